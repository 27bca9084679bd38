//! `/metrics`: Prometheus text exposition (format 0.0.4) of the pool, the engine and the server.
//! Invariants: every family has HELP and TYPE lines and appears once; counters end in `_total`;
//! units are base units (seconds, bytes); label values are namespace names, route names and
//! fixed words, which need no escaping.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use memoria_kv::{CountersSnapshot, LostTier};

use crate::state::AppState;

pub(super) struct Out(pub(super) String);

impl Out {
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    pub(super) fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
    }

    /// One family with a sample per namespace.
    fn per_ns<T: std::fmt::Display>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        rows: &[(String, CountersSnapshot)],
        value: impl Fn(&CountersSnapshot) -> T,
    ) {
        self.family(name, kind, help);
        for (ns, c) in rows {
            self.sample(name, &format!("namespace=\"{ns}\""), value(c));
        }
    }
}

/// The lower tiers a block is promoted from, in report order.
pub(super) const PROMOTED_FROM: [LostTier; 3] = [LostTier::Cold, LostTier::Disk, LostTier::Remote];

/// The whole exposition.
pub fn render(state: &AppState) -> String {
    let mut o = Out(String::with_capacity(16 << 10));
    let pool = state.engine.pool_stats().snapshot();
    let eng = state.engine.stats().snapshot();
    let rows: Vec<(String, CountersSnapshot)> = pool
        .namespaces
        .iter()
        .map(|(id, c)| (state.namespace_name(*id), *c))
        .collect();

    o.per_ns(
        "memoria_state_cache_hits_total",
        "counter",
        "Prompt tokens whose K/V state was found in the shared state cache.",
        &rows,
        |c| c.hit_tokens,
    );
    o.per_ns(
        "memoria_state_cache_misses_total",
        "counter",
        "Prompt tokens looked up in the state cache and not found (computed).",
        &rows,
        |c| c.miss_tokens,
    );
    o.per_ns(
        "memoria_state_cache_hit_rate",
        "gauge",
        "State cache hits over look-ups, in tokens, since start (0 before any look-up).",
        &rows,
        CountersSnapshot::hit_rate,
    );
    o.per_ns(
        "memoria_state_cache_hit_blocks_total",
        "counter",
        "K/V blocks found in the state cache.",
        &rows,
        |c| c.hit_blocks,
    );
    o.per_ns(
        "memoria_state_cache_miss_blocks_total",
        "counter",
        "K/V blocks of prompts not found in the state cache.",
        &rows,
        |c| c.miss_blocks,
    );

    let pool_stats = state.engine.pool_stats();
    let mut advisors = vec![(String::new(), pool_stats.advisor_snapshot())];
    for (id, _) in &pool.namespaces {
        if let Some(a) = pool_stats.advisor_namespace(*id) {
            advisors.push((state.namespace_name(*id), a));
        }
    }
    super::cache_view::render(&mut o, &rows, &advisors);

    o.family(
        "memoria_kv_blocks",
        "gauge",
        "K/V blocks per tier and state (hot: the in-RAM block pool).",
    );
    let hot = [
        ("used", pool.blocks_used),
        ("cached", pool.blocks_cached),
        ("free", pool.blocks_free),
    ];
    for (st, n) in hot {
        o.sample(
            "memoria_kv_blocks",
            &format!("tier=\"hot\",state=\"{st}\""),
            n,
        );
    }
    let tiers = state.store.as_ref().map(|s| s.snapshot());
    let lower: Vec<(&str, memoria_store::TierSnapshot)> = tiers
        .iter()
        .flat_map(|t| [("cold", t.cold), ("disk", t.redb)])
        .collect();
    for (tier, t) in &lower {
        let labels = format!("tier=\"{tier}\",state=\"stored\"");
        o.sample("memoria_kv_blocks", &labels, t.blocks);
    }
    o.family(
        "memoria_kv_bytes",
        "gauge",
        "Bytes of K/V blocks per tier and state.",
    );
    for (st, n) in hot {
        o.sample(
            "memoria_kv_bytes",
            &format!("tier=\"hot\",state=\"{st}\""),
            n * pool.block_bytes,
        );
    }
    for (tier, t) in &lower {
        let labels = format!("tier=\"{tier}\",state=\"stored\"");
        o.sample("memoria_kv_bytes", &labels, t.bytes);
    }
    o.family(
        "memoria_kv_pool_bytes",
        "gauge",
        "Bytes of the hot block pool: reserved (address space for the whole budget) and \
         committed (blocks ever used, whose pages may be resident).",
    );
    o.sample(
        "memoria_kv_pool_bytes",
        "kind=\"reserved\"",
        pool.bytes_total(),
    );
    o.sample(
        "memoria_kv_pool_bytes",
        "kind=\"committed\"",
        pool.bytes_committed(),
    );
    let per_tier = [
        (
            "memoria_kv_tier_hits_total",
            "Blocks found in a lower tier (cold RAM, disk) on a hot-pool miss.",
        ),
        (
            "memoria_kv_tier_misses_total",
            "Blocks looked up in a lower tier and not found.",
        ),
        (
            "memoria_kv_tier_evictions_total",
            "Blocks evicted from a lower tier.",
        ),
    ];
    for (i, (name, help)) in per_tier.into_iter().enumerate() {
        o.family(name, "counter", help);
        for (tier, t) in &lower {
            let v = [t.hits, t.misses, t.evictions][i];
            o.sample(name, &format!("tier=\"{tier}\""), v);
        }
    }
    o.family(
        "memoria_kv_capacity_bytes",
        "gauge",
        "Bytes each tier may hold.",
    );
    o.sample(
        "memoria_kv_capacity_bytes",
        "tier=\"hot\"",
        pool.bytes_total(),
    );
    o.family("memoria_kv_block_tokens", "gauge", "Tokens per K/V block.");
    o.sample("memoria_kv_block_tokens", "", pool.block_tokens);
    o.family(
        "memoria_kv_namespace_blocks",
        "gauge",
        "Hot K/V blocks attributed to each namespace, by state.",
    );
    for (ns, c) in &rows {
        for (st, n) in [("used", c.blocks_used), ("cached", c.blocks_cached)] {
            o.sample(
                "memoria_kv_namespace_blocks",
                &format!("namespace=\"{ns}\",state=\"{st}\""),
                n,
            );
        }
    }
    o.family(
        "memoria_kv_evictions_total",
        "counter",
        "K/V blocks evicted from the hot tier, by namespace and reason.",
    );
    for (ns, c) in &rows {
        for (reason, n) in [
            ("capacity", c.evict_capacity),
            ("quota", c.evict_quota),
            ("ttl", c.evict_ttl),
            ("explicit", c.evict_explicit),
        ] {
            o.sample(
                "memoria_kv_evictions_total",
                &format!("namespace=\"{ns}\",reason=\"{reason}\""),
                n,
            );
        }
    }
    o.per_ns(
        "memoria_kv_promotions_total",
        "counter",
        "K/V blocks brought back into the hot tier from a lower tier.",
        &rows,
        |c| c.promotions,
    );
    o.family(
        "memoria_kv_tier_promotions_total",
        "counter",
        "K/V blocks brought back into the hot tier, by namespace and the tier that served them \
         (cold RAM, disk, remote).",
    );
    for (ns, c) in &rows {
        for t in PROMOTED_FROM {
            o.sample(
                "memoria_kv_tier_promotions_total",
                &format!("namespace=\"{ns}\",tier=\"{}\"", t.name()),
                c.promoted_from(t),
            );
        }
    }
    o.per_ns(
        "memoria_kv_cow_copies_total",
        "counter",
        "Partial K/V blocks copied on write.",
        &rows,
        |c| c.cow_copies,
    );
    o.per_ns(
        "memoria_kv_tail_hits_total",
        "counter",
        "Prompts that continued a cached partial K/V block (token-granular reuse).",
        &rows,
        |c| c.tail_hits,
    );
    o.per_ns(
        "memoria_kv_alloc_errors_total",
        "counter",
        "K/V allocations refused (pool full or namespace at its cap).",
        &rows,
        |c| c.quota_errors + c.out_of_blocks_errors,
    );
    o.per_ns(
        "memoria_kv_sequences",
        "gauge",
        "Live K/V sequences per namespace.",
        &rows,
        |c| c.seqs_active,
    );
    o.per_ns(
        "memoria_tokens_saved_total",
        "counter",
        "Prefill tokens not computed because their state was cached.",
        &rows,
        CountersSnapshot::prefill_tokens_saved,
    );

    o.family("memoria_sessions", "gauge", "Sessions open in the engine.");
    o.sample("memoria_sessions", "", eng.sessions_active);
    o.family(
        "memoria_tokens_prefilled_total",
        "counter",
        "Prompt tokens computed by the engine (cache misses and recomputes).",
    );
    o.sample("memoria_tokens_prefilled_total", "", eng.prefill_tokens);
    o.family(
        "memoria_engine_decode_tokens_total",
        "counter",
        "Tokens decoded by the engine, all namespaces.",
    );
    o.sample("memoria_engine_decode_tokens_total", "", eng.decode_tokens);
    o.family(
        "memoria_engine_steps_total",
        "counter",
        "Forward passes run by the engine.",
    );
    o.sample("memoria_engine_steps_total", "", eng.steps);
    o.family(
        "memoria_engine_step_seconds_total",
        "counter",
        "Time spent in forward passes.",
    );
    o.sample(
        "memoria_engine_step_seconds_total",
        "",
        eng.step_seconds_total,
    );
    o.family(
        "memoria_engine_queue_depth",
        "gauge",
        "Sessions with work waiting at the start of the last engine step (0 when idle).",
    );
    o.sample("memoria_engine_queue_depth", "", eng.queue_depth);
    o.family(
        "memoria_engine_cancelled_total",
        "counter",
        "Generations and embeddings cancelled because their caller went away.",
    );
    o.sample("memoria_engine_cancelled_total", "", eng.cancelled);
    o.family(
        "memoria_engine_embeddings_total",
        "counter",
        "Embeddings the engine computed in its steps (cache hits are not counted here).",
    );
    o.sample("memoria_engine_embeddings_total", "", eng.embeddings);
    o.family(
        "memoria_engine_panics_total",
        "counter",
        "Engine commands and steps that panicked and were contained (each failed its request).",
    );
    o.sample("memoria_engine_panics_total", "", eng.panics);
    o.family(
        "memoria_engine_restarts_total",
        "counter",
        "Times the supervisor restarted a dead engine loop.",
    );
    o.sample("memoria_engine_restarts_total", "", eng.restarts);
    o.family(
        "memoria_engine_up",
        "gauge",
        "1 while the engine loop runs, 0 while it restarts.",
    );
    o.sample("memoria_engine_up", "", u64::from(state.engine.is_up()));

    super::speculation::render(&mut o, state);
    render_server(&mut o, state);
    if state.config.llama_metrics {
        super::llama::render(&mut o, state);
    }
    o.0
}

/// Request-side families: admission, tokens, latencies, responses.
fn render_server(o: &mut Out, state: &AppState) {
    let ns = state.metrics.namespaces();
    let gates = state.admission.snapshot();
    o.family(
        "memoria_queue_depth",
        "gauge",
        "Requests waiting for a slot in each namespace's admission queue.",
    );
    for (name, g) in &gates {
        o.sample(
            "memoria_queue_depth",
            &format!("namespace=\"{name}\""),
            g.queued(),
        );
    }
    o.family(
        "memoria_requests_running",
        "gauge",
        "Requests holding an admission slot in each namespace.",
    );
    for (name, g) in &gates {
        o.sample(
            "memoria_requests_running",
            &format!("namespace=\"{name}\""),
            g.running(),
        );
    }
    let counter =
        |o: &mut Out, name: &str, help: &str, f: &dyn Fn(&crate::metrics::NsMetrics) -> u64| {
            o.family(name, "counter", help);
            for (n, m) in &ns {
                o.sample(name, &format!("namespace=\"{n}\""), f(m));
            }
        };
    counter(
        o,
        "memoria_requests_total",
        "Requests routed to each namespace.",
        &|m| m.requests.load(Relaxed),
    );
    o.family(
        "memoria_requests_rejected_total",
        "counter",
        "Requests refused, by namespace (overload: 429) or, without one, by reason.",
    );
    for (n, m) in &ns {
        o.sample(
            "memoria_requests_rejected_total",
            &format!("namespace=\"{n}\",reason=\"overload\""),
            m.rejected_overload.load(Relaxed),
        );
    }
    for (reason, v) in state.metrics.rejected() {
        o.sample(
            "memoria_requests_rejected_total",
            &format!("namespace=\"\",reason=\"{reason}\""),
            v,
        );
    }
    counter(
        o,
        "memoria_prompt_tokens_total",
        "Prompt tokens of finished generations.",
        &|m| m.prompt_tokens.load(Relaxed),
    );
    counter(
        o,
        "memoria_cached_prompt_tokens_total",
        "Prompt tokens of finished generations served from the state cache.",
        &|m| m.cached_tokens.load(Relaxed),
    );
    counter(
        o,
        "memoria_tokens_generated_total",
        "Completion tokens generated.",
        &|m| m.completion_tokens.load(Relaxed),
    );
    counter(
        o,
        "memoria_client_disconnects_total",
        "Generations cancelled because the client disconnected.",
        &|m| m.disconnects.load(Relaxed),
    );
    counter(
        o,
        "memoria_embeddings_total",
        "Inputs embedded or served from the embedding cache.",
        &|m| m.embeddings.load(Relaxed),
    );
    counter(
        o,
        "memoria_embedding_cache_hits_total",
        "Embedding inputs served from the embedding cache.",
        &|m| m.embedding_cache_hits.load(Relaxed),
    );
    o.family(
        "memoria_time_to_first_token_seconds",
        "histogram",
        "Time from a request's arrival to its first generated token.",
    );
    for (n, m) in &ns {
        m.ttft.render(
            &mut o.0,
            "memoria_time_to_first_token_seconds",
            &format!("namespace=\"{n}\""),
        );
    }
    o.family(
        "memoria_token_latency_seconds",
        "histogram",
        "Time between consecutive generated tokens of one request.",
    );
    for (n, m) in &ns {
        m.token_latency.render(
            &mut o.0,
            "memoria_token_latency_seconds",
            &format!("namespace=\"{n}\""),
        );
    }
    o.family(
        "memoria_http_responses_total",
        "counter",
        "HTTP responses by route and status code.",
    );
    for ((route, code), v) in state.metrics.responses() {
        o.sample(
            "memoria_http_responses_total",
            &format!("route=\"{route}\",code=\"{code}\""),
            v,
        );
    }
    super::components::render(o, state);
    super::remote::render(o, state);
    super::events::render(o, state);
    super::store::render(o, state);
    super::memory::render(o, state);
    o.family(
        "memoria_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
    );
    o.sample(
        "memoria_uptime_seconds",
        "",
        state.started.elapsed().as_secs_f64(),
    );
}
