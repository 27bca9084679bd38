//! The host events publisher's counters in `/metrics` (`memoria_events_*_total`)
//! and `/stats` (`events`); nothing when the host publishes no events.

use serde_json::{Map, Value};

use super::render::Out;
use crate::state::AppState;

/// Appends one counter family per observer counter.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let Some(obs) = &state.observer else { return };
    for (name, help, v) in obs.counters() {
        let family = format!("memoria_events_{name}_total");
        o.family(&family, "counter", help);
        o.sample(&family, "", v);
    }
}

/// The counters as an object (null without an observer).
pub(super) fn json(state: &AppState) -> Value {
    let Some(obs) = &state.observer else {
        return Value::Null;
    };
    let m: Map<String, Value> = obs
        .counters()
        .into_iter()
        .map(|(name, _, v)| (name.to_string(), Value::from(v)))
        .collect();
    Value::Object(m)
}
