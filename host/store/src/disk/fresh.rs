//! `--store-recover` while serving: damage that opening the file did not meet (a page only a
//! write reads, or damage done after the open) stops the writer with a damaged-file error; with
//! `recover` set, the writer then closes the file, moves it aside as
//! `memoria.redb.corrupt-<unix time>` (see [`crate::maintenance::move_aside`]), opens an empty
//! store in its place, and writes again, saying so. Invariants: only a damaged-file failure
//! starts a fresh file (a full disk or an I/O error resumes the same file, `resume.rs`); the
//! index is replaced by the new file's (empty) one, keeping only the blocks still queued; if
//! moving or creating fails, the writer stays stopped and says why.

use std::path::Path;
use std::sync::Arc;

use super::resume::Resumer;
use super::slot::{READER_PATIENCE, sole_owner};
use super::writer::{Writer, failure};
use super::{close_quietly, load_index};
use crate::guard::contain;
use crate::maintenance::move_aside;
use crate::stats::TierStats;

impl Writer {
    /// Starts an empty file when the writer stopped on a damaged one and `recover` is set.
    /// Returns whether it did.
    pub(crate) fn start_fresh_if_damaged(&self, r: &Resumer) -> bool {
        if !self.recover {
            return false;
        }
        let Some(cause) = failure(&self.failed).filter(|f| f.is_damaged()) else {
            return false;
        };
        if let Some(old) = self.db.take() {
            // Readers still holding it keep it until their read ends.
            if let Ok(db) = sole_owner(old, READER_PATIENCE) {
                close_quietly(db);
            }
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let moved = match move_aside(dir) {
            Ok(to) => to,
            Err(e) => {
                eprintln!(
                    "memoria: the store {} is damaged and --store-recover could not move it \
                     aside ({e}); it stays stopped",
                    self.path.display()
                );
                return false;
            }
        };
        let opened = contain("create", || {
            let db = r.reopen()?;
            let on_disk = load_index(&db)?;
            Ok((db, on_disk))
        });
        let (db, on_disk) = match opened {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "memoria: the damaged store file was moved to {}, but an empty store could \
                     not be created at {} ({e}); the store stays stopped",
                    moved.display(),
                    self.path.display()
                );
                return false;
            }
        };
        self.index
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .restart(on_disk);
        self.undurable.borrow_mut().clear();
        self.churn.set(0);
        self.settled.set(0);
        self.db.put(Arc::new(db));
        *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        TierStats::add(&self.stats.recoveries, 1);
        eprintln!(
            "memoria: the store file was damaged ({}); --store-recover moved it to {} and \
             goes on with an empty store",
            cause.damage(),
            moved.display()
        );
        self.publish();
        true
    }
}
