//! `memoria store stats|verify|compact|clear|repair`: offline tools over a store directory (the
//! redb file written by `memoria run/serve --store DIR`), and the hidden `stress` child used by
//! the crash test. Also builds the store for commands that take `--store DIR`: with its disk
//! budgets, and (`serve --store-recover`) salvaging a damaged file into a fresh one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use memoria_kv::{NamespaceId, NamespaceSalt, NamespaceTable};
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_store::maintenance::RepairReport;
use memoria_store::{StoreOptions, TierStack, maintenance};

use crate::load::load_model;

/// The salt label `memoria run` (and the stress child) use for their namespace.
pub const CLI_SALT_LABEL: &str = "memoria-cli";

/// Opens the tier stack on `dir` with default options, when one is given.
pub fn open_store(dir: Option<&Path>) -> anyhow::Result<Option<Arc<TierStack>>> {
    open_store_with(dir, &StoreSettings::default())
}

/// The `[store]` settings `memoria serve` passes (None: the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreSettings {
    /// `max_disk_mb`.
    pub max_disk_bytes: Option<u64>,
    /// `max_saves_mb`.
    pub max_saves_bytes: Option<u64>,
    /// `cold_mb`, `page_cache_mb`, `write_queue_mb`.
    pub ram: crate::config::StoreRam,
    /// `--store-recover`: a damaged file is salvaged (what still reads goes on in a fresh file)
    /// and moved aside.
    pub recover: bool,
    /// Print the budgets in force on stderr.
    pub announce: bool,
}

/// Opens the tier stack on `dir` with `set`'s budgets, when one is given.
pub fn open_store_with(
    dir: Option<&Path>,
    set: &StoreSettings,
) -> anyhow::Result<Option<Arc<TierStack>>> {
    let Some(d) = dir else { return Ok(None) };
    let mut opts = StoreOptions::default();
    opts.disk.budget_bytes = set.max_disk_bytes.unwrap_or(0);
    opts.disk.saves_budget_bytes = set.max_saves_bytes.unwrap_or(0);
    if let Some(b) = set.ram.cold_bytes {
        opts.cold_budget_bytes = usize::try_from(b).unwrap_or(usize::MAX);
    }
    if let Some(b) = set.ram.page_cache_bytes {
        opts.disk.cache_bytes = usize::try_from(b).unwrap_or(usize::MAX);
    }
    if let Some(b) = set.ram.write_queue_bytes {
        opts.disk.queue_bytes = b;
    }
    // With --store-recover the store salvages a damaged file itself: one found at open (redb's
    // integrity check runs then) or met by a write later, and goes on with what still reads.
    opts.disk.recover = set.recover;
    let stack =
        TierStack::open(d, opts).with_context(|| format!("opening the store {}", d.display()))?;
    if set.announce
        && let Some(disk) = stack.disk()
    {
        let (budget, saves) = disk.budgets();
        let how = if set.max_disk_bytes.is_some() {
            "[store] max_disk_mb".to_string()
        } else {
            let pct = memoria_store::disk::budget::DEFAULT_FREE_FRACTION * 100.0;
            format!("default: {pct:.0}% of the filesystem's free space + the file")
        };
        eprintln!(
            "memoria: store {}: disk budget {} MiB ({how}), saved sessions {} MiB, file now {} MiB",
            d.display(),
            budget >> 20,
            saves >> 20,
            stack.snapshot().redb.file_bytes >> 20
        );
    }
    Ok(Some(Arc::new(stack)))
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Blocks, bytes, sessions, models and namespaces held by a store.
    Stats(PathArgs),
    /// Read and check every stored block and session; exits non-zero if any is bad.
    Verify(VerifyArgs),
    /// Compact the store file.
    Compact(PathArgs),
    /// Remove one namespace's blocks and sessions, or everything (asked, or `--yes`).
    Clear(ClearArgs),
    /// Repair a damaged store: redb's repair, then removal of bad entries; a file damaged beyond
    /// that is salvaged: every entry that still reads and verifies is copied into a fresh file,
    /// and the damaged one kept aside as memoria.redb.corrupt-<unix time>.
    Repair(PathArgs),
    /// Crash-test child: prefill random prompts and save them, printing `saved NAME` after each
    /// save is durable.
    #[command(hide = true)]
    Stress(StressArgs),
}

#[derive(Debug, Args)]
pub struct PathArgs {
    /// Store directory.
    #[arg(long = "store")]
    store: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    path: PathArgs,
    /// Remove the bad entries found.
    #[arg(long)]
    repair: bool,
}

#[derive(Debug, Args)]
pub struct ClearArgs {
    #[command(flatten)]
    path: PathArgs,
    /// Namespace to clear: one of the configuration's (`--config`; without it, those `memoria
    /// serve` has without a file), or `memoria-cli` (`memoria run`'s); all when absent.
    #[arg(long)]
    namespace: Option<String>,
    /// The host.toml whose `[namespaces]` `--namespace` names (as `memoria serve --config`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Without `--namespace`: remove everything without asking (required when stdin is not a
    /// terminal).
    #[arg(long)]
    yes: bool,
}

/// Whether clearing every namespace of the store in `dir` may go ahead: `--yes`, or an answer
/// `y`/`yes` to a question on a terminal; otherwise an error saying what to pass.
fn confirm_clear_all(dir: &Path, yes: bool) -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal};
    if yes {
        return Ok(());
    }
    let refuse = || {
        anyhow::anyhow!(
            "`memoria store clear` without --namespace removes every block and saved session of \
             every namespace in {}: pass --yes to do that, or --namespace NAME to clear one",
            dir.display()
        )
    };
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(refuse());
    }
    eprint!(
        "Remove every block and saved session of \
             every namespace in {}? [y/N] ",
        dir.display()
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(refuse()),
    }
}

#[derive(Debug, Args)]
pub struct StressArgs {
    #[arg(short = 'm', long)]
    model: PathBuf,
    #[arg(long = "store")]
    store: PathBuf,
    /// Sessions to prefill and save.
    #[arg(long, default_value_t = 1000)]
    rounds: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The salt of namespace `name` as `memoria serve` registers it: the namespaces of the
/// configuration at `config` (none: the built-in default), resolved and derived exactly as the
/// server does (`Tenants::registry_table`), else `memoria run`'s own namespace. A namespace
/// that is not isolated shares its salt (and so its blocks) with others; that is said on stderr.
fn namespace_salt(name: &str, config: Option<&Path>) -> anyhow::Result<NamespaceSalt> {
    let raw = match config {
        Some(p) => crate::config::RawConfig::load(p)?,
        None => crate::config::RawConfig::default(),
    };
    let cfg = crate::config::resolve(raw, &crate::config::Overrides::default())?;
    let tenants = crate::config::tenants(cfg.namespaces, cfg.remote.as_ref())?;
    let (table, id) = match tenants.get(name) {
        Some(ns) => {
            if ns.spec.isolation != memoria_tenant::Isolation::Isolated {
                eprintln!(
                    "memoria: namespace {name} is {}: its blocks are those of every namespace of that policy, and all are cleared",
                    ns.spec.isolation
                );
            }
            (tenants.registry_table(), ns.id)
        }
        None if name == CLI_SALT_LABEL => {
            let ns = NamespaceId(0);
            let entry = memoria_tenant::standalone(ns, CLI_SALT_LABEL);
            (NamespaceTable::new(None, [entry]), ns)
        }
        None => {
            let known: Vec<&str> = tenants.iter().map(|n| n.name.as_str()).collect();
            anyhow::bail!(
                "--namespace {name:?}: no such namespace in {} (it has {}; `{CLI_SALT_LABEL}` is memoria run's)",
                config.map_or_else(
                    || "the default configuration".into(),
                    |p| p.display().to_string()
                ),
                known.join(", ")
            );
        }
    };
    table
        .salt(id)
        .with_context(|| format!("namespace {name} has no salt"))
}

pub fn main(c: StoreCommand) -> anyhow::Result<()> {
    match c {
        StoreCommand::Stats(a) => {
            let s = maintenance::stats(&a.store)?;
            if a.json {
                println!("{}", serde_json::to_string(&s)?);
            } else {
                println!("file: {} bytes", s.file_bytes);
                println!(
                    "blocks: {} ({} bytes stored, {} bytes of K/V)",
                    s.blocks, s.block_bytes, s.raw_bytes
                );
                println!("sessions: {}", s.sessions);
                for (fp, desc) in &s.models {
                    println!("model {}: {desc}", &fp[..16]);
                }
                for (tag, (n, bytes)) in &s.namespaces {
                    println!("namespace {tag}: {n} blocks, {bytes} bytes");
                }
                for (enc, n) in &s.encodings {
                    println!("encoding {enc}: {n} blocks");
                }
                if s.unreadable > 0 {
                    println!("unreadable headers: {}", s.unreadable);
                }
            }
            Ok(())
        }
        StoreCommand::Verify(a) => {
            let r = maintenance::verify(&a.path.store, a.repair)?;
            if a.path.json {
                println!("{}", serde_json::to_string(&r)?);
            } else if let (Some(damage), Some(s)) = (&r.damage, &r.salvageable) {
                println!(
                    "file DAMAGED beyond redb's repair ({damage}) | `memoria store repair --store \
                     {}` would keep what still reads: {}",
                    a.path.store.display(),
                    s.summary()
                );
                for b in &r.bad {
                    println!("bad {} {}: {}", b.table, b.key, b.reason);
                }
            } else {
                println!(
                    "file {} | {} blocks, {} sessions{}{} checked | {} bad | {} removed",
                    if r.file_ok { "ok" } else { "DAMAGED" },
                    r.blocks_checked,
                    r.sessions_checked,
                    if r.hot_checked {
                        ", the hot prefixes"
                    } else {
                        ""
                    },
                    if r.routes_checked {
                        ", the routing keys"
                    } else {
                        ""
                    },
                    r.bad.len(),
                    r.removed
                );
                for b in &r.bad {
                    println!("bad {} {}: {}", b.table, b.key, b.reason);
                }
            }
            if r.damage.is_some() {
                anyhow::bail!(
                    "the store file is damaged; nothing was changed (run `memoria store repair \
                     --store {}`)",
                    a.path.store.display()
                );
            }
            anyhow::ensure!(r.ok(), "the store has {} bad entries", r.bad.len());
            Ok(())
        }
        StoreCommand::Compact(a) => {
            let (before, after) = maintenance::compact(&a.store)?;
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({"before_bytes": before, "after_bytes": after})
                );
            } else {
                println!("compacted: {before} -> {after} bytes");
            }
            Ok(())
        }
        StoreCommand::Clear(a) => {
            let salt = match a.namespace.as_deref() {
                Some(name) => Some(namespace_salt(name, a.config.as_deref())?),
                None => {
                    confirm_clear_all(&a.path.store, a.yes)?;
                    None
                }
            };
            let r = maintenance::clear(&a.path.store, salt)?;
            if a.path.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("removed {} blocks and {} sessions", r.blocks, r.sessions);
            }
            Ok(())
        }
        StoreCommand::Repair(a) => {
            let r = maintenance::repair(&a.store)?;
            if a.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                match &r {
                    RepairReport::Repaired {
                        rolled_back,
                        removed,
                    } => println!(
                        "repaired: {} | {removed} bad entries removed",
                        if *rolled_back {
                            "redb rolled the file back to its last intact commit"
                        } else {
                            "the file structure is intact"
                        }
                    ),
                    RepairReport::Salvaged(r) => {
                        println!(
                            "the file was damaged beyond redb's repair ({}); salvaged it ({}) \
                             into a fresh store file and moved the damaged file to {}",
                            r.reason,
                            r.summary(),
                            r.moved_to
                        );
                        for name in &r.lost_sessions {
                            println!("lost saved session {name}");
                        }
                    }
                }
            }
            Ok(())
        }
        StoreCommand::Stress(a) => stress(a),
    }
}

/// Deterministic pseudo-random tokens in `3..n_vocab`.
pub fn random_tokens(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (3 + x % (n_vocab as u64 - 3)) as u32
        })
        .collect()
}

fn stress(a: StressArgs) -> anyhow::Result<()> {
    let loaded = load_model(&a.model, true)?;
    let n_vocab = loaded.model.hparams().n_vocab;
    let store = open_store(Some(&a.store))?;
    let cfg = EngineConfig {
        store: store.map(|s| s as _),
        kv_budget_bytes: 1 << 20,
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(Arc::new(loaded.model), Arc::new(loaded.tokenizer), cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let ns = NamespaceId(0);
    engine
        .namespaces()
        .insert(memoria_tenant::standalone(ns, CLI_SALT_LABEL));
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    rt.block_on(async {
        for i in 0..a.rounds {
            let seed = a.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
            let len = 20 + (seed % 80) as usize;
            let session = engine.open(ns).await?;
            engine
                .append(ns, session, random_tokens(seed, len, n_vocab))
                .await?;
            engine.prefill(ns, session).await?;
            let name = format!("s{seed}");
            engine.save(ns, session, &name).await?;
            engine.close(ns, session).await?;
            writeln!(out, "saved {name} {len}")?;
            out.flush()?;
        }
        anyhow::Ok(())
    })?;
    engine.shutdown();
    Ok(())
}
