//! Salvage of a damaged store file (`memoria store repair`, `serve --store-recover`, the
//! writer meeting damage while serving with `--store-recover`): every entry that still reads
//! and verifies is copied into a fresh file, which then takes the store's name, and the damaged
//! file is kept aside for inspection (`memoria.redb.corrupt-<unix time>`); the report says what
//! was kept and what was lost. The same pass without a target counts what would be kept
//! (`memoria store verify` on a damaged file). Invariants: a block is kept only if the codec
//! verifies it (checksum, and its hash is its key), a saved session only if its record decodes
//! (its own checksum), a host record only if its decoder accepts it; keys come from both
//! `blocks` and `block_index`, so a block whose leaf in one of them is damaged is still found
//! through the other; the damaged file is only read.

mod scan;
mod write;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use redb::{Database, ReadableDatabase};
use serde::Serialize;

use self::scan::{ScanEnd, get, scan};
use self::write::Fresh;
use crate::codec;
use crate::disk::tables::{
    BLOCK_INDEX, BLOCKS, CLOCK_KEY, DB_FILE, HOT, HOT_KEY, META, MODELS, ROUTES_KEY, SESSIONS,
};
use crate::error::StoreError;
use crate::guard::contain;
use crate::hot::HotRecord;
use crate::routes::RoutesRecord;
use crate::session::SessionRecord;

/// Names of lost sessions a report lists at most.
const MAX_LISTED: usize = 64;

/// What a salvage kept and lost (or, counting only, would keep).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct SalvageReport {
    /// Where the damaged file was moved (empty when only counting).
    pub moved_to: String,
    /// What was wrong with it.
    pub reason: String,
    /// Whether the damaged file could be opened for reading at all (if not, nothing was kept).
    pub readable: bool,
    pub blocks_kept: u64,
    /// Blocks whose key was found but whose value did not read or verify.
    pub blocks_lost: u64,
    pub sessions_kept: u64,
    pub sessions_lost: u64,
    /// `namespace id/name` of lost sessions (at most 64).
    pub lost_sessions: Vec<String>,
    /// Host records kept: `top` (hot prefixes), `routes` (routing keys).
    pub host_records_kept: Vec<String>,
    pub models_kept: u64,
    /// Damaged stretches the scans stepped over: the entries in them are lost, their number
    /// unknown.
    pub skipped: u64,
    /// Tables whose scan could not reach their end (the rest of them is lost).
    pub cut_short: Vec<String>,
}

impl SalvageReport {
    /// One line: what was kept and lost.
    pub fn summary(&self) -> String {
        if !self.readable {
            return "nothing could be read from it".into();
        }
        let mut s = format!(
            "kept {} blocks and {} saved sessions that still read, lost {} blocks and {} \
             sessions",
            self.blocks_kept, self.sessions_kept, self.blocks_lost, self.sessions_lost
        );
        if self.skipped > 0 {
            s += &format!(
                " (and whatever the {} damaged stretches skipped held)",
                self.skipped
            );
        }
        if !self.cut_short.is_empty() {
            s += &format!(
                "; unreadable past the damage: {}",
                self.cut_short.join(", ")
            );
        }
        s
    }
}

/// Entries read from a file of `len` bytes at most (each takes far more than 8 bytes).
fn entry_budget(len: u64) -> u64 {
    len / 8 + 1024
}

fn note(r: &mut SalvageReport, table: &str, end: ScanEnd) {
    r.skipped += end.skipped;
    if end.stopped {
        r.cut_short.push(table.to_string());
    }
}

/// Blocks written to the fresh file per transaction, by value bytes.
const WRITE_BATCH_BYTES: usize = 32 << 20;

/// Copies (or, without `to`, counts) what reads and verifies in `db` (a file of `len` bytes).
fn copy<D: ReadableDatabase>(
    db: &D,
    len: u64,
    to: Option<&Fresh>,
    r: &mut SalvageReport,
) -> Result<(), StoreError> {
    let budget = entry_budget(len);
    // block_index: every key and its last-use stamp.
    let mut ix_keys = Vec::new();
    let mut stamps: HashMap<[u8; 32], u64> = HashMap::new();
    let end = scan(
        db,
        BLOCK_INDEX,
        &mut ix_keys,
        |_, (_, stamp)| Some(stamp),
        |batch| {
            stamps.extend(batch);
            Ok(())
        },
        budget,
    )?;
    note(r, "block_index", end);
    let mut clock = stamps.values().copied().max().unwrap_or(0);
    // blocks, in key order, each verified under its key.
    let verified = |k: &[u8; 32], v: &[u8]| -> Option<Vec<u8>> {
        codec::verify(v)
            .ok()
            .filter(|h| h.identity.hash.0 == *k)
            .map(|_| v.to_vec())
    };
    let mut kept: HashSet<[u8; 32]> = HashSet::new();
    let mut write = |batch: Vec<([u8; 32], Vec<u8>)>| -> Result<(), StoreError> {
        let rows: Vec<_> = batch
            .into_iter()
            .map(|(k, v)| {
                let stamp = stamps.get(&k).copied().unwrap_or(1);
                (k, v, stamp)
            })
            .collect();
        kept.extend(rows.iter().map(|(k, ..)| *k));
        match to {
            Some(f) => f.blocks(&rows),
            None => Ok(()),
        }
    };
    let mut block_keys = Vec::new();
    let end = scan(db, BLOCKS, &mut block_keys, verified, &mut write, budget)?;
    note(r, "blocks", end);
    // Keys only block_index reached (their blocks' leaves were skipped): read one by one.
    let seen: HashSet<[u8; 32]> = block_keys.iter().copied().collect();
    let mut batch = Vec::new();
    let mut bytes = 0;
    for k in ix_keys.iter().filter(|k| !seen.contains(*k)) {
        if let Some(v) = get(db, BLOCKS, k, |v| verified(k, v)) {
            bytes += v.len();
            batch.push((*k, v));
            if bytes >= WRITE_BATCH_BYTES {
                write(std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
    }
    if !batch.is_empty() {
        write(batch)?;
    }
    let all: HashSet<[u8; 32]> = seen.into_iter().chain(ix_keys).collect();
    r.blocks_kept = kept.len() as u64;
    r.blocks_lost = all.len().saturating_sub(kept.len()) as u64;

    // Saved sessions: kept when their record decodes.
    let mut session_keys = Vec::new();
    let mut kept_sessions = HashSet::new();
    let end = scan(
        db,
        SESSIONS,
        &mut session_keys,
        |_, v: &[u8]| SessionRecord::decode(v).is_ok().then(|| v.to_vec()),
        |batch| {
            kept_sessions.extend(batch.iter().map(|(k, _)| k.clone()));
            match to {
                Some(f) => f.sessions(&batch),
                None => Ok(()),
            }
        },
        budget,
    )?;
    note(r, "sessions", end);
    r.sessions_kept = kept_sessions.len() as u64;
    let lost: Vec<_> = session_keys
        .iter()
        .filter(|k| !kept_sessions.contains(*k))
        .collect();
    r.sessions_lost = lost.len() as u64;
    r.lost_sessions = lost
        .iter()
        .take(MAX_LISTED)
        .map(|(ns, name)| format!("{ns}/{name}"))
        .collect();

    // Host records, models and the clock.
    let mut hot = Vec::new();
    let end = scan(
        db,
        HOT,
        &mut Vec::new(),
        |k: &String, v: &[u8]| {
            let ok = match k.as_str() {
                HOT_KEY => HotRecord::decode(v).is_ok(),
                ROUTES_KEY => RoutesRecord::decode(v).is_ok(),
                _ => false,
            };
            ok.then(|| v.to_vec())
        },
        |batch| {
            hot.extend(batch);
            Ok(())
        },
        budget,
    )?;
    note(r, "hot", end);
    r.host_records_kept = hot.iter().map(|(k, _)| k.clone()).collect();
    let mut models = Vec::new();
    let end = scan(
        db,
        MODELS,
        &mut Vec::new(),
        |_, v: &str| Some(v.to_string()),
        |batch| {
            models.extend(batch);
            Ok(())
        },
        budget,
    )?;
    note(r, "models", end);
    r.models_kept = models.len() as u64;
    if let Some(c) = get(db, META, &CLOCK_KEY.to_string(), Some) {
        clock = clock.max(c);
    }
    match to {
        Some(f) => f.rest(&hot, &models, clock),
        None => Ok(()),
    }
}

/// Opens the store file in `dir` for reading only (never writing it); `None` when redb cannot
/// open it (its header is damaged, or it needs a recovery that fails).
fn open_read_only(dir: &Path) -> Option<redb::ReadOnlyDatabase> {
    contain("salvage open", || {
        Database::builder()
            .open_read_only(dir.join(DB_FILE))
            .map_err(|e| StoreError::Damaged {
                what: "open",
                msg: e.to_string(),
            })
    })
    .ok()
}

fn file_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.len())
}

/// Salvages the damaged store file in `dir` (not in use by any process): copies what still
/// reads and verifies into a fresh file, moves the damaged one aside, puts the fresh one in its
/// place. `reason`: what is wrong with it, for the report.
pub fn salvage(dir: &Path, reason: String) -> Result<SalvageReport, StoreError> {
    let db = open_read_only(dir);
    salvage_from(db.as_ref(), dir, reason)
}

/// [`salvage`] reading through `db`, an open handle on the damaged file (`None`: unreadable,
/// an empty store replaces it).
pub(crate) fn salvage_from<D: ReadableDatabase>(
    db: Option<&D>,
    dir: &Path,
    reason: String,
) -> Result<SalvageReport, StoreError> {
    let mut r = SalvageReport {
        reason,
        readable: db.is_some(),
        ..SalvageReport::default()
    };
    let fresh = Fresh::create(dir)?;
    if let Some(db) = db {
        copy(db, file_len(dir), Some(&fresh), &mut r)?;
    }
    r.moved_to = fresh.install(dir)?.display().to_string();
    Ok(r)
}

/// What a salvage of the store file in `dir` would keep, read without changing anything.
pub fn count(dir: &Path, reason: String) -> Result<SalvageReport, StoreError> {
    let mut r = SalvageReport {
        reason,
        ..SalvageReport::default()
    };
    if let Some(db) = open_read_only(dir) {
        r.readable = true;
        copy(&db, file_len(dir), None, &mut r)?;
    }
    Ok(r)
}
