//! `memoria bench`: with flags alone, prompt-processing and generation speed of one model (like
//! llama-bench); with a subcommand, a workload benchmark (batched decoding, shared prefixes, ...).

mod batched;
mod client;
mod cluster;
mod model;
mod prefix;
mod procs;
mod restart;
mod serve;
mod speculate;
mod tokens;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    sub: Option<BenchCommand>,
    #[command(flatten)]
    model: model::ModelBenchArgs,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Continuous batching of B sessions, like llama-batched-bench.
    Batched(batched::BatchedArgs),
    /// The remote tier between hosts: TTFT of a prefix another host computed, the routed
    /// shared-prompt round, decode with write-behind.
    Cluster(cluster::ClusterArgs),
    /// Many concurrent sessions sharing a long prefix.
    Prefix(prefix::PrefixArgs),
    /// TTFT computed, hot and after a restart from the redb tier; store write cost.
    Restart(restart::RestartArgs),
    /// Load a running `memoria serve` with clients sharing a system prompt.
    Serve(serve::ServeBenchArgs),
    /// Decode speed with speculative decoding off and on, on editing, quoting, agent-loop and
    /// story requests (the tokens must be equal).
    Speculate(speculate::SpeculateArgs),
}

pub fn main(a: BenchArgs) -> anyhow::Result<()> {
    match a.sub {
        None => model::main(a.model),
        Some(BenchCommand::Batched(b)) => batched::main(b),
        Some(BenchCommand::Cluster(c)) => cluster::main(c),
        Some(BenchCommand::Prefix(p)) => prefix::main(p),
        Some(BenchCommand::Restart(r)) => restart::main(r),
        Some(BenchCommand::Serve(s)) => serve::main(s),
        Some(BenchCommand::Speculate(s)) => speculate::main(s),
    }
}
