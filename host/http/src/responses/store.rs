//! Stored responses (`store: true`, the default) for `previous_response_id`: the conversation
//! so far in chat form (every message, the answer included) and the tokens whose K/V the
//! answer left, kept per namespace: in memory (bounded, oldest dropped), and with `--store` also
//! as one JSON file per response under `<store>/responses/<namespace>/`, so a continuation
//! after a restart finds it. Ids are random (128 bits) and looked up only within the caller's
//! namespace, so one tenant can neither guess nor reach another's.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Responses kept in memory.
const KEPT: usize = 4096;

/// One stored response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    /// Chat messages of the whole conversation, this response's answer last.
    pub messages: Vec<Value>,
    /// The context the answer left: prompt and generated tokens.
    pub tokens: Vec<u32>,
}

/// Records by (namespace, id), and their keys oldest first.
type Kept = (
    HashMap<(String, String), Record>,
    VecDeque<(String, String)>,
);

/// The store.
#[derive(Default)]
pub struct ResponseStore {
    dir: Option<PathBuf>,
    mem: Mutex<Kept>,
}

impl ResponseStore {
    /// A store that also keeps files under `dir` (None: memory only).
    pub fn new(dir: Option<PathBuf>) -> ResponseStore {
        ResponseStore {
            dir,
            mem: Mutex::default(),
        }
    }

    /// Whether records survive a restart.
    pub fn durable(&self) -> bool {
        self.dir.is_some()
    }

    fn file(&self, ns: &str, id: &str) -> Option<PathBuf> {
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 128
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        (ok(ns) && ok(id)).then(|| {
            self.dir
                .as_ref()
                .map(|d| d.join(ns).join(format!("{id}.json")))
        })?
    }

    /// Keeps `rec` for namespace `ns` (its file written before this returns).
    pub fn put(&self, ns: &str, rec: Record) -> std::io::Result<()> {
        if let Some(path) = self.file(ns, &rec.id) {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, serde_json::to_vec(&rec).unwrap_or_default())?;
            std::fs::rename(&tmp, &path)?;
        }
        let mut m = self.mem.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), rec.id.clone());
        if m.0.insert(key.clone(), rec).is_none() {
            m.1.push_back(key);
        }
        while m.1.len() > KEPT {
            if let Some(old) = m.1.pop_front() {
                m.0.remove(&old);
            }
        }
        Ok(())
    }

    /// The response `id` of namespace `ns`, if it was stored.
    pub fn get(&self, ns: &str, id: &str) -> Option<Record> {
        {
            let m = self.mem.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(r) = m.0.get(&(ns.to_string(), id.to_string())) {
                return Some(r.clone());
            }
        }
        let path = self.file(ns, id)?;
        let bytes = std::fs::read(path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// A fresh id: `prefix_` and 32 hex digits drawn from the system's random source.
pub fn new_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, Relaxed);
    let mut h = blake3::Hasher::new();
    h.update(&nanos.to_le_bytes());
    h.update(&n.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    let mut seed = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut seed);
    }
    h.update(&seed);
    let x = h.finalize();
    let hex: String = x.as_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{prefix}_{hex}")
}
