//! `--store-recover` while serving: damage that opening the file did not meet (a page only a
//! write reads, or damage done after the open) stops the writer with a damaged-file error; with
//! `recover` set, the writer then salvages the file through the handle it holds (every entry
//! that still reads and verifies is copied into a fresh file, see [`crate::salvage`]), closes
//! it, moves it aside as `memoria.redb.corrupt-<unix time>`, puts the fresh file in its place,
//! and writes again, saying what was kept and lost. Invariants: only a damaged-file failure
//! starts a fresh file (a full disk or an I/O error resumes the same file, `resume.rs`); the
//! index is replaced by the new file's, keeping the blocks still queued; if the salvage or the
//! reopening fails, the writer stays stopped and says why.

use std::path::Path;
use std::sync::Arc;

use super::load_index;
use super::resume::Resumer;
use super::slot::{READER_PATIENCE, sole_owner};
use super::writer::{Writer, failure};
use crate::guard::contain;
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
        let dir = self.path.parent().unwrap_or(Path::new("."));
        // Read through the handle the server holds (the file is marked in use: no other open
        // would read it), then let it go: readers still holding it keep it until they end.
        let old = self.db.take();
        let salvaged =
            crate::salvage::salvage_from(old.as_deref().map(|f| &**f), dir, cause.damage());
        if let Some(old) = old
            && let Ok(db) = sole_owner(old, READER_PATIENCE)
        {
            drop(db);
        }
        let report = match salvaged {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "memoria: the store {} is damaged and --store-recover could not salvage it \
                     ({e}); it stays stopped",
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
                    "memoria: the damaged store file was moved to {}, but the salvaged store \
                     could not be opened at {} ({e}); the store stays stopped",
                    report.moved_to,
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
            "memoria: the store file was damaged ({}); --store-recover salvaged it ({}) into a \
             fresh file, moved the damaged file to {} and goes on",
            report.reason,
            report.summary(),
            report.moved_to
        );
        self.publish();
        true
    }
}
