//! Deterministic random weights for synthetic models, encoded row by row while the file is
//! written. Small tensors are drawn value by value; a large weight matrix (at least
//! [`POOL_MIN_VALUES`] values) is made of blocks of 256 (or 32) values picked, per row and
//! block, from a pool of [`POOL_UNITS`] random blocks drawn and encoded once per tensor: every
//! type encodes a block independently of its neighbours, so the rows' bytes are concatenated
//! pool entries, and a multi-gigabyte file costs a few thousand encodings per tensor rather
//! than one per block (K-quant encoding is what made it slow). The values of a tensor depend
//! on its shape, not on its type, so models of different types hold the same weights up to
//! rounding.
//!
//! Invariant: each row's bytes come from splitmix64 seeded by (seed, tensor name, row index)
//! only, so they do not depend on thread count, chunking, scheduling or platform.

use std::io;
use std::sync::{Arc, OnceLock};

use memoria_kernels::GgmlType;
use memoria_kernels::quant::quantize_row;
use rayon::prelude::*;

use super::SynthError;
use super::plan::{Init, Planned};
use crate::gguf::{GgufWriter, RowFill};

/// Adds every planned tensor, of its type, to `w`; its rows are drawn as the file is written.
pub(super) fn add_tensors(
    w: &mut GgufWriter,
    seed: u64,
    plan: &[Planned],
    types: &[GgmlType],
) -> Result<(), SynthError> {
    for (t, &ty) in plan.iter().zip(types) {
        let rows = t.dims[1..].iter().product();
        let fill = row_fill(seed, &t.name, (t.dims[0] as usize, rows), ty, t.init);
        w.add_tensor_rows(&t.name, &t.dims, ty, fill)?;
    }
    Ok(())
}

/// Distinct blocks a large matrix's rows are made of.
const POOL_UNITS: usize = 1024;
/// Values from which a weight matrix is made of pooled blocks.
const POOL_MIN_VALUES: u64 = 1 << 22;

/// The pool of one tensor: `POOL_UNITS` blocks of `unit` values, each encoded as `unit_bytes`.
struct Pool {
    unit: usize,
    unit_bytes: usize,
    bytes: Vec<u8>,
}

impl Pool {
    /// Draws and encodes the pool (in parallel).
    fn build(tensor_seed: u64, unit: usize, ty: GgmlType) -> io::Result<Pool> {
        let unit_bytes = ty.row_bytes(unit).unwrap_or(1).max(1);
        let pool_seed = splitmix64(tensor_seed ^ 0x706F_6F6C);
        let mut bytes = vec![0u8; POOL_UNITS * unit_bytes];
        bytes
            .par_chunks_mut(unit_bytes)
            .enumerate()
            .try_for_each_init(
                || vec![0f32; unit],
                |vals, (u, dst)| {
                    fill_row(vals, pool_seed, u as u64, Init::Weight);
                    quantize_row(ty, vals, dst)
                },
            )
            .map_err(io::Error::other)?;
        Ok(Pool {
            unit,
            unit_bytes,
            bytes,
        })
    }

    /// Row `r`: its blocks, each a pool entry chosen by (tensor, row, block).
    fn row(&self, tensor_seed: u64, r: u64, dst: &mut [u8]) {
        let state = splitmix64(tensor_seed.wrapping_add(r.wrapping_mul(0xA24B_AED4_963E_E407)));
        for (j, d) in dst.chunks_exact_mut(self.unit_bytes).enumerate() {
            let pick = (splitmix64(state.wrapping_add(j as u64)) >> 32) as usize % POOL_UNITS;
            d.copy_from_slice(&self.bytes[pick * self.unit_bytes..][..self.unit_bytes]);
        }
    }
}

/// The block length a weight matrix of `rows × cols` values is pooled in, if it is pooled:
/// 256 values (every type's block divides it) or, for rows that are not a multiple of 256,
/// 32 (the types that fit such rows have 32-value blocks or none).
fn pool_unit(cols: usize, rows: u64, ty: GgmlType, init: Init) -> Option<usize> {
    let big = init == Init::Weight && (cols as u64).saturating_mul(rows) >= POOL_MIN_VALUES;
    [256, 32]
        .into_iter()
        .find(|u| cols.is_multiple_of(*u) && u.is_multiple_of(ty.block_size()))
        .filter(|_| big)
}

/// Draws and encodes rows `first..` of tensor `name` (`rows` rows of `cols` values of type
/// `ty`), in parallel.
fn row_fill(
    seed: u64,
    name: &str,
    (cols, rows): (usize, u64),
    ty: GgmlType,
    init: Init,
) -> RowFill {
    let tensor_seed = splitmix64(seed ^ fnv1a(name.as_bytes()));
    // The writer checked the row length against the type before any fill runs.
    let row_bytes = ty.row_bytes(cols).unwrap_or(1).max(1);
    if let Some(unit) = pool_unit(cols, rows, ty, init) {
        let pool = Arc::new(OnceLock::new());
        return Arc::new(move |first: u64, out: &mut [u8]| {
            let pool = match pool.get() {
                Some(p) => p,
                None => {
                    let built = Pool::build(tensor_seed, unit, ty)?;
                    pool.get_or_init(|| built)
                }
            };
            debug_assert_eq!(pool.unit, unit);
            out.par_chunks_mut(row_bytes)
                .enumerate()
                .for_each(|(i, dst)| pool.row(tensor_seed, first + i as u64, dst));
            Ok(())
        });
    }
    Arc::new(move |first: u64, out: &mut [u8]| {
        out.par_chunks_mut(row_bytes)
            .enumerate()
            .try_for_each_init(
                || vec![0f32; cols],
                |row, (i, dst)| {
                    fill_row(row, tensor_seed, first + i as u64, init);
                    quantize_row(ty, row, dst)
                },
            )
            .map_err(io::Error::other)
    })
}

fn fill_row(row: &mut [f32], tensor_seed: u64, r: u64, init: Init) {
    let (center, half_width) = match init {
        Init::Weight => (0.0, 3f32.sqrt() * 0.02),
        Init::Norm => (1.0, 0.05),
        Init::Bias => (0.0, 0.02),
        Init::Ramp { last } => {
            let steps = row.len().saturating_sub(1).max(1) as f32;
            for (c, x) in row.iter_mut().enumerate() {
                *x = last.powf(c as f32 / steps);
            }
            return;
        }
    };
    let mut state = splitmix64(tensor_seed.wrapping_add(r.wrapping_mul(0xA24B_AED4_963E_E407)));
    for x in row {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        // 24 random bits -> uniform in [-1, 1).
        let u = (splitmix64(state) >> 40) as f32 / (1u64 << 24) as f32;
        *x = center + half_width * (2.0 * u - 1.0);
    }
}

/// splitmix64's output function: a fixed, platform-independent 64-bit mix.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use memoria_kernels::dequantize_row;

    use super::*;

    /// Rows `first..first + n` of a fill, as f32.
    fn rows(fill: &RowFill, ty: GgmlType, cols: usize, first: u64, n: usize) -> Vec<Vec<f32>> {
        let rb = ty.row_bytes(cols).unwrap();
        let mut bytes = vec![0u8; rb * n];
        fill(first, &mut bytes).unwrap();
        bytes
            .chunks(rb)
            .map(|b| {
                let mut v = vec![0f32; cols];
                dequantize_row(ty, b, &mut v).unwrap();
                v
            })
            .collect()
    }

    /// A large matrix is pooled: the same values (up to rounding) whatever the type, the same
    /// bytes whatever the chunking, distinct rows with the weights' spread; small ones are not.
    #[test]
    fn large_matrices_are_pooled_alike_for_every_type() {
        let (cols, n) = (4096usize, 1024u64);
        assert_eq!(pool_unit(cols, n, GgmlType::Q4K, Init::Weight), Some(256));
        assert_eq!(
            pool_unit(2880, n * 2, GgmlType::Q8_0, Init::Weight),
            Some(32)
        );
        assert_eq!(pool_unit(cols, 8, GgmlType::F32, Init::Weight), None);
        assert_eq!(pool_unit(cols, n, GgmlType::F32, Init::Norm), None);
        let fill = |ty| row_fill(7, "blk.0.ffn_up.weight", (cols, n), ty, Init::Weight);
        let f32_rows = rows(&fill(GgmlType::F32), GgmlType::F32, cols, 100, 8);
        let q8_rows = rows(&fill(GgmlType::Q8_0), GgmlType::Q8_0, cols, 100, 8);
        for (a, b) in f32_rows.iter().zip(&q8_rows) {
            let worst = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(worst < 3e-4, "{worst}");
        }
        assert_ne!(f32_rows[0], f32_rows[1]);
        let std = (f32_rows[0].iter().map(|v| v * v).sum::<f32>() / cols as f32).sqrt();
        assert!((0.018..0.022).contains(&std), "std {std}");
        let q4 = fill(GgmlType::Q4K);
        let whole = rows(&q4, GgmlType::Q4K, cols, 0, 6);
        let tail = rows(&q4, GgmlType::Q4K, cols, 4, 2);
        assert_eq!(&whole[4..], &tail[..]);
    }
}
