//! Blocks of the pool lent to a writer on another thread: the staging thread reads a restored
//! context's K/V straight into them, and the prefix match links each one it needs instead of
//! allocating a block and copying. Invariants: a lent block is allocated (used, one reference,
//! in no sequence and no index) and the pool never touches its bytes until it comes back; a
//! [`Loan`] keeps the arena's mapping alive, writes only its own blocks, and when dropped (on
//! whatever thread, a panic's unwind included) hands every block not adopted back to the pool's
//! return list, which the pool drains on its own thread ([`crate::BlockPool::reclaim_loans`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use memoria_kernels::pages::HugeMap;

/// Blocks given back by dropped loans, waiting for the pool to take them back.
#[derive(Debug, Default)]
pub(crate) struct Returns {
    ids: Mutex<Vec<u32>>,
    /// Set while `ids` is non-empty: the pool's check costs one load when nothing is back.
    any: AtomicBool,
}

impl Returns {
    fn give(&self, ids: impl Iterator<Item = u32>) {
        let mut g = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        g.extend(ids);
        if !g.is_empty() {
            self.any.store(true, Ordering::Release);
        }
    }

    /// Every block given back since the last call (empty without a lock when none was).
    pub(crate) fn take(&self, into: &mut Vec<u32>) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut g = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        into.append(&mut g);
        self.any.store(false, Ordering::Release);
    }
}

/// One lent block: its id and first byte.
#[derive(Debug)]
struct Lent {
    id: u32,
    at: *mut u8,
    adopted: bool,
}

/// Blocks lent by a pool, to be filled elsewhere and adopted by its prefix match.
pub struct Loan {
    /// Keeps the arena's mapping (and so every `Lent::at`) alive.
    _map: Arc<HugeMap>,
    blocks: Vec<Lent>,
    block_bytes: usize,
    returns: Arc<Returns>,
}

// SAFETY: the loan's pointers address blocks no one else touches while they are lent (the
// pool's invariant above), inside a mapping the loan keeps alive; moving the loan to another
// thread moves that exclusive access with it.
unsafe impl Send for Loan {}

impl std::fmt::Debug for Loan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan")
            .field("blocks", &self.blocks.len())
            .field("block_bytes", &self.block_bytes)
            .finish()
    }
}

impl Loan {
    pub(crate) fn new(
        map: Arc<HugeMap>,
        blocks: Vec<(u32, *mut u8)>,
        block_bytes: usize,
        returns: Arc<Returns>,
    ) -> Loan {
        Loan {
            _map: map,
            blocks: blocks
                .into_iter()
                .map(|(id, at)| Lent {
                    id,
                    at,
                    adopted: false,
                })
                .collect(),
            block_bytes,
            returns,
        }
    }

    /// Blocks lent.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Bytes per block.
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// The first `n` lent blocks' bytes (at most all), to fill in place.
    pub fn slots_mut(&mut self, n: usize) -> impl Iterator<Item = &mut [u8]> {
        let b = self.block_bytes;
        self.blocks.iter().take(n).map(move |l| {
            // SAFETY: a lent block's bytes, alive (`_map`) and touched by no one but this
            // loan (the module's invariant); each block appears once, so the slices are
            // disjoint, and they borrow `self` mutably.
            unsafe { std::slice::from_raw_parts_mut(l.at, b) }
        })
    }

    /// The bytes of lent block `k`.
    pub fn slot(&self, k: usize) -> Option<&[u8]> {
        let l = self.blocks.get(k)?;
        // SAFETY: as `slots_mut`, shared.
        Some(unsafe { std::slice::from_raw_parts(l.at, self.block_bytes) })
    }

    /// Hands lent block `k` to the pool that lent it, which links it in place of a copy;
    /// `None` when there is no such block or it was adopted already.
    pub fn adopt(&mut self, k: usize) -> Option<u32> {
        let l = self.blocks.get_mut(k)?;
        if l.adopted {
            return None;
        }
        l.adopted = true;
        Some(l.id)
    }

    /// Whether this loan came from the pool whose return list is `returns`.
    pub(crate) fn lent_by(&self, returns: &Arc<Returns>) -> bool {
        Arc::ptr_eq(&self.returns, returns)
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        self.returns
            .give(self.blocks.iter().filter(|l| !l.adopted).map(|l| l.id));
    }
}
