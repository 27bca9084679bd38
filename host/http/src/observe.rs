//! A hook for watching served prompts: `memoria serve` installs one to publish the routing keys
//! of what its pool now holds (host events). Called on the request's task after a
//! chat or completion request was answered 2xx; it must return at once (queue, never block).
//! The handler leaves the prompt it opened its session with in the request's [`ServedSlot`]:
//! its tokens and the pool's chain hashes the open computed, so the observer neither
//! tokenizes nor hashes the prompt again.

use std::sync::{Arc, Mutex};

use memoria_kv::BlockHash;
use memoria_tenant::Namespace;

/// The first prompt a request's engine session opened with.
#[derive(Clone, Debug)]
pub struct ServedPrompt {
    pub tokens: Arc<[u32]>,
    /// The pool's salted hashes of its whole blocks: host-internal, they never leave the host.
    pub pool_chain: Arc<[BlockHash]>,
}

/// Where a request's handler leaves its first prompt for the observer (made only when one is
/// installed).
#[derive(Debug, Default)]
pub struct ServedSlot(Mutex<Option<ServedPrompt>>);

impl ServedSlot {
    /// Keeps `prompt` unless one is kept already (a request's first prompt wins).
    pub fn offer(&self, prompt: ServedPrompt) {
        if let Ok(mut p) = self.0.lock() {
            p.get_or_insert(prompt);
        }
    }

    pub fn take(&self) -> Option<ServedPrompt> {
        self.0.lock().ok()?.take()
    }
}

/// Watches chat and completion requests a host answered.
pub trait PromptObserver: Send + Sync {
    /// A request in `ns` was answered 2xx: `label` is its route label (`""` for `/v1/...`, the
    /// namespace of `/ns/{namespace}/v1/...`), `prompt` the first prompt it opened a session
    /// with (with its pool chain).
    fn served(&self, ns: &Namespace, label: &str, prompt: ServedPrompt);

    /// Counters: `(name, help, value)`, exposed as `memoria_events_{name}_total` in `/metrics`
    /// and `events.{name}` in `/stats`.
    fn counters(&self) -> Vec<(&'static str, &'static str, u64)>;
}
