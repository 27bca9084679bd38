//! Damage only a write reveals (hardening probe 2, "FF FF FF FF at 8192"): in a store file of a
//! few MiB, four bytes `FF` at offset 8192 land in a b-tree page that opening the file and
//! reading `meta` never visit; the first write then panics inside redb (contained) and stopped
//! the writer for good, and `--store-recover` did not move the file aside since the open had
//! succeeded. With `recover`, redb's integrity check at open finds the damage and the file is
//! moved aside; damage done after the open is met by a write, and the writer moves the file
//! aside then. Either way the store writes again.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;

use super::tables::DB_FILE;
use super::{DiskOptions, RedbTier};
use crate::tier::Tier;

/// Where the probe wrote its four bytes.
const AT: u64 = 8192;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memoria-damage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn hash(i: u64) -> BlockHash {
    let mut h = [0u8; 32];
    h[..8].copy_from_slice(&i.to_le_bytes());
    h[8] = 0xDA;
    BlockHash(h)
}

/// Block `i` as the codec stores it (8 KiB of K/V, raw: it verifies under [`hash`]`(i)`).
fn value(i: u64) -> Vec<u8> {
    use memoria_kv::{KvElem, KvLayout, ModelFingerprint, NamespaceSalt};
    let layout = KvLayout::new(2, 64, KvElem::F16).with_block_tokens(16);
    let identity = crate::codec::BlockIdentity {
        model: ModelFingerprint([7; 32]),
        layout,
        salt: NamespaceSalt([3; 32]),
        hash: hash(i),
    };
    let data: Vec<u8> = (0..layout.block_bytes().unwrap() as u64)
        .map(|j| (j * 31 + i * 7) as u8)
        .collect();
    let tokens: Vec<u32> = (0..16).collect();
    crate::codec::encode(&identity, &tokens, &data, crate::codec::Encoding::Raw).unwrap()
}

/// Puts one new block and flushes (one durable commit: the file's layout is deterministic).
fn write_one(tier: &RedbTier, i: u64) -> Result<(), crate::StoreError> {
    tier.put(&hash(i), value(i));
    tier.flush()
}

/// A closed store in `dir` with a model registered (as the engine does first) and `n` blocks
/// of 10 KB, each in its own commit.
fn store_with_blocks(dir: &Path, n: u64) {
    let tier = RedbTier::open(dir, DiskOptions::default()).expect("open");
    tier.flush().expect("the first commit");
    tier.register_model([7; 32], "n_layer=2 kv_dim=64 elem=f16 block=16".into());
    tier.flush().expect("the model's commit");
    for i in 0..n {
        write_one(&tier, i).expect("write");
    }
    assert_eq!(tier.stats().snapshot().blocks, n);
}

fn write_ff(file: &Path, at: u64) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .expect("open the store file");
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[0xFF; 4]).unwrap();
    f.sync_all().unwrap();
}

fn moved_aside(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{DB_FILE}.corrupt-")))
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn recover_opts() -> DiskOptions {
    DiskOptions {
        recover: true,
        // No page cache: what the writer reads comes from the file.
        cache_bytes: 0,
        ..DiskOptions::default()
    }
}

/// The new file takes writes and keeps them.
fn writes_again(dir: &Path, tier: RedbTier) {
    assert!(tier.failure().is_none(), "{:?}", tier.failure());
    write_one(&tier, 2_000_000).expect("a write after the recovery");
    assert!(tier.on_disk(&hash(2_000_000)));
    assert!(tier.get(&hash(2_000_000)).is_some());
    drop(tier);
    let tier = RedbTier::open(dir, DiskOptions::default()).expect("reopen");
    assert!(tier.get(&hash(2_000_000)).is_some(), "kept across a reopen");
    drop(tier);
    let mut db = super::open_database(dir).expect("open");
    assert!(
        db.check_integrity().expect("check"),
        "the new file is intact"
    );
}

#[test]
fn probe_2_ff_at_8192_with_recover_moves_the_file_aside_and_writes_again() {
    let dir = temp_dir("at-8192");
    store_with_blocks(&dir, 40);
    write_ff(&dir.join(DB_FILE), AT);
    let e = crate::maintenance::check(&dir).expect_err("the page is in use");
    assert!(e.is_damaged(), "{e}");
    let readable = crate::salvage::count(&dir, e.damage()).expect("count");
    assert!(
        readable.readable && readable.blocks_kept > 0,
        "{readable:?}"
    );
    let tier = RedbTier::open(&dir, recover_opts()).expect("recover opens a salvaged store");
    assert_eq!(moved_aside(&dir).len(), 1, "the damaged file is kept aside");
    assert_eq!(
        tier.stats().snapshot().blocks,
        readable.blocks_kept,
        "every block that still reads is kept"
    );
    for i in 0..40 {
        if tier.on_disk(&hash(i)) {
            assert_eq!(tier.get(&hash(i)).map(|v| !v.is_empty()), Some(true));
        }
    }
    writes_again(&dir, tier);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_2_damage_a_plain_open_misses_is_found_by_the_check_with_recover() {
    let dir = temp_dir("check");
    store_with_blocks(&dir, 40);
    let file = dir.join(DB_FILE);
    let pristine = std::fs::read(&file).unwrap();
    // A block's bytes (mid-page, past the leaf's header): no open reads them, the check does.
    let pages = pristine.len() as u64 / 4096;
    let at = (pages / 2..pages)
        .map(|p| p * 4096 + 2048)
        .find(|&at| {
            std::fs::write(&file, &pristine).unwrap();
            write_ff(&file, at);
            let plain = super::open_database(&dir).map(drop);
            let checked = super::open_database_checked(&dir, 1 << 20, true).map(drop);
            plain.is_ok() && checked.is_err_and(|e| e.is_damaged())
        })
        .expect("some block byte that only the check reads");
    std::fs::write(&file, &pristine).unwrap();
    write_ff(&file, at);
    let e = super::open_database_checked(&dir, 1 << 20, true).expect_err("damaged");
    assert!(e.to_string().contains("--store-recover"), "{e}");
    assert!(moved_aside(&dir).is_empty());
    let tier = RedbTier::open(&dir, recover_opts()).expect("recover opens a fresh store");
    assert_eq!(
        moved_aside(&dir).len(),
        1,
        "damage at {at} moves the file aside"
    );
    writes_again(&dir, tier);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes new blocks until one meets the damage (a page redb still holds in memory from the
/// open's check is not read again; the next one is); returns that write's error.
fn write_until_damage(tier: &RedbTier) -> crate::StoreError {
    (1_000_000..1_000_064)
        .find_map(|i| write_one(tier, i).err())
        .expect("a write meets the damage")
}

/// Damages the header of every page but the file's own header (page 0), under an open tier.
fn damage_every_page(file: &Path) {
    let len = std::fs::metadata(file).unwrap().len();
    for at in (4096..len).step_by(4096) {
        write_ff(file, at);
    }
}

#[test]
fn probe_2_damage_met_by_a_write_stops_the_writer_without_recover() {
    let dir = temp_dir("write-stop");
    store_with_blocks(&dir, 40);
    let opts = DiskOptions {
        recover: false,
        ..recover_opts()
    };
    let tier = RedbTier::open(&dir, opts).expect("the file is intact at open");
    tier.flush().expect("the first commit");
    damage_every_page(&dir.join(DB_FILE));
    let e = write_until_damage(&tier);
    assert!(e.is_damaged(), "{e}");
    assert!(e.to_string().contains("memoria store repair"), "{e}");
    std::thread::sleep(Duration::from_millis(50));
    assert!(tier.failure().is_some_and(|f| f.is_damaged()), "stopped");
    assert!(
        moved_aside(&dir).is_empty(),
        "nothing is moved without recover"
    );
    assert_eq!(tier.stats().snapshot().recoveries, 0);
    drop(tier);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_2_damage_met_by_a_write_with_recover_moves_the_file_aside_and_writes_again() {
    let dir = temp_dir("write-recover");
    store_with_blocks(&dir, 40);
    let tier = RedbTier::open(&dir, recover_opts()).expect("the file is intact at open");
    tier.flush().expect("the first commit");
    assert!(moved_aside(&dir).is_empty());
    assert!(tier.on_disk(&hash(0)));
    damage_every_page(&dir.join(DB_FILE));
    // The writer may move the file aside before the flush that met the damage returns, so
    // that flush can report either the damage or success: write until either is seen.
    let met = (1_000_000..1_000_064).find_map(|i| match write_one(&tier, i) {
        Err(e) => Some(Some(e)),
        Ok(()) if tier.stats().snapshot().recoveries > 0 => Some(None),
        Ok(()) => None,
    });
    match met.expect("a write meets the damage") {
        Some(e) => assert!(e.is_damaged(), "{e}"),
        None => assert_eq!(tier.stats().snapshot().recoveries, 1),
    }
    wait_for("the writer to start a fresh file", || {
        tier.stats().snapshot().recoveries == 1 && tier.failure().is_none()
    });
    assert_eq!(moved_aside(&dir).len(), 1, "the damaged file is kept aside");
    // What the salvage kept still verifies; the rest went with the damaged file.
    for i in 0..40 {
        if tier.on_disk(&hash(i)) {
            let v = tier.get(&hash(i)).expect("a kept block reads");
            assert!(crate::codec::verify(&v).is_ok());
        }
    }
    writes_again(&dir, tier);
    let _ = std::fs::remove_dir_all(&dir);
}
