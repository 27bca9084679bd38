//! Rotary position embedding. Angles follow ggml exactly: `theta_i = p * base^(-2i/n_dims)`
//! built by repeated f32 multiplication, scaled by `freq_scale`, then `cos`/`sin` in f32.
//! `Norm` rotates adjacent pairs (llama); `Neox` rotates pairs half the rotary width apart (qwen2).

/// How RoPE pairs dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs `(2i, 2i+1)`: llama.cpp's `LLAMA_ROPE_TYPE_NORM`.
    Norm,
    /// Pairs `(i, i + n_dims/2)`: llama.cpp's `LLAMA_ROPE_TYPE_NEOX`.
    Neox,
}

/// Precomputed parameters for rotating heads of one model.
#[derive(Clone, Debug)]
pub struct RopeTables {
    style: RopeStyle,
    n_dims: usize,
    freq_base: f32,
    freq_scale: f32,
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
        }
    }

    /// Fills `cos_sin` (`[n_dims/2][2]`) with the rotation of position `pos`.
    pub fn angles(&self, pos: usize, cos_sin: &mut [(f32, f32)]) {
        let theta_scale = self.freq_base.powf(-2.0 / self.n_dims as f32);
        let mut theta = pos as f32;
        for cs in cos_sin.iter_mut().take(self.n_dims / 2) {
            let t = self.freq_scale * theta;
            *cs = (t.cos(), t.sin());
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
