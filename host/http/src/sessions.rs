//! The registry of engine sessions opened by HTTP requests, for the admin API: which namespace,
//! route and prompt size each has and when it started. Invariant: an entry lives exactly as
//! long as its [`SessionGuard`], which the request holds while its session is open.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use memoria_sched::SessionId;
use serde_json::{Value, json};

/// One live session.
#[derive(Clone, Debug)]
pub struct SessionEntry {
    pub namespace: String,
    pub ns_id: memoria_kv::NamespaceId,
    pub route: &'static str,
    pub prompt_tokens: usize,
    pub stream: bool,
    pub started: Instant,
    pub started_unix: u64,
}

/// Live sessions by id.
#[derive(Debug, Default)]
pub struct SessionRegistry {
    map: Arc<Mutex<BTreeMap<SessionId, SessionEntry>>>,
}

/// Removes its entry when dropped.
#[derive(Debug)]
pub struct SessionGuard {
    id: SessionId,
    map: Arc<Mutex<BTreeMap<SessionId, SessionEntry>>>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

impl SessionRegistry {
    /// Registers `id` until the guard is dropped.
    pub fn register(&self, id: SessionId, entry: SessionEntry) -> SessionGuard {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry);
        SessionGuard {
            id,
            map: self.map.clone(),
        }
    }

    /// One session.
    pub fn get(&self, id: SessionId) -> Option<SessionEntry> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    /// Every live session, oldest id first.
    pub fn list(&self) -> Vec<(SessionId, SessionEntry)> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (*k, v.clone())).collect()
    }
}

impl SessionEntry {
    /// A new entry stamped now.
    pub fn new(
        namespace: &str,
        ns_id: memoria_kv::NamespaceId,
        route: &'static str,
        prompt_tokens: usize,
        stream: bool,
    ) -> SessionEntry {
        SessionEntry {
            namespace: namespace.to_string(),
            ns_id,
            route,
            prompt_tokens,
            stream,
            started: Instant::now(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    /// The JSON the admin API shows.
    pub fn to_json(&self, id: SessionId) -> Value {
        json!({
            "id": id.0,
            "namespace": self.namespace,
            "route": self.route,
            "prompt_tokens": self.prompt_tokens,
            "stream": self.stream,
            "created": self.started_unix,
            "age_s": self.started.elapsed().as_secs_f64(),
        })
    }
}
