//! The router's own `/metrics` (Prometheus text format 0.0.4): requests sent to each backend,
//! refused connections, connections opened and reused, retries, requests no backend took, and
//! each backend's up, queue-depth, in-flight and idle-connection gauges.

use std::fmt::Write;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use super::events::EventCounters;
use super::table::Table;

/// Router-wide counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests moved to the next backend after a refused connection.
    pub retries: AtomicU64,
    /// Requests no backend accepted (answered 503).
    pub unavailable: AtomicU64,
    /// Requests a backend accepted but did not answer (502/504).
    pub upstream_errors: AtomicU64,
    /// Requests sent to a backend that announced a prefix of the prompt (`--events`).
    pub by_prefix: AtomicU64,
    /// Requests sent by rendezvous hashing (no events, or no host announced the prefix).
    pub by_rendezvous: AtomicU64,
}

/// `s` as a label value (backslash, quote and newline escaped).
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One per-backend series: name, type, help, and how to read it from a backend.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&super::table::Backend) -> u64,
);

/// The exposition.
pub fn render(table: &Table, c: &Counters, events: Option<&EventCounters>) -> String {
    let mut out = String::new();
    let per_backend: [Series; 11] = [
        (
            "memoria_route_backend_live",
            "gauge",
            "1 while the backend has a liveness key (always 1 without --events).",
            |b| u64::from(b.live.load(Relaxed)),
        ),
        (
            "memoria_route_backend_prefix_keys",
            "gauge",
            "Routing keys the backend announced in its events (its current epoch).",
            |b| b.keys.lock().map_or(0, |k| k.len() as u64),
        ),
        (
            "memoria_route_requests_total",
            "counter",
            "Requests sent to the backend.",
            |b| b.requests.load(Relaxed),
        ),
        (
            "memoria_route_refused_total",
            "counter",
            "Connections to the backend refused or timed out while proxying.",
            |b| b.refused.load(Relaxed),
        ),
        (
            "memoria_route_backend_up",
            "gauge",
            "1 while the backend is in the routing table.",
            |b| u64::from(b.up.load(Relaxed)),
        ),
        (
            "memoria_route_backend_queue_depth",
            "gauge",
            "Requests queued on the backend at its last poll.",
            |b| b.queue_depth.load(Relaxed),
        ),
        (
            "memoria_route_backend_inflight",
            "gauge",
            "Requests this router has open to the backend.",
            |b| b.inflight.load(Relaxed),
        ),
        (
            "memoria_route_upstream_connects_total",
            "counter",
            "Connections the router opened to the backend.",
            |b| b.pool.connects.load(Relaxed),
        ),
        (
            "memoria_route_upstream_reuses_total",
            "counter",
            "Requests sent on an idle connection taken from the pool.",
            |b| b.pool.reuses.load(Relaxed),
        ),
        (
            "memoria_route_upstream_stale_total",
            "counter",
            "Pooled connections the backend had closed (the request went again on a fresh one).",
            |b| b.pool.stale.load(Relaxed),
        ),
        (
            "memoria_route_idle_connections",
            "gauge",
            "Idle connections to the backend kept for the next request.",
            |b| b.pool.idle() as u64,
        ),
    ];
    for (name, kind, help, value) in per_backend {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for b in &table.backends {
            let _ = writeln!(out, "{name}{{backend=\"{}\"}} {}", label(&b.url), value(b));
        }
    }
    for (name, help, v) in [
        (
            "memoria_route_retries_total",
            "Requests retried on the next backend after a refused connection.",
            &c.retries,
        ),
        (
            "memoria_route_unavailable_total",
            "Requests no backend accepted.",
            &c.unavailable,
        ),
        (
            "memoria_route_upstream_errors_total",
            "Requests a backend accepted but did not answer.",
            &c.upstream_errors,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            v.load(Relaxed)
        );
    }
    let name = "memoria_route_choices_total";
    let _ = writeln!(
        out,
        "# HELP {name} Requests sent, by why the backend was chosen.\n# TYPE {name} counter"
    );
    for (reason, v) in [("prefix", &c.by_prefix), ("rendezvous", &c.by_rendezvous)] {
        let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {}", v.load(Relaxed));
    }
    if let Some(e) = events {
        for (name, help, v) in [
            (
                "memoria_route_events_applied_total",
                "Host events applied to the routing table.",
                &e.applied,
            ),
            (
                "memoria_route_events_skipped_total",
                "Stream entries or liveness values that did not parse (skipped).",
                &e.skipped,
            ),
            (
                "memoria_route_events_errors_total",
                "Event-following rounds a Redis command failed in.",
                &e.errors,
            ),
            (
                "memoria_route_events_unknown_hosts_total",
                "Live hosts seen whose address is no --backend.",
                &e.unknown_hosts,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Relaxed)
            );
        }
    }
    out
}
