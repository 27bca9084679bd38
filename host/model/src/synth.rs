//! Synthetic models of every architecture memoria runs: deterministic random weights in
//! llama.cpp's tensor layout and metadata, at real shapes ([`presets`]) and in the type mixes
//! people download ([`WeightTypes`]), for tests and benchmarks that need a model of a given
//! shape and type.
//!
//! Invariant: the output depends only on the `SynthSpec` (values come from a splitmix64 stream
//! seeded per tensor and per row, so thread count and platform do not change a single byte),
//! and every file is one llama.cpp can load: its names, shapes, types and metadata keys.
//! Tensors are encoded while the file is written, so a file larger than memory streams to disk.

mod arch;
pub mod demo;
mod meta;
mod mix;
mod plan;
pub mod presets;
mod vocab;
mod weights;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_archs;

use std::path::{Path, PathBuf};

use memoria_kernels::{GgmlType, KernelError};

use crate::gguf::{GgufError, GgufWriter};
pub use arch::Arch;
use arch::Tying;
pub use mix::WeightTypes;
use vocab::FIRST_NORMAL;

/// Where the vocabulary comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthVocab {
    /// Copy every `tokenizer.*` key of this GGUF file (e.g. a `ggml-vocab-*.gguf`).
    FromFile(PathBuf),
    /// Build a SentencePiece-style vocabulary of this many tokens (at least 260).
    Size(usize),
}

/// The mixture of experts of a MoE model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthMoe {
    /// Experts per layer.
    pub experts: usize,
    /// Experts per token.
    pub used: usize,
    /// Rows of each expert's gate and up matrices.
    pub ffn: usize,
}

/// Shape, type and seed of a synthetic model.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthSpec {
    pub arch: Arch,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// Head size; `None`: `dim / heads`.
    pub head_dim: Option<usize>,
    /// Rows of the dense FFN's gate and up matrices (`feed_forward_length`; MoE models carry
    /// it too).
    pub ffn: usize,
    /// The experts, for the MoE architectures (and only for them).
    pub moe: Option<SynthMoe>,
    /// Sliding window of the architectures that have one; `None`: the family's.
    pub window: Option<usize>,
    pub vocab: SynthVocab,
    /// Types of the weights.
    pub ty: WeightTypes,
    pub context: usize,
    pub seed: u64,
    pub rope_base: f32,
    pub tied_embeddings: bool,
}

impl SynthSpec {
    /// A small model of `arch` every type can represent (all row lengths are multiples of 256):
    /// width 256, 2 layers, 4/2 heads of 64, FFN 512, 512 tokens; MoE architectures get 4
    /// experts of 256 rows, 2 per token; Gemma 2's output is tied, as llama.cpp requires.
    pub fn tiny(arch: Arch, ty: impl Into<WeightTypes>) -> SynthSpec {
        SynthSpec {
            arch,
            dim: 256,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            head_dim: None,
            ffn: 512,
            moe: arch.is_moe().then_some(SynthMoe {
                experts: 4,
                used: 2,
                ffn: 256,
            }),
            window: None,
            vocab: SynthVocab::Size(512),
            ty: ty.into(),
            context: 256,
            seed: 1,
            rope_base: 10000.0,
            tied_embeddings: arch.tying() == Tying::Always,
        }
    }

    /// The shape of llama2.c's stories110M (dim 768, 12 layers, 32000 tokens).
    pub fn stories110m(ty: impl Into<WeightTypes>) -> SynthSpec {
        SynthSpec {
            arch: Arch::Llama,
            dim: 768,
            layers: 12,
            heads: 12,
            kv_heads: 12,
            head_dim: None,
            ffn: 2048,
            moe: None,
            window: None,
            vocab: SynthVocab::Size(32000),
            ty: ty.into(),
            context: 1024,
            seed: 110,
            rope_base: 10000.0,
            tied_embeddings: false,
        }
    }

    pub(crate) fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.dim / self.heads.max(1))
    }

    /// Width of the queries: `heads * head_dim`.
    pub(crate) fn q_dim(&self) -> usize {
        self.head_dim() * self.heads
    }

    pub(crate) fn kv_dim(&self) -> usize {
        self.head_dim() * self.kv_heads
    }

    /// The sliding window written, for the architectures that have one.
    pub(crate) fn window(&self) -> Option<usize> {
        self.arch.default_window().map(|w| self.window.unwrap_or(w))
    }

    /// Type of token_embd (and an untied output) for a single weight type: Q6_K for Q4_0/Q4_K
    /// models, as llama-quantize.
    pub(crate) fn embedding_type(&self) -> GgmlType {
        match self.ty {
            WeightTypes::Single(GgmlType::Q4_0 | GgmlType::Q4K) => GgmlType::Q6K,
            WeightTypes::Single(ty) => ty,
            WeightTypes::Q4KM => GgmlType::Q6K,
            WeightTypes::Mxfp4Moe => GgmlType::Q8_0,
        }
    }
}

/// Why a model could not be synthesized.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("invalid synthetic model spec: {0}")]
    BadSpec(String),
    #[error("vocabulary {path}: {reason}")]
    Vocab { path: PathBuf, reason: String },
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

/// Builds the model: metadata and vocabulary in memory, each tensor described with the rows
/// it will be filled with; `write_to` (streaming) or `to_bytes` on the result gives the file.
pub fn synthesize(spec: &SynthSpec) -> Result<GgufWriter, SynthError> {
    validate(spec)?;
    let mut w = GgufWriter::new();
    let vocab_size = meta::add_metadata(&mut w, spec)?;
    let tensors = plan::plan(spec, vocab_size);
    let types = plan::types(spec, &tensors);
    check_rows(&tensors, &types)?;
    weights::add_tensors(&mut w, spec.seed, &tensors, &types)?;
    Ok(w)
}

/// Synthesizes `spec` and writes it atomically to `path`.
pub fn write_synth(spec: &SynthSpec, path: impl AsRef<Path>) -> Result<(), SynthError> {
    synthesize(spec)?.write_to(path)?;
    Ok(())
}

/// Every tensor's rows fit its type's blocks.
fn check_rows(tensors: &[plan::Planned], types: &[GgmlType]) -> Result<(), SynthError> {
    for (t, ty) in tensors.iter().zip(types) {
        if ty.row_bytes(t.dims[0] as usize).is_none() {
            return Err(SynthError::BadSpec(format!(
                "{}: a row of {} values is not a multiple of the {ty} block size {}",
                t.name,
                t.dims[0],
                ty.block_size()
            )));
        }
    }
    Ok(())
}

/// Upper bounds that keep a mistyped size from asking for absurd files.
const MAX_DIM: usize = 1 << 17;
const MAX_LAYERS: usize = 1024;
const MAX_EXPERTS: usize = 1024;

fn validate(spec: &SynthSpec) -> Result<(), SynthError> {
    let bad = |m: String| Err(SynthError::BadSpec(m));
    let arch = spec.arch;
    let mut sizes = vec![
        ("dim", spec.dim, MAX_DIM),
        ("layers", spec.layers, MAX_LAYERS),
        ("heads", spec.heads, MAX_DIM),
        ("kv_heads", spec.kv_heads, MAX_DIM),
        ("ffn", spec.ffn, 8 * MAX_DIM),
        ("context", spec.context, u32::MAX as usize),
        ("head_dim", spec.head_dim(), MAX_DIM),
    ];
    if let Some(m) = spec.moe {
        sizes.extend([
            ("experts", m.experts, MAX_EXPERTS),
            ("experts used", m.used, m.experts),
            ("expert ffn", m.ffn, 8 * MAX_DIM),
        ]);
    }
    if let Some(w) = spec.window {
        sizes.push(("window", w, u32::MAX as usize));
    }
    if let Some((name, v, max)) = sizes.iter().find(|(_, v, max)| !(1..=*max).contains(v)) {
        return bad(format!("{name} {v} is out of range 1..={max}"));
    }
    if !spec.heads.is_multiple_of(spec.kv_heads) {
        return bad(format!(
            "heads {} must be a multiple of kv_heads {}",
            spec.heads, spec.kv_heads
        ));
    }
    match spec.head_dim {
        None if !spec.dim.is_multiple_of(spec.heads) => {
            return bad(format!(
                "dim {} must divide into {} heads (or give the head size)",
                spec.dim, spec.heads
            ));
        }
        Some(h) if arch.q_dim_is_width() && h * spec.heads != spec.dim => {
            return bad(format!(
                "{}: llama.cpp sizes the attention as the width, so the head size must be dim / heads = {}",
                arch.name(),
                spec.dim / spec.heads
            ));
        }
        _ => {}
    }
    if !spec.head_dim().is_multiple_of(2) || spec.q_dim() > MAX_DIM {
        return bad(format!(
            "head size {} with {} heads: it must be even, and the queries at most {MAX_DIM} wide",
            spec.head_dim(),
            spec.heads
        ));
    }
    match (arch.tying(), spec.tied_embeddings) {
        (Tying::Always, false) => {
            return bad(format!(
                "{}: llama.cpp always ties the output to the embedding",
                arch.name()
            ));
        }
        (Tying::Never, true) => {
            return bad(format!(
                "{}: llama.cpp requires its own output projection (untied)",
                arch.name()
            ));
        }
        _ => {}
    }
    match (arch.is_moe(), spec.moe.is_some()) {
        (true, false) => return bad(format!("{} needs experts", arch.name())),
        (false, true) => return bad(format!("{} has no experts", arch.name())),
        _ => {}
    }
    if spec.window.is_some() && arch.default_window().is_none() {
        return bad(format!("{} has no sliding window", arch.name()));
    }
    if !(spec.rope_base.is_finite() && spec.rope_base > 0.0) {
        return bad(format!("rope base {} must be positive", spec.rope_base));
    }
    if let WeightTypes::Single(ty) = spec.ty
        && ty.is_activation_only()
    {
        return bad(format!(
            "{ty} is an activation type; llama.cpp has no {ty} weight kernels"
        ));
    }
    let extra = usize::from(arch == Arch::Phi3);
    if let SynthVocab::Size(n) = spec.vocab
        && !(FIRST_NORMAL + 1 + extra..=1 << 22).contains(&n)
    {
        return bad(format!(
            "vocabulary size {n} is out of range {}..={}",
            FIRST_NORMAL + 1 + extra,
            1 << 22
        ));
    }
    Ok(())
}
