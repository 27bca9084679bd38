//! Opening the store file: created atomically when missing, opened with redb's integrity check
//! when asked, its table format checked and its tables created, the index read from it, and a
//! damaged file salvaged at open under `--store-recover`.

use std::path::Path;

use memoria_kv::BlockHash;
use redb::{Database, ReadableDatabase, ReadableTable};

use super::index::DiskIndex;
use super::tables::{
    BLOCK_INDEX, BLOCKS, CLOCK_KEY, DB_FILE, FORMAT_KEY, HOT, META, MODELS, SESSIONS, STORE_FORMAT,
};
use super::{DiskOptions, RedbFile, budget};
use crate::error::{DbResult, StoreError};
use crate::guard::{LeakOnUnwind, contain};

/// A damaged-file error at open, with what to do about it.
pub(super) fn unopenable(path: &Path, e: StoreError) -> StoreError {
    match e {
        StoreError::Damaged { what, msg } => StoreError::Unopenable {
            path: path.display().to_string(),
            msg: format!("{what}: {msg}"),
        },
        e => e,
    }
}

/// Opens (creating if needed) the store database in `dir`, checks its table format and creates
/// missing tables. A damaged file is [`StoreError::Unopenable`] (never a panic).
pub fn open_database(dir: &Path) -> Result<RedbFile, StoreError> {
    open_database_with(dir, DiskOptions::default().cache_bytes)
}

/// [`open_database`] with a page cache of `cache_bytes`.
pub fn open_database_with(dir: &Path, cache_bytes: usize) -> Result<RedbFile, StoreError> {
    open_database_checked(dir, cache_bytes, false)
}

/// [`open_database_with`], running redb's integrity check (every page's checksum) on an
/// existing file when `check` is set: damage a plain open would not read (a page only a write
/// visits) is then an open error, [`StoreError::Unopenable`], instead of a write failing later.
pub fn open_database_checked(
    dir: &Path,
    cache_bytes: usize,
    check: bool,
) -> Result<RedbFile, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
        path: dir.display().to_string(),
        msg: e.to_string(),
    })?;
    let path = dir.join(DB_FILE);
    if !path.exists() {
        create_database(dir, &path)?;
    }
    contain("open", || {
        let db = open_redb(&path, cache_bytes, check)?;
        // On an error the database is dropped here, still under `catch_unwind` (redb's drop
        // can panic on a lock that a contained panic poisoned).
        init_tables(&db)?;
        Ok(db)
    })
    .map_err(|e| unopenable(&path, e))
}

/// Opens the existing redb file at `path` as it is (no table set-up); with `check`, redb's
/// integrity check runs at open. Damage is [`StoreError::Damaged`]; call under [`contain`].
pub(crate) fn open_redb(
    path: &Path,
    cache_bytes: usize,
    check: bool,
) -> Result<RedbFile, StoreError> {
    let mut builder = Database::builder();
    builder
        .set_cache_size(cache_bytes)
        .set_check_integrity_on_open(check);
    RedbFile::create(&builder, path).map_err(|e| match redb::Error::from(e) {
        // Not a redb header, or a header that points past the end of the file.
        redb::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            StoreError::Damaged {
                what: "open",
                msg: io.to_string(),
            }
        }
        redb::Error::Corrupted(m) => StoreError::Damaged {
            what: "open",
            msg: m,
        },
        e => StoreError::Open {
            path: path.display().to_string(),
            msg: e.to_string(),
        },
    })
}

/// Creates an empty store file at `path` atomically: built and committed beside it, then
/// renamed into place, so a process killed while creating leaves no half-written store (only
/// a `.creating` file, replaced on the next open).
fn create_database(dir: &Path, path: &Path) -> Result<(), StoreError> {
    let tmp = dir.join(format!("{DB_FILE}.creating"));
    let io = |what: &str, e: &dyn std::fmt::Display| StoreError::Open {
        path: path.display().to_string(),
        msg: format!("{what}: {e}"),
    };
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("removing a stale file", &e)),
    }
    contain("create", || {
        let db = Database::builder()
            .create(&tmp)
            .map_err(|e| io("create", &e))?;
        init_tables(&db)?;
        Ok(())
    })?;
    std::fs::rename(&tmp, path).map_err(|e| io("rename", &e))?;
    // The rename is durable once the directory is.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("sync the directory", &e))
}

/// `--store-recover` at open: salvages the damaged store file in `dir` (what still reads goes on
/// in a fresh file) and says what was kept, lost and where the damaged file went.
pub(super) fn recover_salvaging(dir: &Path, e: &StoreError) -> Result<(), StoreError> {
    let r = crate::salvage::salvage(dir, e.damage())?;
    eprintln!(
        "memoria: the store file was damaged ({}); --store-recover salvaged it ({}) into a \
         fresh file and moved the damaged file to {}",
        r.reason,
        r.summary(),
        r.moved_to
    );
    Ok(())
}

pub(crate) fn init_tables(db: &Database) -> Result<(), StoreError> {
    let txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
    {
        let mut meta = LeakOnUnwind::new(txn.open_table(META).db("open meta")?);
        let found = meta.get(FORMAT_KEY).db("read format")?.map(|v| v.value());
        match found {
            // No build will ever write a format past u16::MAX: such a value is damage.
            Some(v) if v > u64::from(u16::MAX) => {
                return Err(StoreError::Damaged {
                    what: "read format",
                    msg: format!("the table format value {v} is garbage"),
                });
            }
            Some(v) if v != STORE_FORMAT => {
                return Err(StoreError::Format {
                    found: v,
                    supported: STORE_FORMAT,
                });
            }
            Some(_) => {}
            None => {
                meta.insert(FORMAT_KEY, STORE_FORMAT).db("write format")?;
            }
        }
        txn.open_table(BLOCKS).db("open blocks")?;
        txn.open_table(BLOCK_INDEX).db("open block_index")?;
        txn.open_table(SESSIONS).db("open sessions")?;
        txn.open_table(HOT).db("open hot")?;
        txn.open_table(MODELS).db("open models")?;
    }
    txn.into_inner().commit().db("commit")?;
    Ok(())
}

/// Reads `block_index`, the clock and the saves' sizes.
pub(super) fn load_index(db: &Database) -> Result<DiskIndex, StoreError> {
    let mut ix = DiskIndex::default();
    let txn = db.begin_read().db("begin read")?;
    let bix = txn.open_table(BLOCK_INDEX).db("open block_index")?;
    for e in bix.iter().db("scan block_index")? {
        let (k, v) = e.db("read block_index")?;
        let (len, stamp) = v.value();
        ix.insert(BlockHash(k.value()), len, stamp.max(1));
    }
    let meta = txn.open_table(META).db("open meta")?;
    let clock = meta
        .get(CLOCK_KEY)
        .db("read clock")?
        .map_or(0, |v| v.value());
    ix.clock = ix.clock.max(clock);
    let sessions = txn.open_table(SESSIONS).db("open sessions")?;
    for e in sessions.iter().db("scan sessions")? {
        let (k, v) = e.db("read session")?;
        let (ns, name) = k.value();
        let c = budget::charge((v.value().len() + name.len()) as u64);
        ix.set_save((ns, name.to_string()), Some(c));
    }
    Ok(ix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_killed_while_being_created_leaves_nothing_unopenable() {
        let dir = std::env::temp_dir().join(format!("memoria-create-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // What a kill mid-creation leaves: a partial file beside the store, no store.
        std::fs::write(dir.join(format!("{DB_FILE}.creating")), b"redb\0half").unwrap();
        let db = open_database(&dir).expect("a fresh store despite the leftover");
        drop(db);
        assert!(dir.join(DB_FILE).exists());
        assert!(!dir.join(format!("{DB_FILE}.creating")).exists());
        // And an existing store is opened, not recreated.
        open_database(&dir).expect("reopen");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
