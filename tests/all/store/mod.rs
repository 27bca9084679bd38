//! The persistent prefix-state store end to end: restarts served from disk, SIGKILL
//! crashes that never lose an acknowledged save, corrupted stored blocks that are misses and
//! never change output, namespace isolation, and durable session save/restore with
//! bit-identical logits; the remote tier between two hosts on a real Valkey/Redis
//! server or a 3-node Redis Cluster, named saves included, the server flushed or evicting under a tiny `maxmemory`, and `memoria bench cluster` on it; hot prefixes re-warmed and pinned again after a restart; partial tails kept on disk and reused after a restart. Process-level
//! tests spawn the CLI; the rest run engines in-process.

mod bench_cluster;
mod clear_config;
mod corrupt_serve;
mod crash;
mod damage;
mod engine;
mod process;
mod remote;
mod remote_cluster_serve;
mod remote_faults;
mod remote_long;
mod remote_saves;
mod remote_serve;
pub(crate) mod rewarm;
mod tails;
mod tails_serve;

use std::path::{Path, PathBuf};
use std::process::Output;

pub fn temp_store(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memoria-store-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn memoria(args: &[&str]) -> Output {
    crate::bin::command()
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn memoria")
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

pub fn model() -> PathBuf {
    crate::shared::path("models/stories260K-f32.gguf")
}
