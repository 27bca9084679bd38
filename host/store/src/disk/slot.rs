//! The redb tier's database handle, shared by the readers and the writer, and swappable: after
//! a disk failure redb refuses every later operation until the file is closed, so the writer
//! takes the handle out, closes the file, reopens it and puts the new handle back. Readers hold
//! a clone only for one read; while the slot is empty (a reopen in progress or failed) reads
//! are misses.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::RedbFile;

/// The shared, swappable database handle.
#[derive(Debug, Default)]
pub(crate) struct DbSlot(RwLock<Option<Arc<RedbFile>>>);

impl DbSlot {
    pub fn new(db: Arc<RedbFile>) -> DbSlot {
        DbSlot(RwLock::new(Some(db)))
    }

    /// The database, for one operation; `None` while it is being reopened.
    pub fn get(&self) -> Option<Arc<RedbFile>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Takes the database out (readers see none from now on).
    pub fn take(&self) -> Option<Arc<RedbFile>> {
        self.0.write().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Puts a database in.
    pub fn put(&self, db: Arc<RedbFile>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(db);
    }
}

/// How long the writer waits for readers to let go of the file's handle before it reopens,
/// compacts or replaces the file (`resume.rs`, `shrink.rs`, `fresh.rs`).
pub(crate) const READER_PATIENCE: Duration = Duration::from_secs(1);

/// Waits up to `patience` for the readers still holding `db` to finish, and returns the only
/// handle left; gives `db` back when some reader holds it longer.
pub(crate) fn sole_owner(db: Arc<RedbFile>, patience: Duration) -> Result<RedbFile, Arc<RedbFile>> {
    let until = Instant::now() + patience;
    let mut db = db;
    loop {
        match Arc::try_unwrap(db) {
            Ok(d) => return Ok(d),
            Err(d) if Instant::now() >= until => return Err(d),
            Err(d) => {
                db = d;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}
