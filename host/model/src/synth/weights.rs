//! Deterministic random weights for synthetic models, encoded row by row while the file is
//! written.
//!
//! Invariant: each row's values come from splitmix64 seeded by (seed, tensor name, row index)
//! only, so the bytes do not depend on thread count, chunking, scheduling or platform.

use std::io;
use std::sync::Arc;

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
        let fill = row_fill(seed, &t.name, t.dims[0] as usize, ty, t.init);
        w.add_tensor_rows(&t.name, &t.dims, ty, fill)?;
    }
    Ok(())
}

/// Draws and encodes rows `first..` of tensor `name` (rows of `cols` values of type `ty`), in
/// parallel.
fn row_fill(seed: u64, name: &str, cols: usize, ty: GgmlType, init: Init) -> RowFill {
    let tensor_seed = splitmix64(seed ^ fnv1a(name.as_bytes()));
    // The writer checked the row length against the type before any fill runs.
    let row_bytes = ty.row_bytes(cols).unwrap_or(1).max(1);
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
