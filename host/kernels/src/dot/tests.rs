//! Tests of the dot products: AVX2 vs scalar reference for every type (both paths forced
//! explicitly), exact integer parts, typed helpers, unaligned inputs.

use half::f16;

use super::*;
use crate::quant::{dequantize_row, quantize_row};
use crate::testutil::{Rng, affine_min_slack, quantize_matrix};
use crate::types::QK_K;

const TYPES: &[GgmlType] = &GgmlType::ALL;

fn avx2_available() -> bool {
    simd::detected() == SimdLevel::Avx2
}

/// Σ|w_i x_i| over the dequantized operands, the scale of the float rounding error.
fn abs_dot(ty: GgmlType, a: &[u8], b: &[u8], n: usize) -> f64 {
    let mut wa = vec![0.0; n];
    let mut xb = vec![0.0; n];
    dequantize_row(ty, a, &mut wa).unwrap();
    dequantize_row(ty.vec_dot_type(), b, &mut xb).unwrap();
    wa.iter()
        .zip(&xb)
        .map(|(p, q)| (*p as f64 * *q as f64).abs())
        .sum()
}

fn exact_dot(ty: GgmlType, a: &[u8], b: &[u8], n: usize) -> f64 {
    let mut wa = vec![0.0; n];
    let mut xb = vec![0.0; n];
    dequantize_row(ty, a, &mut wa).unwrap();
    dequantize_row(ty.vec_dot_type(), b, &mut xb).unwrap();
    wa.iter().zip(&xb).map(|(p, q)| *p as f64 * *q as f64).sum()
}

fn operands(ty: GgmlType, n: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng::new(seed);
    let a = quantize_matrix(ty, &rng.vec(n, 1.0), n);
    let b = quantize_matrix(ty.vec_dot_type(), &rng.vec(n, 1.0), n);
    (a, b)
}

#[test]
fn simd_matches_reference_every_type() {
    if !avx2_available() {
        return;
    }
    for &ty in TYPES {
        for (i, n) in [256usize, 512, 1024, 768].into_iter().enumerate() {
            let (a, b) = operands(ty, n, 10 + i as u64);
            let s = vec_dot_with(SimdLevel::Scalar, ty, &a, &b, n);
            let v = vec_dot_with(SimdLevel::Avx2, ty, &a, &b, n);
            let tol = 1e-5 * abs_dot(ty, &a, &b, n) + 1e-6;
            assert!(
                ((s - v) as f64).abs() <= tol,
                "{ty} n={n}: scalar {s} simd {v} tol {tol}"
            );
        }
    }
}

#[test]
fn float_dots_with_tails_match_reference() {
    if !avx2_available() {
        return;
    }
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        for n in [1usize, 7, 8, 9, 63, 64, 100] {
            let (a, b) = operands(ty, n, n as u64);
            let s = vec_dot_with(SimdLevel::Scalar, ty, &a, &b, n);
            let v = vec_dot_with(SimdLevel::Avx2, ty, &a, &b, n);
            let tol = 1e-5 * abs_dot(ty, &a, &b, n) + 1e-7;
            assert!(((s - v) as f64).abs() <= tol, "{ty} n={n}: {s} vs {v}");
        }
    }
}

/// With every scale 1.0, products and sums are small integers: both paths must be exact.
#[test]
fn integer_parts_are_exact() {
    let n = 2 * QK_K;
    let mut rng = Rng::new(7);
    let one = f16::ONE.to_bits().to_le_bytes();
    let zero = f16::ZERO.to_bits().to_le_bytes();
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q8K,
        GgmlType::IQ4NL,
        GgmlType::IQ4XS,
        GgmlType::Mxfp4,
    ] {
        let (mut a, mut b) = operands(ty, n, 70);
        // Force scales to 1 (f16 at known offsets) and affine mins to 0, keep the levels.
        let (offs, zeros): (&[usize], &[usize]) = match ty {
            GgmlType::Q4_0
            | GgmlType::Q5_0
            | GgmlType::Q8_0
            | GgmlType::Q8_1
            | GgmlType::IQ4NL
            | GgmlType::IQ4XS => (&[0], &[]),
            GgmlType::Q4_1 | GgmlType::Q5_1 => (&[0], &[2]),
            GgmlType::Q4K | GgmlType::Q5K => (&[0, 2], &[]),
            GgmlType::Q6K => (&[208], &[]),
            GgmlType::Q3K => (&[108], &[]),
            GgmlType::Q2K => (&[80, 82], &[]),
            _ => (&[], &[]),
        };
        for blk in a.chunks_exact_mut(ty.type_size()) {
            for &o in offs {
                blk[o..o + 2].copy_from_slice(&one);
            }
            for &o in zeros {
                blk[o..o + 2].copy_from_slice(&zero);
            }
            if ty == GgmlType::Q8K {
                blk[..4].copy_from_slice(&1.0f32.to_le_bytes());
            }
            if ty == GgmlType::Mxfp4 {
                blk[0] = 128; // E8M0 2^(128 - 128) = 1
            }
        }
        let ybs = ty.vec_dot_type().type_size();
        for blk in b.chunks_exact_mut(ybs) {
            if ty.vec_dot_type() == GgmlType::Q8K {
                blk[..4].copy_from_slice(&1.0f32.to_le_bytes());
            } else {
                blk[..2].copy_from_slice(&one);
            }
        }
        let exact = exact_dot(ty, &a, &b, n);
        let s = vec_dot_with(SimdLevel::Scalar, ty, &a, &b, n);
        assert_eq!(s as f64, exact, "{ty} scalar");
        if avx2_available() {
            let v = vec_dot_with(SimdLevel::Avx2, ty, &a, &b, n);
            assert_eq!(v as f64, exact, "{ty} simd");
        }
        let _ = rng.uniform();
    }
}

#[test]
fn vec_dot_matches_dequantized_f64() {
    for &ty in TYPES {
        let n = 512;
        let (a, b) = operands(ty, n, 99);
        let got = vec_dot(ty, &a, &b, n) as f64;
        let want = exact_dot(ty, &a, &b, n);
        let tol = 1e-5 * abs_dot(ty, &a, &b, n) + 1e-6 + affine_min_slack(ty, &a, &b);
        assert!((got - want).abs() <= tol, "{ty}: {got} vs {want}");
    }
}

/// llama.cpp's `test-quantize-fns` dot product check: `|dot(q(x), q8(y)) - x·y| / n` on its
/// synthetic data (`0.1 + 2 cos(i + offset)`, 4096 elements) below its per-type bound.
#[test]
fn dot_product_error_within_llama_cpp_bounds() {
    let n = 32 * 128;
    let data = |offset: f32| -> Vec<f32> {
        (0..n)
            .map(|i| 0.1 + 2.0 * (i as f32 + offset).cos())
            .collect()
    };
    let (x, y) = (data(0.0), data(1.0));
    let exact: f64 = x.iter().zip(&y).map(|(a, b)| (a * b) as f64).sum();
    for &ty in TYPES {
        if ty.is_activation_only() {
            continue;
        }
        let a = quantize_matrix(ty, &x, n);
        let b = quantize_matrix(ty.vec_dot_type(), &y, n);
        let bound = if ty == GgmlType::Q2K { 0.04 } else { 0.02 };
        for level in [SimdLevel::Scalar, simd::detected()] {
            let got = vec_dot_with(level, ty, &a, &b, n) as f64;
            let err = (got - exact).abs() / n as f64;
            assert!(err < bound, "{ty} {level:?}: dot error {err} >= {bound}");
        }
    }
}

#[test]
fn typed_helpers_match_reference() {
    let mut rng = Rng::new(8);
    let a = rng.vec(67, 1.0);
    let b = rng.vec(67, 1.0);
    let tol = 1e-5 * a.iter().zip(&b).map(|(x, y)| (x * y).abs()).sum::<f32>();
    assert!((dot_f32(&a, &b) - reference::dot_f32(&a, &b)).abs() <= tol);
    let ah: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
    let bh: Vec<f16> = b.iter().map(|&v| f16::from_f32(v)).collect();
    assert!((dot_f16(&ah, &bh) - reference::dot_f16(&ah, &bh)).abs() <= tol * 1.01);
}

#[test]
fn unaligned_operands_give_identical_results() {
    for &ty in TYPES {
        let n = QK_K;
        let (a, b) = operands(ty, n, 5);
        let mut a1 = vec![0u8; a.len() + 1];
        let mut b1 = vec![0u8; b.len() + 3];
        a1[1..].copy_from_slice(&a);
        b1[3..].copy_from_slice(&b);
        for level in [SimdLevel::Scalar, simd::detected()] {
            let x = vec_dot_with(level, ty, &a, &b, n);
            let y = vec_dot_with(level, ty, &a1[1..], &b1[3..], n);
            assert_eq!(x.to_bits(), y.to_bits(), "{ty} {level:?}");
        }
    }
}

#[test]
#[should_panic(expected = "wrong length")]
fn vec_dot_rejects_short_rows() {
    let a = vec![0u8; 33];
    let b = vec![0u8; 34];
    vec_dot(GgmlType::Q8_0, &a, &b, 32);
}

#[test]
fn quantize_row_used_for_operands_is_deterministic() {
    let mut rng = Rng::new(9);
    let x = rng.vec(256, 1.0);
    let mut q1 = vec![0u8; 292];
    let mut q2 = vec![0u8; 292];
    quantize_row(GgmlType::Q8K, &x, &mut q1).unwrap();
    quantize_row(GgmlType::Q8K, &x, &mut q2).unwrap();
    assert_eq!(q1, q2);
}

/// Every tile shape gives each (row, token) pair the same bits as the 1×1 kernel.
#[cfg(target_arch = "x86_64")]
#[test]
fn tile_shapes_agree_bit_for_bit() {
    if !avx2_available() {
        return;
    }
    let n = 2 * QK_K;
    for &ty in TYPES {
        let mut rng = Rng::new(ty.id() as u64 + 1000);
        let rows: Vec<Vec<u8>> = (0..8)
            .map(|_| quantize_matrix(ty, &rng.vec(n, 1.0), n))
            .collect();
        let vdt = ty.vec_dot_type();
        let toks: Vec<Vec<u8>> = (0..4)
            .map(|_| quantize_matrix(vdt, &rng.vec(n, 1.0), n))
            .collect();
        let wp: [*const u8; 8] = std::array::from_fn(|i| rows[i].as_ptr());
        let xp: [*const u8; 4] = std::array::from_fn(|i| toks[i].as_ptr());
        let mut o81 = [[0.0f32; 1]; 8];
        let mut o44 = [[0.0f32; 4]; 4];
        let mut o23 = [[0.0f32; 3]; 2];
        // SAFETY: AVX2 checked above; every pointer covers a full row of n elements.
        unsafe {
            avx2::tile::<8, 1>(ty, wp, [xp[0]], n, &mut o81);
            avx2::tile::<4, 4>(ty, [wp[0], wp[1], wp[2], wp[3]], xp, n, &mut o44);
            avx2::tile::<2, 3>(ty, [wp[1], wp[0]], [xp[2], xp[0], xp[1]], n, &mut o23);
        }
        for r in 0..4 {
            for t in 0..4 {
                let one = vec_dot_with(SimdLevel::Avx2, ty, &rows[r], &toks[t], n);
                assert_eq!(one.to_bits(), o44[r][t].to_bits(), "{ty} 4x4 r={r} t={t}");
            }
        }
        for r in 0..8 {
            assert_eq!(
                o81[r][0].to_bits(),
                vec_dot_with(SimdLevel::Avx2, ty, &rows[r], &toks[0], n).to_bits()
            );
        }
        assert_eq!(o23[0][0].to_bits(), o44[1][2].to_bits(), "{ty}");
        assert_eq!(o23[1][1].to_bits(), o44[0][0].to_bits(), "{ty}");
        assert_eq!(o23[0][2].to_bits(), o44[1][1].to_bits(), "{ty}");
    }
}

#[test]
fn vnni_tiles_are_bit_identical_to_avx2_tiles() {
    if !crate::simd::vnni_detected() {
        eprintln!("skipped: this CPU has no avx512vnni + avx512vl");
        return;
    }
    let n = 4 * QK_K;
    let int8_types = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q8K,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_1,
        GgmlType::Q5_1,
        GgmlType::IQ4NL,
        GgmlType::Mxfp4,
    ];
    for ty in int8_types {
        let mut rng = Rng::new(ty.id() as u64 + 77);
        let mut rows: Vec<Vec<u8>> = (0..4)
            .map(|_| quantize_matrix(ty, &rng.vec(n, 1.0), n))
            .collect();
        let vdt = ty.vec_dot_type();
        let mut toks: Vec<Vec<u8>> = (0..3)
            .map(|_| quantize_matrix(vdt, &rng.vec(n, 1.0), n))
            .collect();
        // Extremes: every weight and activation value at its largest magnitude (sums that would
        // saturate an i16 pair sum if any could).
        // (first level byte, byte value) of the largest-magnitude weights.
        let extreme_w = match ty {
            GgmlType::Q8_0 => Some((2, 0x81u8)), // -127
            GgmlType::Q4_0 => Some((2, 0x00)),   // level 0 → -8
            GgmlType::Q4_1 => Some((4, 0xFF)),   // level 15
            GgmlType::Q5_0 => Some((2, 0x00)),   // level 0 → -16
            GgmlType::Q8_1 => Some((4, 0x81)),   // -127
            GgmlType::Q5_1 => Some((4, 0xFF)),   // level 31
            GgmlType::IQ4NL => Some((2, 0x00)),  // index 0 → -127
            GgmlType::Mxfp4 => Some((1, 0xFF)),  // code 15 → -12
            _ => None,
        };
        let x_qs = if vdt == GgmlType::Q8_1 { 4 } else { 2 };
        if let Some((o, e)) = extreme_w {
            for blk in rows[3].chunks_mut(ty.type_size()) {
                blk[o..].fill(e);
            }
            for blk in toks[2].chunks_mut(vdt.type_size()) {
                blk[x_qs..].fill(0x7f);
            }
        }
        let wp: [*const u8; 4] = std::array::from_fn(|i| rows[i].as_ptr());
        let xp: [*const u8; 3] = std::array::from_fn(|i| toks[i].as_ptr());
        let mut a = ([[0.0f32; 1]; 4], [[0.0f32; 3]; 4]);
        let mut v = a;
        // SAFETY: VNNI (and so AVX2) checked above; every pointer covers a full row of n elements.
        unsafe {
            avx2::tile_on::<4, 1>(ty, avx2::Build::Avx2, wp, [xp[2]], n, &mut a.0);
            avx2::tile_on::<4, 3>(ty, avx2::Build::Avx2, wp, xp, n, &mut a.1);
            avx2::tile_on::<4, 1>(ty, avx2::Build::Vnni, wp, [xp[2]], n, &mut v.0);
            avx2::tile_on::<4, 3>(ty, avx2::Build::Vnni, wp, xp, n, &mut v.1);
        }
        let bits = |o: &[[f32; 3]; 4]| o.map(|r| r.map(f32::to_bits));
        assert_eq!(bits(&a.1), bits(&v.1), "{ty} 4x3");
        assert_eq!(
            a.0.map(|r| r[0].to_bits()),
            v.0.map(|r| r[0].to_bits()),
            "{ty} 4x1"
        );
        assert_eq!(
            a.0.map(|r| r[0].to_bits()),
            a.1.map(|r| r[2].to_bits()),
            "{ty}: one token and a batch agree"
        );
    }
}

/// The 512-bit tiles: scalar agreement (odd and even block counts, extreme values), every tile
/// shape and the packed activations giving each pair the bits of the 1×1 call.
#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_tiles_agree_with_reference_and_with_themselves() {
    use avx2::wide::{XPair, pack_row, packs, tile_packed};
    if !crate::simd::avx512_detected() {
        eprintln!("skipped: this CPU has no avx512f/bw/vl/vnni");
        return;
    }
    let wide = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
    ];
    for ty in wide {
        assert!(packs(ty));
        let vdt = ty.vec_dot_type();
        for (i, n) in [32usize, 64, 96, 288, 640].into_iter().enumerate() {
            let mut rng = Rng::new(ty.id() as u64 * 31 + i as u64);
            let mut rows: Vec<Vec<u8>> = (0..4)
                .map(|_| quantize_matrix(ty, &rng.vec(n, 1.0), n))
                .collect();
            let mut toks: Vec<Vec<u8>> = (0..3)
                .map(|_| quantize_matrix(vdt, &rng.vec(n, 1.0), n))
                .collect();
            // Extremes: Q8_0 weights at -128 (outside what the quantizer writes, still exact
            // here), the other formats at their lowest level; activations all +127.
            let (o, e) = match ty {
                GgmlType::Q8_0 => (2, 0x80u8),
                GgmlType::Q4_1 | GgmlType::Q5_1 => (4, 0xFF),
                _ => (2, 0x00),
            };
            for blk in rows[3].chunks_mut(ty.type_size()) {
                blk[o..].fill(e);
            }
            let xq = if vdt == GgmlType::Q8_1 { 4 } else { 2 };
            for blk in toks[2].chunks_mut(vdt.type_size()) {
                blk[xq..].fill(0x7f);
            }
            let wp: [*const u8; 4] = std::array::from_fn(|r| rows[r].as_ptr());
            let xp: [*const u8; 3] = std::array::from_fn(|t| toks[t].as_ptr());
            let pairs = (n / 32).div_ceil(2);
            let mut packed = vec![XPair::zeroed(); 3 * pairs];
            let (mut o11, mut o43, mut p43) =
                ([[0.0f32; 1]; 1], [[0.0f32; 3]; 4], [[0.0f32; 3]; 4]);
            for r in 0..4 {
                for t in 0..3 {
                    // SAFETY: AVX-512 checked above; every pointer covers a full row of n elements.
                    unsafe {
                        avx2::tile_on::<1, 1>(
                            ty,
                            avx2::Build::Avx512,
                            [wp[r]],
                            [xp[t]],
                            n,
                            &mut o11,
                        )
                    };
                    let s = vec_dot_scalar(ty, &rows[r], &toks[t], n);
                    let tol = 1e-5 * abs_dot(ty, &rows[r], &toks[t], n) + 1e-6;
                    let got = o11[0][0];
                    assert!(
                        ((s - got) as f64).abs() <= tol,
                        "{ty} n={n} r={r} t={t}: scalar {s} avx512 {got} tol {tol}"
                    );
                    if r == 0 {
                        // SAFETY: as above; `pairs` slots per token.
                        unsafe { pack_row(ty, xp[t], n, packed.as_mut_ptr().add(t * pairs)) };
                    }
                    o43[r][t] = got;
                }
            }
            let pp: [*const XPair; 3] = std::array::from_fn(|t| packed[t * pairs..].as_ptr());
            let mut t43 = [[0.0f32; 3]; 4];
            // SAFETY: as above.
            unsafe {
                avx2::tile_on::<4, 3>(ty, avx2::Build::Avx512, wp, xp, n, &mut t43);
                tile_packed::<4, 3>(ty, wp, pp, n, &mut p43);
            }
            let bits = |o: &[[f32; 3]; 4]| o.map(|r| r.map(f32::to_bits));
            assert_eq!(bits(&t43), bits(&o43), "{ty} n={n}: 4x3 tile vs 1x1");
            assert_eq!(bits(&p43), bits(&o43), "{ty} n={n}: packed vs raw");
        }
    }
}

/// The K-quant tiles of every build (AVX2, 256-bit VNNI, 512-bit VNNI with and without the
/// opt-in int8 tiles) give the same bits for every tile shape and block count, extremes
/// included, and agree with the scalar reference.
#[cfg(target_arch = "x86_64")]
#[test]
fn kquant_tiles_are_bit_identical_across_builds() {
    if !crate::simd::vnni_detected() {
        eprintln!("skipped: this CPU has no avx512vnni + avx512vl");
        return;
    }
    let mut builds = vec![avx2::Build::Vnni];
    if crate::simd::avx512_detected() {
        builds.extend([avx2::Build::VnniWide, avx2::Build::Avx512]);
    }
    let kquants = [
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
    ];
    for ty in kquants {
        for (i, n) in [QK_K, 2 * QK_K, 5 * QK_K].into_iter().enumerate() {
            let mut rng = Rng::new(ty.id() as u64 * 7 + i as u64);
            let mut rows: Vec<Vec<u8>> = (0..4)
                .map(|_| quantize_matrix(ty, &rng.vec(n, 1.0), n))
                .collect();
            let mut toks: Vec<Vec<u8>> = (0..4)
                .map(|_| quantize_matrix(GgmlType::Q8K, &rng.vec(n, 1.0), n))
                .collect();
            // Extremes: every level, scale and min byte of row 3 at 0xFF (Q6_K: scales +127,
            // Q3_K / Q6_K: largest levels), token 3 at +127 with matching bsums (the largest
            // maddubs pair sums), token 2 at -128.
            let (lo, hi) = match ty {
                GgmlType::Q2K => (0, 80),
                GgmlType::Q3K => (0, 108),
                GgmlType::Q4K | GgmlType::Q5K => (4, ty.type_size()),
                _ => (0, 208),
            };
            for blk in rows[3].chunks_mut(ty.type_size()) {
                blk[lo..hi].fill(0xFF);
                if ty == GgmlType::Q6K {
                    blk[192..208].fill(0x7F);
                }
            }
            for (t, v) in [(3usize, 127i8), (2, -128)] {
                for blk in toks[t].chunks_mut(GgmlType::Q8K.type_size()) {
                    blk[4..260].fill(v as u8);
                    for j in 0..16 {
                        let s = (16 * v as i16).to_le_bytes();
                        blk[260 + 2 * j..262 + 2 * j].copy_from_slice(&s);
                    }
                }
            }
            let wp: [*const u8; 4] = std::array::from_fn(|r| rows[r].as_ptr());
            let xp: [*const u8; 4] = std::array::from_fn(|t| toks[t].as_ptr());
            let bits = |o: &[[f32; 4]; 4]| o.map(|r| r.map(f32::to_bits));
            let mut base = [[0.0f32; 4]; 4];
            // SAFETY: VNNI (and so AVX2) checked above; every pointer covers a full row.
            unsafe { avx2::tile_on::<4, 4>(ty, avx2::Build::Avx2, wp, xp, n, &mut base) };
            for r in 0..4 {
                for t in 0..4 {
                    let s = vec_dot_scalar(ty, &rows[r], &toks[t], n);
                    let tol = 1e-5 * abs_dot(ty, &rows[r], &toks[t], n) + 1e-6;
                    let got = base[r][t];
                    assert!(
                        ((s - got) as f64).abs() <= tol,
                        "{ty} n={n} r={r} t={t}: scalar {s} avx2 {got} tol {tol}"
                    );
                }
            }
            for &build in &builds {
                let (mut o44, mut o11, mut o23, mut o18) = (
                    [[0.0f32; 4]; 4],
                    [[0.0f32; 1]; 1],
                    [[0.0f32; 3]; 2],
                    [[0.0f32; 8]; 1],
                );
                let x8: [*const u8; 8] = std::array::from_fn(|t| xp[t % 4]);
                // SAFETY: the build's features checked above; full rows.
                unsafe {
                    avx2::tile_on::<4, 4>(ty, build, wp, xp, n, &mut o44);
                    avx2::tile_on::<2, 3>(
                        ty,
                        build,
                        [wp[3], wp[1]],
                        [xp[2], xp[3], xp[0]],
                        n,
                        &mut o23,
                    );
                    avx2::tile_on::<1, 8>(ty, build, [wp[2]], x8, n, &mut o18);
                }
                assert_eq!(bits(&o44), bits(&base), "{ty} n={n} {build:?} 4x4");
                for r in 0..4 {
                    for t in 0..4 {
                        // SAFETY: as above.
                        unsafe { avx2::tile_on::<1, 1>(ty, build, [wp[r]], [xp[t]], n, &mut o11) };
                        assert_eq!(
                            o11[0][0].to_bits(),
                            base[r][t].to_bits(),
                            "{ty} n={n} {build:?} 1x1 r={r} t={t}"
                        );
                    }
                }
                let want23 = [
                    [base[3][2], base[3][3], base[3][0]],
                    [base[1][2], base[1][3], base[1][0]],
                ];
                assert_eq!(
                    o23.map(|r| r.map(f32::to_bits)),
                    want23.map(|r| r.map(f32::to_bits)),
                    "{ty} n={n} {build:?} 2x3"
                );
                let want18: [f32; 8] = std::array::from_fn(|t| base[2][t % 4]);
                assert_eq!(
                    o18[0].map(f32::to_bits),
                    want18.map(f32::to_bits),
                    "{ty} n={n} {build:?} 1x8"
                );
            }
        }
    }
}
