//! One module per `memoria` subcommand.

pub mod bench;
mod forced;
pub mod inspect;
pub mod logprobs;
pub mod perplexity;
pub mod pull;
pub mod run;
pub mod serve;
mod softmax;
pub mod store;
pub mod synth;
pub mod tokenize;

/// Sizes the global rayon pool; `0` keeps rayon's default (one thread per core).
pub fn init_threads(threads: usize) -> anyhow::Result<()> {
    if threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .map_err(|e| anyhow::anyhow!("thread pool: {e}"))?;
    }
    Ok(())
}
