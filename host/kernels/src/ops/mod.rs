//! Element-wise and per-row ops of a llama layer: RMS norm, RoPE, softmax, SiLU- and GELU-gated
//! FFN activations, and attention (causal, optionally over a sliding window) over K/V read
//! through a caller-supplied indirection.
//!
//! Every op works on one row at a time with a fixed evaluation order, so results are identical
//! whatever batch a row is computed in (batch invariance). Formulas follow ggml's CPU backend
//! (sums of squares and softmax denominators in f64, RoPE angles by repeated f32 products).

mod activation;
mod attention;
mod attention_heads;
mod attention_split;
#[cfg(target_arch = "x86_64")]
mod attention_split_tile;
mod attention_tile;
mod exp;
mod gelu;
mod norm;
mod rope;
mod rows;
#[cfg(target_arch = "x86_64")]
mod rows_avx512;
#[cfg(target_arch = "x86_64")]
mod rows_tile;
#[cfg(target_arch = "x86_64")]
mod rows_tile_avx2;
mod softmax;

pub use activation::{
    add_in_place, gelu_mul_in_place, gelu_tanh, scale_in_place, silu, silu_mul_in_place,
    softcap_in_place, swiglu_oai_in_place,
};
pub use attention::{AttnScratch, AttnShape, KvRead, KvRow, attend};
pub use attention_heads::attend_heads;
pub use attention_split::{SplitScratch, attend_split};
pub use attention_tile::{TILE_ROWS, TileScratch, attend_tile};
pub use norm::rms_norm;
pub use rope::{RopeStyle, RopeTables, Yarn};
pub use rows::{
    axpy_rows_f16, axpy_rows_f32, dot_rows_f16, dot_rows_f32, extend_f16, round_to_f16_in_place,
};
pub use softmax::{softmax_in_place, softmax_with_sink_in_place};
