//! Tests of quantize/dequantize: round-trip error bounds, format invariants, length errors.

use half::f16;

use super::*;
use crate::simd::SimdLevel;
use crate::testutil::Rng;
use crate::types::QK_K;
use bytemuck::Zeroable;

fn round_trip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    let mut q = vec![0u8; ty.row_bytes(x.len()).unwrap()];
    quantize_row(ty, x, &mut q).unwrap();
    let mut y = vec![0.0; x.len()];
    dequantize_row(ty, &q, &mut y).unwrap();
    y
}

fn rel_rmse(x: &[f32], y: &[f32]) -> f64 {
    let err: f64 = x.iter().zip(y).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
    let sig: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
    (err / sig).sqrt()
}

#[test]
fn round_trip_error_bounds_every_type() {
    let mut rng = Rng::new(1);
    let x = rng.vec(4 * QK_K, 2.0);
    let bounds = [
        (GgmlType::F32, 0.0),
        (GgmlType::F16, 1e-3),
        (GgmlType::BF16, 5e-3),
        (GgmlType::Q8_0, 0.01),
        (GgmlType::Q8K, 0.01),
        (GgmlType::Q6K, 0.03),
        (GgmlType::Q4_0, 0.15),
        (GgmlType::Q4_1, 0.12),
        (GgmlType::Q5_0, 0.08),
        (GgmlType::Q5_1, 0.06),
        (GgmlType::Q8_1, 0.01),
        (GgmlType::Q4K, 0.12),
        (GgmlType::Q5K, 0.06),
        (GgmlType::Q3K, 0.25),
        (GgmlType::Q2K, 0.45),
        (GgmlType::IQ4NL, 0.12),
        (GgmlType::IQ4XS, 0.12),
        (GgmlType::Mxfp4, 0.2),
    ];
    for (ty, bound) in bounds {
        let y = round_trip(ty, &x);
        let e = rel_rmse(&x, &y);
        assert!(e <= bound, "{ty}: relative rmse {e} > {bound}");
    }
}

#[test]
fn block_max_error_bounds_q8_0_q4_0() {
    let mut rng = Rng::new(2);
    let x = rng.vec(32 * 64, 3.0);
    for (ty, steps) in [
        (GgmlType::Q8_0, 127.0f32),
        (GgmlType::Q8_1, 127.0),
        (GgmlType::Q4_0, 8.0),
        (GgmlType::Q5_0, 16.0),
    ] {
        let y = round_trip(ty, &x);
        for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
            let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            // One quantization step (d rounded to f16) bounds every element's error.
            let bound = amax / steps * 1.002;
            for (a, b) in xb.iter().zip(yb) {
                assert!((a - b).abs() <= bound, "{ty}: |{a} - {b}| > {bound}");
            }
        }
    }
}

/// Q4_1 / Q5_1: one step `(max - min) / levels` (plus the f16 rounding of the min) bounds every
/// error.
#[test]
fn block_max_error_bound_q4_1_q5_1() {
    let mut rng = Rng::new(12);
    let x = rng.vec(32 * 64, 3.0);
    for (ty, steps) in [(GgmlType::Q4_1, 15.0f32), (GgmlType::Q5_1, 31.0)] {
        let y = round_trip(ty, &x);
        for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
            let min = xb.iter().fold(f32::MAX, |m, &v| m.min(v));
            let max = xb.iter().fold(f32::MIN, |m, &v| m.max(v));
            let bound = (max - min) / steps * 1.002 + min.abs() / 1024.0;
            for (a, b) in xb.iter().zip(yb) {
                assert!((a - b).abs() <= bound, "{ty}: |{a} - {b}| > {bound}");
            }
        }
    }
}

/// Hand-derived Q5_1 block: min -5, max 26 give d = 1; element j has value j - 5 (level j), so
/// bit 4 is set for j >= 16.
#[test]
fn q5_1_golden_block() {
    let x: Vec<f32> = (0..32).map(|j| j as f32 - 5.0).collect();
    let mut q = [0u8; 24];
    quantize_row(GgmlType::Q5_1, &x, &mut q).unwrap();
    assert_eq!(&q[..2], &f16::ONE.to_le_bytes());
    assert_eq!(&q[2..4], &f16::from_f32(-5.0).to_le_bytes());
    assert_eq!(u32::from_le_bytes([q[4], q[5], q[6], q[7]]), 0xFFFF_0000);
    for j in 0..16 {
        assert_eq!(q[8 + j], j as u8 | ((j as u8) << 4), "byte {j}");
    }
    assert_eq!(round_trip(GgmlType::Q5_1, &x), x);
}

/// llama.cpp's `test-quantize-fns` total error: `sqrt(Σ(x - dq(q(x)))²) / n` on its synthetic
/// data (`0.1 + 2 cos(i)`, 4096 elements) below its per-type bound.
#[test]
fn quantization_error_within_llama_cpp_bounds() {
    let n = 32 * 128;
    let x: Vec<f32> = (0..n).map(|i| 0.1 + 2.0 * (i as f32).cos()).collect();
    for ty in GgmlType::ALL {
        let bound = match ty {
            GgmlType::Q3K => 0.004,
            GgmlType::Q2K => 0.0075,
            _ => 0.002,
        };
        let y = round_trip(ty, &x);
        let sum: f64 = x
            .iter()
            .zip(&y)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum();
        let err = sum.sqrt() / n as f64;
        assert!(err < bound, "{ty}: total error {err} >= {bound}");
    }
}

#[test]
fn zero_rows_stay_zero() {
    let x = vec![0.0f32; 2 * QK_K];
    for ty in GgmlType::ALL {
        assert!(round_trip(ty, &x).iter().all(|&v| v == 0.0), "{ty}");
    }
}

#[test]
fn q8_0_exact_on_representable_values() {
    // amax 127 gives d = 1, so integers round-trip exactly.
    let x: Vec<f32> = (0..32)
        .map(|i| (i * 8 - 127).clamp(-127, 127) as f32)
        .collect();
    let mut x = x;
    x[0] = 127.0;
    assert_eq!(round_trip(GgmlType::Q8_0, &x), x);
}

/// The vector Q8_K quantizer this CPU runs (512-bit or AVX2) gives the scalar loop's bytes:
/// ties, the largest magnitude twice with both signs, zeros, NaNs, a lone huge value, values
/// so small that the scale is near f32's largest.
#[test]
fn q8k_simd_quantizer_equals_the_scalar_loop() {
    let mut x: Vec<f32> = (0..256 * 12)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) % 20001) as f32 / 100.0 - 100.0)
        .collect();
    // Block 1: exact halves after scaling (amax 127), and the largest magnitude twice with
    // both signs (the first one sets the sign of the scale).
    for (i, v) in x[256..512].iter_mut().enumerate() {
        *v = (i % 64) as f32 - 31.5;
    }
    x[300] = -127.0;
    x[400] = 127.0;
    x[512..768].fill(0.0);
    x[600] = -0.0;
    x[768 + 5] = f32::NAN;
    x[768 + 9] = f32::from_bits(0x7fc0_0013);
    x[1024 + 7] = 1e30;
    for (i, v) in x[1280..1536].iter_mut().enumerate() {
        *v = (i as f32 / 2.0 + 0.5) * (1.0 - f32::EPSILON);
    }
    x[1536..1792].fill(0.0);
    x[1600] = 1e-30;
    x[1601] = -3e-31;
    // Subnormals, and a scale near f32's largest (`-127 / max` still finite: ggml's
    // `nearest_int` asserts that its argument is in range).
    for (i, v) in x[1792..2048].iter_mut().enumerate() {
        *v = (i as f32 - 100.0) * 1e-38;
    }
    let blocks = x.len() / 256;
    let (mut a, mut b) = (
        vec![BlockQ8K::zeroed(); blocks],
        vec![BlockQ8K::zeroed(); blocks],
    );
    super::q8k::quantize(&x, &mut a);
    super::q8k::quantize_scalar(&x, &mut b);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&a),
        bytemuck::cast_slice::<_, u8>(&b)
    );
}

/// The vector Q8_0 / Q8_1 quantizers this CPU runs (512-bit or AVX2) give the scalar loops'
/// bytes: ties at every half step, values just under and over them, zeros, a lone huge value,
/// NaN and infinities, and blocks so small that `1 / d` overflows or nearly does.
#[test]
fn q8_simd_quantizers_equal_the_scalar_loops() {
    let mut x: Vec<f32> = (0..32 * 64)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) % 20001) as f32 / 100.0 - 100.0)
        .collect();
    // Block 1: exact halves after scaling by 127/127 (amax 127).
    for (i, v) in x[32..64].iter_mut().enumerate() {
        *v = i as f32 - 15.5;
    }
    x[63] = 127.0;
    x[64..96].fill(0.0);
    x[96] = f32::NAN;
    x[130] = f32::INFINITY;
    x[170] = -f32::INFINITY;
    x[200] = 1e30;
    for (i, v) in x[224..256].iter_mut().enumerate() {
        *v = (i as f32 + 0.5) * (1.0 - f32::EPSILON);
    }
    for (i, v) in x[256..320].iter_mut().enumerate() {
        *v = (i as f32 - 20.0) * if i < 32 { 1e-40 } else { 1e-37 };
    }
    let blocks = x.len() / 32;
    let (mut a, mut b) = (
        vec![BlockQ8_0::zeroed(); blocks],
        vec![BlockQ8_0::zeroed(); blocks],
    );
    super::q8_0::quantize(&x, &mut a);
    super::q8_0::quantize_scalar(&x, &mut b);
    // Never -128, even where `1 / d` overflowed (the dot products' sign trick relies on it).
    assert!(a.iter().all(|y| !y.qs.contains(&i8::MIN)));
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&a),
        bytemuck::cast_slice::<_, u8>(&b)
    );
    let (mut a, mut b) = (
        vec![BlockQ8_1::zeroed(); blocks],
        vec![BlockQ8_1::zeroed(); blocks],
    );
    super::q8_1::quantize(&x, &mut a);
    super::q8_1::quantize_scalar(&x, &mut b);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&a),
        bytemuck::cast_slice::<_, u8>(&b)
    );
}

#[test]
fn q8k_bsums_and_range() {
    let mut rng = Rng::new(3);
    let x = rng.vec(2 * QK_K, 1.0);
    let mut q = vec![0u8; GgmlType::Q8K.row_bytes(x.len()).unwrap()];
    quantize_row(GgmlType::Q8K, &x, &mut q).unwrap();
    for b in bytemuck::cast_slice::<u8, BlockQ8K>(&q) {
        let bsums = b.bsums;
        for (j, g) in b.qs.chunks(16).enumerate() {
            assert_eq!(bsums[j] as i32, g.iter().map(|&v| v as i32).sum::<i32>());
            assert!(g.iter().all(|&v| v != -128));
        }
    }
}

#[test]
fn k_quant_scales_use_full_range() {
    let mut rng = Rng::new(4);
    let x = rng.vec(QK_K, 1.0);
    let mut q = vec![0u8; 144];
    quantize_row(GgmlType::Q4K, &x, &mut q).unwrap();
    let b: BlockQ4K = bytemuck::pod_read_unaligned(&q);
    let max_sc = (0..8).map(|j| scale_min_k4(j, &b.scales).0).max().unwrap();
    assert_eq!(max_sc, 63);
    let mut q = vec![0u8; 210];
    quantize_row(GgmlType::Q6K, &x, &mut q).unwrap();
    let b: BlockQ6K = bytemuck::pod_read_unaligned(&q);
    assert!(b.scales.iter().any(|&s| s.unsigned_abs() >= 127));
}

#[test]
fn length_errors_are_reported() {
    let mut out = vec![0.0f32; 32];
    assert_eq!(
        dequantize_row(GgmlType::Q8_0, &[0u8; 33], &mut out),
        Err(KernelError::WrongDataLength {
            ty: GgmlType::Q8_0,
            rows: 1,
            cols: 32,
            expected: 34,
            got: 33
        })
    );
    let mut out = vec![0.0f32; 31];
    assert!(matches!(
        dequantize_row(GgmlType::Q4_0, &[0u8; 18], &mut out),
        Err(KernelError::RowNotBlockAligned { .. })
    ));
    assert!(quantize_row(GgmlType::Q4K, &[0.0; 256], &mut [0u8; 143]).is_err());
    assert!(quantize_row(GgmlType::F16, &[0.0; 3], &mut [0u8; 8]).is_err());
}

#[test]
fn unaligned_rows_decode_like_aligned() {
    let mut rng = Rng::new(5);
    let x = rng.vec(QK_K, 1.0);
    for ty in GgmlType::ALL {
        let rb = ty.row_bytes(QK_K).unwrap();
        let mut q = vec![0u8; rb + 1];
        quantize_row(ty, &x, &mut q[1..]).unwrap();
        let mut a = vec![0.0; QK_K];
        let mut b = vec![0.0; QK_K];
        dequantize_row(ty, &q[1..], &mut a).unwrap();
        let aligned = q[1..].to_vec();
        dequantize_row(ty, &aligned, &mut b).unwrap();
        assert_eq!(a, b, "{ty}");
    }
}

#[test]
fn f16_rows_simd_matches_scalar() {
    let mut rng = Rng::new(6);
    let mut x = rng.vec(77, 1000.0);
    x.extend([
        f32::INFINITY,
        -0.0,
        1e-7,
        65520.0,
        65519.0,
        f32::NAN,
        2.0f32.powi(-24) * 1.5,
    ]);
    let scalar: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    let mut simd = vec![f16::ZERO; x.len()];
    f32_to_f16_row(&x, &mut simd);
    let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
    if crate::simd::level() == SimdLevel::Avx2 {
        let nan_pos = x.iter().position(|v| v.is_nan()).unwrap();
        assert!(simd[nan_pos].is_nan());
        let mut a = bits(&simd);
        let mut b = bits(&scalar);
        a.remove(nan_pos);
        b.remove(nan_pos);
        assert_eq!(a, b);
    } else {
        assert_eq!(bits(&simd), bits(&scalar));
    }
    let mut back = vec![0.0f32; x.len()];
    f16_to_f32_row(&simd, &mut back);
    for (h, f) in simd.iter().zip(&back) {
        assert!(h.to_f32() == *f || f.is_nan());
    }
}

#[test]
fn bf16_rows_round_trip() {
    let x = [1.0f32, -3.5, 1.0 + 1.0 / 256.0, f32::INFINITY];
    let y = round_trip(GgmlType::BF16, &x);
    assert_eq!(y, vec![1.0, -3.5, 1.0, f32::INFINITY]);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn q8_0_round_trip_within_one_step(x in prop::collection::vec(-1e3f32..1e3, 32..=32)) {
            let y = round_trip(GgmlType::Q8_0, &x);
            let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            for (a, b) in x.iter().zip(&y) {
                prop_assert!((a - b).abs() <= amax / 127.0 * 1.002 + 1e-30);
            }
        }

        #[test]
        fn k_quants_bounded_error(x in prop::collection::vec(-10f32..10.0, 256..=256)) {
            let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            for (ty, frac) in [
                (GgmlType::Q6K, 0.05f32),
                (GgmlType::Q5K, 0.12),
                (GgmlType::Q4K, 0.25),
                (GgmlType::Q8K, 0.01),
            ] {
                let y = round_trip(ty, &x);
                for (a, b) in x.iter().zip(&y) {
                    prop_assert!((a - b).abs() <= amax * frac + 1e-6, "{} {} {}", ty, a, b);
                }
            }
        }
    }
}

/// Hand-derived Q4_0 block: the largest magnitude (-8) fixes d = -8 / -8 = 1, so level j
/// encodes x = j - 8, and levels are `trunc(x * id + 8.5)` clamped to 15.
#[test]
fn q4_0_golden_block() {
    let mut x = [7.0f32; 32];
    for (j, v) in x.iter_mut().take(16).enumerate() {
        *v = j as f32 - 8.0;
    }
    let mut q = [0u8; 18];
    quantize_row(GgmlType::Q4_0, &x, &mut q).unwrap();
    assert_eq!(&q[..2], &f16::ONE.to_le_bytes());
    for j in 0..16 {
        assert_eq!(q[2 + j], j as u8 | (15 << 4), "byte {j}");
    }
}

/// Hand-derived Q8_0 block: amax 254 gives d = 2; values round half away from zero.
#[test]
fn q8_0_golden_block() {
    let mut x = [0.0f32; 32];
    x[0] = -254.0;
    x[1] = 3.0; // 1.5 -> 2
    x[2] = -3.0; // -1.5 -> -2
    x[3] = 5.0; // 2.5 -> 3 (ties away from zero, not to even)
    let mut q = [0u8; 34];
    quantize_row(GgmlType::Q8_0, &x, &mut q).unwrap();
    assert_eq!(&q[..2], &f16::from_f32(2.0).to_le_bytes());
    assert_eq!(&q[2..6], &[(-127i8) as u8, 2, (-2i8) as u8, 3]);
}

/// Hand-derived Q4_1 block: min -3, max 12 give d = 1, so element j (< 16) of value j - 3 is
/// level j, and the upper 16 (value 12) are level 15.
#[test]
fn q4_1_golden_block() {
    let mut x = [12.0f32; 32];
    for (j, v) in x.iter_mut().take(16).enumerate() {
        *v = j as f32 - 3.0;
    }
    let mut q = [0u8; 20];
    quantize_row(GgmlType::Q4_1, &x, &mut q).unwrap();
    assert_eq!(&q[..2], &f16::ONE.to_le_bytes());
    assert_eq!(&q[2..4], &f16::from_f32(-3.0).to_le_bytes());
    for j in 0..16 {
        assert_eq!(q[4 + j], j as u8 | (15 << 4), "byte {j}");
    }
    assert_eq!(round_trip(GgmlType::Q4_1, &x), x);
}

/// Hand-derived Q5_0 block: element j has value j - 16, so the largest magnitude (-16) gives
/// d = 1 and level j; bit 4 (set for j >= 16) goes to bit j of qh.
#[test]
fn q5_0_golden_block() {
    let x: Vec<f32> = (0..32).map(|j| j as f32 - 16.0).collect();
    let mut q = [0u8; 22];
    quantize_row(GgmlType::Q5_0, &x, &mut q).unwrap();
    assert_eq!(&q[..2], &f16::ONE.to_le_bytes());
    assert_eq!(u32::from_le_bytes([q[2], q[3], q[4], q[5]]), 0xFFFF_0000);
    for j in 0..16 {
        assert_eq!(q[6 + j], j as u8 | ((j as u8) << 4), "byte {j}");
    }
    assert_eq!(round_trip(GgmlType::Q5_0, &x), x);
}

/// Hand-derived Q8_1 block: amax 127 gives d = 1; values round half away from zero and
/// `s = d * Σq`.
#[test]
fn q8_1_golden_block() {
    let mut x = [0.0f32; 32];
    x[0] = 127.0;
    x[1] = -3.0;
    x[2] = 2.5; // -> 3
    x[20] = -0.5; // -> -1
    let mut q = [0u8; 36];
    quantize_row(GgmlType::Q8_1, &x, &mut q).unwrap();
    let b: BlockQ8_1 = bytemuck::pod_read_unaligned(&q);
    let (d, s) = (b.d, b.s);
    assert_eq!((d.to_f32(), s.to_f32()), (1.0, 126.0));
    assert_eq!(&b.qs[..3], &[127, -3, 3]);
    assert_eq!(b.qs[20], -1);
}

/// Hand-derived IQ4_NL block: the table values themselves (largest magnitude -127) give
/// d = 1 and index j % 16 for element j; the least-squares refit keeps d = 1 exactly.
#[test]
fn iq4_nl_golden_block() {
    let x: Vec<f32> = (0..32).map(|j| KVALUES_IQ4NL[j % 16] as f32).collect();
    let mut q = [0u8; 18];
    quantize_row(GgmlType::IQ4NL, &x, &mut q).unwrap();
    assert_eq!(&q[..2], &f16::ONE.to_le_bytes());
    for j in 0..16 {
        assert_eq!(q[2 + j], j as u8 | ((j as u8) << 4), "byte {j}");
    }
    assert_eq!(round_trip(GgmlType::IQ4NL, &x), x);
}

/// Q8_K rounds ties to even (`nearest_int`) with iscale = -127 / max.
#[test]
fn q8k_golden_block() {
    let mut x = [0.0f32; QK_K];
    x[0] = -127.0; // iscale = 1
    x[1] = 2.5; // -> 2 (ties to even)
    x[2] = 3.5; // -> 4
    let mut q = vec![0u8; 292];
    quantize_row(GgmlType::Q8K, &x, &mut q).unwrap();
    let b: BlockQ8K = bytemuck::pod_read_unaligned(&q);
    let (d, bsums) = (b.d, b.bsums);
    assert_eq!(d, 1.0);
    assert_eq!(&b.qs[..3], &[-127, 2, 4]);
    assert_eq!(bsums[0], -121);
}

/// FNV-1a 64 of a byte string.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Bit-exactness with llama.cpp: the FNV-1a hashes of 1024 exactly representable values (four
/// super-blocks of growing scale, elements 32..64 zero) quantized by ggml's `quantize_row_*_ref`
/// (ggml-quants.c compiled with `-ffp-contract=off`; Q4_0..Q8_0 and MXFP4 by gguf-py's ports of
/// them, which agree).
#[test]
fn quantizers_match_llama_cpp_reference_bytes() {
    let mut x: Vec<f32> = (0..1024)
        .map(|i| (((i * 37 + 11) % 101) as f32 - 50.0) / 16.0 * (1.0 + (i / 256) as f32 * 0.75))
        .collect();
    x[32..64].fill(0.0);
    let want = [
        (GgmlType::Q4_0, 0x01ef_72c7_233d_60bc_u64),
        (GgmlType::Q4_1, 0xe2c1_dee4_e549_1f71),
        (GgmlType::Q5_0, 0x84e2_9176_12ff_4816),
        (GgmlType::Q5_1, 0xa1e3_669e_9f01_1561),
        (GgmlType::Q8_0, 0x7355_ee40_2ddb_6a58),
        (GgmlType::Q8_1, 0x55a6_d453_b5a1_307a),
        (GgmlType::Q2K, 0xd71f_ef94_258a_3bb8),
        (GgmlType::Q3K, 0x70f8_a47c_6dde_1a50),
        (GgmlType::Q4K, 0x7ccd_0500_5772_547e),
        (GgmlType::Q5K, 0x8922_719f_652b_e71f),
        (GgmlType::Q6K, 0x94db_01ff_f7e2_9c5a),
        (GgmlType::Q8K, 0x7796_c410_81d6_05e0),
        (GgmlType::IQ4NL, 0x0f7d_9144_138f_9a12),
        (GgmlType::IQ4XS, 0xa572_397f_8291_dbb8),
        (GgmlType::Mxfp4, 0xadef_9b2f_a60e_9172),
    ];
    for (ty, hash) in want {
        let mut q = vec![0u8; ty.row_bytes(x.len()).unwrap()];
        quantize_row(ty, &x, &mut q).unwrap();
        assert_eq!(fnv1a(&q), hash, "{ty}");
    }
}
