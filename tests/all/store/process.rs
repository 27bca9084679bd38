//! Restart and corruption across processes: `memoria run --store` twice on the same store.

use serde_json::Value;

use super::{memoria, model, s, temp_store};

const PROMPT: &str = "Once upon a time there was a little girl named Lily who loved to play \
                      outside in the sunshine with her dog and her friends every single day";

/// One `memoria run --json --store` with greedy sampling: (JSON, prompt logits).
fn run(store: &std::path::Path, tag: &str) -> (Value, Vec<f32>) {
    let logits = store.with_file_name(format!(
        "{}-{tag}-logits.json",
        store
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("store")
    ));
    let out = memoria(&[
        "run",
        "-m",
        s(&model()),
        "-p",
        PROMPT,
        "-n",
        "12",
        "--temp",
        "0",
        "-t",
        "2",
        "--json",
        "--store",
        s(store),
        "--logits-out",
        s(&logits),
    ]);
    assert!(
        out.status.success(),
        "run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let l: Vec<f32> =
        serde_json::from_str(&std::fs::read_to_string(&logits).expect("logits")).expect("parse");
    let _ = std::fs::remove_file(&logits);
    (v, l)
}

fn full_blocks_before_last(v: &Value) -> u64 {
    let n = v["prompt_tokens"].as_array().expect("prompt_tokens").len() as u64;
    (n - 1) / 16 * 16
}

#[test]
fn a_restarted_process_serves_the_prefix_from_the_store_with_identical_output() {
    let dir = temp_store("restart");
    let (first, l1) = run(&dir, "1");
    assert_eq!(first["cached_tokens"], 0);
    assert!(first["store"]["redb"]["puts"].as_u64().unwrap() >= 2);
    let (second, l2) = run(&dir, "2");
    let cached = full_blocks_before_last(&second);
    assert!(cached >= 32, "the prompt spans at least two blocks");
    // Every full block before the last prompt token came from disk: none was prefilled.
    assert_eq!(second["cached_tokens"].as_u64(), Some(cached));
    assert_eq!(second["store"]["redb"]["hits"].as_u64(), Some(cached / 16));
    assert_eq!(second["tokens"], first["tokens"]);
    assert_eq!(second["text"], first["text"]);
    assert_eq!(
        l1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        l2.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrites every stored block with `f` applied to its bytes.
fn tamper(dir: &std::path::Path, f: impl Fn(usize, &mut Vec<u8>)) -> usize {
    use memoria_store::disk::open_database;
    use memoria_store::disk::tables::BLOCKS;
    use redb::ReadableTable;
    let db = open_database(dir).expect("open");
    let txn = db.begin_write().expect("write");
    let n;
    {
        let mut t = txn.open_table(BLOCKS).expect("blocks");
        let mut all = Vec::new();
        for e in t.iter().expect("iter") {
            let (k, v) = e.expect("entry");
            all.push((k.value(), v.value().to_vec()));
        }
        n = all.len();
        for (i, (k, mut v)) in all.into_iter().enumerate() {
            f(i, &mut v);
            t.insert(k, v.as_slice()).expect("insert");
        }
    }
    txn.commit().expect("commit");
    n
}

#[test]
fn corrupted_stored_blocks_are_misses_removed_and_change_nothing() {
    let dir = temp_store("corrupt");
    let (first, l1) = run(&dir, "1");
    // Flip one payload byte in even blocks, truncate odd ones.
    let n = tamper(&dir, |i, v| {
        if i % 2 == 0 {
            let at = v.len() - 5;
            v[at] ^= 0x5a;
        } else {
            v.truncate(v.len() / 2);
        }
    });
    assert!(n >= 2);
    let bad = memoria(&["store", "verify", "--store", s(&dir)]);
    assert!(!bad.status.success(), "verify must fail on a damaged store");
    let (second, l2) = run(&dir, "2");
    let redb = &second["store"]["redb"];
    let hit_blocks = full_blocks_before_last(&second) / 16;
    assert_eq!(redb["hits"], 0);
    assert_eq!(
        redb["corrupt_removed"].as_u64(),
        Some(1),
        "the walk stops at the first bad block"
    );
    assert!(hit_blocks >= 2);
    assert_eq!(second["cached_tokens"], 0, "nothing corrupt was served");
    assert_eq!(second["tokens"], first["tokens"]);
    assert_eq!(
        l1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        l2.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // The recomputed blocks were written again; repair removes what was never read.
    let repair = memoria(&["store", "verify", "--repair", "--store", s(&dir)]);
    let report = String::from_utf8_lossy(&repair.stdout).to_string();
    let ok = memoria(&["store", "verify", "--store", s(&dir)]);
    assert!(
        ok.status.success(),
        "after repair: {report} / {}",
        String::from_utf8_lossy(&ok.stdout)
    );
    // Blocks removed on read were recomputed and written again; the rest comes back as the
    // chain is recomputed run by run.
    let (third, l3) = run(&dir, "3");
    assert!(third["cached_tokens"].as_u64() >= Some(16));
    assert_eq!(third["tokens"], first["tokens"]);
    assert_eq!(
        l3.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        l1.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn store_cli_reports_compacts_and_clears_by_namespace() {
    let dir = temp_store("cli");
    run(&dir, "1");
    let stats = memoria(&["store", "stats", "--json", "--store", s(&dir)]);
    assert!(stats.status.success());
    let v: Value = serde_json::from_slice(&stats.stdout).expect("json");
    let blocks = v["blocks"].as_u64().expect("blocks");
    assert!(blocks >= 2);
    assert_eq!(v["models"].as_object().map(|m| m.len()), Some(1));
    assert!(
        memoria(&["store", "compact", "--store", s(&dir)])
            .status
            .success()
    );
    let other = memoria(&[
        "store",
        "clear",
        "--json",
        "--namespace",
        "someone-else",
        "--store",
        s(&dir),
    ]);
    // A name no configuration or tool gives a namespace is refused, naming it.
    assert!(!other.status.success());
    assert!(String::from_utf8_lossy(&other.stderr).contains("\"someone-else\""));
    let ours = memoria(&[
        "store",
        "clear",
        "--json",
        "--namespace",
        "memoria-cli",
        "--store",
        s(&dir),
    ]);
    let v: Value = serde_json::from_slice(&ours.stdout).expect("json");
    assert_eq!(v["blocks"].as_u64(), Some(blocks));
    let missing = memoria(&["store", "stats", "--store", s(&dir.join("nope"))]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not a memoria store"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn store_clear_without_a_namespace_removes_nothing_unless_confirmed_with_yes() {
    let dir = temp_store("clear-all");
    run(&dir, "1");
    let blocks = || {
        let out = memoria(&["store", "stats", "--json", "--store", s(&dir)]);
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        v["blocks"].as_u64().expect("blocks")
    };
    let before = blocks();
    assert!(before >= 2);
    // No terminal to ask on (stdin is not one here): refused, saying what to pass.
    let refused = memoria(&["store", "clear", "--store", s(&dir)]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("--yes") && err.contains("--namespace"),
        "{err}"
    );
    assert_eq!(blocks(), before, "nothing removed");
    let all = memoria(&["store", "clear", "--json", "--yes", "--store", s(&dir)]);
    assert!(
        all.status.success(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    let v: Value = serde_json::from_slice(&all.stdout).expect("json");
    assert_eq!(v["blocks"].as_u64(), Some(before));
    assert_eq!(blocks(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
