//! Disjoint mutable access for pool tasks: [`for_each_chunk_mut`] hands task `i` the `i`-th
//! chunk of a slice, and [`SharedMut`] lets tasks write disjoint, non-contiguous parts of one
//! buffer (the caller proves disjointness at each use).

use std::marker::PhantomData;

/// `f(i, chunk_i)` for every `chunk`-long piece of `data` (the last may be shorter), on the
/// current pool. Panics if `chunk == 0` while `data` is not empty.
pub fn for_each_chunk_mut<T: Send>(
    data: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if data.is_empty() {
        return;
    }
    assert!(chunk > 0, "for_each_chunk_mut: chunk must be > 0");
    let len = data.len();
    let ptr = SharedMut::new(data);
    super::for_each(len.div_ceil(chunk), |i| {
        let start = i * chunk;
        // SAFETY: chunks i ≠ j do not overlap and each task index runs exactly once.
        let part = unsafe { ptr.slice(start, chunk.min(len - start)) };
        f(i, part);
    });
}

/// A `&mut [T]` shared by pool tasks that write disjoint ranges of it.
#[derive(Clone, Copy, Debug)]
pub struct SharedMut<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: access goes through `slice`, whose contract forbids overlapping use; T: Send.
unsafe impl<T: Send> Send for SharedMut<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedMut<'_, T> {}

impl<'a, T> SharedMut<'a, T> {
    /// Wraps `data` for the length of its borrow.
    pub fn new(data: &'a mut [T]) -> Self {
        SharedMut {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: PhantomData,
        }
    }

    /// Total length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `data[start..start + len]`. Panics when out of range.
    ///
    /// # Safety
    /// No two live results may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(&self, start: usize, len: usize) -> &'a mut [T] {
        assert!(
            start <= self.len && len <= self.len - start,
            "SharedMut: range out of bounds"
        );
        // SAFETY: in bounds (checked); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}
