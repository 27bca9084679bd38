//! Speculative decoding's figures, per namespace, for `/stats` and `/metrics`: draft tokens
//! verified and accepted, the acceptance rate, verifying passes and the tokens they produced
//! (tokens per pass), the bytes of the isolation groups' draft memories, and what the engine
//! reckons a row past the first costs in a pass (what draft lengths are weighed with).

use serde_json::{Value, json};

use super::render::Out;
use crate::state::AppState;

/// Every namespace's figures by name.
fn rows(state: &AppState) -> Vec<(String, memoria_sched::SpecSnapshot)> {
    state
        .engine
        .stats()
        .speculation
        .snapshot()
        .into_iter()
        .map(|(id, s)| (state.namespace_name(id), s))
        .collect()
}

/// `/stats`'s `speculation` object.
pub fn json(state: &AppState) -> Value {
    let mut namespaces = serde_json::Map::new();
    let mut total = memoria_sched::SpecSnapshot::default();
    for (name, s) in rows(state) {
        total.drafted += s.drafted;
        total.accepted += s.accepted;
        total.passes += s.passes;
        total.produced += s.produced;
        namespaces.insert(name, figures(&s));
    }
    let mut out = figures(&total);
    if let Value::Object(o) = &mut out {
        o.insert(
            "draft_memory_bytes".into(),
            state.engine.draft_memory_bytes().into(),
        );
        o.insert(
            "row_cost".into(),
            state.engine.stats().speculation.row_cost().into(),
        );
        o.insert("namespaces".into(), Value::Object(namespaces));
    }
    out
}

fn figures(s: &memoria_sched::SpecSnapshot) -> Value {
    json!({
        "drafted": s.drafted,
        "accepted": s.accepted,
        "acceptance_rate": s.acceptance(),
        "passes": s.passes,
        "tokens_per_pass": s.tokens_per_pass(),
    })
}

/// A counter family: its name, help and value.
type Family = (
    &'static str,
    &'static str,
    fn(&memoria_sched::SpecSnapshot) -> u64,
);

/// The `/metrics` families.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let rows = rows(state);
    let families: [Family; 4] = [
        (
            "memoria_speculation_drafted_tokens_total",
            "Draft tokens verified by speculative decoding, per namespace.",
            |s| s.drafted,
        ),
        (
            "memoria_speculation_accepted_tokens_total",
            "Draft tokens the model confirmed, per namespace.",
            |s| s.accepted,
        ),
        (
            "memoria_speculation_passes_total",
            "Decode steps that verified a draft, per namespace.",
            |s| s.passes,
        ),
        (
            "memoria_speculation_produced_tokens_total",
            "Tokens produced by the steps that verified a draft, per namespace (over passes: tokens per pass).",
            |s| s.produced,
        ),
    ];
    for (name, help, value) in families {
        o.family(name, "counter", help);
        for (ns, s) in &rows {
            o.sample(name, &format!("namespace=\"{ns}\""), value(s));
        }
    }
    o.family(
        "memoria_speculation_draft_memory_bytes",
        "gauge",
        "Bytes held by the isolation groups' draft memories.",
    );
    o.sample(
        "memoria_speculation_draft_memory_bytes",
        "",
        state.engine.draft_memory_bytes(),
    );
    o.family(
        "memoria_speculation_row_cost",
        "gauge",
        "What a row past the first costs in a forward pass, as a fraction of a one-row pass (measured from the engine's passes; draft lengths are weighed with it).",
    );
    o.sample(
        "memoria_speculation_row_cost",
        "",
        state.engine.stats().speculation.row_cost(),
    );
}
