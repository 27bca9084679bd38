//! Deterministic random weights for synthetic models, in llama.cpp tensor names and layouts.
//!
//! Invariant: each row's values come from splitmix64 seeded by (seed, tensor name, row index)
//! only, so the bytes do not depend on thread count, scheduling or platform.

use memoria_kernels::quant::quantize_row;
use memoria_kernels::{GgmlType, KernelError};
use rayon::prelude::*;

use super::{Arch, SynthError, SynthSpec};
use crate::gguf::GgufWriter;

/// How a tensor's values are drawn.
#[derive(Clone, Copy)]
enum Init {
    /// Uniform in ±sqrt(3)*0.02 (std 0.02).
    Weight,
    /// 1 ± 0.05.
    Norm,
    /// Uniform in ±0.02.
    Bias,
}

pub(super) fn add_tensors(
    w: &mut GgufWriter,
    spec: &SynthSpec,
    vocab: usize,
) -> Result<(), SynthError> {
    let (dim, ffn, kv) = (spec.dim as u64, spec.ffn as u64, spec.kv_dim() as u64);
    let emb = spec.embedding_type();
    let mut add = |name: &str, dims: &[u64], ty: GgmlType, init: Init| -> Result<(), SynthError> {
        let data = tensor_bytes(spec.seed, name, dims, ty, init)?;
        w.add_tensor(name, dims, ty, data)?;
        Ok(())
    };
    add("token_embd.weight", &[dim, vocab as u64], emb, Init::Weight)?;
    add("output_norm.weight", &[dim], GgmlType::F32, Init::Norm)?;
    if !spec.tied_embeddings {
        add("output.weight", &[dim, vocab as u64], emb, Init::Weight)?;
    }
    let ty = spec.ty;
    for i in 0..spec.layers {
        let n = |t: &str| format!("blk.{i}.{t}");
        add(&n("attn_norm.weight"), &[dim], GgmlType::F32, Init::Norm)?;
        add(&n("attn_q.weight"), &[dim, dim], ty, Init::Weight)?;
        add(&n("attn_k.weight"), &[dim, kv], ty, Init::Weight)?;
        add(&n("attn_v.weight"), &[dim, kv], ty, Init::Weight)?;
        if spec.arch == Arch::Qwen2 {
            add(&n("attn_q.bias"), &[dim], GgmlType::F32, Init::Bias)?;
            add(&n("attn_k.bias"), &[kv], GgmlType::F32, Init::Bias)?;
            add(&n("attn_v.bias"), &[kv], GgmlType::F32, Init::Bias)?;
        }
        add(&n("attn_output.weight"), &[dim, dim], ty, Init::Weight)?;
        add(&n("ffn_norm.weight"), &[dim], GgmlType::F32, Init::Norm)?;
        add(&n("ffn_gate.weight"), &[dim, ffn], ty, Init::Weight)?;
        add(&n("ffn_down.weight"), &[ffn, dim], ty, Init::Weight)?;
        add(&n("ffn_up.weight"), &[dim, ffn], ty, Init::Weight)?;
    }
    Ok(())
}

/// Encoded data of one tensor; rows are drawn and quantized in parallel.
fn tensor_bytes(
    seed: u64,
    name: &str,
    dims: &[u64],
    ty: GgmlType,
    init: Init,
) -> Result<Vec<u8>, SynthError> {
    let cols = dims[0] as usize;
    let rows: usize = dims[1..].iter().map(|&d| d as usize).product();
    let row_bytes = ty.row_bytes(cols).ok_or(KernelError::RowNotBlockAligned {
        ty,
        cols,
        block: ty.block_size(),
    })?;
    let tensor_seed = splitmix64(seed ^ fnv1a(name.as_bytes()));
    let mut data = vec![0u8; row_bytes * rows];
    data.par_chunks_mut(row_bytes)
        .enumerate()
        .try_for_each_init(
            || vec![0f32; cols],
            |row, (r, dst)| {
                fill_row(row, tensor_seed, r as u64, init);
                quantize_row(ty, row, dst)
            },
        )?;
    Ok(data)
}

fn fill_row(row: &mut [f32], tensor_seed: u64, r: u64, init: Init) {
    let mut state = splitmix64(tensor_seed.wrapping_add(r.wrapping_mul(0xA24B_AED4_963E_E407)));
    let (center, half_width) = match init {
        Init::Weight => (0.0, 3f32.sqrt() * 0.02),
        Init::Norm => (1.0, 0.05),
        Init::Bias => (0.0, 0.02),
    };
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
