//! The estimator against exact LRU: synthetic reference streams whose miss-ratio curve is
//! computed by simulating an LRU cache at each size, and the memory bound.

use std::collections::{BTreeMap, HashMap};

use super::*;

/// xorshift64*: deterministic streams without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn hash_of(block: u64) -> BlockHash {
    BlockHash(*blake3::hash(&block.to_le_bytes()).as_bytes())
}

/// Exact LRU hit rate of `stream` with `cap` blocks: a recency-ordered map.
fn lru_hit_rate(stream: &[u64], cap: usize) -> f64 {
    let mut at: HashMap<u64, u64> = HashMap::new();
    let mut order: BTreeMap<u64, u64> = BTreeMap::new();
    let mut hits = 0u64;
    for (t, &b) in stream.iter().enumerate() {
        let t = t as u64;
        if let Some(old) = at.insert(b, t) {
            order.remove(&old);
            hits += 1;
        } else if order.len() == cap {
            let (_, victim) = order.pop_first().unwrap();
            at.remove(&victim);
        }
        order.insert(t, b);
    }
    hits as f64 / stream.len() as f64
}

/// Zipf-like popularity over `n` blocks (rank^-alpha by inverse CDF on a table).
fn zipf_stream(rng: &mut Rng, n: usize, alpha: f64, len: usize) -> Vec<u64> {
    let w: Vec<f64> = (1..=n).map(|r| (r as f64).powf(-alpha)).collect();
    let total: f64 = w.iter().sum();
    let mut cdf = Vec::with_capacity(n);
    let mut s = 0.0;
    for x in &w {
        s += x / total;
        cdf.push(s);
    }
    (0..len)
        .map(|_| {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            cdf.partition_point(|&c| c < u).min(n - 1) as u64
        })
        .collect()
}

/// Prompt-like stream: sessions reuse one of `prompts` shared prefixes (`prefix` blocks,
/// Zipf-chosen) and add `own` blocks of their own, half of sessions returning later for a
/// second turn that repeats all of their earlier blocks.
fn prompt_stream(
    rng: &mut Rng,
    prompts: usize,
    prefix: usize,
    own: usize,
    sessions: usize,
) -> Vec<u64> {
    let pick = zipf_stream(rng, prompts, 0.8, sessions);
    let mut out = Vec::new();
    let mut next_private = 1u64 << 40;
    let mut earlier: Vec<Vec<u64>> = Vec::new();
    for &p in &pick {
        let mut blocks: Vec<u64> = (0..prefix as u64).map(|i| p * 1000 + i).collect();
        for _ in 0..own {
            blocks.push(next_private);
            next_private += 1;
        }
        out.extend_from_slice(&blocks);
        if rng.below(2) == 0 {
            earlier.push(blocks);
        }
        if !earlier.is_empty() && rng.below(3) == 0 {
            let i = rng.below(earlier.len() as u64) as usize;
            let again = earlier.swap_remove(i);
            out.extend_from_slice(&again);
        }
    }
    out
}

/// Feeds `stream` and checks every reported point within `tol` of exact LRU.
fn check(stream: &[u64], budget: usize, tol: f64) -> AdvisorSnapshot {
    let mut a = Advisor::new(budget);
    let ns = NamespaceId(0);
    a.track(ns, None);
    for &b in stream {
        a.access(ns, &hash_of(b));
    }
    let snap = a.snapshot();
    let mut worst = 0.0f64;
    for p in &snap.curve {
        let exact = lru_hit_rate(stream, p.blocks as usize);
        worst = worst.max((p.hit_rate - exact).abs());
        assert!(
            (p.hit_rate - exact).abs() <= tol,
            "at {} blocks (x{}): estimated {:.4}, exact {:.4} (rate {:.4})",
            p.blocks,
            p.scale,
            p.hit_rate,
            exact,
            snap.sampling_rate
        );
    }
    assert_eq!(snap.refs, stream.len() as u64);
    eprintln!(
        "{} refs, budget {budget}: rate {:.4}, largest error {worst:.4}",
        stream.len(),
        snap.sampling_rate
    );
    snap
}

#[test]
fn small_working_sets_are_exact() {
    let mut rng = Rng(7);
    let stream = zipf_stream(&mut rng, 1500, 0.9, 30_000);
    let snap = check(&stream, 400, 1e-9);
    assert_eq!(snap.sampling_rate, 1.0);
    assert_eq!(snap.sampled_refs, snap.refs);
}

#[test]
fn sampled_zipf_curves_are_within_005_of_exact_lru() {
    for (seed, n, alpha, budget) in [
        (1, 200_000, 0.9, 8_000),
        (2, 100_000, 0.7, 20_000),
        (3, 60_000, 1.1, 2_000),
    ] {
        let mut rng = Rng(seed);
        let stream = zipf_stream(&mut rng, n, alpha, 600_000);
        let snap = check(&stream, budget, 0.05);
        assert!(snap.sampling_rate < 0.5, "sampled: {}", snap.sampling_rate);
    }
}

#[test]
fn sampled_prompt_streams_are_within_005_of_exact_lru() {
    let mut rng = Rng(11);
    let stream = prompt_stream(&mut rng, 3000, 24, 8, 20_000);
    let snap = check(&stream, 6_000, 0.05);
    assert!(snap.sampling_rate < 0.5);
    let smallest = snap.smallest_budget_for_target;
    if let Some(s) = smallest {
        assert!(lru_hit_rate(&stream, s as usize) >= 0.9 - 0.05);
    }
}

#[test]
fn loops_larger_than_the_cache_never_hit() {
    // A cyclic scan over 10k blocks: LRU hits nothing below 10k blocks, everything above.
    let stream: Vec<u64> = (0..200_000u64).map(|i| i % 10_000).collect();
    let snap = check(&stream, 4_000, 0.05);
    assert!(snap.at_scale(1.0).unwrap() < 0.05);
    let s = snap.smallest_budget_for_target.expect("reachable at 10k");
    assert!((9_000..=11_500).contains(&s), "{s}");
}

#[test]
fn memory_stays_under_1_mib_at_any_load() {
    let mut a = Advisor::new(100_000);
    for ns in 0..20u32 {
        a.track(NamespaceId(ns), None);
    }
    let before = a.memory_bytes();
    let mut rng = Rng(5);
    for _ in 0..400_000 {
        let ns = NamespaceId(rng.below(20) as u32);
        let h = hash_of(rng.next());
        if rng.below(4) == 0 {
            a.insert(ns, &h);
        } else {
            a.access(ns, &h);
        }
    }
    assert_eq!(a.memory_bytes(), before, "memory is fixed at construction");
    assert!(before <= 1 << 20, "{before} bytes");
    eprintln!("advisor with 8 namespaces tracked: {before} bytes");
    assert!(a.namespace(NamespaceId(7)).is_some());
    assert!(
        a.namespace(NamespaceId(8)).is_none(),
        "only the first 8 are tracked"
    );
    assert_eq!(a.snapshot().memory_bytes, before as u64);
}

#[test]
fn inserts_move_blocks_without_counting_references() {
    let mut a = Advisor::new(4);
    let ns = NamespaceId(1);
    a.insert(ns, &hash_of(1));
    a.access(ns, &hash_of(1));
    let s = a.snapshot();
    assert_eq!(s.refs, 1);
    assert_eq!(
        s.at_scale(0.25),
        Some(1.0),
        "a sealed block is a hit at any size"
    );
}

#[test]
fn target_is_validated() {
    let mut a = Advisor::new(4);
    a.set_target(1.5);
    assert_eq!(a.target(), 0.9);
    a.set_target(0.8);
    assert_eq!(a.target(), 0.8);
}
