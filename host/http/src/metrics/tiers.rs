//! The `/stats` object's `tiers` entry: blocks and bytes held per tier (`hot`, then `cold` and
//! `disk` when the host has lower tiers, and `remote`: the server's key count and memory, which
//! every host sharing it fills), with each lower tier's hits, misses, evictions and budget, the figures `/metrics` gives as `memoria_kv_*{tier=...}`, and the store's own
//! figures (writes, drops, errors; for the disk: file, saves, queue, writer state), which it
//! gives as `memoria_store_*` (module `store`). Invariant: read-only.

use memoria_store::TierSnapshot;
use serde_json::{Map, Value, json};

use crate::state::AppState;

fn lower(t: &TierSnapshot) -> Value {
    json!({
        "blocks": t.blocks,
        "bytes": t.bytes,
        "hits": t.hits,
        "misses": t.misses,
        "evictions": t.evictions,
        "budget_bytes": t.budget_bytes,
    })
}

/// Adds `extra`'s members to the object `v`.
fn merge(v: &mut Value, extra: Value) {
    if let (Value::Object(o), Value::Object(e)) = (v, extra) {
        o.extend(e);
    }
}

/// `{"hot": {...}, "cold": {...}, "disk": {...}}` (lower tiers only when configured).
pub(super) fn json(state: &AppState) -> Value {
    let pool = state.engine.pool_stats().snapshot();
    let held = pool.blocks_used.saturating_add(pool.blocks_cached);
    let mut o = Map::new();
    o.insert(
        "hot".into(),
        json!({
            "blocks": held,
            "bytes": held.saturating_mul(pool.block_bytes),
            "blocks_used": pool.blocks_used,
            "blocks_cached": pool.blocks_cached,
            "blocks_free": pool.blocks_free,
            "budget_bytes": pool.bytes_total(),
        }),
    );
    if let Some(store) = &state.store {
        let s = store.snapshot();
        for (name, t) in [("cold", &s.cold), ("disk", &s.redb)] {
            if t.budget_bytes > 0 || t.blocks > 0 {
                let mut v = lower(t);
                merge(&mut v, super::store::tier_json(t));
                if name == "disk" {
                    merge(&mut v, super::store::disk_json(store, t));
                }
                o.insert(name.into(), v);
            }
        }
        if let Some(r) = s.remote {
            // The server's whole database, as last polled (shared by every host using it).
            o.insert(
                "remote".into(),
                json!({
                    "blocks": r.server_keys,
                    "bytes": r.server_bytes,
                    "hits": r.hits,
                    "misses": r.misses(),
                    "server_wide": true,
                }),
            );
        }
    }
    Value::Object(o)
}

/// The `/stats` object's `limits` entry: each namespace's quotas, so that use can be shown
/// against them (`max_blocks` null: no block quota).
pub(super) fn limits(state: &AppState) -> Value {
    let mut o = Map::new();
    for ns in state.tenants().iter() {
        let l = &ns.spec.limits;
        o.insert(
            ns.name.clone(),
            json!({
                "max_blocks": l.max_blocks,
                "max_sessions": l.max_sessions,
                "max_concurrent": l.max_concurrent,
                "max_queue": l.max_queue,
                "hit_timing": if ns.spec.pads_hits() { "pad" } else { "off" },
            }),
        );
    }
    Value::Object(o)
}
