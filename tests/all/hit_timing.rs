//! Timing-safe hits, audited the way Gu et al. (ICML 2025) audit prompt caching: a victim in
//! namespace `a` sends a prompt (a miss), an attacker in namespace `b` of the same shared group
//! sends the same prompt (a hit on `a`'s blocks) or a fresh one; a two-sample
//! Kolmogorov–Smirnov test on the times to first token tells hits from misses with
//! `hit_timing = "off"` (p < 0.05) and cannot with the default `pad` of shared groups (p > 0.05).
//! The same audit for `/v1/embeddings`, whose cache is shared by the group as well.

use std::time::Instant;

use serde_json::json;

use crate::serve::client::{get, post};
use crate::serve::server::{Server, temp_dir};

/// Samples of each kind per configuration.
const SAMPLES: usize = 200;
/// Prompt length: several blocks, so a miss computes measurably more than a hit.
const PROMPT: usize = 160;

/// The two-sample Kolmogorov–Smirnov statistic `D` (largest gap between the empirical CDFs).
fn ks_statistic(a: &[f64], b: &[f64]) -> f64 {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

/// The asymptotic p-value of `D` for samples of sizes `n` and `m`: the Kolmogorov distribution's
/// tail `Q(λ) = 2 Σ (-1)^(k-1) exp(-2 k² λ²)` at `λ = (√ne + 0.12 + 0.11/√ne) D`,
/// `ne = n m / (n + m)` (Stephens' correction, as in Numerical Recipes' `kstwo`).
fn ks_p_value(d: f64, n: usize, m: usize) -> f64 {
    let ne = (n * m) as f64 / (n + m) as f64;
    let s = ne.sqrt();
    let lambda = (s + 0.12 + 0.11 / s) * d;
    if lambda < 1e-3 {
        return 1.0;
    }
    let mut sum = 0.0;
    for k in 1..=100 {
        let k = k as f64;
        let term = (-2.0 * k * k * lambda * lambda).exp();
        sum += if k as u64 % 2 == 1 { term } else { -term };
        if term < 1e-12 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

#[test]
fn ks_helper_matches_known_values() {
    let a: Vec<f64> = (0..100).map(f64::from).collect();
    assert_eq!(ks_statistic(&a, &a), 0.0);
    assert!(ks_p_value(0.0, 100, 100) > 0.999);
    let b: Vec<f64> = (200..300).map(f64::from).collect();
    assert_eq!(ks_statistic(&a, &b), 1.0);
    assert!(ks_p_value(1.0, 100, 100) < 1e-10);
    // Half the mass shifted past the other sample: D = 0.5.
    let c: Vec<f64> = (50..150).map(f64::from).collect();
    assert!((ks_statistic(&a, &c) - 0.5).abs() < 1e-12);
    // Q(1.36) ≈ 0.049, the textbook 5% critical value of λ.
    let d = 1.36 / ((50.0f64).sqrt() + 0.12 + 0.11 / (50.0f64).sqrt());
    assert!((ks_p_value(d, 100, 100) - 0.0495).abs() < 0.002);
}

/// Prompt `i`: distinct token ids (no two prompts share a first block).
fn prompt(i: usize) -> Vec<u32> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (0..PROMPT)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            3 + (x % 500) as u32
        })
        .collect()
}

/// Seconds to the (only) token of a one-token completion of `p` in namespace `ns`.
fn ttft(s: &Server, ns: &str, p: &[u32]) -> (f64, u64) {
    let body = json!({"prompt": p, "max_tokens": 1, "temperature": 0});
    let t = Instant::now();
    let r = post(s.addr, &format!("/ns/{ns}/v1/completions"), &body, &[]);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(r.status, 200, "{}", r.text());
    let cached = r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    (secs, cached)
}

/// Prompt tokens namespace `b` was served from the cache so far (`/stats`).
fn b_hits(s: &Server) -> u64 {
    let r = get(s.addr, "/stats", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["namespaces"]["b"]["state_cache"]["hits"]
        .as_u64()
        .unwrap_or(0)
}

/// A server whose namespaces `a` and `b` share group `g`, with `timing` in both.
fn group_server(name: &str, timing: &str) -> Server {
    let dir = temp_dir(name);
    // Small enough to serve fast, large enough that computing 160 tokens takes measurably
    // longer (tens of ms) than computing the last partial block.
    let model = crate::serve::server::small_synth(&dir.join("timing.gguf"), 1024);
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!(
            "[namespaces.a]\nisolation = \"group:g\"\n{timing}\n[namespaces.b]\nisolation = \"group:g\"\n{timing}\n"
        ),
    )
    .expect("config");
    Server::start(
        name,
        &["-m", &model, "--config", cfg.to_str().expect("utf-8")],
    )
}

/// Hit and miss samples under a config whose namespaces `a` and `b` share group `g`.
fn audit(name: &str, timing: &str) -> (Vec<f64>, Vec<f64>) {
    let padded = timing.is_empty();
    let s = group_server(name, timing);
    let (mut hits, mut misses) = (Vec::new(), Vec::new());
    // Warm-up (the recompute estimate learns from misses), then victim/attacker pairs.
    for i in 0..SAMPLES + 10 {
        let p = prompt(i);
        let before = b_hits(&s);
        let (miss, cached_miss) = ttft(&s, "a", &p);
        let (hit, cached_hit) = ttft(&s, "b", &p);
        assert_eq!(cached_miss, 0, "prompt {i} was new");
        // The operator's figures show the hit; a padded response does not.
        let served = b_hits(&s) - before;
        assert!(
            served as usize >= PROMPT - 32,
            "prompt {i}: the attacker's request was not a hit ({served} tokens from cache)"
        );
        assert_eq!(
            cached_hit == 0,
            padded,
            "prompt {i}: usage reports {cached_hit} cached"
        );
        if i >= 10 {
            misses.push(miss);
            hits.push(hit);
        }
    }
    (hits, misses)
}

/// Counts of both samples per 25 ms bucket, as `edge:hits/misses` for the non-empty ones.
fn buckets(hits: &[f64], misses: &[f64]) -> String {
    let bucket = |x: f64| (x / 0.025).ceil() as usize;
    let top = hits
        .iter()
        .chain(misses)
        .map(|&x| bucket(x))
        .max()
        .unwrap_or(0);
    (0..=top)
        .filter_map(|b| {
            let h = hits.iter().filter(|&&x| bucket(x) == b).count();
            let m = misses.iter().filter(|&&x| bucket(x) == b).count();
            (h + m > 0).then(|| format!("{}:{h}/{m}", b * 25))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn padded_hits_cannot_be_told_from_misses_by_their_timing() {
    let started = Instant::now();
    let (hits, misses) = audit("timing-off", "hit_timing = \"off\"");
    let d_off = ks_statistic(&hits, &misses);
    let p_off = ks_p_value(d_off, hits.len(), misses.len());
    println!(
        "hit_timing off: median hit {:.1} ms, miss {:.1} ms, KS D = {d_off:.3}, p = {p_off:.2e}",
        median(&hits) * 1e3,
        median(&misses) * 1e3
    );
    assert!(
        p_off < 0.05,
        "without padding a hit should be faster than a miss (D {d_off}, p {p_off})"
    );
    // Under indistinguishable timing p is uniform on [0, 1], so one audit in 20 lands under
    // 0.05 by chance: a second, independent audit (a fresh server) decides then, and a padding
    // that works fails both with probability 1/400; a leaky one fails both nearly always.
    let (mut hits, mut misses) = audit("timing-pad", "");
    let mut d_pad = ks_statistic(&hits, &misses);
    let mut p_pad = ks_p_value(d_pad, hits.len(), misses.len());
    if p_pad <= 0.05 {
        println!("hit_timing pad: first audit p = {p_pad:.3}; auditing again with a fresh server");
        (hits, misses) = audit("timing-pad-2", "");
        d_pad = ks_statistic(&hits, &misses);
        p_pad = ks_p_value(d_pad, hits.len(), misses.len());
    }
    println!(
        "hit_timing pad (group default): median hit {:.1} ms, miss {:.1} ms, KS D = {d_pad:.3}, p = {p_pad:.3}",
        median(&hits) * 1e3,
        median(&misses) * 1e3
    );
    println!(
        "  client-measured, by 25 ms (upper edge ms: hits/misses): {}",
        buckets(&hits, &misses)
    );
    assert!(
        p_pad > 0.05,
        "padded hits are distinguishable from misses (D {d_pad}, p {p_pad})"
    );
    println!("audit took {:.1} s", started.elapsed().as_secs_f64());
}

/// Seconds for the embedding of `p` in namespace `ns`.
fn embed_secs(s: &Server, ns: &str, p: &[u32]) -> f64 {
    let body = json!({"input": p});
    let t = Instant::now();
    let r = post(s.addr, &format!("/ns/{ns}/v1/embeddings"), &body, &[]);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(r.status, 200, "{}", r.text());
    secs
}

/// Embedding hit and miss samples: `a` computes each prompt's vector, `b` gets it from the
/// group's cache (counted in `/metrics`).
fn embed_audit(name: &str, timing: &str) -> (Vec<f64>, Vec<f64>) {
    let s = group_server(name, timing);
    let (mut hits, mut misses) = (Vec::new(), Vec::new());
    for i in 0..SAMPLES + 10 {
        let p = prompt(1_000_000 + i);
        let miss = embed_secs(&s, "a", &p);
        let hit = embed_secs(&s, "b", &p);
        if i >= 10 {
            misses.push(miss);
            hits.push(hit);
        }
    }
    let m = get(s.addr, "/metrics", &[]).text();
    let line = m
        .lines()
        .find(|l| l.starts_with("memoria_embedding_cache_hits_total{namespace=\"b\"}"))
        .unwrap_or_else(|| panic!("no embedding cache hits for b in\n{m}"));
    assert!(
        line.ends_with(&format!(" {}", SAMPLES + 10)),
        "every attacker request was a cache hit: {line}"
    );
    (hits, misses)
}

#[test]
fn padded_embedding_hits_cannot_be_told_from_misses_by_their_timing() {
    let (hits, misses) = embed_audit("embed-timing-off", "hit_timing = \"off\"");
    let d_off = ks_statistic(&hits, &misses);
    let p_off = ks_p_value(d_off, hits.len(), misses.len());
    println!(
        "embeddings, hit_timing off: median hit {:.2} ms, miss {:.2} ms, KS D = {d_off:.3}, p = {p_off:.2e}",
        median(&hits) * 1e3,
        median(&misses) * 1e3
    );
    assert!(
        p_off < 0.05,
        "without padding a cached vector should come faster (D {d_off}, p {p_off})"
    );
    // As above: a second, independent audit decides a p under 0.05 (1 in 20 by chance).
    let (mut hits, mut misses) = embed_audit("embed-timing-pad", "");
    let mut p_pad = ks_p_value(ks_statistic(&hits, &misses), hits.len(), misses.len());
    if p_pad <= 0.05 {
        (hits, misses) = embed_audit("embed-timing-pad-2", "");
        p_pad = ks_p_value(ks_statistic(&hits, &misses), hits.len(), misses.len());
    }
    println!(
        "embeddings, hit_timing pad: median hit {:.1} ms, miss {:.1} ms, p = {p_pad:.3}; {}",
        median(&hits) * 1e3,
        median(&misses) * 1e3,
        buckets(&hits, &misses)
    );
    assert!(
        p_pad > 0.05,
        "padded embedding hits are distinguishable from misses (p {p_pad})"
    );
}
