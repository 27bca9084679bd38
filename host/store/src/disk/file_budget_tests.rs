//! The store file's real size against `[store] max_disk_mb` (hardening probe 3a: a 4, 8 and 16
//! MiB budget filled with distinct blocks grew the file to 8.9, 17.8 and 35.7 MB, 2.13×, since
//! commits without fsync left the pages they freed unusable and redb doubles a file it grows).
//! Many distinct blocks are written as fast as the writer takes them, under eviction, with a
//! durable commit each time a budget's worth went by (as the probe's once-a-second commits
//! did), and the file is sampled all along: it must stay within 1.25× the budget.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;

use super::budget::{charge, file_limit};
use super::{DiskOptions, RedbTier};
use crate::stats::TierSnapshot;
use crate::tier::Tier;

/// What the file may reach, at most, against its budget.
const BOUND: f64 = 1.25;

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("memoria-filebudget-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Incompressible bytes for block `i` (the probe's blocks were ~10 KB encoded).
fn value(i: u64, len: usize) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn hash(i: u64) -> BlockHash {
    let mut h = [0u8; 32];
    h[..8].copy_from_slice(&i.to_le_bytes());
    h[8] = 0xB1;
    BlockHash(h)
}

fn file_len(tier: &RedbTier) -> u64 {
    std::fs::metadata(tier.path()).map_or(0, |m| m.len())
}

/// Writes `total` bytes of distinct `len`-byte blocks into a store with a `budget_mib` budget
/// (no saves); returns the largest file size seen, the final one and the tier's figures.
fn fill(name: &str, budget_mib: u64, len: usize, total: u64) -> (u64, u64, TierSnapshot) {
    let dir = temp_dir(name);
    let budget = budget_mib << 20;
    let opts = DiskOptions {
        budget_bytes: budget,
        ..DiskOptions::default()
    };
    let tier = RedbTier::open(&dir, opts).expect("open");
    let n = total / len as u64;
    let mut peak = file_len(&tier);
    // A durable commit each time a budget's worth of blocks went by: the probe's server made
    // one a second ([store] sync_interval) while its cache turned over several times a second.
    let durable_every = (budget / charge(len as u64)).max(1);
    for i in 0..n {
        tier.put(&hash(i), value(i, len));
        if i % 16 == 0 {
            peak = peak.max(file_len(&tier));
        }
        if i % durable_every == durable_every - 1 {
            tier.flush().expect("flush");
        }
        // Keep the queue short, as a serving engine's is: the writer commits small batches.
        let until = Instant::now() + Duration::from_secs(30);
        while tier.stats().snapshot().queue_bytes > 16 * len as u64 {
            assert!(Instant::now() < until, "the writer stalled");
            std::thread::sleep(Duration::from_micros(200));
            peak = peak.max(file_len(&tier));
        }
    }
    let until = Instant::now() + Duration::from_secs(30);
    while tier.stats().snapshot().queue_blocks > 0 {
        assert!(Instant::now() < until, "the writer stalled");
        std::thread::sleep(Duration::from_millis(1));
        peak = peak.max(file_len(&tier));
    }
    tier.flush().expect("flush");
    let last = file_len(&tier);
    let s = tier.stats().snapshot();
    drop(tier);
    // What is left is a store that opens and serves.
    let tier = RedbTier::open(&dir, opts).expect("reopen");
    assert!(
        (0..n).rev().take(4).any(|i| tier.get(&hash(i)).is_some()),
        "the newest blocks are served after a reopen"
    );
    drop(tier);
    let _ = std::fs::remove_dir_all(&dir);
    (peak.max(last), last, s)
}

fn check(budget_mib: u64, peak: u64, last: u64, s: &TierSnapshot) {
    let budget = budget_mib << 20;
    eprintln!(
        "budget {budget_mib} MiB: file peak {peak} final {last} ({:.2}x), charged {}, blocks {}, \
         evictions {}, durable commits {} of {}, compactions {}",
        peak as f64 / budget as f64,
        s.charged_bytes,
        s.blocks,
        s.evictions,
        s.durable_commits,
        s.commits,
        s.compactions,
    );
    assert!(s.evictions > 0, "the budget was filled past: {s:?}");
    assert!(
        peak as f64 <= BOUND * budget as f64,
        "the file reached {peak} bytes on a {budget}-byte budget ({:.2}x)",
        peak as f64 / budget as f64
    );
    assert!(last <= file_limit(budget), "final {last}");
    assert!(
        s.charged_bytes >= budget / 4,
        "the cache blocks keep a fair share of the budget: {s:?}"
    );
}

#[test]
fn probe_3a_disk_budget_4_mib_keeps_the_file_near_4_mib() {
    let (peak, last, s) = fill("4", 4, 10_000, 40 << 20);
    check(4, peak, last, &s);
}

#[test]
fn probe_3a_disk_budget_8_mib_keeps_the_file_near_8_mib() {
    let (peak, last, s) = fill("8", 8, 10_000, 64 << 20);
    check(8, peak, last, &s);
}

#[test]
fn probe_3a_disk_budget_6_mib_between_redb_sizes_keeps_the_file_near_6_mib() {
    // 6 MiB lies between two sizes redb's doubling reaches (4.25 and 8.5 MiB).
    let (peak, last, s) = fill("6", 6, 3_000, 48 << 20);
    check(6, peak, last, &s);
}

#[test]
fn a_file_over_a_lowered_budget_is_compacted_back_within_it() {
    let dir = temp_dir("lowered");
    let big = DiskOptions {
        budget_bytes: 16 << 20,
        ..DiskOptions::default()
    };
    let tier = RedbTier::open(&dir, big).expect("open");
    for i in 0..1500 {
        tier.put(&hash(i), value(i, 10_000));
    }
    tier.flush().expect("flush");
    drop(tier);
    let before = std::fs::metadata(dir.join(super::tables::DB_FILE))
        .unwrap()
        .len();
    assert!(before > 16 << 20, "{before}");
    // Restarted with a quarter of the budget: the first commit evicts, then the file shrinks.
    let small = DiskOptions {
        budget_bytes: 4 << 20,
        ..DiskOptions::default()
    };
    let tier = RedbTier::open(&dir, small).expect("reopen");
    tier.flush().expect("flush");
    let until = Instant::now() + Duration::from_secs(10);
    while file_len(&tier) > file_limit(4 << 20) {
        assert!(Instant::now() < until, "still {} bytes", file_len(&tier));
        std::thread::sleep(Duration::from_millis(5));
        tier.flush().expect("flush");
    }
    let s = tier.stats().snapshot();
    assert!(s.compactions >= 1, "{s:?}");
    assert!(s.blocks > 0 && s.charged_bytes <= 4 << 20, "{s:?}");
    assert!(
        (1400..1500).any(|i| tier.get(&hash(i)).is_some()),
        "the newest are kept"
    );
    // It keeps within the limit as writing goes on.
    for i in 1500..2500 {
        tier.put(&hash(i), value(i, 10_000));
    }
    tier.flush().expect("flush");
    assert!(
        file_len(&tier) <= file_limit(4 << 20),
        "{}",
        file_len(&tier)
    );
    drop(tier);
    let _ = std::fs::remove_dir_all(&dir);
}
