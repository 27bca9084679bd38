//! The one wasmtime [`Engine`] of a host: pooling allocator sized from the namespaces' limits,
//! epoch interruption driven by a ticker thread, fuel when any namespace asks for it.
//!
//! Invariant: the pool's per-memory reservation is at least every namespace's memory cap, so
//! the cap (not the pool) is what stops a guest.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use memoria_tenant::Tenants;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Pool and feature sizing derived from the namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineSizing {
    /// Component instances alive at once, all namespaces together.
    pub instances: u32,
    /// Largest linear memory any namespace may grow to.
    pub max_memory: u64,
    /// Whether some namespace meters fuel.
    pub fuel: bool,
}

impl EngineSizing {
    /// Sums `max_instances` (plus slack for the HTTP path's overlap) and takes the largest cap.
    pub fn from_tenants(tenants: &Tenants) -> EngineSizing {
        let mut instances = 8u64;
        let mut max_memory = 16u64 << 20;
        let mut fuel = false;
        for ns in tenants.iter() {
            let l = &ns.spec.limits;
            instances =
                instances.saturating_add(u64::try_from(l.max_instances).unwrap_or(u64::MAX));
            max_memory = max_memory.max(l.memory_bytes);
            fuel |= l.fuel.is_some();
        }
        EngineSizing {
            instances: instances.min(4096) as u32,
            max_memory,
            fuel,
        }
    }

    /// Adds `spare` instances for namespaces a reload may add.
    pub fn with_headroom(self, spare: u32) -> EngineSizing {
        EngineSizing {
            instances: self.instances.saturating_add(spare).min(4096),
            ..self
        }
    }

    /// Why an engine sized `self` cannot serve namespaces that need `need` (None: it can).
    pub fn shortfall(&self, need: &EngineSizing) -> Option<String> {
        if need.instances > self.instances {
            return Some(format!(
                "the namespaces' max_instances add up to more than the {} instance slots the runtime was started with",
                self.instances
            ));
        }
        if need.max_memory > self.max_memory {
            return Some(format!(
                "a namespace's memory limit ({} MiB) is above the {} MiB the runtime was started with",
                need.max_memory >> 20,
                self.max_memory >> 20
            ));
        }
        if need.fuel && !self.fuel {
            return Some(
                "a namespace now meters fuel, which the runtime was started without".into(),
            );
        }
        None
    }
}

/// Builds the engine.
pub fn build(s: EngineSizing) -> wasmtime::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(s.instances)
        .total_core_instances(s.instances * 8)
        .total_memories(s.instances * 2)
        .total_tables(s.instances * 8)
        .total_stacks(s.instances)
        .max_memory_size(usize::try_from(s.max_memory).unwrap_or(usize::MAX));
    let mut cfg = Config::new();
    cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .epoch_interruption(true)
        .consume_fuel(s.fuel)
        .wasm_component_model(true);
    Engine::new(&cfg)
}

/// Increments the engine's epoch every `tick` until dropped (or the engine is gone).
#[derive(Debug)]
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub fn start(engine: &Engine, tick: Duration) -> std::io::Result<EpochTicker> {
        let weak = engine.weak();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("memoria-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match weak.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(EpochTicker { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
