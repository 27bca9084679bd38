//! The state cache's operator view in `/stats` and `/metrics`: misses by reason (blocks,
//! tokens, and the tier where evicted blocks were lost) and the sizing advisor's curve, for
//! the pool and per namespace. Invariant: read-only; the `isolated` count never names the
//! namespace holding the blocks.

use memoria_kv::advisor::AdvisorSnapshot;
use memoria_kv::{CountersSnapshot, LostTier, MissReason, MissSnapshot};
use serde_json::{Map, Value, json};

use super::render::Out;

/// `{"cold": n, ..., "evicted_at": {"hot": n, ...}, "tokens": {"cold": n, ...}}`.
pub fn misses_json(m: &MissSnapshot) -> Value {
    let mut o = Map::new();
    let mut tokens = Map::new();
    for r in MissReason::ALL {
        o.insert(r.name().into(), json!(m.blocks_for(r)));
        tokens.insert(r.name().into(), json!(m.tokens_for(r)));
    }
    let at: Map<String, Value> = LostTier::ALL
        .iter()
        .map(|t| (t.name().to_string(), json!(m.evicted_at(*t))))
        .collect();
    o.insert("evicted_at".into(), Value::Object(at));
    o.insert("tokens".into(), Value::Object(tokens));
    Value::Object(o)
}

/// The advisor object, or null when none is kept.
pub fn advisor_json(a: Option<&AdvisorSnapshot>) -> Value {
    let Some(a) = a else { return Value::Null };
    let curve: Vec<Value> = a
        .curve
        .iter()
        .map(|p| json!({"scale": p.scale, "blocks": p.blocks, "hit_rate": p.hit_rate}))
        .collect();
    json!({
        "budget_blocks": a.budget_blocks,
        "curve": curve,
        "target_hit_rate": a.target_hit_rate,
        "smallest_budget_for_target": a.smallest_budget_for_target,
        "refs": a.refs,
        "sampled_refs": a.sampled_refs,
        "sampling_rate": a.sampling_rate,
        "memory_bytes": a.memory_bytes,
    })
}

/// `memoria_kv_misses_total`, `memoria_kv_evicted_misses_total` and the advisor gauges.
pub fn render(
    o: &mut Out,
    rows: &[(String, CountersSnapshot)],
    advisors: &[(String, AdvisorSnapshot)],
) {
    o.family(
        "memoria_kv_misses_total",
        "counter",
        "Prompt K/V blocks not found in the state cache, by namespace and reason (cold, \
         evicted, partial, expired, corrupt, isolated); each missed block counts once.",
    );
    for (ns, c) in rows {
        for r in MissReason::ALL {
            o.sample(
                "memoria_kv_misses_total",
                &format!("namespace=\"{ns}\",reason=\"{}\"", r.name()),
                c.misses.blocks_for(r),
            );
        }
    }
    o.family(
        "memoria_kv_evicted_misses_total",
        "counter",
        "Prompt K/V blocks missed because they were evicted (or their pin expired), by the \
         tier where they were lost.",
    );
    for (ns, c) in rows {
        for t in LostTier::ALL {
            o.sample(
                "memoria_kv_evicted_misses_total",
                &format!("namespace=\"{ns}\",tier=\"{}\"", t.name()),
                c.misses.evicted_at(t),
            );
        }
    }
    o.family(
        "memoria_kv_advisor_hit_rate",
        "gauge",
        "Predicted state cache hit rate (full prompt blocks, LRU, SHARDS estimate) at a multiple \
         of the current hot budget; namespace=\"\" is the whole pool.",
    );
    for (ns, a) in advisors {
        for p in &a.curve {
            o.sample(
                "memoria_kv_advisor_hit_rate",
                &format!("namespace=\"{ns}\",scale=\"{}\"", p.scale),
                p.hit_rate,
            );
        }
    }
    o.family(
        "memoria_kv_advisor_target_blocks",
        "gauge",
        "Smallest hot budget in blocks predicted to reach the target hit rate (-1: not within \
         16x the budget).",
    );
    for (ns, a) in advisors {
        let v = a.smallest_budget_for_target.map_or(-1.0, |b| b as f64);
        o.sample(
            "memoria_kv_advisor_target_blocks",
            &format!("namespace=\"{ns}\""),
            v,
        );
    }
}
