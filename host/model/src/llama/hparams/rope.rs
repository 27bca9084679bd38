//! RoPE hyper-parameters as llama.cpp derives them from `{arch}.rope.*`: the scaling type
//! (`none`, `linear`, `yarn`, `longrope`) and factor, YaRN's ramp and magnitude (its
//! `yarn_attn_factor` cancelled against the kernel's own factor, as `llama_context` does), the
//! file's `rope.scaling.attn_factor`, and the windowed layers' own base where the architecture
//! has one.

use memoria_kernels::ops::{RopeStyle, RopeTables, Yarn};

use super::{Arch, Keys, ModelError};

/// How one set of layers rotates Q and K.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    pub style: RopeStyle,
    /// Rotated dimensions of each head (the first `dims`; even, at most the head size).
    pub dims: usize,
    pub base: f32,
    /// `1 / scaling factor` (1 without scaling).
    pub freq_scale: f32,
    /// Multiplier of cos and sin (ggml's `attn_factor`).
    pub attn_factor: f32,
    /// YaRN's ramp, for `rope.scaling.type = yarn`.
    pub yarn: Option<Yarn>,
    /// Training context of the unscaled model (`rope.scaling.original_context_length`): LongRoPE
    /// uses its long factors past it.
    pub n_ctx_orig: usize,
}

impl RopeParams {
    /// The kernel tables for these parameters (frequency factors added by the caller).
    pub fn tables(&self) -> RopeTables {
        let t = RopeTables::new(self.style, self.dims, self.base, self.freq_scale)
            .with_attn_factor(self.attn_factor);
        match self.yarn {
            Some(y) => t.with_yarn(y),
            None => t,
        }
    }
}

/// `get_mscale` of `llama_context`: YaRN's magnitude for a scaling factor.
fn mscale(factor: f32, m: f32) -> f32 {
    if factor <= 1.0 {
        1.0
    } else {
        0.1 * m * factor.ln() + 1.0
    }
}

/// The global RoPE and, when the windowed layers rotate differently, theirs.
pub(super) fn read(
    k: &Keys,
    arch: Arch,
    head_dim: usize,
    n_ctx_train: usize,
    windowed: bool,
) -> Result<(RopeParams, Option<RopeParams>), ModelError> {
    let dims = match k.u64("rope.dimension_count") {
        Some(v) => usize::try_from(v).unwrap_or(usize::MAX),
        None => head_dim,
    };
    if dims == 0 || dims > head_dim || !dims.is_multiple_of(2) {
        return Err(k.bad(
            "rope.dimension_count",
            format!("{dims} with head size {head_dim}"),
        ));
    }
    let base = k.positive("rope.freq_base")?.unwrap_or(10000.0);
    let kind = k.str("rope.scaling.type").unwrap_or("linear");
    if !matches!(kind, "none" | "linear" | "yarn" | "longrope") {
        return Err(k.bad("rope.scaling.type", format!("{kind:?} is not supported")));
    }
    let factor = match k.f32("rope.scaling.factor") {
        Some(v) => Some(v),
        None => k.f32("rope.scale_linear"),
    };
    let factor = match factor {
        None => 1.0,
        Some(0.0) => 1.0,
        Some(v) if v.is_finite() && v > 0.0 => v,
        Some(v) => {
            return Err(k.bad("rope.scaling.factor", format!("{v} is not positive")));
        }
    };
    let freq_scale = if kind == "none" { 1.0 } else { 1.0 / factor };
    let n_ctx_orig = k.count_or(
        "rope.scaling.original_context_length",
        usize::MAX,
        n_ctx_train,
    )?;
    let file_attn_factor = k.positive("rope.scaling.attn_factor")?.unwrap_or(1.0);
    let (yarn, attn_factor) = if kind == "yarn" {
        let scale = 1.0 / freq_scale;
        // llama_context: YaRN's magnitude, divided by the one the kernel multiplies in again.
        let af = mscale(scale, 1.0) * (1.0 / (1.0 + 0.1 * scale.ln()));
        let y = Yarn::new(1.0, dims, n_ctx_orig, base, 32.0, 1.0);
        (Some(y), af * file_attn_factor)
    } else {
        (None, file_attn_factor)
    };
    let global = RopeParams {
        style: arch.rope_style(),
        dims,
        base,
        freq_scale,
        attn_factor,
        yarn,
        n_ctx_orig,
    };
    let local = match arch {
        _ if !windowed => None,
        // Gemma 3's local layers: base 10000 unless the file says, no scaling.
        Arch::Gemma3 => Some(RopeParams {
            base: k.positive("rope.freq_base_swa")?.unwrap_or(10000.0),
            freq_scale: 1.0,
            ..global
        }),
        // OLMo 2's windowed layers: no scaling, no YaRN (olmo2.cpp passes them explicitly).
        Arch::Olmo2 => Some(RopeParams {
            base: k.positive("rope.freq_base_swa")?.unwrap_or(base),
            freq_scale: 1.0,
            attn_factor: 1.0,
            yarn: None,
            ..global
        }),
        _ => k
            .positive("rope.freq_base_swa")?
            .map(|b| RopeParams { base: b, ..global }),
    };
    Ok((global, local))
}
