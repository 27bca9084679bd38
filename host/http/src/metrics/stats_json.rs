//! `/stats`: the same figures as `/metrics` as one JSON object, with `state_cache` (hits and
//! misses in tokens, hit rate) at the top for people and scripts. Invariant: read-only.

use std::sync::atomic::Ordering::Relaxed;

use serde_json::{Value, json};

use super::cache_view::{advisor_json, misses_json};
use crate::state::AppState;

/// Blocks promoted into the pool, by the tier that served them.
fn promotions_json(c: &memoria_kv::CountersSnapshot) -> Value {
    let mut m = serde_json::Map::new();
    for t in super::render::PROMOTED_FROM {
        m.insert(t.name().into(), c.promoted_from(t).into());
    }
    Value::Object(m)
}

/// The `/stats` object.
pub fn stats_json(state: &AppState) -> Value {
    let pool = state.engine.pool_stats().snapshot();
    let eng = state.engine.stats().snapshot();
    let t = &pool.total;
    let pool_stats = state.engine.pool_stats();
    let mut namespaces = serde_json::Map::new();
    for (id, c) in &pool.namespaces {
        namespaces.insert(
            state.namespace_name(*id),
            json!({
                "state_cache": {"hits": c.hit_tokens, "misses": c.miss_tokens, "hit_rate": c.hit_rate()},
                "blocks_used": c.blocks_used,
                "blocks_cached": c.blocks_cached,
                "sequences": c.seqs_active,
                "evictions": c.evictions(),
                "hit_blocks": c.hit_blocks,
                "miss_blocks": c.miss_blocks,
                "misses": misses_json(&c.misses),
                "promotions": promotions_json(c),
                "advisor": advisor_json(pool_stats.advisor_namespace(*id).as_ref()),
            }),
        );
    }
    for (name, m) in state.metrics.namespaces() {
        let entry = namespaces.entry(name).or_insert_with(|| json!({}));
        if let Value::Object(o) = entry {
            o.insert(
                "requests".into(),
                json!({
                    "total": m.requests.load(Relaxed),
                    "rejected_overload": m.rejected_overload.load(Relaxed),
                    "prompt_tokens": m.prompt_tokens.load(Relaxed),
                    "cached_tokens": m.cached_tokens.load(Relaxed),
                    "completion_tokens": m.completion_tokens.load(Relaxed),
                    "disconnects": m.disconnects.load(Relaxed),
                }),
            );
        }
    }
    let admission: Vec<Value> = state
        .admission
        .snapshot()
        .iter()
        .map(|(n, g)| {
            json!({"namespace": n, "running": g.running(), "queued": g.queued(),
                   "max_concurrent": g.max_concurrent, "max_queue": g.max_queue,
                   "rejected": g.rejected.load(Relaxed)})
        })
        .collect();
    json!({
        "model": state.config.model_id,
        "uptime_s": state.started.elapsed().as_secs_f64(),
        "state_cache": {
            "hits": t.hit_tokens, "misses": t.miss_tokens, "hit_rate": t.hit_rate(),
            "hit_blocks": t.hit_blocks, "miss_blocks": t.miss_blocks,
            "misses_by_reason": misses_json(&t.misses),
            "promotions": promotions_json(t),
        },
        "advisor": advisor_json(Some(&pool_stats.advisor_snapshot())),
        "pool": {
            "blocks_total": pool.blocks_total,
            "blocks_used": pool.blocks_used,
            "blocks_cached": pool.blocks_cached,
            "blocks_free": pool.blocks_free,
            "block_tokens": pool.block_tokens,
            "block_bytes": pool.block_bytes,
            "bytes_total": pool.bytes_total(),
            "bytes_reserved": pool.bytes_total(),
            "bytes_committed": pool.bytes_committed(),
            "bytes_used": pool.bytes_used(),
            "bytes_cached": pool.bytes_cached(),
            "evictions": t.evictions(),
            "sequences": t.seqs_active,
            "auto_pinned_blocks": pool_stats.auto_pinned_blocks.load(Relaxed),
        },
        "engine": {
            "sessions": eng.sessions_active,
            "queue_depth": eng.queue_depth,
            "up": state.engine.is_up(),
            "panics": eng.panics,
            "restarts": eng.restarts,
            "steps": eng.steps,
            "prefill_tokens": eng.prefill_tokens,
            "decode_tokens": eng.decode_tokens,
            "tokens_saved": t.hit_tokens,
            "mean_step_tokens": eng.mean_step_tokens(),
            "generations": eng.generations,
            "embeddings": eng.embeddings,
            "forks": eng.forks,
            "cancelled": eng.cancelled,
            "commands": eng.commands,
            "store_work_in_step": eng.store_work_in_step,
            "chain_hashes": eng.chain_hashes,
        },
        "admission": admission,
        "namespaces": namespaces,
        "components": super::components::json(state),
        "remote": super::remote::json(state),
        "events": super::events::json(state),
        "tiers": super::tiers::json(state),
        "memory": super::memory::json(state),
        "limits": super::tiers::limits(state),
        "speculation": super::speculation::json(state),
    })
}
