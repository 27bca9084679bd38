//! `[store]` keys: the disk and saves budgets and the RAM budgets (cold tier, page cache, write
//! queue), checked and in bytes.

use anyhow::bail;

use super::file;

/// `[store] max_disk_mb` and `max_saves_mb`, in bytes, checked.
pub(super) fn store_budgets(s: &file::RawStore) -> anyhow::Result<(Option<u64>, Option<u64>)> {
    const MAX_MB: u64 = 1 << 40;
    // The store file cannot be held under this (its own tables, and redb grows it by doubling).
    const MIN_DISK_MB: u64 = memoria_store::disk::budget::MIN_BUDGET >> 20;
    if let Some(mb) = s.max_disk_mb
        && !(MIN_DISK_MB..=MAX_MB).contains(&mb)
    {
        bail!(
            "store.max_disk_mb = {mb}: use {MIN_DISK_MB} to {MAX_MB} (the store file cannot be \
             held under {MIN_DISK_MB} MiB)"
        );
    }
    if let Some(mb) = s.max_saves_mb
        && !(1..=MAX_MB).contains(&mb)
    {
        bail!("store.max_saves_mb = {mb}: use 1 to {MAX_MB}");
    }
    if let (Some(disk), Some(saves)) = (s.max_disk_mb, s.max_saves_mb)
        && saves.saturating_mul(2) > disk
    {
        bail!("store.max_saves_mb = {saves}: at most half of store.max_disk_mb ({disk})");
    }
    Ok((
        s.max_disk_mb.map(|m| m << 20),
        s.max_saves_mb.map(|m| m << 20),
    ))
}

/// The store's RAM budgets from `[store]`, in bytes (None: the defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreRam {
    pub cold_bytes: Option<u64>,
    pub page_cache_bytes: Option<u64>,
    pub write_queue_bytes: Option<u64>,
}

/// `[store] cold_mb` (0 turns the cold tier off), `page_cache_mb` and `write_queue_mb`, checked.
pub(super) fn store_ram(s: &file::RawStore) -> anyhow::Result<StoreRam> {
    const MAX_MB: u64 = 1 << 24;
    for (key, v, min) in [
        ("cold_mb", s.cold_mb, 0),
        ("page_cache_mb", s.page_cache_mb, 1),
        ("write_queue_mb", s.write_queue_mb, 1),
    ] {
        if let Some(mb) = v
            && !(min..=MAX_MB).contains(&mb)
        {
            bail!("store.{key} = {mb}: use {min} to {MAX_MB}");
        }
    }
    Ok(StoreRam {
        cold_bytes: s.cold_mb.map(|m| m << 20),
        page_cache_bytes: s.page_cache_mb.map(|m| m << 20),
        write_queue_bytes: s.write_queue_mb.map(|m| m << 20),
    })
}
