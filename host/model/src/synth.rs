//! Synthetic llama-family models: deterministic random weights in llama.cpp's tensor layout and
//! metadata, for tests and benchmarks that need a model of a given shape and type.
//!
//! Invariant: the output depends only on the `SynthSpec` (values come from a splitmix64 stream
//! seeded per tensor and per row, so thread count and platform do not change a single byte),
//! and every file is one llama.cpp can load: its names, shapes, types and metadata keys.

pub mod demo;
mod vocab;
mod weights;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use memoria_kernels::{GgmlType, KernelError};

use crate::gguf::{GgufError, GgufWriter, MetaArray, MetaValue};
use vocab::{FIRST_NORMAL, spm_tokenizer, tokenizer_from_file};
use weights::add_tensors;

/// Architectures the synthesizer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
}

impl Arch {
    /// `general.architecture` value and metadata key prefix.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }

    const fn rms_eps(self) -> f32 {
        match self {
            Arch::Llama => 1e-5,
            Arch::Qwen2 => 1e-6,
        }
    }
}

/// Where the vocabulary comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthVocab {
    /// Copy every `tokenizer.*` key of this GGUF file (e.g. a `ggml-vocab-*.gguf`).
    FromFile(PathBuf),
    /// Build a SentencePiece-style vocabulary of this many tokens (at least 260).
    Size(usize),
}

/// Shape, type and seed of a synthetic model.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthSpec {
    pub arch: Arch,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub vocab: SynthVocab,
    /// Type of the 2-D weights.
    pub ty: GgmlType,
    pub context: usize,
    pub seed: u64,
    pub rope_base: f32,
    pub tied_embeddings: bool,
}

impl SynthSpec {
    /// A small model every type can represent (all row lengths are multiples of 256).
    pub fn tiny(arch: Arch, ty: GgmlType) -> SynthSpec {
        SynthSpec {
            arch,
            dim: 256,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            ffn: 512,
            vocab: SynthVocab::Size(512),
            ty,
            context: 256,
            seed: 1,
            rope_base: 10000.0,
            tied_embeddings: false,
        }
    }

    /// The shape of llama2.c's stories110M (dim 768, 12 layers, 32000 tokens).
    pub fn stories110m(ty: GgmlType) -> SynthSpec {
        SynthSpec {
            arch: Arch::Llama,
            dim: 768,
            layers: 12,
            heads: 12,
            kv_heads: 12,
            ffn: 2048,
            vocab: SynthVocab::Size(32000),
            ty,
            context: 1024,
            seed: 110,
            rope_base: 10000.0,
            tied_embeddings: false,
        }
    }

    pub(crate) fn head_dim(&self) -> usize {
        self.dim / self.heads
    }

    pub(crate) fn kv_dim(&self) -> usize {
        self.head_dim() * self.kv_heads
    }

    /// Type of token_embd (and an untied output): Q6_K for Q4_0/Q4_K models, as llama-quantize.
    pub(crate) fn embedding_type(&self) -> GgmlType {
        match self.ty {
            GgmlType::Q4_0 | GgmlType::Q4K => GgmlType::Q6K,
            ty => ty,
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

/// Builds the model in memory; `write_to` or `to_bytes` on the result gives the file.
pub fn synthesize(spec: &SynthSpec) -> Result<GgufWriter, SynthError> {
    validate(spec)?;
    let mut w = GgufWriter::new();
    let vocab_size = add_vocab_metadata(&mut w, spec)?;
    add_tensors(&mut w, spec, vocab_size)?;
    Ok(w)
}

/// Synthesizes `spec` and writes it atomically to `path`.
pub fn write_synth(spec: &SynthSpec, path: impl AsRef<Path>) -> Result<(), SynthError> {
    synthesize(spec)?.write_to(path)?;
    Ok(())
}

fn validate(spec: &SynthSpec) -> Result<(), SynthError> {
    let bad = |m: String| Err(SynthError::BadSpec(m));
    let sizes = [
        ("dim", spec.dim),
        ("layers", spec.layers),
        ("heads", spec.heads),
        ("kv_heads", spec.kv_heads),
        ("ffn", spec.ffn),
        ("context", spec.context),
    ];
    if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
        return bad(format!("{name} must be at least 1"));
    }
    if !spec.dim.is_multiple_of(spec.heads) || !spec.heads.is_multiple_of(spec.kv_heads) {
        return bad(format!(
            "dim {} must divide into {} heads, and heads into {} kv_heads",
            spec.dim, spec.heads, spec.kv_heads
        ));
    }
    if !spec.head_dim().is_multiple_of(2) {
        return bad(format!(
            "head_dim {} must be even for rope",
            spec.head_dim()
        ));
    }
    if spec.ty.is_activation_only() {
        return bad(format!(
            "{} is an activation type; llama.cpp has no {} weight kernels",
            spec.ty, spec.ty
        ));
    }
    for (ty, what, n) in [
        (spec.ty, "dim", spec.dim),
        (spec.ty, "ffn", spec.ffn),
        (spec.embedding_type(), "dim", spec.dim),
    ] {
        if !n.is_multiple_of(ty.block_size()) {
            return bad(format!(
                "{what} {n} is not a multiple of the {ty} block size {}",
                ty.block_size()
            ));
        }
    }
    if let SynthVocab::Size(n) = spec.vocab
        && n < FIRST_NORMAL + 1
    {
        return bad(format!(
            "vocabulary size {n} is below the minimum of {}",
            FIRST_NORMAL + 1
        ));
    }
    Ok(())
}

/// `general.file_type` (llama_ftype) for a weight type.
const fn file_type(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::F32 => 0,
        GgmlType::F16 => 1,
        GgmlType::Q4_0 => 2,
        GgmlType::Q4_1 => 3,
        GgmlType::Q8_0 => 7,
        GgmlType::Q5_0 => 8,
        GgmlType::Q5_1 => 9,
        GgmlType::Q2K => 10,
        GgmlType::Q3K => 12,
        GgmlType::Q4K => 15,
        GgmlType::Q5K => 17,
        GgmlType::Q6K => 18,
        GgmlType::IQ4NL => 25,
        GgmlType::IQ4XS => 30,
        GgmlType::BF16 => 32,
        // LLAMA_FTYPE_MOSTLY_MXFP4_MOE (llama.cpp keeps 1-d tensors in F32 in such files).
        GgmlType::Mxfp4 => 38,
        GgmlType::Q8_1 | GgmlType::Q8K => 0,
    }
}

/// Writes general/arch/tokenizer metadata; returns the vocabulary size.
fn add_vocab_metadata(w: &mut GgufWriter, spec: &SynthSpec) -> Result<usize, SynthError> {
    let arch = spec.arch.name();
    let u32_of = |v: usize| MetaValue::U32(u32::try_from(v).unwrap_or(u32::MAX));
    w.set("general.architecture", MetaValue::String(arch.to_owned()))
        .set(
            "general.name",
            MetaValue::String(format!("synth-{arch}-{}", spec.ty)),
        )
        .set("general.file_type", MetaValue::U32(file_type(spec.ty)));
    if !matches!(spec.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        w.set("general.quantization_version", MetaValue::U32(2));
    }
    let tokenizer = match &spec.vocab {
        SynthVocab::FromFile(path) => tokenizer_from_file(path)?,
        SynthVocab::Size(n) => spm_tokenizer(*n),
    };
    let vocab_size = tokenizer
        .iter()
        .find(|(k, _)| k == "tokenizer.ggml.tokens")
        .and_then(|(_, v)| v.as_array())
        .map_or(0, MetaArray::len);
    let hp = [
        ("context_length", u32_of(spec.context)),
        ("embedding_length", u32_of(spec.dim)),
        ("block_count", u32_of(spec.layers)),
        ("feed_forward_length", u32_of(spec.ffn)),
        ("attention.head_count", u32_of(spec.heads)),
        ("attention.head_count_kv", u32_of(spec.kv_heads)),
        (
            "attention.layer_norm_rms_epsilon",
            MetaValue::F32(spec.arch.rms_eps()),
        ),
        ("rope.dimension_count", u32_of(spec.head_dim())),
        ("rope.freq_base", MetaValue::F32(spec.rope_base)),
        ("vocab_size", u32_of(vocab_size)),
    ];
    for (key, value) in hp {
        w.set(&format!("{arch}.{key}"), value);
    }
    for (key, value) in tokenizer {
        w.set(&key, value);
    }
    Ok(vocab_size)
}
