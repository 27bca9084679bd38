//! Tests of MXFP4: the quantizer's bytes and the dequantizer's values against llama.cpp's
//! (`testdata/mxfp4_quant.bin`: 16 blocks of f32 input then the 16 blocks
//! `quantize_row_mxfp4_ref` wrote for them, from ggml-quants.c compiled with
//! `-ffp-contract=off`; gguf-py's `quants.MXFP4` writes the same bytes except for block 12,
//! whose NaN it lets into the block maximum), the E8M0 scale for every exponent, the exponent
//! choice at the powers of two where `log2f` rounds up, round trips and error bounds.

use super::*;
use crate::testutil::Rng;

const VECTORS: &[u8] = include_bytes!("testdata/mxfp4_quant.bin");

fn quantize(x: &[f32]) -> Vec<u8> {
    let mut q = vec![0u8; GgmlType::Mxfp4.row_bytes(x.len()).unwrap()];
    quantize_row(GgmlType::Mxfp4, x, &mut q).unwrap();
    q
}

fn dequantize(q: &[u8]) -> Vec<f32> {
    let mut y = vec![0.0; q.len() / 17 * 32];
    dequantize_row(GgmlType::Mxfp4, q, &mut y).unwrap();
    y
}

/// The input floats and llama.cpp's blocks of the checked-in vectors.
fn vectors() -> (Vec<f32>, &'static [u8]) {
    let (x, q) = VECTORS.split_at(16 * 32 * 4);
    let x = x
        .as_chunks::<4>()
        .0
        .iter()
        .map(|b| f32::from_le_bytes(*b))
        .collect();
    (x, q)
}

fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn quantizer_writes_llama_cpp_bytes() {
    let (x, want) = vectors();
    assert_eq!(want.len(), 16 * 17);
    let got = quantize(&x);
    for (i, (g, w)) in got.chunks(17).zip(want.chunks(17)).enumerate() {
        assert_eq!(g, w, "block {i}");
    }
    // Blocks are independent: each one alone gives the same bytes.
    for (i, xb) in x.chunks(32).enumerate() {
        assert_eq!(quantize(xb), &want[17 * i..17 * i + 17], "block {i} alone");
    }
    // The vectors cover the cases they were chosen for.
    let e: Vec<u8> = want.chunks(17).map(|b| b[0]).collect();
    assert_eq!(e[3], 128, "amax just below 8: log2f rounds up to 3");
    assert_eq!(e[6], 0, "all-zero block");
    assert_eq!(e[7], 248, "subnormal amax: the exponent wraps");
    assert_eq!(
        e[8], 255,
        "amax in [2^-126, 2^-125): exponent -1 wraps to 255"
    );
    assert_eq!((e[9], e[10], e[11]), (0, 1, 252));
    assert_eq!(e[13], 0, "infinite amax");
    // Ties between two codes keep the first (block 5: d = 2^-8, x = 0.5d, 1.5d, ... ).
    assert_eq!(
        &want[5 * 17..5 * 17 + 9],
        &[120, 6, 0x91, 0xa2, 0xb3, 0xc4, 0xd5, 0xe6, 0xf7]
    );
}

/// llama.cpp's `dequantize_row_mxfp4` on every exponent with every code (the FNV-1a hash of its
/// f32 output), and the values `KVALUES_MXFP4[code] · 2^(e - 128)` exactly.
#[test]
fn dequantizer_matches_llama_cpp_for_every_exponent() {
    let blocks: Vec<u8> = (0..=255u8)
        .flat_map(|e| {
            std::iter::once(e)
                .chain((0..16u8).map(move |j| j | (((j as u32 + e as u32) % 16) << 4) as u8))
        })
        .collect();
    let y = dequantize(&blocks);
    assert_eq!(
        fnv1a(y.iter().flat_map(|v| v.to_le_bytes())),
        0x5c6a_4dbd_7340_5aa5
    );
    for (b, yb) in blocks.chunks(17).zip(y.chunks(32)) {
        let scale = 2f64.powi(b[0] as i32 - 128);
        for j in 0..16 {
            for (i, code) in [(j, b[1 + j] & 0xF), (j + 16, b[1 + j] >> 4)] {
                let want = (KVALUES_MXFP4[code as usize] as f64 * scale) as f32;
                assert_eq!(yb[i].to_bits(), want.to_bits(), "e={} i={i}", b[0]);
            }
        }
    }
    let (xs, q) = vectors();
    // The checked-in blocks decode to values within one step of finite inputs.
    for ((qb, xb), yb) in q
        .chunks(17)
        .zip(xs.chunks(32))
        .zip(dequantize(q).chunks(32))
    {
        let d = e8m0_to_f32_half(qb[0]);
        if xb.iter().all(|v| v.abs() < 1e30) && qb[0] < 250 {
            for (x, y) in xb.iter().zip(yb) {
                assert!(
                    (x - y).abs() <= (2.0 * d).max(x.abs() - 12.0 * d),
                    "{x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn e8m0_half_is_ggml_bit_construction() {
    for e in 0..=255u8 {
        let bits = e8m0_to_f32_half(e).to_bits();
        let want = match e {
            0 => 0x0020_0000,
            1 => 0x0040_0000,
            _ => (e as u32 - 1) << 23,
        };
        assert_eq!(bits, want, "e={e}");
        assert_eq!(
            e8m0_to_f32_half(e) as f64,
            2f64.powi(e as i32 - 128),
            "e={e}"
        );
    }
}

/// The exponent is `floor(log2f(amax)) + 125` with the platform's `log2f` (glibc on the CI
/// hosts, the same function llama.cpp calls), checked at every power of two, where `log2f` of
/// the values just below it rounds up to the integer, and far from them.
#[test]
fn exponent_follows_log2f_around_every_power_of_two() {
    let mut block = [0.0f32; 32];
    let mut rounded_up = 0;
    for exp in 1u32..254 {
        let p = exp << 23;
        for bits in p - 300..p + 40 {
            let amax = f32::from_bits(bits);
            block[17] = -amax;
            let e = quantize(&block)[0];
            let want = (amax.log2().floor() - 2.0 + 127.0) as i32 as u8;
            assert_eq!(e, want, "amax {amax:e} (bits {bits:#x})");
            rounded_up += usize::from(bits < p && amax.log2().floor() as i32 == exp as i32 - 127);
        }
    }
    assert!(
        rounded_up > 1000,
        "only {rounded_up} values below a power of two round up"
    );
    block[17] = 0.0;
    let mut rng = Rng::new(39);
    for _ in 0..20_000 {
        let amax =
            f32::from_bits((rng.next_u64() >> 33) as u32 % 0x7f80_0000).max(f32::MIN_POSITIVE);
        block[3] = amax;
        let want = (amax.log2().floor() - 2.0 + 127.0) as i32 as u8;
        assert_eq!(quantize(&block)[0], want, "amax {amax:e}");
    }
}

/// Hand-derived block: the table values times 1/4 (largest magnitude 3, so e = 126 and
/// d = 2^-2) are encoded exactly, code j % 16 for element j except -0 → code 0.
#[test]
fn representable_values_round_trip_exactly() {
    let x: Vec<f32> = (0..32)
        .map(|j| KVALUES_MXFP4[j % 16] as f32 * 0.25)
        .collect();
    let q = quantize(&x);
    assert_eq!(q[0], 126);
    for j in 0..16u8 {
        let lo = if j == 8 { 0 } else { j };
        assert_eq!(q[1 + j as usize], lo | (lo << 4), "byte {j}");
    }
    assert_eq!(dequantize(&q), x);
}

/// Every element gets the nearest code (the first on ties), so its error is at most half the
/// gap around it (2d) below 12d and `|x| - 12d` above.
#[test]
fn round_trip_takes_the_nearest_code() {
    let mut rng = Rng::new(7);
    for scale in [1e-6f32, 0.02, 1.0, 300.0] {
        let x = rng.vec(64 * 32, scale);
        let q = quantize(&x);
        let y = dequantize(&q);
        for ((xb, yb), qb) in x.chunks(32).zip(y.chunks(32)).zip(q.chunks(17)) {
            let d = e8m0_to_f32_half(qb[0]);
            let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            assert!(amax >= 8.0 * d && amax < 16.0 * d, "amax {amax} d {d}");
            for (&a, &b) in xb.iter().zip(yb) {
                let best = KVALUES_MXFP4
                    .iter()
                    .map(|&k| (k as f32 * d - a).abs())
                    .fold(f32::INFINITY, f32::min);
                assert_eq!((b - a).abs(), best, "{a} -> {b}");
                assert!((a - b).abs() <= (2.0 * d).max(a.abs() - 12.0 * d));
            }
        }
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let mut out = [0.0f32; 32];
    assert_eq!(
        dequantize_row(GgmlType::Mxfp4, &[0u8; 18], &mut out),
        Err(KernelError::WrongDataLength {
            ty: GgmlType::Mxfp4,
            rows: 1,
            cols: 32,
            expected: 17,
            got: 18
        })
    );
    assert!(matches!(
        quantize_row(GgmlType::Mxfp4, &[0.0; 48], &mut [0u8; 34]),
        Err(KernelError::RowNotBlockAligned { block: 32, .. })
    ));
    assert!(quantize_row(GgmlType::Mxfp4, &[0.0; 64], &mut [0u8; 33]).is_err());
    // A Q8_0 row of the same width is a different size: it is never mistaken for MXFP4.
    let q8 = [0u8; 34];
    assert!(dequantize_row(GgmlType::Mxfp4, &q8, &mut out).is_err());
}
