//! SIGKILL at random points of a child that prefills and saves sessions: after every kill the
//! store opens, verifies (every block and record), and holds every save the child acknowledged.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_kv::NamespaceId;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_store::{StoreOptions, TierStack, maintenance};

use super::{model, s, temp_store};

const KILLS: usize = 50;

/// Reads the child's lines until `ready`, lets it run `delay`, kills it, and returns the names
/// it acknowledged as saved.
fn run_and_kill(dir: &std::path::Path, seed: u64, delay: Duration) -> Vec<String> {
    let mut child = crate::bin::command()
        .args(["store", "stress", "-m", s(&model()), "--store", s(dir)])
        .args(["--seed", &seed.to_string(), "--rounds", "400"])
        .env("RUST_BACKTRACE", "0")
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn stress child");
    let stdout = child.stdout.take().expect("stdout");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "ready" {
                let _ = ready_tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    // The store exists once the child says `ready` (a kill before that would leave no store
    // to verify); a child that dies first closes the channel, and the checks below report it.
    let _ = ready_rx.recv_timeout(Duration::from_secs(120));
    std::thread::sleep(delay);
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let lines = reader.join().expect("reader");
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("saved "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn sigkill_at_random_points_never_loses_an_acknowledged_save() {
    let dir = temp_store("crash");
    let started = Instant::now();
    let mut x = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
    let mut acked: Vec<String> = Vec::new();
    for round in 0..KILLS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(x % 400);
        acked.extend(run_and_kill(&dir, round as u64 + 1, delay));
        let report = maintenance::verify(&dir, false).expect("the store opens after a kill");
        assert!(report.ok(), "round {round}: {report:?}");
        let stack = TierStack::open(&dir, StoreOptions::default()).expect("reopen");
        for name in &acked {
            let rec = stack
                .load_session(NamespaceId(0), name)
                .expect("read session")
                .unwrap_or_else(|| panic!("round {round}: acknowledged save {name} is gone"));
            assert!(rec.tokens.len() >= 20);
        }
        drop(stack);
        if round % 10 == 9 {
            let out = super::memoria(&["store", "verify", "--store", s(&dir)]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    assert!(!acked.is_empty(), "the child never got to save anything");
    restore_some(&dir, &acked);
    eprintln!(
        "{KILLS} kills, {} acknowledged saves, {:.1} s",
        acked.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Restores a few acknowledged saves through an engine and compares their logits with a fresh
/// computation of the same tokens.
fn restore_some(dir: &std::path::Path, acked: &[String]) {
    let load = || {
        let m = Model::load(model()).expect("model");
        let t = Tokenizer::from_gguf(m.gguf()).expect("tokenizer");
        (Arc::new(m), Arc::new(t))
    };
    let stack = Arc::new(TierStack::open(dir, StoreOptions::default()).expect("open"));
    let (m, t) = load();
    let cfg = EngineConfig {
        store: Some(stack.clone()),
        ..EngineConfig::default()
    };
    let with_store = EngineHandle::start(m, t, cfg).expect("engine");
    let (m, t) = load();
    let plain = EngineHandle::start(m, t, EngineConfig::default()).expect("engine");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let ns = NamespaceId(0);
    for e in [&with_store, &plain] {
        e.namespaces()
            .insert(memoria_tenant::standalone(ns, "memoria-cli"));
    }
    rt.block_on(async {
        for name in acked.iter().rev().take(3) {
            let restored = with_store.restore(ns, name).await.expect("restore");
            let tokens = with_store.tokens(ns, restored).await.expect("tokens");
            let got = with_store.prefill(ns, restored).await.expect("prefill");
            let s = plain.open(ns).await.expect("open");
            plain.append(ns, s, tokens).await.expect("append");
            let want = plain.prefill(ns, s).await.expect("prefill");
            assert_eq!(
                got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "restored {name}"
            );
        }
    });
    with_store.shutdown();
    plain.shutdown();
}
