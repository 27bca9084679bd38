//! Resuming the redb tier's writer after a disk failure (a full disk, an I/O error). redb
//! latches any failed write, sync or resize: every later operation answers `PreviousIo` until
//! the database is closed. So the writer, every `resume_interval` (doubling after each failed
//! try, up to 64×), checks that the disk looks writable again (free space for two batches, for
//! a full disk), takes the handle from the readers, closes the file, reopens it (redb recovers
//! the last commit), reconciles its in-memory index with what the file holds (a failed commit
//! may have reached the disk after all) and clears the failure. A damaged file is not retried:
//! that is `memoria store repair`'s job, offline, or `--store-recover`'s (`fresh.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::budget::{batch_bytes, free_bytes};
use super::slot::{READER_PATIENCE, sole_owner};
use super::writer::{Writer, failure};
use super::{RedbFile, load_index, open_database_with};
use crate::error::StoreError;
use crate::guard::contain;
use crate::stats::TierStats;

/// The most the retry interval doubles to.
const MAX_BACKOFF_SHIFT: u32 = 6;

/// How the writer gets its database back.
pub(crate) trait Reopen: Send {
    /// Whether there looks to be room to write again (checked before a full disk is retried).
    fn writable(&self) -> bool;
    /// Opens the database again.
    fn reopen(&self) -> Result<RedbFile, StoreError>;
}

/// Reopens the store file in `dir`.
pub(crate) struct ReopenFile {
    pub dir: PathBuf,
    pub cache_bytes: usize,
    pub budget: u64,
}

impl Reopen for ReopenFile {
    fn writable(&self) -> bool {
        let need = batch_bytes(self.budget).saturating_mul(2).max(8 << 20);
        free_bytes(&self.dir).is_ok_and(|free| free >= need)
    }

    fn reopen(&self) -> Result<RedbFile, StoreError> {
        open_database_with(&self.dir, self.cache_bytes)
    }
}

/// The writer's retry schedule and the way it reopens.
pub(crate) struct Resumer {
    reopen: Box<dyn Reopen>,
    interval: Duration,
    next: Option<Instant>,
    shift: u32,
}

impl Resumer {
    pub fn new(reopen: Box<dyn Reopen>, interval: Duration) -> Resumer {
        Resumer {
            reopen,
            interval: interval.max(Duration::from_millis(1)),
            next: None,
            shift: 0,
        }
    }

    /// How long until the next try (from the first failure on).
    pub fn wait(&mut self) -> Duration {
        let now = Instant::now();
        let next = *self.next.get_or_insert_with(|| later(now, self.interval));
        next.saturating_duration_since(now)
            .max(Duration::from_millis(1))
    }

    fn due(&mut self) -> bool {
        let now = Instant::now();
        let next = *self.next.get_or_insert_with(|| later(now, self.interval));
        if now < next {
            return false;
        }
        let step = self
            .interval
            .checked_mul(1u32 << self.shift)
            .unwrap_or(Duration::from_secs(3600));
        self.next = Some(later(now, step));
        self.shift = (self.shift + 1).min(MAX_BACKOFF_SHIFT);
        true
    }

    /// Opens the database again (see [`Reopen::reopen`]).
    pub fn reopen(&self) -> Result<RedbFile, StoreError> {
        self.reopen.reopen()
    }

    fn reset(&mut self) {
        self.next = None;
        self.shift = 0;
    }
}

fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or(now)
}

impl Writer {
    /// Tries to resume writing when the writer is stopped by a disk failure and a try is due.
    /// Returns whether the writer writes again.
    pub(crate) fn try_resume(&self, r: &mut Resumer) -> bool {
        let Some(cause) = failure(&self.failed) else {
            r.reset();
            return true;
        };
        if !cause.is_disk_failure() || !r.due() {
            return false;
        }
        if cause.is_full() && !r.reopen.writable() {
            return false;
        }
        if let Some(old) = self.db.take() {
            match sole_owner(old, READER_PATIENCE) {
                Ok(db) => drop(db),
                Err(old) => {
                    self.db.put(old);
                    return false;
                }
            }
        }
        let opened = contain("reopen", || {
            let db = r.reopen.reopen()?;
            let on_disk = load_index(&db)?;
            Ok((db, on_disk))
        });
        match opened {
            Err(e) => {
                eprintln!(
                    "memoria: the store {} could not be reopened after a disk failure ({e}); \
                     its blocks are misses until it can, retrying",
                    self.path.display()
                );
                false
            }
            Ok((db, on_disk)) => {
                self.index
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .reconcile(on_disk);
                self.db.put(Arc::new(db));
                *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = None;
                TierStats::add(&self.stats.resumes, 1);
                r.reset();
                eprintln!(
                    "memoria: the store {} writes again (it had stopped: {cause})",
                    self.path.display()
                );
                self.publish();
                true
            }
        }
    }
}
