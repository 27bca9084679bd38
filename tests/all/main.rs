//! memoria's integration tests, one binary. Modules are named after the subject they pin.

mod biased;
mod cache_view;
mod chat;
mod cli;
mod deploy;
mod engine;
mod fidelity;
mod gemma;
mod gguf;
mod golden;
mod hit_timing;
mod kernels;
mod kv;
mod logprobs;
mod public_bench;
mod public_prefixes;
mod pull;
mod sampling;
mod serve;
mod sessions;
mod shared;
mod status_page;
mod store;
mod tail_reuse;
mod tenants;
mod tokenizer;
