//! Tests of the MXFP4 dot products: the scalar reference equals llama.cpp's generic C bit for
//! bit, and the AVX2 / VNNI tiles of the shared 32-element body (MXFP4, IQ4_NL, Q4_0, Q8_0)
//! equal a scalar model of their lane order bit for bit, at every tile shape.

use super::*;
use crate::quant::{KVALUES_IQ4NL, KVALUES_MXFP4, e8m0_to_f32_half};
use crate::testutil::{Rng, quantize_matrix};

/// The checked-in quantizer vectors (`quant/testdata`): 16 blocks of f32, then their MXFP4
/// blocks as llama.cpp writes them.
const VECTORS: &[u8] = include_bytes!("../quant/testdata/mxfp4_quant.bin");

/// `ggml_vec_dot_mxfp4_q8_0_generic` (ggml-cpu/quants.c compiled with `-ffp-contract=off`) on
/// the checked-in MXFP4 blocks against Q8_0 blocks of their finite inputs: block `i` alone
/// against input block `ACT[i % 8]` (subnormal and huge scales included), then the whole row
/// of blocks `ROW` (the bits of each f32 result).
#[test]
fn reference_dot_equals_llama_cpp_generic() {
    const ACT: [usize; 8] = [15, 14, 5, 4, 3, 2, 1, 0];
    const ROW: [usize; 10] = [0, 1, 2, 3, 4, 5, 9, 10, 14, 15];
    const PER_BLOCK: [u32; 16] = [
        0x3f66_42a0,
        0xbd39_4738,
        0xc1de_a2f8,
        0xbe30_5e00,
        0xbda3_4400,
        0xc192_c8e0,
        0,
        0,
        0,
        0x0045_cc30,
        0x8017_60a2,
        0x7d2d_5800,
        0xc081_c180,
        0,
        0xbd33_a8d8,
        0x3ecb_fb20,
    ];
    const WHOLE_ROW: u32 = 0xc234_e228;
    let (x, w) = VECTORS.split_at(16 * 32 * 4);
    let x: Vec<f32> = x
        .as_chunks::<4>()
        .0
        .iter()
        .map(|b| f32::from_le_bytes(*b))
        .collect();
    let act: Vec<f32> = (0..16)
        .flat_map(|i| x[32 * ACT[i % 8]..][..32].iter().copied())
        .collect();
    let y = quantize_matrix(GgmlType::Q8_0, &act, act.len());
    for (i, &want) in PER_BLOCK.iter().enumerate() {
        let got = vec_dot_scalar(GgmlType::Mxfp4, &w[17 * i..][..17], &y[34 * i..][..34], 32);
        assert_eq!(got.to_bits(), want, "block {i}: {got:e}");
    }
    let wr: Vec<u8> = ROW
        .iter()
        .flat_map(|&i| w[17 * i..][..17].to_vec())
        .collect();
    let yr: Vec<u8> = ROW
        .iter()
        .flat_map(|&i| y[34 * i..][..34].to_vec())
        .collect();
    let got = vec_dot_with(SimdLevel::Scalar, GgmlType::Mxfp4, &wr, &yr, 32 * ROW.len());
    assert_eq!(got.to_bits(), WHOLE_ROW, "{got}");
}

/// One 32-element weight block of `ty` as its scale and signed values in element order.
fn decode(ty: GgmlType, b: &[u8]) -> (f32, [i32; 32]) {
    let nib = |qs: &[u8], i: usize| {
        if i < 16 { qs[i] & 0xF } else { qs[i - 16] >> 4 }
    };
    let f16_at = |c: &[u8]| half::f16::from_le_bytes([c[0], c[1]]).to_f32();
    match ty {
        GgmlType::Mxfp4 => (
            e8m0_to_f32_half(b[0]),
            std::array::from_fn(|i| KVALUES_MXFP4[nib(&b[1..], i) as usize] as i32),
        ),
        GgmlType::IQ4NL => (
            f16_at(b),
            std::array::from_fn(|i| KVALUES_IQ4NL[nib(&b[2..], i) as usize] as i32),
        ),
        GgmlType::Q4_0 => (
            f16_at(b),
            std::array::from_fn(|i| nib(&b[2..], i) as i32 - 8),
        ),
        _ => (f16_at(b), std::array::from_fn(|i| b[2 + i] as i8 as i32)),
    }
}

/// The AVX2 tiles' order for a 32-element format against Q8_0: 8 lanes (lane `m` the exact sum
/// over elements `4m..4m + 4`), per block `lane = fma(dw · dx, f32(sum), lane)`, then the fixed
/// horizontal sum `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
fn lane_model(ty: GgmlType, w: &[u8], x: &[u8]) -> f32 {
    let wb = ty.type_size();
    let mut acc = [0.0f32; 8];
    for (bw, bx) in w.chunks_exact(wb).zip(x.chunks_exact(34)) {
        let (dw, v) = decode(ty, bw);
        let dx = half::f16::from_le_bytes([bx[0], bx[1]]).to_f32();
        for (m, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * m..4 * m + 4)
                .map(|i| v[i] * bx[2 + i] as i8 as i32)
                .sum();
            *lane = (dw * dx).mul_add(s as f32, *lane);
        }
    }
    let s4: [f32; 4] = std::array::from_fn(|i| acc[i] + acc[i + 4]);
    (s4[0] + s4[2]) + (s4[1] + s4[3])
}

#[cfg(target_arch = "x86_64")]
#[test]
fn block32_tiles_equal_their_lane_model_bit_for_bit() {
    if simd::detected() != SimdLevel::Avx2 {
        eprintln!("skipped: this CPU has no AVX2");
        return;
    }
    let mut builds = vec![avx2::Build::Avx2];
    if simd::vnni_detected() {
        builds.push(avx2::Build::Vnni);
    }
    for ty in [
        GgmlType::Mxfp4,
        GgmlType::IQ4NL,
        GgmlType::Q4_0,
        GgmlType::Q8_0,
    ] {
        for (k, n) in [32usize, 96, 256, 1024].into_iter().enumerate() {
            let mut rng = Rng::new(ty.id() as u64 * 13 + k as u64);
            let mut rows: Vec<Vec<u8>> = (0..4)
                .map(|r| quantize_matrix(ty, &rng.vec(n, 0.1 + r as f32), n))
                .collect();
            let mut toks: Vec<Vec<u8>> = (0..4)
                .map(|_| quantize_matrix(GgmlType::Q8_0, &rng.vec(n, 1.0), n))
                .collect();
            // Row 3 at the largest magnitudes (MXFP4: code 15, -12, with the subnormal E8M0
            // scales 0 and 1, then 2 and 160, in turn), token 3 all +127 (the largest i16 pair
            // sums).
            for (b, blk) in rows[3].chunks_mut(ty.type_size()).enumerate() {
                if ty == GgmlType::Mxfp4 {
                    blk[0] = [0, 1, 2, 160][b % 4];
                    blk[1..].fill(0xFF);
                } else if ty != GgmlType::Q8_0 {
                    blk[2..].fill(0x00);
                }
            }
            for blk in toks[3].chunks_mut(34) {
                blk[2..].fill(0x7F);
            }
            let wp: [*const u8; 4] = std::array::from_fn(|r| rows[r].as_ptr());
            let xp: [*const u8; 4] = std::array::from_fn(|t| toks[t].as_ptr());
            let want: [[u32; 4]; 4] = std::array::from_fn(|r| {
                std::array::from_fn(|t| lane_model(ty, &rows[r], &toks[t]).to_bits())
            });
            for &build in &builds {
                let (mut o44, mut o11, mut o13) =
                    ([[0.0f32; 4]; 4], [[0.0f32; 1]; 1], [[0.0f32; 3]; 1]);
                // SAFETY: the build's features were detected above; every pointer covers a
                // full row of n elements.
                unsafe { avx2::tile_on::<4, 4>(ty, build, wp, xp, n, &mut o44) };
                assert_eq!(
                    o44.map(|r| r.map(f32::to_bits)),
                    want,
                    "{ty} n={n} {build:?} 4x4"
                );
                for r in 0..4 {
                    for t in 0..4 {
                        // SAFETY: as above.
                        unsafe { avx2::tile_on::<1, 1>(ty, build, [wp[r]], [xp[t]], n, &mut o11) };
                        assert_eq!(
                            o11[0][0].to_bits(),
                            want[r][t],
                            "{ty} n={n} {build:?} r={r} t={t}"
                        );
                    }
                    // SAFETY: as above.
                    unsafe {
                        avx2::tile_on::<1, 3>(
                            ty,
                            build,
                            [wp[r]],
                            [xp[3], xp[1], xp[0]],
                            n,
                            &mut o13,
                        )
                    };
                    assert_eq!(
                        o13[0].map(f32::to_bits),
                        [want[r][3], want[r][1], want[r][0]],
                        "{ty} n={n} {build:?} 1x3 r={r}"
                    );
                }
            }
        }
    }
}
