//! The `corrupt` miss reason end to end: a block damaged on disk between two runs of
//! `memoria serve --store` is a miss counted under `corrupt` in `/stats`, is never served, and
//! the answer stays the same.

use super::rewarm::{complete, n, start, stats, stop};
use crate::serve::server::temp_dir;

/// Flips a payload byte of every stored block; returns how many there were.
fn damage_blocks(store: &std::path::Path) -> usize {
    use memoria_store::disk::open_database;
    use memoria_store::disk::tables::BLOCKS;
    use redb::ReadableTable;
    let db = open_database(store).expect("open");
    let txn = db.begin_write().expect("write");
    let mut all = Vec::new();
    {
        let mut t = txn.open_table(BLOCKS).expect("blocks");
        for e in t.iter().expect("iter") {
            let (k, v) = e.expect("entry");
            all.push((k.value(), v.value().to_vec()));
        }
        for (k, v) in &mut all {
            let at = v.len() - 5;
            v[at] ^= 0x5a;
            t.insert(*k, v.as_slice()).expect("insert");
        }
    }
    txn.commit().expect("commit");
    all.len()
}

#[test]
fn store_serve_counts_a_damaged_disk_block_as_a_corrupt_miss_and_answers_the_same() {
    let dir = temp_dir("corrupt-miss");
    let store = dir.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!("[server]\nadmin_key = \"{}\"\n", super::rewarm::ADMIN),
    )
    .expect("config");
    let s = start("corrupt-miss-1", &cfg, &store);
    let (first, _) = complete(&s);
    stop(s);
    assert!(
        damage_blocks(&store) >= 2,
        "the prompt's blocks were written"
    );

    let s = start("corrupt-miss-2", &cfg, &store);
    let (text, cached) = complete(&s);
    assert_eq!(text, first, "the answer does not change");
    assert_eq!(cached, 0, "nothing damaged was served");
    let v = stats(&s);
    let misses = &v["state_cache"]["misses_by_reason"];
    assert_eq!(
        n(&misses["corrupt"]),
        1,
        "the walk stops at the first bad block: {v}"
    );
    assert!(n(&misses["tokens"]["corrupt"]) > 0, "{v}");
    assert_eq!(n(&v["tiers"]["disk"]["hits"]), 0, "{v}");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
