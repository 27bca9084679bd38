//! One module per `memoria` subcommand.

pub mod bench;
pub mod inspect;
pub mod run;
pub mod serve;
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
