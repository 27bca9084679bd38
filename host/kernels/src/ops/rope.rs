//! Rotary position embedding. Angles follow ggml's `rope_cache_init`/`rope_yarn` exactly:
//! `theta_i = p * base^(-2i/n_dims)` built by repeated f32 multiplication, divided by a
//! per-dimension frequency factor where the model has them (LongRoPE, Llama 3's
//! `rope_freqs`), scaled by `freq_scale`, ramped between interpolation and extrapolation for
//! YaRN, then `cos`/`sin` in f32 times the magnitude scale (`attn_factor`, and YaRN's
//! `1 + 0.1 ln(1/freq_scale)`). `Norm` rotates adjacent pairs (llama); `Neox` rotates pairs
//! half the rotary width apart (qwen2).

/// How RoPE pairs dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs `(2i, 2i+1)`: llama.cpp's `LLAMA_ROPE_TYPE_NORM`.
    Norm,
    /// Pairs `(i, i + n_dims/2)`: llama.cpp's `LLAMA_ROPE_TYPE_NEOX`.
    Neox,
}

/// YaRN's interpolation ramp (ggml's `ext_factor` and `corr_dims`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// Mix of extrapolation (0: plain interpolation).
    pub ext_factor: f32,
    /// Dimensions below `low` extrapolate, above `high` interpolate, ramped between.
    pub low: f32,
    pub high: f32,
}

impl Yarn {
    /// ggml's `ggml_rope_yarn_corr_dims` for `n_dims` rotary dimensions trained on
    /// `n_ctx_orig` positions with base `freq_base`.
    pub fn new(
        ext_factor: f32,
        n_dims: usize,
        n_ctx_orig: usize,
        freq_base: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Yarn {
        let corr_dim = |n_rot: f32| {
            n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * freq_base.ln())
        };
        let start = corr_dim(beta_fast).floor();
        let end = corr_dim(beta_slow).ceil();
        Yarn {
            ext_factor,
            low: start.max(0.0),
            high: end.min(n_dims as f32 - 1.0),
        }
    }

    /// ggml's `rope_yarn_ramp` for dimension pair `i` (`i0 / 2`).
    fn ramp(&self, i: usize) -> f32 {
        let y = (i as f32 - self.low) / (self.high - self.low).max(0.001);
        1.0 - y.clamp(0.0, 1.0)
    }
}

/// Precomputed parameters for rotating heads of one model.
#[derive(Clone, Debug)]
pub struct RopeTables {
    style: RopeStyle,
    n_dims: usize,
    freq_base: f32,
    freq_scale: f32,
    /// Magnitude scale of cos and sin (ggml's `attn_factor`), before YaRN's own factor.
    attn_factor: f32,
    yarn: Option<Yarn>,
    /// Per-pair divisors of the frequencies (`[n_dims / 2]`), if the model has them.
    freq_factors: Option<Vec<f32>>,
}

impl RopeTables {
    /// `n_dims` rotary dimensions (even, ≤ head size); `freq_scale` is 1/linear-scaling factor.
    pub fn new(style: RopeStyle, n_dims: usize, freq_base: f32, freq_scale: f32) -> Self {
        assert!(
            n_dims.is_multiple_of(2),
            "rope: rotary dimension count must be even"
        );
        RopeTables {
            style,
            n_dims,
            freq_base,
            freq_scale,
            attn_factor: 1.0,
            yarn: None,
            freq_factors: None,
        }
    }

    /// These tables with cos and sin multiplied by `attn_factor`.
    pub fn with_attn_factor(mut self, attn_factor: f32) -> Self {
        self.attn_factor = attn_factor;
        self
    }

    /// These tables with YaRN's ramp (no effect when `yarn.ext_factor` is 0).
    pub fn with_yarn(mut self, yarn: Yarn) -> Self {
        self.yarn = (yarn.ext_factor != 0.0).then_some(yarn);
        self
    }

    /// These tables with per-pair frequency divisors (`[n_dims / 2]`; panics otherwise).
    pub fn with_freq_factors(mut self, factors: Vec<f32>) -> Self {
        assert_eq!(factors.len(), self.n_dims / 2, "rope: one factor per pair");
        self.freq_factors = Some(factors);
        self
    }

    /// Fills `cos_sin` (`[n_dims/2][2]`) with the rotation of position `pos`.
    pub fn angles(&self, pos: usize, cos_sin: &mut [(f32, f32)]) {
        let theta_scale = self.freq_base.powf(-2.0 / self.n_dims as f32);
        let mut theta = pos as f32;
        for (i, cs) in cos_sin.iter_mut().take(self.n_dims / 2).enumerate() {
            let extrap = match &self.freq_factors {
                Some(f) => theta / f[i],
                None => theta,
            };
            let interp = self.freq_scale * extrap;
            let (t, mscale) = match &self.yarn {
                None => (interp, self.attn_factor),
                Some(y) => {
                    let mix = y.ramp(i) * y.ext_factor;
                    let t = interp * (1.0 - mix) + extrap * mix;
                    (
                        t,
                        self.attn_factor * (1.0 + 0.1 * (1.0 / self.freq_scale).ln()),
                    )
                }
            };
            *cs = (t.cos() * mscale, t.sin() * mscale);
            theta *= theta_scale;
        }
    }

    /// Rotates every head in `x` (`[n_heads, head_dim]`) by the angles in `cos_sin`.
    pub fn rotate(&self, x: &mut [f32], head_dim: usize, cos_sin: &[(f32, f32)]) {
        assert!(
            self.n_dims <= head_dim && x.len().is_multiple_of(head_dim),
            "rope: shape"
        );
        let half = self.n_dims / 2;
        for head in x.chunks_exact_mut(head_dim) {
            for (i, &(c, s)) in cos_sin.iter().take(half).enumerate() {
                let (a, b) = match self.style {
                    RopeStyle::Norm => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }

    /// Number of rotary dimensions.
    pub fn n_dims(&self) -> usize {
        self.n_dims
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_zero_is_identity_and_norm_preserved() {
        let rope = RopeTables::new(RopeStyle::Norm, 4, 10000.0, 1.0);
        let mut cs = [(0.0, 0.0); 2];
        rope.angles(0, &mut cs);
        let mut x = [1.0f32, 2.0, 3.0, 4.0];
        rope.rotate(&mut x, 4, &cs);
        assert_eq!(x, [1.0, 2.0, 3.0, 4.0]);
        for style in [RopeStyle::Norm, RopeStyle::Neox] {
            let rope = RopeTables::new(style, 4, 10000.0, 1.0);
            rope.angles(17, &mut cs);
            let mut y = [1.0f32, 2.0, 3.0, 4.0];
            rope.rotate(&mut y, 4, &cs);
            let n: f32 = y.iter().map(|v| v * v).sum();
            assert!((n - 30.0).abs() < 1e-4);
        }
    }

    /// Plain tables give ggml's angles: `freq_scale · theta` with no other factor.
    #[test]
    fn factors_of_one_change_nothing() {
        let plain = RopeTables::new(RopeStyle::Neox, 8, 10000.0, 0.5);
        let ones = RopeTables::new(RopeStyle::Neox, 8, 10000.0, 0.5)
            .with_freq_factors(vec![1.0; 4])
            .with_attn_factor(1.0)
            .with_yarn(Yarn::new(0.0, 8, 4096, 10000.0, 32.0, 1.0));
        let (mut a, mut b) = ([(0.0, 0.0); 4], [(0.0, 0.0); 4]);
        for pos in [0, 1, 77, 4097] {
            plain.angles(pos, &mut a);
            ones.angles(pos, &mut b);
            assert_eq!(a, b, "pos {pos}");
        }
        let mut theta = 77.0f32;
        plain.angles(77, &mut a);
        for &(c, s) in &a {
            assert_eq!((c, s), ((0.5 * theta).cos(), (0.5 * theta).sin()));
            theta *= 10000f32.powf(-2.0 / 8.0);
        }
    }

    /// YaRN as ggml computes it: dimensions below the ramp extrapolate (the unscaled angle),
    /// above it interpolate, and every pair's magnitude is `1 + 0.1 ln(factor)`.
    #[test]
    fn yarn_ramps_between_extrapolation_and_interpolation() {
        let (n, base, scale) = (64, 150000.0f32, 1.0 / 32.0);
        let y = Yarn::new(1.0, n, 4096, base, 32.0, 1.0);
        assert!(
            y.low > 0.0 && y.high < n as f32 - 1.0 && y.low < y.high,
            "{y:?}"
        );
        let rope = RopeTables::new(RopeStyle::Neox, n, base, scale).with_yarn(y);
        let mut cs = vec![(0.0, 0.0); n / 2];
        rope.angles(100, &mut cs);
        let m = 1.0 + 0.1 * 32f32.ln();
        let theta = |i: usize| 100.0 * base.powf(-2.0 * i as f32 / n as f32);
        let (c0, s0) = cs[0];
        assert!((c0 / m - theta(0).cos()).abs() < 1e-4 && (s0 / m - theta(0).sin()).abs() < 1e-4);
        let last = n / 2 - 1;
        let (cl, sl) = cs[last];
        let t = theta(last) * scale;
        assert!((cl / m - t.cos()).abs() < 1e-5 && (sl / m - t.sin()).abs() < 1e-5);
        for &(c, s) in &cs {
            assert!(((c * c + s * s).sqrt() - m).abs() < 1e-4);
        }
    }

    #[test]
    fn norm_style_rotates_adjacent_pairs() {
        let rope = RopeTables::new(RopeStyle::Norm, 2, 10000.0, 1.0);
        let mut cs = [(0.0, 0.0); 1];
        rope.angles(1, &mut cs);
        let mut x = [1.0f32, 0.0];
        rope.rotate(&mut x, 2, &cs);
        assert!((x[0] - 1f32.cos()).abs() < 1e-7 && (x[1] - 1f32.sin()).abs() < 1e-7);
    }
}
