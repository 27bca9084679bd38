//! The named records of the redb tier: saved sessions (charged to the saves' budget), the hot
//! set and the routes, written through the writer and read back in snapshot reads.

use redb::ReadableDatabase;

use super::RedbTier;
use super::budget;
use super::tables::{HOT, HOT_KEY, ROUTES_KEY, SESSIONS};
use super::writer::{Ack, Msg};
use crate::error::{DbResult, StoreError};
use crate::guard::contain;
use crate::hot::HotRecord;
use crate::routes::RoutesRecord;
use crate::session::SessionRecord;
use crate::stats::TierStats;

impl RedbTier {
    /// Saves a session record; `ack` runs after the commit that holds it, or at once with
    /// [`StoreError::SavesFull`] when the saves' budget cannot take it (a save replacing one of
    /// the same name is charged the difference), or with the writer's failure.
    pub fn save_session(&self, ns: u64, name: &str, record: &SessionRecord, ack: Ack) {
        if let Some(f) = self.failure() {
            ack(Err(f));
            return;
        }
        let record = record.encode();
        let need = budget::charge((record.len() + name.len()) as u64);
        let key = (ns, name.to_string());
        let prev = {
            let mut ix = self.index();
            let old = ix.save(&key).unwrap_or(0);
            let used = ix.saves_charged - old;
            if used.saturating_add(need) > self.saves_budget {
                drop(ix);
                ack(Err(StoreError::SavesFull {
                    used,
                    budget: self.saves_budget,
                    need,
                }));
                return;
            }
            ix.set_save(key.clone(), Some(need))
        };
        let m = Msg::Session {
            ns,
            name: name.to_string(),
            record,
            prev,
            ack,
        };
        if let Err(m) = self.send_or_return(m)
            && let Msg::Session { ack, .. } = *m
        {
            self.index().set_save(key, prev);
            ack(Err(StoreError::WriterGone));
        }
    }

    pub(super) fn send_or_return(&self, m: Msg) -> Result<(), Box<Msg>> {
        let g = crate::sync::lock(&self.tx);
        match g.as_ref() {
            Some(tx) => tx.send(m).map_err(|e| Box::new(e.0)),
            None => Err(Box::new(m)),
        }
    }

    /// Replaces the saved hot prefixes with `record` (bytes of [`crate::HotRecord`]); `ack`
    /// runs after the commit that holds it, or with the writer's failure.
    pub fn save_hot(&self, record: Vec<u8>, ack: Ack) {
        self.save_record(HOT_KEY, record, ack);
    }

    /// Replaces the saved routing keys with `record` (bytes of [`RoutesRecord`]); `ack` as
    /// [`RedbTier::save_hot`]'s.
    pub fn save_routes(&self, record: Vec<u8>, ack: Ack) {
        self.save_record(ROUTES_KEY, record, ack);
    }

    fn save_record(&self, key: &'static str, record: Vec<u8>, ack: Ack) {
        if let Some(f) = self.failure() {
            ack(Err(f));
            return;
        }
        if let Err(m) = self.send_or_return(Msg::Hot { key, record, ack })
            && let Msg::Hot { ack, .. } = *m
        {
            ack(Err(StoreError::WriterGone));
        }
    }

    /// The saved hot prefixes, verified; `None` when none were saved.
    pub fn load_hot(&self) -> Result<Option<HotRecord>, StoreError> {
        self.load_record(HOT_KEY, |b| Ok(HotRecord::decode(b)?))
    }

    /// The saved routing keys, verified; `None` when none were saved.
    pub fn load_routes(&self) -> Result<Option<RoutesRecord>, StoreError> {
        self.load_record(ROUTES_KEY, |b| {
            RoutesRecord::decode(b).map_err(StoreError::Routes)
        })
    }

    /// The host record under `key`, decoded; a damaged record is its decoder's error (not a
    /// read error).
    fn load_record<T>(
        &self,
        key: &'static str,
        decode: impl FnOnce(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let r = contain("read host record", || {
            let txn = self.database()?.begin_read().db("begin read")?;
            let t = match txn.open_table(HOT) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(e).db("open hot"),
            };
            let Some(v) = t.get(key).db("read host record")? else {
                return Ok(None);
            };
            decode(v.value()).map(Some)
        });
        if r.as_ref()
            .is_err_and(|e| !matches!(e, StoreError::Hot(_) | StoreError::Routes(_)))
        {
            TierStats::add(&self.stats.read_errors, 1);
        }
        r
    }

    /// Reads a saved session (verified); `None` when there is none by that name.
    pub fn load_session(&self, ns: u64, name: &str) -> Result<Option<SessionRecord>, StoreError> {
        let r = contain("read session", || {
            let txn = self.database()?.begin_read().db("begin read")?;
            let t = txn.open_table(SESSIONS).db("open sessions")?;
            let Some(v) = t.get((ns, name)).db("read session")? else {
                return Ok(None);
            };
            Ok(Some(SessionRecord::decode(v.value())?))
        });
        if r.as_ref()
            .is_err_and(|e| !matches!(e, StoreError::Session(_)))
        {
            TierStats::add(&self.stats.read_errors, 1);
        }
        r
    }
}
