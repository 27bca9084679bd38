//! The advisor against a real serve workload: run 1 replays prompts (uniform over documents)
//! through `memoria serve` with a small hot pool and reads the predicted curve and the
//! smallest budget reaching the target (0.9) from `/stats`; run 2 replays the same requests on
//! a fresh server whose pool is that budget rounded up to the next point of the curve (2× or
//! 4×, whole MiB as `budget_mb` is), and measures the hit rate (full prompt blocks) run 1's
//! curve predicts there, within 0.05. The working set is twice the first pool, so the
//! suggestion lands just under 2×. Below the working set the pool's LRU-2 beats the LRU the
//! curve models (printed beside the curve's 1× point; a Zipf(1) replay measured 0.647 at 1×
//! against 0.578 predicted), so the curve errs on the safe side. The miss reasons add up and
//! `/metrics` passes `promtool`.

use serde_json::{Value, json};

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

/// Blocks per document prompt (16 tokens each) plus one token, so every prompt's last block
/// is partial.
const DOC_BLOCKS: usize = 12;

fn stats(s: &Server) -> Value {
    let r = get(s.addr, "/stats", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// xorshift64*, so both runs replay the same requests.
fn rng(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// The document each request asks for, uniform over `docs` (the pool's LRU-2 and the LRU
/// the curve models then agree in expectation; on skewed popularity LRU-2 hits more).
fn requests(docs: usize, n: usize) -> Vec<usize> {
    let w: Vec<f64> = vec![1.0; docs];
    let total: f64 = w.iter().sum();
    let mut s = 0x5eed_u64;
    (0..n)
        .map(|_| {
            let u = (rng(&mut s) >> 11) as f64 / (1u64 << 53) as f64 * total;
            let mut acc = 0.0;
            w.iter()
                .position(|x| {
                    acc += x;
                    acc >= u
                })
                .unwrap_or(docs - 1)
        })
        .collect()
}

/// Document `d`'s token ids (inside the 512-token vocabulary, never 0-2).
fn doc(d: usize) -> Vec<u32> {
    let mut s = 0x1234_5678_9abc_def0 ^ (d as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..DOC_BLOCKS * 16 + 1)
        .map(|_| 3 + (rng(&mut s) % 500) as u32)
        .collect()
}

fn start(name: &str, budget_mb: u64) -> Server {
    let dir = temp_dir(name);
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!("[cache]\nbudget_mb = {budget_mb}\ntarget_hit_rate = 0.9\n"),
    )
    .expect("config");
    Server::start(
        name,
        &[
            "-m",
            &model(),
            "-np",
            "1",
            "-c",
            "512",
            "--config",
            cfg.to_str().expect("utf-8"),
        ],
    )
}

fn replay(s: &Server, reqs: &[usize]) {
    for &d in reqs {
        let r = post(
            s.addr,
            "/v1/completions",
            &json!({"prompt": doc(d), "max_tokens": 1, "temperature": 0}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

/// Hit rate of full prompt blocks (partial last blocks are always computed).
fn full_block_hit_rate(st: &Value) -> f64 {
    let c = &st["state_cache"];
    let hits = c["hit_blocks"].as_u64().expect("hit_blocks") as f64;
    let misses = c["miss_blocks"].as_u64().expect("miss_blocks") as f64;
    let partial = c["misses_by_reason"]["partial"].as_u64().expect("partial") as f64;
    hits / (hits + misses - partial)
}

fn check_reasons(st: &Value) {
    let c = &st["state_cache"];
    let by = &c["misses_by_reason"];
    let sum: u64 = [
        "cold", "evicted", "partial", "expired", "corrupt", "isolated",
    ]
    .iter()
    .map(|r| by[*r].as_u64().expect("reason"))
    .sum();
    assert_eq!(sum, c["miss_blocks"].as_u64().unwrap(), "{by}");
    let ns = &st["namespaces"]["shared"];
    assert!(ns["misses"]["cold"].as_u64().unwrap() > 0, "{ns}");
    assert!(
        ns["advisor"]["curve"]
            .as_array()
            .is_some_and(|c| c.len() == 5),
        "{ns}"
    );
}

#[test]
fn cache_view_advisor_predicts_the_hit_rate_of_its_suggested_budget() {
    let s1 = start("advisor-1", 1);
    let st = stats(&s1);
    let blocks = st["pool"]["blocks_total"].as_u64().expect("blocks_total") as usize;
    // A working set twice the pool.
    let docs = (2 * blocks).div_ceil(DOC_BLOCKS).max(8);
    let reqs = requests(docs, 30 * docs);
    replay(&s1, &reqs);
    let st1 = stats(&s1);
    check_reasons(&st1);
    assert!(
        st1["state_cache"]["misses_by_reason"]["evicted"]
            .as_u64()
            .unwrap()
            > 0
    );
    let m = get(s1.addr, "/metrics", &[]).text();
    for needle in [
        "memoria_kv_misses_total{namespace=\"shared\",reason=\"evicted\"}",
        "memoria_kv_evicted_misses_total{namespace=\"shared\",tier=\"hot\"}",
        "memoria_kv_advisor_hit_rate{namespace=\"\",scale=\"1\"}",
    ] {
        assert!(m.contains(needle), "/metrics lacks {needle}");
    }
    crate::serve::promtool_check("cache-view", &m);
    let adv = &st1["advisor"];
    let measured1 = full_block_hit_rate(&st1);
    let curve = adv["curve"].as_array().expect("curve");
    let at = |scale: f64| {
        curve
            .iter()
            .find(|p| p["scale"].as_f64() == Some(scale))
            .expect("scale")["hit_rate"]
            .as_f64()
            .unwrap()
    };
    eprintln!("advisor run 1: {blocks} blocks, {docs} docs, measured {measured1:.4}, {adv}");
    assert!(adv["memory_bytes"].as_u64().unwrap() <= 1 << 20);
    // Below the working set the pool's LRU-2 beats the LRU the curve models (measured 0.489
    // against 0.443 at 1× here): the curve errs on the safe side; it is printed, not asserted.
    let block_bytes = st1["pool"]["block_bytes"].as_u64().expect("block_bytes");
    let suggested = adv["smallest_budget_for_target"]
        .as_u64()
        .expect("the target is reachable within 16x");
    let target = adv["target_hit_rate"].as_f64().unwrap();
    assert!(
        suggested as f64 > blocks as f64,
        "the first pool is too small by design"
    );
    let scale = [2u64, 4]
        .into_iter()
        .find(|&k| suggested <= k * blocks as u64)
        .expect("within 4x by design");
    let budget_mb = scale;
    assert_eq!(
        st1["pool"]["bytes_total"].as_u64(),
        Some(blocks as u64 * block_bytes)
    );
    drop(s1);

    let s2 = start("advisor-2", budget_mb);
    let st = stats(&s2);
    let blocks2 = st["pool"]["blocks_total"].as_u64().unwrap();
    assert!(
        blocks2 >= suggested && blocks2.abs_diff(scale * blocks as u64) <= 1,
        "{blocks2}"
    );
    replay(&s2, &reqs);
    let st2 = stats(&s2);
    check_reasons(&st2);
    let measured2 = full_block_hit_rate(&st2);
    let predicted = at(scale as f64);
    eprintln!(
        "advisor run 2: {blocks2} blocks (suggested {suggested} for {target}): predicted \
         {predicted:.4}, measured {measured2:.4}; run 1 at x1: predicted {:.4}, measured \
         {measured1:.4}",
        at(1.0)
    );
    assert!(predicted >= target - 0.01, "{predicted}");
    assert!(
        (predicted - measured2).abs() <= 0.05,
        "{blocks2} blocks: predicted {predicted}, measured {measured2}"
    );
}
