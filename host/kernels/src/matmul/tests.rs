//! Tests of matmul: exact batch invariance (batch size, position, tile edges, thread count),
//! agreement with a dequantize + f64 reference, prequantized path, get_rows, shape errors.

use super::*;
use crate::KernelError;
use crate::dot::vec_dot_with;
use crate::quant::dequantize_row;
use crate::testutil::{Rng, affine_min_slack, quantize_matrix};
use crate::types::{GgmlType, QK_K};

const ROWS: usize = 37;
const COLS: usize = 2 * QK_K;

fn levels() -> Vec<SimdLevel> {
    let mut v = vec![SimdLevel::Scalar];
    if simd::detected() == SimdLevel::Avx2 {
        v.push(SimdLevel::Avx2);
    }
    v
}

fn weights(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    quantize_matrix(ty, &rng.vec(rows * cols, 0.5), cols)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn batch_invariance_is_exact_for_every_type() {
    let n = 37;
    let x = Rng::new(42).vec(n * COLS, 1.0); // [n, COLS]
    for ty in GgmlType::ALL {
        let data = weights(ty, ROWS, COLS, ty.id() as u64);
        let w = WeightMatrix::new(ty, &data, ROWS, COLS).unwrap();
        for level in levels() {
            let mut full = vec![0.0; n * ROWS]; // [n, ROWS]
            matmul_with(level, &w, &x, n, &mut full);
            // One token at a time.
            for t in 0..n {
                let mut one = vec![0.0; ROWS];
                matmul_with(level, &w, &x[t * COLS..(t + 1) * COLS], 1, &mut one);
                assert_eq!(
                    bits(&one),
                    bits(&full[t * ROWS..(t + 1) * ROWS]),
                    "{ty} {level:?} t={t}"
                );
            }
            // Sub-batches starting at every offset mod the token tile, of every small size.
            for start in 0..5 {
                for len in [2usize, 3, 5, 6, 9] {
                    let end = (start + len).min(n);
                    let m = end - start;
                    let mut part = vec![0.0; m * ROWS];
                    matmul_with(level, &w, &x[start * COLS..end * COLS], m, &mut part);
                    assert_eq!(
                        bits(&part),
                        bits(&full[start * ROWS..end * ROWS]),
                        "{ty} {level:?}"
                    );
                }
            }
            // Row subsets (different row-tile edges): the first 13 rows as their own matrix.
            let rb = ty.row_bytes(COLS).unwrap();
            let w13 = WeightMatrix::new(ty, &data[rb * 3..rb * 16], 13, COLS).unwrap();
            let mut sub = vec![0.0; n * 13];
            matmul_with(level, &w13, &x, n, &mut sub);
            for t in 0..n {
                assert_eq!(
                    bits(&sub[t * 13..(t + 1) * 13]),
                    bits(&full[t * ROWS + 3..t * ROWS + 16]),
                    "{ty} {level:?} rows"
                );
            }
            // Each entry equals vec_dot on the same path.
            let mut xq = QuantizedActivations::new();
            xq.quantize(ty.vec_dot_type(), &x, n, COLS);
            for t in [0, 17, 36] {
                for r in 0..ROWS {
                    let d = vec_dot_with(level, ty, w.row(r), xq.row(t), COLS);
                    assert_eq!(
                        d.to_bits(),
                        full[t * ROWS + r].to_bits(),
                        "{ty} {level:?} dot"
                    );
                }
            }
        }
    }
}

#[test]
fn thread_count_does_not_change_results() {
    let n = 11;
    let x = Rng::new(3).vec(n * COLS, 1.0);
    for ty in [GgmlType::Q8_0, GgmlType::Q4K, GgmlType::F16] {
        let data = weights(ty, 64, COLS, 1);
        let w = WeightMatrix::new(ty, &data, 64, COLS).unwrap();
        let run = |threads: usize| {
            let pool = crate::threads::Pool::new(threads);
            let mut out = vec![0.0; n * 64];
            pool.install(|| matmul(&w, &x, n, &mut out));
            bits(&out)
        };
        let one = run(1);
        assert_eq!(one, run(3), "{ty}");
        assert_eq!(one, run(7), "{ty}");
    }
}

#[test]
fn matmul_matches_dequantized_f64_reference() {
    let n = 5;
    let x = Rng::new(11).vec(n * COLS, 1.0);
    for ty in GgmlType::ALL {
        let data = weights(ty, ROWS, COLS, 100 + ty.id() as u64);
        let w = WeightMatrix::new(ty, &data, ROWS, COLS).unwrap();
        let mut xq = QuantizedActivations::new();
        xq.quantize(ty.vec_dot_type(), &x, n, COLS);
        let mut xd = vec![0.0; n * COLS]; // [n, COLS]
        for t in 0..n {
            dequantize_row(xq.ty(), xq.row(t), &mut xd[t * COLS..(t + 1) * COLS]).unwrap();
        }
        let mut wd = vec![0.0; COLS];
        for level in levels() {
            let mut out = vec![0.0; n * ROWS];
            matmul_prequantized_with(level, &w, &xq, &mut out);
            for r in 0..ROWS {
                dequantize_row(ty, w.row(r), &mut wd).unwrap();
                for t in 0..n {
                    let xs = &xd[t * COLS..(t + 1) * COLS];
                    let exact: f64 = wd.iter().zip(xs).map(|(a, b)| *a as f64 * *b as f64).sum();
                    let scale: f64 = wd
                        .iter()
                        .zip(xs)
                        .map(|(a, b)| (*a as f64 * *b as f64).abs())
                        .sum();
                    let got = out[t * ROWS + r] as f64;
                    let slack = affine_min_slack(ty, w.row(r), xq.row(t));
                    assert!(
                        (got - exact).abs() <= 1e-5 * scale + 1e-6 + slack,
                        "{ty} {level:?} r={r} t={t}: {got} vs {exact}"
                    );
                    // And close to the unquantized input too (activation quantization error).
                    let raw = &x[t * COLS..(t + 1) * COLS];
                    let vs_raw: f64 = wd.iter().zip(raw).map(|(a, b)| *a as f64 * *b as f64).sum();
                    assert!((got - vs_raw).abs() <= 0.02 * scale + 1e-3, "{ty} raw");
                }
            }
        }
    }
}

#[test]
fn prequantized_equals_matmul() {
    let n = 6;
    let x = Rng::new(12).vec(n * COLS, 1.0);
    let data = weights(GgmlType::Q6K, 16, COLS, 2);
    let w = WeightMatrix::new(GgmlType::Q6K, &data, 16, COLS).unwrap();
    let mut a = vec![0.0; n * 16];
    let mut b = vec![0.0; n * 16];
    matmul(&w, &x, n, &mut a);
    let mut xq = QuantizedActivations::default();
    xq.quantize(GgmlType::Q8K, &x, n, COLS);
    matmul_prequantized(&w, &xq, &mut b);
    assert_eq!(bits(&a), bits(&b));
}

#[test]
fn get_rows_dequantizes_selected_rows() {
    let data = weights(GgmlType::Q4_0, 10, 64, 4);
    let w = WeightMatrix::new(GgmlType::Q4_0, &data, 10, 64).unwrap();
    let ids = [3u32, 0, 9, 3];
    let mut out = vec![0.0; ids.len() * 64];
    get_rows(&w, &ids, &mut out);
    let mut want = vec![0.0; 64];
    for (i, &id) in ids.iter().enumerate() {
        dequantize_row(GgmlType::Q4_0, w.row(id as usize), &mut want).unwrap();
        assert_eq!(&out[i * 64..(i + 1) * 64], &want[..]);
    }
}

#[test]
fn weight_matrix_rejects_bad_shapes() {
    let data = vec![0u8; 34 * 4];
    assert!(WeightMatrix::new(GgmlType::Q8_0, &data, 2, 64).is_ok());
    assert_eq!(
        WeightMatrix::new(GgmlType::Q8_0, &data, 3, 64).unwrap_err(),
        KernelError::WrongDataLength {
            ty: GgmlType::Q8_0,
            rows: 3,
            cols: 64,
            expected: 204,
            got: 136
        }
    );
    assert!(matches!(
        WeightMatrix::new(GgmlType::Q8_0, &data, 4, 33),
        Err(KernelError::RowNotBlockAligned { .. })
    ));
    assert!(WeightMatrix::new(GgmlType::F32, &data, usize::MAX, 8).is_err());
}

#[test]
fn empty_batch_is_a_no_op() {
    let data = weights(GgmlType::Q8_0, 4, 32, 1);
    let w = WeightMatrix::new(GgmlType::Q8_0, &data, 4, 32).unwrap();
    let mut out: Vec<f32> = vec![];
    matmul(&w, &[], 0, &mut out);
}

#[test]
fn batch_invariance_across_token_blocks() {
    let n = 70; // more than one token block of the driver
    let cols = QK_K;
    let x = Rng::new(21).vec(n * cols, 1.0); // [n, cols]
    for ty in [GgmlType::Q4_0, GgmlType::Q6K, GgmlType::BF16] {
        let data = weights(ty, 12, cols, 5);
        let w = WeightMatrix::new(ty, &data, 12, cols).unwrap();
        for level in levels() {
            let mut full = vec![0.0; n * 12]; // [n, 12]
            matmul_with(level, &w, &x, n, &mut full);
            for t in [0, 1, 63, 64, 65, 69] {
                let mut one = vec![0.0; 12];
                matmul_with(level, &w, &x[t * cols..(t + 1) * cols], 1, &mut one);
                assert_eq!(
                    bits(&one),
                    bits(&full[t * 12..(t + 1) * 12]),
                    "{ty} {level:?} t={t}"
                );
            }
        }
    }
}

/// Matmuls running inside rayon tasks (nested parallelism, work stealing on the same thread)
/// neither panic nor change results.
#[test]
fn nested_parallel_matmuls_agree() {
    use rayon::prelude::*;
    let n = 64;
    let cols = 2 * QK_K;
    let x = Rng::new(8).vec(n * cols, 1.0); // [n, cols]; large enough to quantize in parallel
    let data = weights(GgmlType::Q8_0, 16, cols, 3);
    let w = WeightMatrix::new(GgmlType::Q8_0, &data, 16, cols).unwrap();
    let mut want = vec![0.0; n * 16];
    matmul(&w, &x, n, &mut want);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let outs: Vec<Vec<f32>> = pool.install(|| {
        (0..8)
            .into_par_iter()
            .map(|_| {
                let mut out = vec![0.0; n * 16];
                matmul(&w, &x, n, &mut out);
                out
            })
            .collect()
    });
    for out in outs {
        assert_eq!(bits(&out), bits(&want));
    }
}

/// Odd block counts (the 512-bit tiles' half-empty last pair) keep batch invariance exact and
/// agree with `vec_dot`, for the 32-element formats on every level.
#[test]
fn batch_invariance_with_odd_block_counts() {
    let (rows, cols, n) = (13, 9 * 32, 11);
    let x = Rng::new(5).vec(n * cols, 1.0);
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
    ] {
        let data = weights(ty, rows, cols, ty.id() as u64 + 3);
        let w = WeightMatrix::new(ty, &data, rows, cols).unwrap();
        for level in levels() {
            let mut full = vec![0.0; n * rows];
            matmul_with(level, &w, &x, n, &mut full);
            for t in 0..n {
                let xt = &x[t * cols..(t + 1) * cols];
                let mut one = vec![0.0; rows];
                matmul_with(level, &w, xt, 1, &mut one);
                assert_eq!(
                    bits(&one),
                    bits(&full[t * rows..(t + 1) * rows]),
                    "{ty} {level:?} t={t}"
                );
                let mut xq = QuantizedActivations::new();
                xq.quantize(ty.vec_dot_type(), xt, 1, cols);
                for r in 0..rows {
                    let d = vec_dot_with(level, ty, w.row(r), xq.row(0), cols);
                    assert_eq!(d.to_bits(), one[r].to_bits(), "{ty} {level:?} t={t} r={r}");
                }
            }
        }
    }
}
