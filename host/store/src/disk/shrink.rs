//! Holding the redb file itself to the disk budget. The charges bound what the cache blocks
//! hold, but the file is what redb makes of it: a commit without fsync cannot reuse the pages it
//! frees until a durable one (bounded in `writer.rs`), branch pages and free space between
//! values cost more, and redb grows a file by doubling it, so a store a little past one size
//! lands on twice it. So after every batch the writer reads the file's size; past
//! [`file_limit`] it evicts in a durable commit, compacts the file (readers see misses
//! meanwhile, as during a reopen) and checks that its next growth ([`next_growth`]) stays within
//! the limit; if not, the cache blocks' target is lowered by what the file still holds past
//! half the limit, and again, for a few rounds. Invariants: the target only ever goes down
//! (within a process); an attempt that falls short is not repeated until the file grows again;
//! budgets under [`MIN_BUDGET`] are not held (the file starts near 1 MiB).

use std::sync::Arc;

use redb::CompactionError;

use super::budget::{MIN_BUDGET, file_limit, next_growth};
use super::slot::{READER_PATIENCE, sole_owner};
use super::writer::{Msg, Writer, failure};
use crate::error::{DbResult, StoreError};
use crate::guard::contain;
use crate::stats::TierStats;

/// Evict-and-compact rounds one attempt makes at most.
const ROUNDS: usize = 4;
/// `compact` calls per round at most (each moves what it can towards the file's start).
const PASSES: usize = 8;

impl Writer {
    fn file_len(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// Brings the file back within its limit when it has passed it (see the module's doc).
    pub(crate) fn hold_file(&self) {
        let limit = file_limit(self.budget);
        let file = self.file_len();
        if self.budget < MIN_BUDGET
            || file <= limit
            || file <= self.settled.get()
            || failure(&self.failed).is_some()
        {
            return;
        }
        let mut after = file;
        for _ in 0..ROUNDS {
            // Evict down to the target in a durable commit: what it frees becomes reusable.
            self.process(vec![Msg::Flush(Box::new(|_| {}))]);
            if failure(&self.failed).is_some() || !self.compact() {
                break;
            }
            after = self.file_len();
            let fits = next_growth(after) <= limit;
            if fits {
                break;
            }
            let excess = after.saturating_sub(limit / 2);
            self.trim.set(self.trim.get().saturating_add(excess));
        }
        self.settled.set(if after > limit { after } else { 0 });
        eprintln!(
            "memoria: the store {} was {} bytes, past its limit of {limit} ([store] \
             max_disk_mb + 1/8): compacted to {after} bytes; cache blocks now take at most {} \
             bytes",
            self.path.display(),
            file,
            self.block_target(self.index_saves()),
        );
        self.publish();
    }

    fn index_saves(&self) -> u64 {
        self.index
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .saves_charged
    }

    /// Compacts the file with the handle taken from the readers; false when it could not be
    /// (readers held on, or redb refused); a damaged file stops the writer as a write would.
    fn compact(&self) -> bool {
        let Some(old) = self.db.take() else {
            return false;
        };
        let mut db = match sole_owner(old, READER_PATIENCE) {
            Ok(db) => db,
            Err(old) => {
                self.db.put(old);
                return false;
            }
        };
        let r = contain("compact", || {
            for _ in 0..PASSES {
                match db.compact() {
                    Ok(true) => {}
                    Ok(false) => break,
                    // A read that began before the handle was taken: try again later.
                    Err(CompactionError::TransactionInProgress) => return Ok(false),
                    Err(e) => return Err(e).db("compact"),
                }
            }
            Ok(true)
        });
        match r {
            Ok(done) => {
                self.db.put(Arc::new(db));
                if done {
                    TierStats::add(&self.stats.compactions, 1);
                    // Compaction commits durably: nothing is left without fsync.
                    self.undurable.borrow_mut().clear();
                    self.churn.set(0);
                }
                done
            }
            Err(e) => {
                if e.is_damaged() {
                    drop(db);
                } else {
                    self.db.put(Arc::new(db));
                }
                self.fail_compaction(&e);
                false
            }
        }
    }

    fn fail_compaction(&self, e: &StoreError) {
        if e.is_damaged() || e.is_disk_failure() {
            // As a failed write: the writer stops (and resumes or starts fresh as it would).
            let lost = self.undurable.take();
            TierStats::add(&self.stats.dropped, lost.len() as u64);
            let mut ix = self.index.lock().unwrap_or_else(|p| p.into_inner());
            for h in &lost {
                ix.remove(h);
            }
            drop(ix);
        }
        self.fail(e);
    }
}
