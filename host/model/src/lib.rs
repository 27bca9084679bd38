//! memoria-model: everything about a model file and its maths. GGUF read (memory-mapped, hardened)
//! and write, tokenizers (SentencePiece and byte-level BPE) from GGUF metadata, chat templates,
//! hyper-parameters and the llama-family forward pass over a batch of tokens.

pub mod chat;
pub mod gguf;
pub mod llama;
pub mod synth;
pub mod tokenizer;
