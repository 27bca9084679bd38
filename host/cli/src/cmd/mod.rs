//! One module per `memoria` subcommand.

pub mod bench;
mod forced;
mod hot;
pub mod inspect;
pub mod logprobs;
pub mod perplexity;
pub mod pull;
pub mod run;
pub mod serve;
mod serve_events;
pub mod serve_flags;
mod serve_tools;
mod softmax;
pub mod store;
pub mod synth;
pub mod tokenize;

/// The async runtime of a long-running server (`serve`, `route`): 2 to 4 worker threads.
pub fn server_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4)))
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Most compute threads `-t` may ask for.
pub const MAX_THREADS: usize = 1024;

/// Sizes the global rayon pool and the kernels' decode worker pool to the same thread count;
/// `0` keeps rayon's default (one thread per core, or `RAYON_NUM_THREADS`).
pub fn init_threads(threads: usize) -> anyhow::Result<()> {
    if threads > MAX_THREADS {
        anyhow::bail!(
            "-t / --threads / server.threads = {threads}: use 0 (one per core) to {MAX_THREADS}"
        );
    }
    if threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .map_err(|e| anyhow::anyhow!("thread pool: {e}"))?;
    }
    // Outside any rayon pool this is the global pool's size.
    memoria_kernels::threads::set_threads(rayon::current_num_threads())
        .map_err(|e| anyhow::anyhow!("worker pool: {e}"))
}
