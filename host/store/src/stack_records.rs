//! The records the tier stack saves beside blocks: named sessions (on disk, and in their shared
//! form in the remote tier), the hot prefixes and the routing keys of stored blocks.

use super::*;

impl TierStack {
    /// Saves a session record: durably on disk when there is one, then as the shared form in
    /// the remote tier when there is one (so another host restores it). `ack` runs after the
    /// disk commit and the remote's answer, or with the error. With a disk, a remote that does
    /// not answer leaves the save on disk (counted as a remote write error); without one, it
    /// fails the save ([`StoreError::RemoteUnavailable`]).
    pub fn save_session(&self, ns: NamespaceId, name: &str, record: &SessionRecord, ack: Ack) {
        let remote = self.remote_session_write(name, record);
        match (&self.disk, remote) {
            (None, None) => ack(Err(StoreError::NoDisk)),
            (None, Some(write)) => write.send(Box::new(move |ok| {
                ack(if ok {
                    Ok(())
                } else {
                    Err(StoreError::RemoteUnavailable)
                })
            })),
            (Some(d), None) => d.save_session(u64::from(ns.0), name, record, ack),
            (Some(d), Some(write)) => d.save_session(
                u64::from(ns.0),
                name,
                record,
                Box::new(move |r| match r {
                    Ok(()) => write.send(Box::new(move |_| ack(Ok(())))),
                    Err(e) => ack(Err(e)),
                }),
            ),
        }
    }

    /// A saved session, verified; `None` when there is none by that name on disk (see
    /// [`TierStack::load_session_remote`] for the remote tier's copy).
    pub fn load_session(
        &self,
        ns: NamespaceId,
        name: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        match &self.disk {
            Some(d) => d.load_session(u64::from(ns.0), name),
            None if self.remote.is_some() => Ok(None),
            None => Err(StoreError::NoDisk),
        }
    }

    /// Replaces the saved hot prefixes; `ack` runs after the commit (or with the error).
    pub fn save_hot(&self, record: &crate::HotRecord, ack: Ack) {
        match (&self.disk, record.encode()) {
            (Some(d), Ok(bytes)) => d.save_hot(bytes, ack),
            (Some(_), Err(e)) => ack(Err(e.into())),
            (None, _) => ack(Err(StoreError::NoDisk)),
        }
    }

    /// Replaces the saved routing keys of stored blocks (see [`crate::routes`]); `ack` as
    /// [`TierStack::save_hot`]'s.
    pub fn save_routes(&self, record: &crate::RoutesRecord, ack: Ack) {
        match (&self.disk, record.encode()) {
            (Some(d), Ok(bytes)) => d.save_routes(bytes, ack),
            (Some(_), Err(e)) => ack(Err(StoreError::Routes(e))),
            (None, _) => ack(Err(StoreError::NoDisk)),
        }
    }

    /// The saved routing keys, verified; `None` when none were saved or there is no disk.
    pub fn load_routes(&self) -> Result<Option<crate::RoutesRecord>, StoreError> {
        match &self.disk {
            Some(d) => d.load_routes(),
            None => Ok(None),
        }
    }

    /// The saved hot prefixes, verified; `None` when none were saved or there is no disk.
    pub fn load_hot(&self) -> Result<Option<crate::HotRecord>, StoreError> {
        match &self.disk {
            Some(d) => d.load_hot(),
            None => Ok(None),
        }
    }
}
