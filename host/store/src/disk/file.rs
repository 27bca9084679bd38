//! The store file under redb, let go of when its handle drops. A write transaction redb
//! panicked inside is leaked rather than dropped ([`crate::guard::LeakOnUnwind`]: its drop could
//! panic a second time and abort), and redb defers closing a database until its live write
//! transaction ends, so without help the file (its descriptor and its lock) would stay held
//! until the process exits: a repair, a reopen or a fresh open of the same file in this process
//! would find it "already open". [`RedbFile`] pairs the database with the backend it runs on,
//! and dropping it closes the database and then closes the backend itself: the lock is
//! released and the descriptor closed; whatever a leaked transaction might still try reads a
//! closed-file error.

use std::fmt;
use std::fs::OpenOptions;
use std::io;
use std::mem::ManuallyDrop;
use std::ops::{Bound, Deref, DerefMut};
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use redb::backends::FileBackend;
use redb::{BackendError, Builder, Database, DatabaseError, StorageBackend};

use crate::guard::contain;

/// A redb database and the backend it runs on, which is closed when this drops.
pub struct RedbFile {
    db: ManuallyDrop<Database>,
    file: Option<Arc<Releasable>>,
}

impl RedbFile {
    /// Opens (creating if needed) the redb file at `path` with `builder`'s settings.
    pub(crate) fn create(builder: &Builder, path: &Path) -> Result<RedbFile, DatabaseError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let shared = Arc::new(Releasable(RwLock::new(Some(FileBackend::new(file)?))));
        let db = builder.create_with_backend(Backend(shared.clone()))?;
        Ok(RedbFile {
            db: ManuallyDrop::new(db),
            file: Some(shared),
        })
    }

    /// A database on some other backend (the fault-injecting ones of the tests), closed as
    /// redb closes it.
    #[cfg(test)]
    pub(crate) fn unmanaged(db: Database) -> RedbFile {
        RedbFile {
            db: ManuallyDrop::new(db),
            file: None,
        }
    }
}

impl Deref for RedbFile {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.db
    }
}

impl DerefMut for RedbFile {
    fn deref_mut(&mut self) -> &mut Database {
        &mut self.db
    }
}

impl fmt::Debug for RedbFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbFile")
            .field("managed", &self.file.is_some())
            .finish()
    }
}

impl Drop for RedbFile {
    fn drop(&mut self) {
        // SAFETY: drop runs once and `self.db` is not used after it.
        let db = unsafe { ManuallyDrop::take(&mut self.db) };
        // redb's close may panic on a damaged file: contained, and the backend is closed anyway.
        let _ = contain("close", move || {
            drop(db);
            Ok(())
        });
        if let Some(file) = self.file.take() {
            file.release();
        }
    }
}

/// The file backend, until it is released (by redb's close or by [`RedbFile`]'s drop).
#[derive(Debug)]
struct Releasable(RwLock<Option<FileBackend>>);

impl Releasable {
    /// Closes the backend (releasing its locks) and the file, once; later calls do nothing.
    fn release(&self) {
        let taken = self
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(f) = taken {
            let _ = f.close();
        }
    }

    fn with<T, E: From<io::Error>>(
        &self,
        f: impl FnOnce(&FileBackend) -> Result<T, E>,
    ) -> Result<T, E> {
        let g = self.0.read().unwrap_or_else(PoisonError::into_inner);
        match g.as_ref() {
            Some(b) => f(b),
            None => Err(io::Error::other("the store file was closed").into()),
        }
    }
}

/// What redb holds: a share of the [`Releasable`] backend.
#[derive(Debug)]
struct Backend(Arc<Releasable>);

impl StorageBackend for Backend {
    fn len(&self) -> Result<u64, io::Error> {
        self.0.with(|b| b.len())
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.0.with(|b| b.read(offset, out))
    }
    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.0.with(|b| b.set_len(len))
    }
    fn sync_data(&self) -> Result<(), io::Error> {
        self.0.with(|b| b.sync_data())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.0.with(|b| b.write(offset, data))
    }
    fn close(&self) -> Result<(), io::Error> {
        self.0.release();
        Ok(())
    }
    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.with(|b| b.try_lock_range(start, end))
    }
    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.0.with(|b| b.try_lock_shared_range(start, end))
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.with(|b| b.lock_range(start, end))
    }
    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.with(|b| b.lock_shared_range(start, end))
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.with(|b| b.unlock_range(start, end))
    }
    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.with(|b| b.query_lock_range(start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::LeakOnUnwind;

    fn temp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("memoria-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.join("db.redb")
    }

    #[test]
    fn a_leaked_write_transaction_does_not_keep_the_file_locked() {
        let path = temp("leak");
        let db = RedbFile::create(&Database::builder(), &path).expect("create");
        // What the writer does when redb panics mid-write: the transaction is leaked.
        let r: Result<(), _> = contain("write", || {
            let _txn = LeakOnUnwind::new(db.begin_write().expect("begin"));
            panic!("a damaged page")
        });
        assert!(r.is_err());
        assert!(
            matches!(
                Database::builder().create(&path),
                Err(DatabaseError::DatabaseAlreadyOpen)
            ),
            "held while the handle lives"
        );
        drop(db);
        let again = RedbFile::create(&Database::builder(), &path).expect("released on drop");
        let w = again.begin_write().expect("a new writer");
        w.commit().expect("commit");
        drop(again);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
