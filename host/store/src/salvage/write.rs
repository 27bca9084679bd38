//! The fresh file a salvage copies into: built as `memoria.redb.salvage` beside the damaged
//! file with the store's tables, filled in batches (one durable write transaction each), closed
//! and synced before [`Fresh::install`] moves the damaged file aside and renames this one into
//! the store's name. Invariants: the store's name never points at a half-written file (a crash
//! mid-salvage leaves the damaged file in place and a stale `.salvage`, replaced next time);
//! every block copied gets its `block_index` entry in the same transaction.

use std::path::{Path, PathBuf};

use redb::Database;

use crate::disk::init_tables;
use crate::disk::tables::{BLOCK_INDEX, BLOCKS, CLOCK_KEY, DB_FILE, HOT, META, MODELS, SESSIONS};
use crate::error::{DbResult, StoreError};
use crate::guard::{LeakOnUnwind, contain};

/// The salvage file's name inside a store directory.
pub(crate) const SALVAGE_FILE: &str = "memoria.redb.salvage";

pub(crate) struct Fresh {
    db: Option<Database>,
    path: PathBuf,
}

fn io(path: &Path, what: &str, e: &dyn std::fmt::Display) -> StoreError {
    StoreError::Open {
        path: path.display().to_string(),
        msg: format!("salvage: {what}: {e}"),
    }
}

impl Fresh {
    /// An empty store file at `dir`/[`SALVAGE_FILE`] (a stale one is replaced).
    pub fn create(dir: &Path) -> Result<Fresh, StoreError> {
        let path = dir.join(SALVAGE_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path, "removing a stale file", &e)),
        }
        let db = contain("salvage create", || {
            let db = Database::builder()
                .create(&path)
                .map_err(|e| io(&path, "create", &e))?;
            init_tables(&db)?;
            Ok(db)
        })?;
        Ok(Fresh { db: Some(db), path })
    }

    fn db(&self) -> Result<&Database, StoreError> {
        self.db.as_ref().ok_or(StoreError::WriterGone)
    }

    /// Writes blocks (hash, codec bytes, last-use stamp) and their index entries.
    pub fn blocks(&self, batch: &[([u8; 32], Vec<u8>, u64)]) -> Result<(), StoreError> {
        let db = self.db()?;
        contain("salvage write", || {
            let txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
            {
                let mut blocks = LeakOnUnwind::new(txn.open_table(BLOCKS).db("open blocks")?);
                let mut bix =
                    LeakOnUnwind::new(txn.open_table(BLOCK_INDEX).db("open block_index")?);
                for (k, v, stamp) in batch {
                    blocks.insert(k, v.as_slice()).db("write block")?;
                    bix.insert(k, (v.len() as u64, (*stamp).max(1)))
                        .db("write block_index")?;
                }
            }
            txn.into_inner().commit().db("commit")
        })
    }

    /// Writes saved sessions (namespace id, name, record bytes).
    pub fn sessions(&self, batch: &[((u64, String), Vec<u8>)]) -> Result<(), StoreError> {
        let db = self.db()?;
        contain("salvage write", || {
            let txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
            {
                let mut t = LeakOnUnwind::new(txn.open_table(SESSIONS).db("open sessions")?);
                for ((ns, name), v) in batch {
                    t.insert((*ns, name.as_str()), v.as_slice())
                        .db("write session")?;
                }
            }
            txn.into_inner().commit().db("commit")
        })
    }

    /// Writes host records, model descriptions and the last-use clock.
    pub fn rest(
        &self,
        hot: &[(String, Vec<u8>)],
        models: &[([u8; 32], String)],
        clock: u64,
    ) -> Result<(), StoreError> {
        let db = self.db()?;
        contain("salvage write", || {
            let txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
            {
                let mut t = LeakOnUnwind::new(txn.open_table(HOT).db("open hot")?);
                for (k, v) in hot {
                    t.insert(k.as_str(), v.as_slice()).db("write host record")?;
                }
                let mut t = LeakOnUnwind::new(txn.open_table(MODELS).db("open models")?);
                for (k, v) in models {
                    t.insert(k, v.as_str()).db("write model")?;
                }
                let mut t = LeakOnUnwind::new(txn.open_table(META).db("open meta")?);
                t.insert(CLOCK_KEY, clock).db("write clock")?;
            }
            txn.into_inner().commit().db("commit")
        })
    }

    /// Closes and syncs the file, moves the damaged store file in `dir` aside (see
    /// [`crate::maintenance::move_aside`]) and renames this one into its place; returns where the
    /// damaged file went.
    pub fn install(mut self, dir: &Path) -> Result<PathBuf, StoreError> {
        if let Some(db) = self.db.take() {
            contain("salvage close", || {
                drop(db);
                Ok(())
            })?;
        }
        std::fs::File::open(&self.path)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(&self.path, "sync", &e))?;
        let to = crate::maintenance::move_aside(dir)?;
        let store = dir.join(DB_FILE);
        std::fs::rename(&self.path, &store).map_err(|e| io(&store, "rename", &e))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(dir, "sync the directory", &e))?;
        Ok(to)
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            let _ = contain("salvage close", || {
                drop(db);
                Ok(())
            });
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
