//! Teacher forcing through the engine: whole token sequences computed by the engine's scoring
//! job (the batched pass, paged K/V and kernels that serve requests), with the logits rows of
//! the positions asked for, as llama.cpp's perplexity and logprob tools decode them. Each
//! sequence starts from an empty context (nothing is taken from the cache); sequences of equal
//! length are scored together, as many at once as a pass of `batch` tokens holds
//! (llama-perplexity's `n_seq`), and the engine's batch invariance keeps every row the same
//! whatever shares its pass.

use std::sync::Arc;

use anyhow::{Context, bail};
use memoria_kv::{KvElem, KvLayout, NamespaceId};
use memoria_model::llama::{KvDtype, Model};
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle};

/// What to decode and how.
pub struct Forcing<'a> {
    /// The sequences, all of the same length.
    pub seqs: &'a [Vec<u32>],
    /// Tokens per forward pass (at least 1).
    pub batch: usize,
    /// K/V element type.
    pub kv: KvDtype,
    /// The first position whose logits are wanted (every later one is).
    pub from: usize,
}

/// The namespace the sequences are computed in (the CLI's own, as `memoria run`'s).
const NS: NamespaceId = NamespaceId(0);

/// Decodes every sequence and calls `sink(seq, pos, logits)` for each wanted position, in order
/// of sequence then position. Returns the number of forward passes the engine ran.
pub fn decode(
    model: Arc<Model>,
    tok: Arc<Tokenizer>,
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
    let hp = model.hparams();
    let n_vocab = hp.n_vocab;
    let group = (f.batch / len).max(1).min(f.seqs.len());
    let elem = match f.kv {
        KvDtype::F32 => KvElem::F32,
        KvDtype::F16 => KvElem::F16,
    };
    let cfg = EngineConfig {
        kv_elem: elem,
        kv_budget_bytes: pool_bytes(&model, elem, group, len)?,
        step_tokens: f.batch,
        max_context: len,
        store: None,
        idle_ttl: None,
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(model, tok, cfg).context("starting the engine")?;
    engine
        .namespaces()
        .insert(memoria_tenant::standalone(NS, super::store::CLI_SALT_LABEL));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let steps_before = engine
        .stats()
        .steps
        .load(std::sync::atomic::Ordering::Relaxed);
    let from = f.from.min(len);
    for (g, seqs) in f.seqs.chunks(group).enumerate() {
        let rows = rt.block_on(async {
            let mut sessions = Vec::with_capacity(seqs.len());
            for s in seqs {
                sessions.push(engine.open_with(NS, s.clone()).await?);
            }
            // All asked at once, so the engine scores them in the same passes.
            let mut asked = tokio::task::JoinSet::new();
            for (i, &id) in sessions.iter().enumerate() {
                let e = engine.clone();
                asked.spawn(async move { (i, e.score_rows(NS, id, from).await) });
            }
            let mut scored: Vec<Vec<f32>> = vec![Vec::new(); sessions.len()];
            let mut failed = None;
            while let Some(done) = asked.join_next().await {
                match done {
                    Ok((i, Ok(rows))) => scored[i] = rows,
                    Ok((_, Err(e))) => failed = Some(anyhow::Error::from(e)),
                    Err(e) => failed = Some(anyhow::Error::from(e)),
                }
            }
            for &id in &sessions {
                let _ = engine.close(NS, id).await;
            }
            match failed {
                Some(e) => Err(e.context("scoring")),
                None => Ok(scored),
            }
        })?;
        for (i, rows) in rows.iter().enumerate() {
            if rows.len() != (len - from) * n_vocab {
                bail!("the engine returned fewer logits than asked");
            }
            for (k, row) in rows.chunks_exact(n_vocab).enumerate() {
                sink(g * group + i, from + k, row)?;
            }
        }
    }
    let steps = engine
        .stats()
        .steps
        .load(std::sync::atomic::Ordering::Relaxed)
        - steps_before;
    engine.shutdown();
    Ok(steps as usize)
}

/// A pool that holds `group` sequences of `len` tokens at once, with a block of slack each.
fn pool_bytes(model: &Model, elem: KvElem, group: usize, len: usize) -> anyhow::Result<usize> {
    let hp = model.hparams();
    let layout = KvLayout::new(hp.n_layer, hp.kv_dim(), elem);
    let block = layout.block_bytes().context("the model's K/V block size")?;
    let blocks = group.saturating_mul(len.div_ceil(layout.block_tokens) + 2);
    Ok(blocks.saturating_mul(block).max(1 << 20))
}
