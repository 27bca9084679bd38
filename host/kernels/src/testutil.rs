//! Test-only helpers: a tiny deterministic PRNG and quantized test rows.

use crate::quant::quantize_row;
use crate::types::GgmlType;

/// xorshift64* — deterministic, dependency-free.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Roughly normal (sum of 4 uniforms), times `scale`.
    pub fn normal(&mut self, scale: f32) -> f32 {
        (self.uniform() + self.uniform() + self.uniform() + self.uniform()) * 0.866 * scale
    }

    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal(scale)).collect()
    }
}

/// Quantizes `x` (`[rows, cols]`) row by row to `ty`.
pub fn quantize_matrix(ty: GgmlType, x: &[f32], cols: usize) -> Vec<u8> {
    let rb = ty.row_bytes(cols).expect("block aligned");
    let rows = x.len() / cols;
    let mut out = vec![0u8; rows * rb];
    for (src, dst) in x.chunks_exact(cols).zip(out.chunks_exact_mut(rb)) {
        quantize_row(ty, src, dst).expect("lengths");
    }
    out
}

/// Extra error of an affine-weight dot (Q4_1, Q5_1 against Q8_1) beyond float reassociation: the
/// min term uses Q8_1's f16 `s` instead of the exact `d * Σq` of the dequantized activations, so
/// each block may differ by `|m| * |s|` times f16 rounding (2⁻¹¹ for `s`, 2⁻¹¹ for `d`).
/// Zero for other types.
pub fn affine_min_slack(ty: GgmlType, w: &[u8], x: &[u8]) -> f64 {
    if ty.vec_dot_type() != GgmlType::Q8_1 || ty == GgmlType::Q8_1 {
        return 0.0;
    }
    let f16_at = |b: &[u8], o: usize| half::f16::from_le_bytes([b[o], b[o + 1]]).to_f32() as f64;
    w.chunks_exact(ty.type_size())
        .zip(x.as_chunks::<36>().0)
        .map(|(wb, xb)| (f16_at(wb, 2) * f16_at(xb, 2)).abs() * 2.0f64.powi(-10))
        .sum()
}
