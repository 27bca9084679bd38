//! Text embeddings from the llama forward pass: the final hidden states (the residual stream
//! after the last block, normed with `output_norm` as the logits see it) mean-pooled over every
//! token and L2-normalised. Invariant: the result depends only on the tokens (each chunk is a
//! batch-invariant forward pass into a private cache), so equal inputs give equal vectors.

use memoria_kernels::ops::rms_norm;

use super::{BatchToken, KvDtype, Model, ModelError, Scratch};

/// Mean pooling of final hidden states, one owner for the maths `Model::embed` and the engine's
/// embedding jobs share: each row normed with `output_norm` (as the logits see it), summed in
/// f64 in row order, then averaged and L2-normalised by [`MeanPool::finish`]. Its buffers are
/// sized once, at creation.
#[derive(Clone, Debug)]
pub struct MeanPool {
    sum: Vec<f64>,    // [n_embd]
    normed: Vec<f32>, // [n_embd]
    rows: usize,
}

impl MeanPool {
    /// An empty pool for `model`'s width.
    pub fn new(model: &Model) -> MeanPool {
        let d = model.hparams().n_embd;
        MeanPool {
            sum: vec![0.0; d],
            normed: vec![0.0; d],
            rows: 0,
        }
    }

    /// Adds `hidden` (whole rows of `n_embd`: the residual stream after the last block, as
    /// [`Model::hidden_states`] gives it).
    pub fn add(&mut self, model: &Model, hidden: &[f32]) {
        let hp = model.hparams();
        let d = hp.n_embd;
        for row in hidden.chunks_exact(d) {
            rms_norm(
                row,
                &model.weights().output_norm,
                hp.rms_eps,
                &mut self.normed,
            );
            for (s, &v) in self.sum.iter_mut().zip(&self.normed) {
                *s += f64::from(v);
            }
            self.rows += 1;
        }
    }

    /// Rows added so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The mean of the rows, L2-normalised (zeros when nothing or only zeros were added).
    pub fn finish(&self) -> Vec<f32> {
        let n = self.rows.max(1) as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let norm = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        mean.iter().map(|v| (v * scale) as f32).collect()
    }
}

impl Model {
    /// The final hidden states (residual stream after the last block, before `output_norm`)
    /// of batch rows `rows` of the last [`Model::forward`] run with `scratch`.
    pub fn hidden_states<'s>(
        &self,
        scratch: &'s Scratch,
        rows: std::ops::Range<usize>,
    ) -> &'s [f32] {
        let d = self.hparams().n_embd;
        &scratch.x[rows.start * d..rows.end * d]
    }

    /// The embedding of `tokens`, `[n_embd]`, computed in forward passes of up to `n_batch`
    /// tokens into a private f32 cache. `tokens` must be non-empty and fit the model's
    /// training context. (A server computes embeddings through its engine instead, batched
    /// with every other session; this is the single-caller path for tools and tests.)
    pub fn embed(&self, tokens: &[u32], n_batch: usize) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::BadBatch("nothing to embed".into()));
        }
        let mut kv = self.new_contiguous_kv(KvDtype::F32, 1, tokens.len());
        let mut scratch = Scratch::default();
        let mut pool = MeanPool::new(self);
        let n_batch = n_batch.max(1);
        for (c, chunk) in tokens.chunks(n_batch).enumerate() {
            let batch: Vec<BatchToken> = chunk
                .iter()
                .enumerate()
                .map(|(i, &token)| BatchToken {
                    token,
                    pos: c * n_batch + i,
                    seq: 0,
                    logits: false,
                })
                .collect();
            self.forward(&batch, &mut kv, &mut scratch)?;
            pool.add(self, self.hidden_states(&scratch, 0..chunk.len()));
        }
        Ok(pool.finish())
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
