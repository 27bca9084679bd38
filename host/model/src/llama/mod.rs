//! The llama-family model: hyper-parameters, weights used in place from the GGUF mapping, and a
//! forward pass over a batch of tokens from any number of sequences whose K/V live in a
//! caller-owned [`KvStore`]. Config (`HParams`), weights (`ModelWeights`) and per-step buffers
//! (`Scratch`) are separate, as in llama2.c; the forward pass allocates nothing once warm.

mod embed;
pub use embed::MeanPool;
mod forward;
#[cfg(test)]
mod gemma_tests;
mod hparams;
mod kv;
mod weights;

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;

pub use forward::{BatchToken, Scratch};
pub use hparams::{Arch, FfnAct, HParams, SlidingWindow};
pub use kv::{ContiguousKv, KvDtype, KvStore, SeqLayerView};
pub use weights::{LayerWeights, MatDesc, ModelWeights};

use memoria_kernels::ops::RopeTables;

use crate::gguf::{GgufError, GgufFile, TensorInfo};

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("missing metadata key `{0}`")]
    MissingKey(String),
    #[error("architecture `{0}` is not supported (supported: llama, qwen2, gemma3)")]
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

/// A loaded model: the mapping it reads from, its shape and its weight descriptors.
#[derive(Debug)]
pub struct Model {
    file: GgufFile,
    hparams: HParams,
    weights: ModelWeights,
    rope: RopeTables,
    /// RoPE of the sliding-window layers when their base differs (Gemma 3's local layers).
    rope_local: Option<RopeTables>,
    fingerprint: OnceLock<[u8; 32]>,
}

impl Model {
    /// Maps and validates a GGUF model file.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
        Model::from_gguf(GgufFile::open(path)?)
    }

    /// Validates an already opened GGUF file as a model.
    pub fn from_gguf(file: GgufFile) -> Result<Model, ModelError> {
        file.check_tensor_types()?;
        let hparams = HParams::from_gguf(&file)?;
        let weights = ModelWeights::load(&file, &hparams)?;
        let rope = RopeTables::new(
            hparams.rope_style,
            hparams.rope_dims,
            hparams.rope_base,
            hparams.rope_freq_scale,
        );
        let rope_local = hparams
            .swa
            .map(|w| RopeTables::new(hparams.rope_style, hparams.rope_dims, w.rope_base, 1.0));
        Ok(Model {
            file,
            hparams,
            weights,
            rope,
            rope_local,
            fingerprint: OnceLock::new(),
        })
    }

    /// The model's shape.
    pub fn hparams(&self) -> &HParams {
        &self.hparams
    }

    /// The GGUF file (metadata, tokenizer, tensors).
    pub fn gguf(&self) -> &GgufFile {
        &self.file
    }

    /// A content fingerprint of the model file: blake3 of every byte (header, metadata and
    /// weights), computed on first use. K/V block hashes start from it, so state computed by one
    /// model is never served to another.
    pub fn fingerprint(&self) -> [u8; 32] {
        *self.fingerprint.get_or_init(|| self.file.content_hash())
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
