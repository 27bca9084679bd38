//! The store against damage and pressure, through its public API only: a byte-flip loop over
//! the redb file (every offset class: header, table pages, data pages) where verify, open, reads
//! and repair never panic; the file held to its disk budget under a write loop; named saves
//! refused past their own budget with a "full" error.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc::channel;

use memoria_kv::{BlockHash, KvElem, KvLayout, ModelFingerprint, NamespaceId, NamespaceSalt};
use memoria_store::disk::tables::DB_FILE;
use memoria_store::maintenance::{self, RepairReport};
use memoria_store::{
    BlockIdentity, DiskOptions, Expect, SessionRecord, StoreError, StoreOptions, TierStack,
};

const MODEL: ModelFingerprint = ModelFingerprint([9; 32]);

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memoria-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn layout() -> KvLayout {
    KvLayout::new(4, 64, KvElem::F16).with_block_tokens(16)
}

/// (identity, tokens, data) of one stored block.
type Block = (BlockIdentity, Vec<u32>, Vec<u8>);

/// `n` blocks of one chain with incompressible data (16 KiB each).
fn blocks(salt: &NamespaceSalt, n: usize, seed: u64) -> Vec<Block> {
    let l = layout();
    let mut prev = BlockHash::root(&MODEL, l.elem, l.block_tokens, salt);
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            let tokens: Vec<u32> = (0..16).map(|t| (t + 16 * i as u32) ^ seed as u32).collect();
            prev = BlockHash::chain(&prev, &tokens);
            let data = (0..l.block_bytes().unwrap())
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let identity = BlockIdentity {
                model: MODEL,
                layout: l,
                salt: *salt,
                hash: prev,
            };
            (identity, tokens, data)
        })
        .collect()
}

fn record(salt: &NamespaceSalt, n_tokens: u32) -> SessionRecord {
    let tokens: Vec<u32> = (0..n_tokens).collect();
    let root = BlockHash::root(&MODEL, KvElem::F16, 16, salt);
    SessionRecord {
        model: MODEL,
        elem: KvElem::F16,
        block_tokens: 16,
        salt: *salt,
        hashes: SessionRecord::chain(&root, &tokens, 16),
        tokens,
    }
}

fn save(st: &TierStack, name: &str, rec: &SessionRecord) -> Result<(), StoreError> {
    let (tx, rx) = channel();
    st.save_session(
        NamespaceId(1),
        name,
        rec,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx.recv().expect("every save is answered")
}

fn opts(budget: u64, saves: u64) -> StoreOptions {
    StoreOptions {
        cold_budget_bytes: 0,
        disk: DiskOptions {
            budget_bytes: budget,
            saves_budget_bytes: saves,
            ..DiskOptions::default()
        },
        ..StoreOptions::default()
    }
}

/// Names of the saves the byte-flip store holds.
const SAVES: [&str; 8] = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];

/// The save `SAVES[i]` holds.
fn saved(salt: &NamespaceSalt, i: usize) -> SessionRecord {
    record(salt, 100 + 50 * i as u32)
}

/// What a serving engine could get from the store: the blocks it serves (indices into `all`)
/// and the saves it restores as saved (indices into [`SAVES`]).
#[derive(Debug, Default, PartialEq, Eq)]
struct Served {
    blocks: Vec<usize>,
    saves: Vec<usize>,
}

/// Reads every block and session through the stack (what a serving engine does).
fn serve_like(st: &TierStack, all: &[Block], salt: &NamespaceSalt) -> Served {
    let mut out = vec![0; layout().block_bytes().unwrap()];
    let mut served = Served::default();
    for (i, (id, tokens, data)) in all.iter().enumerate() {
        let e = Expect {
            model: MODEL,
            layout: layout(),
            hash: id.hash,
            root: None,
            salt: None,
            tokens: Some(tokens),
        };
        if st.fetch(&e, &mut out).is_some() {
            assert_eq!(&out, data, "a served block is exact");
            served.blocks.push(i);
        }
    }
    for (i, name) in SAVES.iter().enumerate() {
        if let Ok(Some(r)) = st.load_session(NamespaceId(1), name) {
            assert_eq!(r, saved(salt, i), "a restored save is what was saved");
            served.saves.push(i);
        }
    }
    served
}

/// The byte-flip offsets: every header field area, page starts spread over the file (table
/// roots and data leaves), the allocator state at the end, and pseudo-random bytes.
/// `MEMORIA_FLIP_STRIDE=N` adds every N-th byte (a longer run than CI's).
fn offsets(len: u64) -> Vec<u64> {
    let mut v: Vec<u64> = vec![
        0, 8, 16, 24, 32, 40, 48, 56, 64, 96, 128, 192, 256, 384, 512,
    ];
    if let Some(stride) = std::env::var("MEMORIA_FLIP_STRIDE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|s| *s > 0)
    {
        v.extend((0..len).step_by(stride).map(|o| o + 40));
    }
    let pages = len / 4096;
    for k in 0..12 {
        let page = 1 + k * pages.saturating_sub(2) / 11;
        v.push(page * 4096);
        v.push(page * 4096 + 40);
    }
    v.extend([
        8192,
        4096 + 8,
        len.saturating_sub(4096),
        len.saturating_sub(8),
    ]);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..9 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x % len.saturating_sub(4).max(1));
    }
    v.sort_unstable();
    v.dedup();
    v.retain(|o| o + 4 <= len);
    v
}

fn corrupt(file: &Path, pristine: &[u8], at: u64) {
    let mut b = pristine.to_vec();
    let at = at as usize;
    b[at..at + 4].copy_from_slice(&[0xFF; 4]);
    std::fs::write(file, b).unwrap();
}

#[derive(Debug, Default)]
struct Tally {
    verify_ok: usize,
    verify_failed: usize,
    open_ok: usize,
    open_refused: usize,
    repaired: usize,
    salvaged: usize,
    /// Cases where the file was damaged beyond redb's repair, yet a serving engine restored
    /// every save.
    damaged_yet_all_saves: usize,
    /// Cases where a new save on the opened file failed (the damage met by its write).
    saves_refused: usize,
}

/// One damage case: `verify` never makes the file worse, and everything a serving engine could
/// read from the damaged file (each block and each save) is still there after `repair`.
fn flip_case(
    d: &Path,
    pristine: &[u8],
    at: u64,
    all: &[Block],
    salt: &NamespaceSalt,
    t: &mut Tally,
) {
    let file = d.join(DB_FILE);
    corrupt(&file, pristine, at);
    let damaged = std::fs::read(&file).unwrap();
    let damage_found = match maintenance::verify(d, false) {
        Ok(r) if r.ok() => {
            t.verify_ok += 1;
            false
        }
        Ok(r) => {
            t.verify_failed += 1;
            if let Some(why) = &r.damage {
                let s = r.salvageable.as_ref().expect("what a repair would keep");
                assert!(!why.is_empty());
                assert_eq!(s.moved_to, "", "counting moves nothing");
                // Beyond redb's repair: verify left the file exactly as it was.
                assert!(
                    std::fs::read(&file).unwrap() == damaged,
                    "verify changed a damaged file at {at}"
                );
            }
            r.damage.is_some()
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            t.verify_failed += 1;
            false
        }
    };
    // What `memoria serve` gets from the damaged file.
    corrupt(&file, pristine, at);
    let before = match TierStack::open(d, opts(64 << 20, 0)) {
        Ok(st) => {
            t.open_ok += 1;
            let served = serve_like(&st, all, salt);
            let (id, tok, data) = &blocks(salt, 1, 99)[0];
            st.persist(*id, tok, data, true);
            let _ = st.flush();
            if let Err(e) = save(&st, "new", &record(salt, 20)) {
                let m = e.to_string();
                assert!(
                    e.is_damaged()
                        && m.contains("memoria store repair --store")
                        && m.contains("--store-recover"),
                    "at {at}: a save the damage refuses says what is wrong and what to run: {m}"
                );
                t.saves_refused += 1;
            }
            served
        }
        Err(e) => {
            t.open_refused += 1;
            if e.is_damaged() {
                let m = e.to_string();
                assert!(m.contains("memoria store repair"), "{m}");
                assert!(m.contains("--store-recover"), "{m}");
            }
            Served::default()
        }
    };
    if damage_found && before.saves.len() == SAVES.len() {
        t.damaged_yet_all_saves += 1;
    }
    corrupt(&file, pristine, at);
    match maintenance::repair(d).expect("repair always leaves a usable store") {
        RepairReport::Repaired { .. } => t.repaired += 1,
        RepairReport::Salvaged(r) => {
            t.salvaged += 1;
            assert!(Path::new(&r.moved_to).is_file(), "{r:?}");
            assert!(
                r.sessions_kept as usize >= before.saves.len(),
                "at {at}: {r:?}"
            );
            let _ = std::fs::remove_file(&r.moved_to);
        }
    }
    let after = maintenance::verify(d, false).expect("verify after repair");
    assert!(after.ok(), "after repair at {at}: {after:?}");
    let st = TierStack::open(d, opts(64 << 20, 0)).expect("open after repair");
    let kept = serve_like(&st, all, salt);
    let lost_saves: Vec<_> = before
        .saves
        .iter()
        .filter(|i| !kept.saves.contains(i))
        .collect();
    assert!(
        lost_saves.is_empty(),
        "at {at}: saves a serving engine restored before the repair and not after: {lost_saves:?}"
    );
    let lost_blocks: Vec<_> = before
        .blocks
        .iter()
        .filter(|i| !kept.blocks.contains(i))
        .collect();
    assert!(
        lost_blocks.is_empty(),
        "at {at}: blocks served before the repair and not after: {lost_blocks:?}"
    );
}

#[test]
fn byte_flips_never_panic_and_repair_keeps_every_save_serve_could_restore() {
    let d = dir("flip");
    let salt = NamespaceSalt::derive("flip");
    let all = blocks(&salt, 40, 7);
    {
        let st = TierStack::open(&d, opts(64 << 20, 0)).unwrap();
        for (id, t, data) in &all {
            assert!(st.persist(*id, t, data, true));
        }
        for (i, name) in SAVES.iter().enumerate() {
            save(&st, name, &saved(&salt, i)).unwrap();
        }
        st.flush().unwrap();
        let served = serve_like(&st, &all, &salt);
        assert_eq!(
            (served.blocks.len(), served.saves.len()),
            (all.len(), SAVES.len())
        );
    }
    let file = d.join(DB_FILE);
    let pristine = std::fs::read(&file).unwrap();
    let offs = offsets(pristine.len() as u64);
    assert!(offs.len() >= 45, "{} offsets", offs.len());
    let mut tally = Tally::default();
    let mut failed = Vec::new();
    for &at in &offs {
        let r = catch_unwind(AssertUnwindSafe(|| {
            flip_case(&d, &pristine, at, &all, &salt, &mut tally)
        }));
        if let Err(p) = r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{at}: {msg}"));
        }
    }
    eprintln!("byte flips at {} offsets: {tally:?}", offs.len());
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
    assert_eq!(tally.verify_ok + tally.verify_failed, offs.len());
    assert!(tally.verify_failed > 0, "some flips must be detected");
    assert!(
        tally.damaged_yet_all_saves > 0,
        "some flips damage the file beyond redb's repair and leave every save readable: {tally:?}"
    );
    assert_eq!(tally.repaired + tally.salvaged, offs.len());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_file_stays_within_its_disk_budget() {
    let d = dir("budget");
    let salt = NamespaceSalt::derive("budget");
    let budget: u64 = 8 << 20;
    let all = blocks(&salt, 2000, 3);
    let st = TierStack::open(&d, opts(budget, 0)).unwrap();
    let mut peak = 0;
    for chunk in all.chunks(50) {
        for (id, t, data) in chunk {
            st.persist(*id, t, data, true);
        }
        st.flush().unwrap();
        peak = peak.max(std::fs::metadata(d.join(DB_FILE)).unwrap().len());
    }
    let s = st.snapshot().redb;
    let file = std::fs::metadata(d.join(DB_FILE)).unwrap().len();
    eprintln!(
        "budget {budget}: file {file} bytes (peak {peak}), {} blocks ({} bytes, {} charged), \
         {} evictions, {} MiB written",
        s.blocks,
        s.bytes,
        s.charged_bytes,
        s.evictions,
        s.bytes_written >> 20
    );
    assert!(
        s.bytes_written > 3 * budget,
        "the loop wrote well past the budget"
    );
    assert!(s.evictions > 0);
    assert!(s.charged_bytes <= budget);
    assert_eq!(s.budget_bytes, budget);
    assert_eq!(s.file_bytes, file);
    // Measured: 8.9 MB for an 8 MiB budget (redb's file growth and copy-on-write pages).
    let slack = budget / 8;
    assert!(
        peak <= budget + slack,
        "peak file {peak} > {budget} + {slack}"
    );
    // The most recently written blocks are the ones kept.
    let mut out = vec![0; layout().block_bytes().unwrap()];
    let (id, t, _) = all.last().unwrap();
    let e = Expect {
        model: MODEL,
        layout: layout(),
        hash: id.hash,
        root: None,
        salt: None,
        tokens: Some(t),
    };
    assert!(st.fetch(&e, &mut out).is_some());
    drop(st);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn saves_past_their_budget_are_refused_as_full() {
    let d = dir("saves");
    let salt = NamespaceSalt::derive("saves");
    let st = TierStack::open(&d, opts(8 << 20, 64 << 10)).unwrap();
    let rec = record(&salt, 1000);
    let mut saved = 0;
    let err = loop {
        match save(&st, &format!("s{saved}"), &rec) {
            Ok(()) => saved += 1,
            Err(e) => break e,
        }
        assert!(saved < 100, "the saves' budget never filled");
    };
    assert!(err.is_full(), "{err}");
    assert!(matches!(err, StoreError::SavesFull { .. }), "{err}");
    assert!(err.to_string().contains("max_saves_mb"), "{err}");
    assert!(saved >= 4, "{saved} saves fit in 64 KiB");
    // Replacing a save of the same name needs no more room; blocks still go to disk.
    save(&st, "s0", &rec).expect("a same-name save replaces");
    let s = st.snapshot().redb;
    assert!(s.saves_bytes <= 64 << 10 && s.saves_budget_bytes == 64 << 10);
    let (id, t, data) = &blocks(&salt, 1, 5)[0];
    assert!(st.persist(*id, t, data, true));
    st.flush().unwrap();
    drop(st);
    // The charge is rebuilt on reopen.
    let st = TierStack::open(&d, opts(8 << 20, 64 << 10)).unwrap();
    assert_eq!(st.snapshot().redb.saves_bytes, s.saves_bytes);
    assert!(save(&st, "one-more", &rec).is_err_and(|e| e.is_full()));
    assert!(st.load_session(NamespaceId(1), "s1").unwrap().is_some());
    drop(st);
    let _ = std::fs::remove_dir_all(&d);
}
