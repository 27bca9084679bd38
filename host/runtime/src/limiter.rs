//! The store's memory limiter: caps linear memory (and tables) like wasmtime's `StoreLimits`,
//! and records that the cap was hit so a failed request can say "memory limit" instead of a
//! generic trap (hitting the cap is not a `wasmtime::Trap`).

use wasmtime::ResourceLimiter;

/// Per-store caps; `hit` is set when a grow was refused.
#[derive(Debug)]
pub struct MemoryLimiter {
    pub memory_bytes: usize,
    pub table_elements: usize,
    pub hit: Option<usize>,
}

impl MemoryLimiter {
    pub fn new(memory_bytes: u64) -> MemoryLimiter {
        MemoryLimiter {
            memory_bytes: usize::try_from(memory_bytes).unwrap_or(usize::MAX),
            table_elements: 100_000,
            hit: None,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.hit = Some(desired);
            return Err(wasmtime::format_err!(
                "memory limit: growing linear memory to {desired} bytes exceeds the namespace's memory_bytes = {}",
                self.memory_bytes
            ));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements)
    }
}
