//! Ignored timing report (`cargo test -p memoria-kernels --release timing -- --ignored
//! --nocapture`): best-of-N wall time of matmul for the 110M llama's shapes, robust to noise from
//! other processes. Not a benchmark suite (see benches/benches/kernels.rs), just a quick check.

use std::time::Instant;

use super::*;
use crate::testutil::{Rng, quantize_matrix};
use crate::types::GgmlType;

fn best_secs(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

#[test]
#[ignore = "timing report, run explicitly"]
fn timing_report() {
    let types = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4K,
        GgmlType::Q6K,
        GgmlType::F16,
    ];
    let shapes = [(768usize, 768usize), (2048, 768), (768, 2048), (32000, 768)];
    println!("threads = {}", rayon::current_num_threads());
    for ty in types {
        // Per token of the 110M llama: 12 layers × (4 × 768² + 3 × 2048·768) + 32000·768 output.
        let mut model_secs = [0.0f64; 2];
        for (rows, cols) in shapes {
            let mut rng = Rng::new(1);
            let data = quantize_matrix(ty, &rng.vec(rows * cols, 0.5), cols);
            let w = WeightMatrix::new(ty, &data, rows, cols).unwrap();
            for (k, n) in [1usize, 64].into_iter().enumerate() {
                let x = rng.vec(n * cols, 1.0); // [n, cols]
                let mut xq = QuantizedActivations::new();
                xq.quantize(ty.vec_dot_type(), &x, n, cols);
                let mut out = vec![0.0; n * rows]; // [n, rows]
                let reps = if rows > 10000 { 10 } else { 60 };
                let s = best_secs(reps, || matmul_prequantized(&w, &xq, &mut out));
                let gflops = 2.0 * (rows * cols * n) as f64 / s / 1e9;
                println!(
                    "{ty:>5} {rows:>5}x{cols:<5} n={n:<3} {:>9.1} us {gflops:>7.1} GFLOP/s",
                    s * 1e6
                );
                let per_token = s / n as f64;
                model_secs[k] += per_token
                    * match (rows, cols) {
                        (768, 768) => 48.0,
                        (2048, 768) => 24.0,
                        (768, 2048) => 12.0,
                        _ => 1.0,
                    };
            }
        }
        println!(
            "{ty:>5} model matmuls only: decode {:.0} tok/s, prefill {:.0} tok/s",
            1.0 / model_secs[0],
            1.0 / model_secs[1]
        );
    }
}

/// A decode/prefill pass over distinct weights for every layer (≈ the 110M llama's matmuls), so
/// the weights stream from DRAM like in a real model rather than staying cache-hot.
#[test]
#[ignore = "timing report, run explicitly"]
fn timing_model_pass() {
    const LAYERS: usize = 12;
    // (rows, cols) of wq, wk, wv, wo, w1, w3, w2.
    let layer_shapes = [
        (768, 768),
        (768, 768),
        (768, 768),
        (768, 768),
        (2048, 768),
        (2048, 768),
        (768, 2048),
    ];
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K] {
        let mut rng = Rng::new(7);
        let mut mats: Vec<(Vec<u8>, usize, usize)> = Vec::new();
        for _ in 0..LAYERS {
            for &(rows, cols) in &layer_shapes {
                mats.push((
                    quantize_matrix(ty, &rng.vec(rows * cols, 0.5), cols),
                    rows,
                    cols,
                ));
            }
        }
        mats.push((
            quantize_matrix(ty, &rng.vec(32000 * 768, 0.5), 768),
            32000,
            768,
        ));
        let mb: usize = mats.iter().map(|m| m.0.len()).sum::<usize>() >> 20;
        for n in [1usize, 64] {
            let x768 = rng.vec(n * 768, 1.0);
            let x2048 = rng.vec(n * 2048, 1.0);
            let mut out = vec![0.0; n * 32000];
            let s = best_secs(5, || {
                for (data, rows, cols) in &mats {
                    let w = WeightMatrix::new(ty, data, *rows, *cols).unwrap();
                    let x = if *cols == 768 { &x768 } else { &x2048 };
                    matmul(&w, x, n, &mut out[..n * rows]);
                }
            });
            println!(
                "{ty:>5} model pass ({mb} MiB) n={n:<3} {:>8.2} ms  {:>6.0} tok/s",
                s * 1e3,
                n as f64 / s
            );
        }
    }
}

#[test]
#[ignore = "timing report, run explicitly"]
fn timing_activation_quantize() {
    let (n, cols) = (512usize, 2048usize);
    let x = Rng::new(3).vec(n * cols, 1.0); // [n, cols]
    let mut xq = QuantizedActivations::new();
    for ty in [GgmlType::Q8_0, GgmlType::Q8K, GgmlType::F16] {
        let s = best_secs(10, || xq.quantize(ty, &x, n, cols));
        println!(
            "quantize {ty:>5} [{n}, {cols}]: {:.2} ms ({:.2} ns/elem)",
            s * 1e3,
            s * 1e9 / (n * cols) as f64
        );
    }
}
