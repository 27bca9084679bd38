//! `memoria:llm/cache`: the caller's namespace's K/V counters, and warming/pinning a prefix
//! under the namespace's own salt.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use memoria_kv::PinLevel;

use crate::TenantState;
use crate::bindings::WitError;
use crate::bindings::memoria::llm::cache::{Counters, Host, WarmInfo};
use crate::errors::from_engine;

impl Host for TenantState {
    async fn stats(&mut self) -> wasmtime::Result<Counters> {
        let c = self.ns.host.engine.pool_stats().namespace(self.ns.ns.id);
        Ok(match c {
            Some(c) => Counters {
                blocks_used: c.blocks_used.load(Relaxed),
                blocks_cached: c.blocks_cached.load(Relaxed),
                hit_tokens: c.hit_tokens.load(Relaxed),
                miss_tokens: c.miss_tokens.load(Relaxed),
                hit_blocks: c.hit_blocks.load(Relaxed),
                miss_blocks: c.miss_blocks.load(Relaxed),
            },
            None => Counters {
                blocks_used: 0,
                blocks_cached: 0,
                hit_tokens: 0,
                miss_tokens: 0,
                hit_blocks: 0,
                miss_blocks: 0,
            },
        })
    }

    async fn warm(
        &mut self,
        tokens: Vec<u32>,
        ttl_ms: Option<u64>,
        priority: Option<i32>,
    ) -> wasmtime::Result<Result<WarmInfo, WitError>> {
        if let Err(e) = self.check_tokens(&tokens) {
            return Ok(Err(e));
        }
        if tokens.is_empty() {
            return Ok(Err(WitError::InvalidArgument(
                "nothing to warm: no tokens".into(),
            )));
        }
        let pin = priority.map_or(PinLevel::Pinned, PinLevel::Priority);
        let ns = &self.ns.ns;
        let r = self
            .ns
            .host
            .engine
            .warm(ns.id, tokens, pin, ttl_ms.map(Duration::from_millis))
            .await;
        Ok(r.map(|w| WarmInfo {
            tokens: w.tokens as u32,
            cached_tokens: w.cached_tokens as u32,
            blocks_pinned: w.blocks_pinned as u32,
        })
        .map_err(from_engine))
    }
}
