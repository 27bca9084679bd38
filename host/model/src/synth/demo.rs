//! The embedded demo model `memoria serve` runs when no model file is given: a tiny llama with
//! random weights and a byte-level vocabulary (SentencePiece specials, the 256 byte tokens and
//! "▁"), generated in memory at start. Invariant: it is a pure function of the constants here,
//! so every host produces the same bytes (and the same K/V block hashes); its output is random
//! text, and callers must say so.

use memoria_kernels::GgmlType;

use super::{Arch, SynthError, SynthSpec, SynthVocab, synthesize};
use crate::gguf::{GgufFile, MetaValue};
use crate::llama::{Model, ModelError};
use crate::tokenizer::{Tokenizer, TokenizerError};

/// The name the demo model reports (`general.name`, `/v1/models`).
pub const DEMO_MODEL_NAME: &str = "memoria-demo-random";

/// The demo model's shape: 4 layers of width 128, a 2048-token context, 260 tokens.
pub fn demo_spec() -> SynthSpec {
    SynthSpec {
        arch: Arch::Llama,
        dim: 128,
        layers: 4,
        heads: 4,
        kv_heads: 2,
        head_dim: None,
        ffn: 384,
        moe: None,
        window: None,
        vocab: SynthVocab::Size(super::vocab::FIRST_NORMAL + 1),
        ty: GgmlType::F32.into(),
        context: 2048,
        seed: 0x6d65_6d6f,
        rope_base: 10000.0,
        tied_embeddings: false,
    }
}

/// Why the demo model could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Synth(#[from] SynthError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
}

/// The demo model's GGUF bytes.
pub fn demo_gguf_bytes() -> Result<Vec<u8>, SynthError> {
    let mut w = synthesize(&demo_spec())?;
    w.set(
        "general.name",
        MetaValue::String(DEMO_MODEL_NAME.to_owned()),
    );
    Ok(w.to_bytes())
}

/// Builds the demo model in memory.
pub fn demo_model() -> Result<Model, DemoError> {
    let file = GgufFile::from_bytes(demo_gguf_bytes()?)?;
    Ok(Model::from_gguf(file)?)
}

/// Builds the demo model and its tokenizer.
pub fn demo_model_and_tokenizer() -> Result<(Model, Tokenizer), DemoError> {
    let model = demo_model()?;
    let tok = Tokenizer::from_gguf(model.gguf())?;
    Ok((model, tok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_model_is_deterministic_and_byte_level() {
        assert_eq!(
            demo_gguf_bytes().expect("bytes"),
            demo_gguf_bytes().expect("bytes")
        );
        let (model, tok) = demo_model_and_tokenizer().expect("demo");
        assert_eq!(model.hparams().n_vocab, 260);
        let text = "héllo, wörld ✓";
        let ids = tok.encode(text, false, false);
        assert_eq!(tok.decode(&ids, true, false).trim_start(), text);
    }
}
