//! The decoder-only transformer model of every supported architecture ([`Arch`]):
//! hyper-parameters, weights used in place from the GGUF mapping, and a forward pass over a
//! batch of tokens from any number of sequences whose K/V live in a caller-owned [`KvStore`].
//! Config (`HParams`), weights (`ModelWeights`) and per-step buffers (`Scratch`) are separate,
//! as in llama2.c; the forward pass allocates nothing once warm.

mod arch;
mod attention;
mod embed;
pub use embed::MeanPool;
mod ffn;
mod forward;
#[cfg(test)]
mod forward_tests;
#[cfg(test)]
mod gemma_tests;
mod hparams;
mod kv;
mod weights;

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;

pub use arch::Arch;
pub use forward::{BatchToken, Scratch};
pub use hparams::{FfnAct, Gating, HParams, Moe, RopeParams, SlidingWindow, SwaLayers};
pub use kv::{ContiguousKv, KvDtype, KvStore, SeqLayerView};
pub use weights::{
    DenseFfn, FfnWeights, GateUp, LayerWeights, MatDesc, ModelWeights, MoeWeights, QkvWeights,
    RopeFactors,
};

use memoria_kernels::ops::RopeTables;

use crate::gguf::{GgufError, GgufFile, TensorInfo};

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("missing metadata key `{0}`")]
    MissingKey(String),
    #[error("architecture `{0}` is not supported (supported: {list})", list = Arch::supported())]
    UnsupportedArch(String),
    #[error("metadata `{key}`: {why}")]
    BadHParam { key: String, why: String },
    #[error("missing tensor `{0}`")]
    MissingTensor(String),
    #[error("tensor `{name}`: {why}")]
    BadTensor { name: String, why: String },
    #[error("invalid batch: {0}")]
    BadBatch(String),
}

/// Choices made when a model is loaded that change what it computes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// The longest context one sequence may reach (llama.cpp's `n_ctx_seq`): LongRoPE models
    /// (Phi-3.5) use their long factors past `rope.scaling.original_context_length`. `None`:
    /// the training context, as llama.cpp with `-c 0`.
    pub context: Option<usize>,
}

/// Which LongRoPE factors a model was loaded with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongRope {
    Short,
    Long,
}

/// A loaded model: the mapping it reads from, its shape and its weight descriptors.
#[derive(Debug)]
pub struct Model {
    file: GgufFile,
    hparams: HParams,
    weights: ModelWeights,
    rope: RopeTables,
    /// RoPE of the sliding-window layers when it differs (Gemma 3's local base).
    rope_local: Option<RopeTables>,
    /// The LongRoPE factors in use, if the model has them.
    long_rope: Option<LongRope>,
    fingerprint: OnceLock<[u8; 32]>,
}

impl Model {
    /// Maps and validates a GGUF model file.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
        Model::load_with(path, LoadOptions::default())
    }

    /// Maps and validates a GGUF model file with `opts`.
    pub fn load_with(path: impl AsRef<Path>, opts: LoadOptions) -> Result<Model, ModelError> {
        Model::from_gguf_with(GgufFile::open(path)?, opts)
    }

    /// Validates an already opened GGUF file as a model.
    pub fn from_gguf(file: GgufFile) -> Result<Model, ModelError> {
        Model::from_gguf_with(file, LoadOptions::default())
    }

    /// Validates an already opened GGUF file as a model, with `opts`.
    pub fn from_gguf_with(file: GgufFile, opts: LoadOptions) -> Result<Model, ModelError> {
        file.check_tensor_types()?;
        let hparams = HParams::from_gguf(&file)?;
        let weights = ModelWeights::load(&file, &hparams)?;
        let (rope, rope_local, long_rope) = rope_tables(&hparams, &weights, opts.context);
        Ok(Model {
            file,
            hparams,
            weights,
            rope,
            rope_local,
            long_rope,
            fingerprint: OnceLock::new(),
        })
    }

    /// Sets the longest context one sequence may reach (see [`LoadOptions::context`]): for a
    /// LongRoPE model this picks the short or long factors (and so the fingerprint); for any
    /// other model it changes nothing.
    pub fn set_context(&mut self, context: usize) {
        let (rope, rope_local, long_rope) =
            rope_tables(&self.hparams, &self.weights, Some(context));
        if long_rope != self.long_rope {
            self.fingerprint = OnceLock::new();
        }
        (self.rope, self.rope_local, self.long_rope) = (rope, rope_local, long_rope);
    }

    /// The LongRoPE factors in use, for models that have them.
    pub fn long_rope(&self) -> Option<LongRope> {
        self.long_rope
    }

    /// The model's shape.
    pub fn hparams(&self) -> &HParams {
        &self.hparams
    }

    /// The GGUF file (metadata, tokenizer, tensors).
    pub fn gguf(&self) -> &GgufFile {
        &self.file
    }

    /// A content fingerprint of the model: blake3 of every byte of the file (header, metadata
    /// and weights), computed on first use, and of the load choices that change what it
    /// computes (LongRoPE's long factors). K/V block hashes start from it, so state computed by
    /// one model is never served to another.
    pub fn fingerprint(&self) -> [u8; 32] {
        *self.fingerprint.get_or_init(|| {
            let file = self.file.content_hash();
            match self.long_rope {
                Some(LongRope::Long) => {
                    let mut h = blake3::Hasher::new();
                    h.update(&file);
                    h.update(b"rope_factors_long");
                    *h.finalize().as_bytes()
                }
                Some(LongRope::Short) | None => file,
            }
        })
    }

    /// The tensors inference reads from the file mapping: all but those matmul reads from an
    /// interleaved copy (whose pages were released after the copy was made).
    pub fn tensors_read_in_place(&self) -> Vec<&TensorInfo> {
        let copied: HashSet<&str> = self
            .weights
            .matrices()
            .filter(|m| m.interleaved.is_some())
            .map(|m| m.info.name.as_str())
            .collect();
        self.file
            .tensors()
            .iter()
            .filter(|t| !copied.contains(t.name.as_str()))
            .collect()
    }

    /// Bytes of weights inference keeps resident at most: the tensors read from the file
    /// mapping plus the interleaved copies.
    pub fn weight_bytes(&self) -> u64 {
        let in_place: u64 = self.tensors_read_in_place().iter().map(|t| t.size).sum();
        let copies: u64 = self
            .weights
            .matrices()
            .filter_map(|m| m.interleaved.as_ref())
            .map(|i| i.bytes() as u64)
            .sum();
        in_place.saturating_add(copies)
    }

    /// The weight descriptors.
    pub fn weights(&self) -> &ModelWeights {
        &self.weights
    }

    /// A contiguous K/V cache sized for this model.
    pub fn new_contiguous_kv(&self, dtype: KvDtype, n_seq: usize, capacity: usize) -> ContiguousKv {
        ContiguousKv::new(
            dtype,
            self.hparams.n_layer,
            self.hparams.kv_dim(),
            n_seq,
            capacity,
        )
    }
}

/// The RoPE tables of the global and windowed layers, with llama.cpp's `get_rope_factors`:
/// `rope_freqs` if present, else LongRoPE's long factors when `context` (default: the training
/// context) exceeds the original one, else the short ones.
fn rope_tables(
    hp: &HParams,
    w: &ModelWeights,
    context: Option<usize>,
) -> (RopeTables, Option<RopeTables>, Option<LongRope>) {
    let f = &w.rope_factors;
    let long = context.unwrap_or(hp.n_ctx_train) > hp.rope.n_ctx_orig;
    let (chosen, long_rope) = match (&f.freqs, &f.short, &f.long) {
        (Some(freqs), _, _) => (Some(freqs), None),
        (None, _, Some(l)) if long => (Some(l), Some(LongRope::Long)),
        (None, Some(s), _) if !long => (Some(s), Some(LongRope::Short)),
        _ => (None, None),
    };
    let with_factors = |t: RopeTables| match chosen {
        Some(factors) => t.with_freq_factors(factors.clone()),
        None => t,
    };
    (
        with_factors(hp.rope.tables()),
        hp.rope_local.map(|r| with_factors(r.tables())),
        long_rope,
    )
}
