//! Per-namespace runtime state shared by that namespace's requests: the engine handle, the
//! instance semaphore (`max_instances`), the open-session count (`max_sessions`), and host-wide
//! pieces guests reach through host functions (chat template, saved sessions, counters), and
//! the namespace's CPU account (`fair`).
//!
//! Invariant: a [`SessionSlot`] exists for every engine session a guest holds; dropping it is
//! the only way the count goes down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memoria_model::chat::ChatTemplate;
use memoria_sched::EngineHandle;
use memoria_tenant::Namespace;
use tokio::sync::Semaphore;

use crate::fair::{CpuShare, NsCpu};
use crate::named::NamedSessions;

/// Host-wide counters of the runtime, readable from any thread.
#[derive(Debug, Default)]
pub struct RuntimeStats {
    /// Requests handled by components.
    pub requests: AtomicU64,
    /// Requests that ended in a trap, timeout or memory-limit error.
    pub failed: AtomicU64,
    /// Bytes copied from guest memory into host buffers by host calls.
    pub host_call_bytes: AtomicU64,
    /// Host calls refused because an argument exceeded `max_host_call_bytes` (nothing copied).
    pub host_call_refused: AtomicU64,
    /// Components deployed (or replaced) through the admin API.
    pub deploys: AtomicU64,
    /// Deploys refused because the component was invalid.
    pub deploys_refused: AtomicU64,
    per_namespace: Mutex<BTreeMap<String, Arc<NsCounters>>>,
}

/// One namespace's component requests; kept by name, so a reload does not reset them.
#[derive(Debug, Default)]
pub struct NsCounters {
    /// Requests that reached a component.
    pub requests: AtomicU64,
    /// Requests that ended in a trap, timeout or memory-limit error.
    pub failed: AtomicU64,
    /// Requests refused with 503 because every `max_instances` slot was busy.
    pub busy: AtomicU64,
    /// CPU time its guests ran, nanoseconds (thread CPU time of their slices).
    pub cpu_nanos: AtomicU64,
    /// Wall time its guests held a tokio worker, nanoseconds (what the CPU share is charged).
    pub worker_nanos: AtomicU64,
    /// Times one of its guests was put to sleep for being over the namespace's CPU share.
    pub throttled: AtomicU64,
    /// Time its guests were put to sleep for, nanoseconds.
    pub throttled_nanos: AtomicU64,
}

/// [`NsCounters`] read at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NsCountersSnapshot {
    pub namespace: String,
    pub requests: u64,
    pub failed: u64,
    pub busy: u64,
    pub cpu_nanos: u64,
    pub worker_nanos: u64,
    pub throttled: u64,
    pub throttled_nanos: u64,
}

impl RuntimeStats {
    /// The counters of namespace `ns` (created on first use).
    pub fn namespace(&self, ns: &str) -> Arc<NsCounters> {
        self.per_namespace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(ns.to_string())
            .or_default()
            .clone()
    }

    /// Every namespace with counters, by name.
    pub fn per_namespace(&self) -> Vec<NsCountersSnapshot> {
        self.per_namespace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(ns, c)| {
                let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
                NsCountersSnapshot {
                    namespace: ns.clone(),
                    requests: get(&c.requests),
                    failed: get(&c.failed),
                    busy: get(&c.busy),
                    cpu_nanos: get(&c.cpu_nanos),
                    worker_nanos: get(&c.worker_nanos),
                    throttled: get(&c.throttled),
                    throttled_nanos: get(&c.throttled_nanos),
                }
            })
            .collect()
    }
}

/// What every namespace's host functions share.
#[derive(Debug)]
pub(crate) struct HostShared {
    pub engine: EngineHandle,
    pub template: Arc<ChatTemplate>,
    pub model_id: String,
    /// Saved sessions when the engine has no persistent store.
    pub named: NamedSessions,
    /// Save/restore through the engine's durable store instead of `named`.
    pub durable: bool,
    pub stats: Arc<RuntimeStats>,
    /// Each namespace's CPU share (None: CPU is counted, never throttled).
    pub cpu_share: Option<CpuShare>,
    /// The epoch tick: the longest a guest runs between two checks of its share.
    pub epoch_tick: std::time::Duration,
    /// First-token padding of `hit_timing = "pad"` namespaces (shared with the HTTP side).
    pub hit_pad: Arc<memoria_tenant::HitPad>,
    /// Embeddings' padding of those namespaces (shared with the HTTP side).
    pub embed_pad: Arc<memoria_tenant::HitPad>,
}

/// One namespace's runtime state.
#[derive(Debug)]
pub(crate) struct NsRuntime {
    pub ns: Arc<Namespace>,
    pub host: Arc<HostShared>,
    pub instances: Arc<Semaphore>,
    pub counters: Arc<NsCounters>,
    /// CPU time of its guests, and its share.
    pub cpu: Arc<NsCpu>,
    sessions: AtomicUsize,
}

impl NsRuntime {
    pub fn new(ns: Arc<Namespace>, host: Arc<HostShared>) -> NsRuntime {
        let counters = host.stats.namespace(&ns.name);
        // The namespace's own `cpu_millicores` over the host's share.
        let share = host.cpu_share.map(|s| CpuShare {
            millicores: ns.spec.limits.cpu_millicores.unwrap_or(s.millicores),
            ..s
        });
        NsRuntime {
            instances: Arc::new(Semaphore::new(ns.spec.limits.max_instances)),
            cpu: Arc::new(NsCpu::new(counters.clone(), share, host.epoch_tick)),
            counters,
            sessions: AtomicUsize::new(0),
            ns,
            host,
        }
    }

    /// Reserves one of the namespace's `max_sessions` slots.
    pub fn session_slot(self: &Arc<Self>) -> Option<SessionSlot> {
        let max = self.ns.spec.limits.max_sessions;
        let mut n = self.sessions.load(Ordering::Acquire);
        while n < max {
            match self
                .sessions
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(SessionSlot { ns: self.clone() }),
                Err(now) => n = now,
            }
        }
        None
    }

    /// Sessions currently open by this namespace's guests.
    pub fn open_sessions(&self) -> usize {
        self.sessions.load(Ordering::Acquire)
    }
}

/// One counted session of a namespace; released on drop.
#[derive(Debug)]
pub(crate) struct SessionSlot {
    ns: Arc<NsRuntime>,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.ns.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}
