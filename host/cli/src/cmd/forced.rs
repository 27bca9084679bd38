//! Teacher forcing: whole token sequences through the model with the logits of chosen
//! positions, as llama.cpp's perplexity and logprob tools decode them. Sequences of equal length
//! share a forward pass when the batch holds several (llama-perplexity's `n_seq`); a sequence
//! longer than the batch is decoded in consecutive batches over its own K/V cache.

use anyhow::{Context, bail};
use memoria_model::llama::{BatchToken, KvDtype, Model, Scratch};

/// What to decode and how.
pub struct Forcing<'a> {
    /// The sequences, all of the same length.
    pub seqs: &'a [Vec<u32>],
    /// Tokens per forward pass (at least 1).
    pub batch: usize,
    /// K/V element type.
    pub kv: KvDtype,
    /// Whether position `pos` of a sequence needs its logits.
    pub wants: &'a dyn Fn(usize) -> bool,
}

/// Decodes every sequence and calls `sink(seq, pos, logits)` for each wanted position, in order
/// of sequence then position. Returns the number of forward passes.
pub fn decode(
    model: &Model,
    f: &Forcing,
    mut sink: impl FnMut(usize, usize, &[f32]) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let Some(len) = f.seqs.first().map(Vec::len) else {
        return Ok(0);
    };
    if f.seqs.iter().any(|s| s.len() != len) {
        bail!("teacher forcing: sequences of different lengths");
    }
    if len == 0 || f.batch == 0 {
        bail!("teacher forcing: empty sequence or batch");
    }
    let n_vocab = model.hparams().n_vocab;
    let group = (f.batch / len).max(1);
    let step = f.batch.min(len);
    let mut scratch = Scratch::default();
    let mut batch = Vec::with_capacity(group * step);
    let mut passes = 0;
    for first in (0..f.seqs.len()).step_by(group) {
        let seqs = &f.seqs[first..(first + group).min(f.seqs.len())];
        let mut kv = model.new_contiguous_kv(f.kv, seqs.len(), len);
        for start in (0..len).step_by(step) {
            let end = (start + step).min(len);
            batch.clear();
            for (si, s) in seqs.iter().enumerate() {
                batch.extend((start..end).map(|pos| BatchToken {
                    token: s[pos],
                    pos,
                    seq: si,
                    logits: (f.wants)(pos),
                }));
            }
            let logits = model
                .forward(&batch, &mut kv, &mut scratch)
                .context("forward pass")?;
            passes += 1;
            let mut rows = logits.chunks_exact(n_vocab);
            for t in batch.iter().filter(|t| t.logits) {
                let row = rows
                    .next()
                    .context("forward pass returned fewer logits than asked")?;
                sink(first + t.seq, t.pos, row)?;
            }
        }
    }
    Ok(passes)
}
