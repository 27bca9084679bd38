//! The component runtime's figures in `/metrics` and `/stats`: requests, failures and busy
//! refusals per namespace, guest CPU time and throttling per namespace, components loaded per
//! namespace, deploys, and host-call bytes.
//! Invariant: nothing is written when the server runs without the runtime.

use std::sync::atomic::Ordering::Relaxed;

use memoria_runtime::NsCountersSnapshot;
use serde_json::{Value, json};

use super::render::Out;
use crate::state::AppState;

/// Appends the component families.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let Some(router) = &state.router else { return };
    let stats = router.stats();
    let rows = stats.per_namespace();
    type Field = fn(&NsCountersSnapshot) -> u64;
    let families: [(&str, &str, Field); 3] = [
        (
            "memoria_component_requests_total",
            "Requests that reached a namespace's component.",
            |r| r.requests,
        ),
        (
            "memoria_component_failures_total",
            "Component requests that ended in a trap, timeout or memory-limit error (500).",
            |r| r.failed,
        ),
        (
            "memoria_component_busy_total",
            "Component requests refused with 503 because every max_instances slot was in use.",
            |r| r.busy,
        ),
    ];
    for (name, help, value) in families {
        o.family(name, "counter", help);
        for r in &rows {
            o.sample(name, &format!("namespace=\"{}\"", r.namespace), value(r));
        }
    }
    type Nanos = fn(&NsCountersSnapshot) -> u64;
    let cpu: [(&str, &str, Nanos); 3] = [
        (
            "memoria_guest_cpu_seconds_total",
            "CPU time a namespace's guests ran (thread CPU time of their slices).",
            |r| r.cpu_nanos,
        ),
        (
            "memoria_guest_worker_seconds_total",
            "Wall time a namespace's guests held a runtime worker; its CPU share is charged this.",
            |r| r.worker_nanos,
        ),
        (
            "memoria_guest_throttled_seconds_total",
            "Time a namespace's guests were put to sleep for being over its CPU share.",
            |r| r.throttled_nanos,
        ),
    ];
    for (name, help, nanos) in cpu {
        o.family(name, "counter", help);
        for r in &rows {
            let labels = format!("namespace=\"{}\"", r.namespace);
            o.sample(name, &labels, seconds(nanos(r)));
        }
    }
    o.family(
        "memoria_guest_throttled_total",
        "counter",
        "Times a namespace's guest was put to sleep for being over its CPU share.",
    );
    for r in &rows {
        let labels = format!("namespace=\"{}\"", r.namespace);
        o.sample("memoria_guest_throttled_total", &labels, r.throttled);
    }
    o.family(
        "memoria_components",
        "gauge",
        "Components a namespace serves (configured and deployed).",
    );
    for ns in state.tenants().iter() {
        let n = router.components(&ns.name).map_or(0, |c| c.len());
        o.sample(
            "memoria_components",
            &format!("namespace=\"{}\"", ns.name),
            n,
        );
    }
    o.family(
        "memoria_component_deploys_total",
        "counter",
        "Admin API component uploads by result.",
    );
    let deploys = [
        ("ok", stats.deploys.load(Relaxed)),
        ("refused", stats.deploys_refused.load(Relaxed)),
    ];
    for (result, v) in deploys {
        o.sample(
            "memoria_component_deploys_total",
            &format!("result=\"{result}\""),
            v,
        );
    }
    o.family(
        "memoria_component_host_call_bytes_total",
        "counter",
        "Bytes copied from guest memory by host calls.",
    );
    o.sample(
        "memoria_component_host_call_bytes_total",
        "",
        stats.host_call_bytes.load(Relaxed),
    );
    o.family(
        "memoria_component_host_calls_refused_total",
        "counter",
        "Host calls refused because an argument was over max_host_call_bytes.",
    );
    o.sample(
        "memoria_component_host_calls_refused_total",
        "",
        stats.host_call_refused.load(Relaxed),
    );
}

/// Nanoseconds as seconds.
fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// The `/stats` object's `components` entry (None without the runtime).
pub fn json(state: &AppState) -> Option<Value> {
    let router = state.router.as_ref()?;
    let stats = router.stats();
    let namespaces: serde_json::Map<String, Value> = stats
        .per_namespace()
        .into_iter()
        .map(|c| {
            let loaded = router.components(&c.namespace).map_or(0, |l| l.len());
            let v = json!({
                "requests": c.requests,
                "failures": c.failed,
                "busy": c.busy,
                "components": loaded,
                "cpu_seconds": seconds(c.cpu_nanos),
                "worker_seconds": seconds(c.worker_nanos),
                "throttled": c.throttled,
                "throttled_seconds": seconds(c.throttled_nanos),
            });
            (c.namespace, v)
        })
        .collect();
    Some(json!({
        "requests": stats.requests.load(Relaxed),
        "failures": stats.failed.load(Relaxed),
        "deploys": stats.deploys.load(Relaxed),
        "deploys_refused": stats.deploys_refused.load(Relaxed),
        "host_call_bytes": stats.host_call_bytes.load(Relaxed),
        "host_calls_refused": stats.host_call_refused.load(Relaxed),
        "namespaces": namespaces,
    }))
}
