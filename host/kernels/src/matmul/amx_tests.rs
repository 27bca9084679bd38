//! Tests of the AMX tile path over interleaved weights (every interleaved format): bit-exact agreement
//! with the sequential scalar reference for every format, token count, shape and thread count,
//! on the software tile model (any CPU with the interleaved kernels) and on the CPU's tiles
//! where the kernel grants them.

use super::*;
use crate::dot::sequential::vec_dot_sequential;
use crate::testutil::{Rng, quantize_matrix};
use crate::types::GgmlType;

const FORMATS: [GgmlType; 13] = [
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::Q3K,
    GgmlType::Q2K,
    GgmlType::IQ4XS,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q4_1,
    GgmlType::Q5_1,
    GgmlType::IQ4NL,
    GgmlType::Mxfp4,
];
/// Token counts: below the partial-tile threshold, partial tiles alone and after whole ones,
/// odd and even numbers of whole tiles (the kernels take tiles in pairs), a pair plus a single
/// tile inside one token block.
const TOKENS: [usize; 13] = [1, 2, 8, 15, 16, 17, 31, 32, 33, 48, 64, 70, 130];

/// `rows × cols` weights of `ty` with extreme levels in row 0's first block.
fn weights(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut w = quantize_matrix(ty, &Rng::new(seed).vec(rows * cols, 0.5), cols);
    if ty == GgmlType::Q8_0 {
        w[2] = 0x80; // -128
        w[3] = 0x7F;
    }
    if matches!(ty, GgmlType::Q4_0 | GgmlType::IQ4NL) {
        w[2..18].fill(0xF0); // levels 0 and 15
    }
    if matches!(ty, GgmlType::Q4K | GgmlType::Q5K) {
        // Row 0's first super-block at the limits: scales and mins 63, every level 15 (Q5_K 31).
        w[4..ty.type_size()].fill(0xFF);
    }
    if ty == GgmlType::Q6K {
        // Row 0's first super-block at the limits: every level 63 (q = 31), scales ±127/-128.
        w[..192].fill(0xFF);
        for (j, s) in w[192..208].iter_mut().enumerate() {
            *s = [0x7F, 0x80, 0x81, 0x01][j % 4];
        }
    }
    if ty == GgmlType::Q3K {
        w[..108].fill(0); // every value -4, every scale -32
    }
    if ty == GgmlType::Q2K {
        w[..80].fill(0xFF); // every level 3, scales and mins 15
    }
    w
}

/// Activations with one token at the quantizer's limits (±127 in every block).
fn activations(ty: GgmlType, n: usize, cols: usize, seed: u64) -> QuantizedActivations {
    let mut x = Rng::new(seed).vec(n * cols, 1.0);
    x[..cols].iter_mut().for_each(|v| *v = v.signum() * 3.0);
    let mut xq = QuantizedActivations::new();
    xq.quantize(ty.vec_dot_type(), &x, n, cols);
    xq
}

/// Checks `run` (a tile-path matmul) against the sequential reference for every format, token
/// count, two shapes (48 rows: three groups, so one left without a pair) and two thread counts
/// (with 3 threads a task may hold a single group).
fn check_against_the_reference(
    what: &str,
    run: impl Fn(&Interleaved, &QuantizedActivations, &mut [f32]) -> Option<()>,
) {
    for ty in FORMATS {
        let shapes = if ty.block_size() == 256 {
            [(48usize, 512usize), (32, 256)]
        } else {
            // 34 blocks: two whole chunks of the tile kernel's stored sums and a part.
            [(48, 96), (32, 1088)]
        };
        for (rows, cols) in shapes {
            let data = weights(ty, rows, cols, ty.id() as u64 + cols as u64);
            let plain = WeightMatrix::new(ty, &data, rows, cols).unwrap();
            let iw = Interleaved::repack(&plain).expect("a 32-element format with whole groups");
            for n in TOKENS {
                let xq = activations(ty, n, cols, 11 + n as u64);
                for threads in [1usize, 3] {
                    let mut out = vec![f32::NAN; n * rows];
                    let pool = crate::threads::Pool::new(threads);
                    if pool.install(|| run(&iw, &xq, &mut out)).is_none() {
                        eprintln!("skipped ({what}): this CPU/kernel does not grant AMX tiles");
                        return;
                    }
                    for t in 0..n {
                        for r in 0..rows {
                            let want = vec_dot_sequential(ty, plain.row(r), xq.row(t));
                            assert_eq!(
                                out[t * rows + r].to_bits(),
                                want.to_bits(),
                                "{what} {ty} {rows}x{cols} n={n} threads={threads} t={t} r={r}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_tile_path_on_the_software_model_is_the_sequential_reference_bit_for_bit() {
    if !Interleaved::wide() {
        eprintln!("skipped: this CPU/process does not use the 512-bit interleaved kernels");
        return;
    }
    check_against_the_reference("software tiles", |iw, xq, out| {
        driver_amx::run_soft(iw, xq, out);
        Some(())
    });
}

#[test]
fn the_tile_path_on_the_cpu_tiles_is_the_sequential_reference_bit_for_bit() {
    if !Interleaved::wide() {
        eprintln!("skipped: this CPU/process does not use the 512-bit interleaved kernels");
        return;
    }
    if !crate::simd::amx_usable() {
        eprintln!("skipped: this CPU/kernel does not grant AMX tiles (simd::amx_usable)");
        return;
    }
    check_against_the_reference("AMX tiles", driver_amx::run_hw);
}

/// 512 tokens (a prefill) through the public matmul and the tile path agree bit for bit.
#[test]
fn a_512_token_prefill_gives_the_default_paths_bits_on_tiles() {
    if !Interleaved::wide() {
        eprintln!("skipped: this CPU/process does not use the 512-bit interleaved kernels");
        return;
    }
    let (rows, cols, n) = (64usize, 256usize, 512usize);
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K] {
        let data = weights(ty, rows, cols, 5);
        let plain = WeightMatrix::new(ty, &data, rows, cols).unwrap();
        let iw = Interleaved::build(&plain).unwrap();
        let w = plain.with_interleaved(Some(&iw));
        let x = Rng::new(9).vec(n * cols, 1.0);
        let mut want = vec![0.0; n * rows];
        matmul(&w, &x, n, &mut want);
        let mut xq = QuantizedActivations::new();
        xq.quantize(ty.vec_dot_type(), &x, n, cols);
        let mut soft = vec![f32::NAN; n * rows];
        driver_amx::run_soft(&iw, &xq, &mut soft);
        // The first differing (token, row), if any: a short message on failure.
        let first_diff = |got: &[f32]| {
            let i = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits())?;
            Some((i / rows, i % rows, got[i], want[i]))
        };
        assert_eq!(
            first_diff(&soft),
            None,
            "{ty}: software tiles (t, r, got, want)"
        );
        let mut hw = vec![f32::NAN; n * rows];
        match driver_amx::run_hw(&iw, &xq, &mut hw) {
            Some(()) => assert_eq!(first_diff(&hw), None, "{ty}: AMX tiles (t, r, got, want)"),
            None => eprintln!("skipped (AMX tiles, {ty}): this CPU/kernel does not grant them"),
        }
    }
}
