//! Benchmark for public prefixes: 8 isolated tenants × 4 clients, each client's
//! conversation = one shared 1,000-token public system prompt + its own 150-token user turn +
//! 100 generated tokens, all alive at once in the hot pool of a SmolLM2-135M-shaped K/V layout
//! (30 layers, kv_dim 192, f16, B = 16). Prints the K/V bytes held without the policy (each
//! tenant holds its own copy of the system prompt; its 4 clients already share it) and with
//! `public_prefixes` (one copy for all), and asserts the ratio is at most 0.6. Memory is exact
//! block accounting, so the figure does not depend on machine load. Run:
//! `cargo test -p memoria-tests --test all -- public_prefix_bench --nocapture`.

use std::sync::Arc;

use memoria_kv::{
    BlockPool, KvElem, KvLayout, ModelFingerprint, NamespaceId, NamespaceSalt, PublicChain,
};

const TENANTS: u32 = 8;
const CLIENTS: u32 = 4;
const SYSTEM_TOKENS: u32 = 1000;
const USER_TOKENS: u32 = 150;
const GENERATED_TOKENS: u32 = 100;

fn layout() -> KvLayout {
    KvLayout::new(30, 192, KvElem::F16).with_block_tokens(16)
}

/// K/V bytes held (blocks in use + cached) after every client's conversation ran, and the
/// blocks the public account holds.
fn held_bytes(public: bool) -> (u64, usize) {
    let l = layout();
    let mut pool = BlockPool::new(l, 4096 * l.block_bytes().expect("layout")).expect("pool");
    let fp = ModelFingerprint::of(b"public-prefix-bench");
    let system: Vec<u32> = (0..SYSTEM_TOKENS).map(|i| 1000 + i).collect();
    let registry = memoria_tenant::Tenants::default().registry_table();
    let common = pool.root_hash(&fp, &registry.common_salt().expect("common salt"));
    let chain = Arc::new(PublicChain::new(
        common,
        l.block_tokens,
        std::slice::from_ref(&system),
    ));
    let mut seqs = Vec::new();
    for t in 0..TENANTS {
        let ns = NamespaceId(t + 1);
        if public {
            pool.set_public_prefixes(ns, Some(chain.clone()));
        }
        let root = pool.root_hash(&fp, &NamespaceSalt::derive(&format!("tenant-{t}")));
        for c in 0..CLIENTS {
            let mut prompt = system.clone();
            prompt.extend((0..USER_TOKENS).map(|i| 50_000 + (t * CLIENTS + c) * 1000 + i));
            let seq = pool.create_seq(ns, root);
            let hit = pool.match_prefix(seq, &prompt).expect("match");
            pool.reserve(seq, prompt.len() - hit).expect("room");
            pool.commit(seq, &prompt[hit..]).expect("commit");
            for g in 0..GENERATED_TOKENS {
                pool.reserve(seq, 1).expect("room");
                pool.commit(seq, &[7 + g]).expect("commit");
            }
            seqs.push(seq);
        }
    }
    pool.check_invariants().expect("invariants");
    let blocks = (pool.used_blocks() + pool.cached_blocks()) as u64;
    (blocks * pool.block_bytes() as u64, pool.public_held())
}

#[test]
fn public_prefix_bench_kv_bytes_held() {
    // Interleaved rounds; the figures are exact, the rounds show they do not move.
    let mut ratios = Vec::new();
    for round in 0..3 {
        let (without, _) = held_bytes(false);
        let (with, public_blocks) = held_bytes(true);
        let ratio = with as f64 / without as f64;
        println!(
            "public-prefix bench round {round}: {TENANTS} tenants x {CLIENTS} clients, \
             {SYSTEM_TOKENS}-token public system prompt: K/V held without the policy \
             {:.1} MiB, with {:.1} MiB ({public_blocks} public blocks): {ratio:.3}x",
            without as f64 / (1 << 20) as f64,
            with as f64 / (1 << 20) as f64,
        );
        ratios.push(ratio);
    }
    assert!(ratios.windows(2).all(|w| w[0] == w[1]));
    assert!(ratios[0] <= 0.6, "target <= 0.6x, got {:.3}", ratios[0]);
}
