//! Text embeddings from the llama forward pass: the final hidden states (the residual stream
//! after the last block, normed with `output_norm` as the logits see it) mean-pooled over every
//! token and L2-normalised. Invariant: the result depends only on the tokens (each chunk is a
//! batch-invariant forward pass into a private cache), so equal inputs give equal vectors.

use memoria_kernels::ops::rms_norm;

use super::{BatchToken, KvDtype, Model, ModelError, Scratch};

impl Model {
    /// The embedding of `tokens`, `[n_embd]`, computed in forward passes of up to `n_batch`
    /// tokens. `tokens` must be non-empty and fit the model's training context.
    pub fn embed(&self, tokens: &[u32], n_batch: usize) -> Result<Vec<f32>, ModelError> {
        let hp = self.hparams();
        let d = hp.n_embd;
        if tokens.is_empty() {
            return Err(ModelError::BadBatch("nothing to embed".into()));
        }
        let mut kv = self.new_contiguous_kv(KvDtype::F32, 1, tokens.len());
        let mut scratch = Scratch::default();
        let mut sum = vec![0f64; d]; // [n_embd]
        let mut normed = vec![0f32; d]; // [n_embd]
        let n_batch = n_batch.max(1);
        for (c, chunk) in tokens.chunks(n_batch).enumerate() {
            let batch: Vec<BatchToken> = chunk
                .iter()
                .enumerate()
                .map(|(i, &token)| BatchToken {
                    token,
                    pos: c * n_batch + i,
                    seq: 0,
                    logits: i + 1 == chunk.len(),
                })
                .collect();
            self.forward(&batch, &mut kv, &mut scratch)?;
            for row in scratch.x[..chunk.len() * d].chunks_exact(d) {
                rms_norm(row, &self.weights().output_norm, hp.rms_eps, &mut normed);
                for (s, &v) in sum.iter_mut().zip(&normed) {
                    *s += f64::from(v);
                }
            }
        }
        let n = tokens.len() as f64;
        let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let norm = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        Ok(mean.iter().map(|v| (v * scale) as f32).collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::synth::demo;

    #[test]
    fn embeddings_are_normalised_deterministic_and_chunk_independent() {
        let model = demo::demo_model().expect("demo model");
        let tokens: Vec<u32> = (3..40).collect();
        let a = model.embed(&tokens, 512).expect("embed");
        let b = model.embed(&tokens, 7).expect("embed in chunks");
        assert_eq!(a.len(), model.hparams().n_embd);
        assert_eq!(a, b);
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        let other = model.embed(&tokens[..10], 512).expect("embed");
        assert_ne!(a, other);
    }
}
