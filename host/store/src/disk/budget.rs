//! The redb tier's disk budget: how many bytes of file a stored value costs, the split between
//! cache blocks and named saves, and the default budget taken from the filesystem's free space.
//! Invariants: charges never under-count a value (a value is charged at least its length); the
//! cache blocks' target leaves room for the saves in use and for one write batch's copy-on-write
//! pages; the file itself is held to [`file_limit`] by the writer (`shrink.rs`), which measures
//! it after every commit.

use std::path::Path;

/// redb's page size.
pub const PAGE: u64 = 4096;
/// Per-entry overhead charged to a small value (key, index entry, leaf bookkeeping).
const ENTRY: u64 = 96;

/// Default share of the filesystem's free space the store may use.
pub const DEFAULT_FREE_FRACTION: f64 = 0.10;
/// Default share of the disk budget that named saves may use.
pub const DEFAULT_SAVES_FRACTION: u64 = 4;
/// Smallest disk budget the file can be held to (an empty store file, its tables and one write
/// batch already take about 1 MiB, and redb grows a file by doubling it): smaller budgets are
/// refused, and the default is never below it.
pub const MIN_BUDGET: u64 = 4 << 20;

/// The most the file may pass its budget by: an eighth.
pub fn file_limit(budget: u64) -> u64 {
    budget.saturating_add(budget / 8)
}

/// The size a file of `file` bytes may reach at its next growth: redb doubles a file's usable
/// space while it is under one region (4 GiB) and adds up to two regions after that
/// (`grow` in redb's `page_manager.rs`).
pub fn next_growth(file: u64) -> u64 {
    const REGION: u64 = 4 << 30;
    file.saturating_add(file.min(REGION.saturating_mul(2)))
}

/// The file bytes a value of `len` bytes costs: packed with others below half a page, else its
/// own leaf of a power-of-two number of pages (redb's allocator orders).
pub fn charge(len: u64) -> u64 {
    let need = len.saturating_add(ENTRY);
    if need <= PAGE / 2 {
        need
    } else {
        need.div_ceil(PAGE)
            .checked_next_power_of_two()
            .map_or(u64::MAX, |p| p.saturating_mul(PAGE))
    }
}

/// Bytes one write transaction may hold: bounds the copy-on-write slack of a commit. Also the
/// most cache-block bytes (written or freed) between two durable commits: pages freed by a
/// commit without fsync stay unusable until the next durable one.
pub fn batch_bytes(budget: u64) -> u64 {
    (budget / 16).min(64 << 20)
}

/// Charged bytes cache blocks may hold in a file of `budget` bytes with `saves` bytes of saves:
/// what is left after the saves, one batch's copies and the file's own overhead (headers,
/// branch pages, free pages not yet reusable), taken as a quarter of the budget.
pub fn block_target(budget: u64, saves: u64) -> u64 {
    budget
        .saturating_sub(saves)
        .saturating_sub(batch_bytes(budget))
        .saturating_sub(budget / 4)
}

/// Charged bytes cache blocks may hold in a file of `file` bytes that must not grow (its next
/// growth would pass [`file_limit`]): the file less a sixteenth for redb's own pages (branches,
/// tables, headers), two batches (pages freed but not yet reusable, and a commit's copies) and
/// the saves.
pub fn room_in_file(file: u64, budget: u64, saves: u64) -> u64 {
    file.saturating_sub(file / 16)
        .saturating_sub(batch_bytes(budget).saturating_mul(2))
        .saturating_sub(saves)
}

/// Free bytes (for unprivileged users) of the filesystem holding `dir` (or its nearest existing
/// ancestor).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut at = dir;
    while !at.exists() {
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => {
                at = Path::new(".");
                break;
            }
        }
    }
    let s = rustix::fs::statvfs(at).map_err(std::io::Error::from)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// The default disk budget for a store in `dir`: a tenth of the free space plus what the store
/// file already holds (its bytes are the store's to reuse), at least [`MIN_BUDGET`].
pub fn default_budget(dir: &Path, existing_file: u64) -> std::io::Result<u64> {
    let free = free_bytes(dir)?;
    let share = (free as f64 * DEFAULT_FREE_FRACTION) as u64;
    Ok(share.saturating_add(existing_file).max(MIN_BUDGET))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_round_to_redb_pages() {
        assert_eq!(charge(10), 10 + ENTRY);
        assert_eq!(charge(PAGE), 2 * PAGE);
        assert_eq!(charge(3 * PAGE), 4 * PAGE);
        assert_eq!(charge(100_000), 32 * PAGE);
        assert_eq!(charge(u64::MAX), u64::MAX);
        for len in [0, 1, 2000, 2048, 5000, 1 << 20] {
            assert!(charge(len) >= len);
        }
    }

    #[test]
    fn block_target_leaves_room_and_never_underflows() {
        let b = 64 << 20;
        assert!(block_target(b, 0) < b);
        assert!(block_target(b, 8 << 20) < block_target(b, 0));
        assert_eq!(block_target(1 << 20, u64::MAX), 0);
    }

    #[test]
    fn the_file_limit_and_growth_saturate() {
        assert_eq!(file_limit(8 << 20), 9 << 20);
        assert_eq!(file_limit(u64::MAX), u64::MAX);
        assert_eq!(next_growth(3 << 20), 6 << 20);
        assert_eq!(next_growth(100 << 30), (100 << 30) + (8 << 30));
        assert_eq!(next_growth(u64::MAX), u64::MAX);
        assert_eq!(room_in_file(16 << 20, 8 << 20, 1 << 20), 13 << 20);
        assert_eq!(room_in_file(1 << 20, 64 << 20, 0), 0);
    }

    #[test]
    fn free_space_is_read_for_a_missing_directory_too() {
        let dir = std::env::temp_dir().join("memoria-budget-missing/a/b");
        let free = free_bytes(&dir).expect("statvfs");
        assert!(free > 0);
        let d = default_budget(&dir, 5 << 20).expect("default");
        assert!(d >= 5 << 20, "{d}");
    }
}
