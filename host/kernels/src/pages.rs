//! [`HugeMap`]: an anonymous, zero-filled memory mapping whose bytes start on a 2 MiB boundary
//! and are advised for transparent huge pages (`MADV_HUGEPAGE`), for the big buffers every
//! token streams through (the interleaved weights, the K/V arena). With 4 KiB pages each token
//! walks the page tables tens of thousands of times, and under a hypervisor each walk is
//! two-level; huge pages cut that by 512×. Pages are still committed only when first touched
//! (2 MiB at a time where the kernel grants a huge page, 4 KiB where it does not: THP set to
//! `never`, no free huge page, not Linux), so nothing here commits memory up front.

use memmap2::MmapMut;

/// The huge page size the mapping is aligned to (x86-64 and aarch64 with 4 KiB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// An anonymous mapping of [`Self::len`] zeroed bytes starting on a [`HUGE_PAGE`] boundary.
pub struct HugeMap {
    map: MmapMut,
    /// Where the aligned bytes start within `map`.
    start: usize,
    len: usize,
    advised: bool,
}

impl std::fmt::Debug for HugeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeMap")
            .field("len", &self.len)
            .field("huge_pages_advised", &self.advised)
            .finish()
    }
}

impl HugeMap {
    /// Reserves `len` bytes (at least one). The mapping is over-sized by up to two huge pages
    /// so the aligned range and its last huge page both fit; the slack is address space only,
    /// never touched. Fails only where the address space cannot be reserved.
    pub fn new(len: usize) -> std::io::Result<HugeMap> {
        let len = len.max(1);
        let whole = len
            .checked_next_multiple_of(HUGE_PAGE)
            .and_then(|l| l.checked_add(HUGE_PAGE))
            .ok_or_else(|| std::io::Error::other(format!("{len} bytes: too large to map")))?;
        let map = MmapMut::map_anon(whole)?;
        let addr = map.as_ptr() as usize;
        let start = addr.next_multiple_of(HUGE_PAGE) - addr;
        let huge = len.next_multiple_of(HUGE_PAGE);
        // Refused where THP is compiled out or the kernel predates it: base pages then.
        #[cfg(target_os = "linux")]
        let advised = map
            .advise_range(memmap2::Advice::HugePage, start, huge)
            .is_ok();
        #[cfg(not(target_os = "linux"))]
        let advised = {
            let _ = huge;
            false
        };
        Ok(HugeMap {
            map,
            start,
            len,
            advised,
        })
    }

    /// Bytes usable (as asked, at least one).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a mapping holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether the kernel accepted the huge page advice (it may still fall back to base
    /// pages where no huge page is free).
    pub fn huge_pages_advised(&self) -> bool {
        self.advised
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.map[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map[self.start..self.start + self.len]
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_slice().as_mut_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_start_on_a_huge_page_and_read_as_zeros() {
        for len in [0, 1, 4096, HUGE_PAGE - 1, HUGE_PAGE, 3 * HUGE_PAGE + 17] {
            let mut m = HugeMap::new(len).expect("map");
            assert_eq!(m.len(), len.max(1));
            assert_eq!(m.as_ptr() as usize % HUGE_PAGE, 0, "len {len}");
            assert!(m.as_slice().iter().step_by(4096).all(|&b| b == 0));
            let last = m.len() - 1;
            m.as_mut_slice()[last] = 9;
            assert_eq!(m.as_slice()[last], 9);
        }
    }

    #[test]
    fn a_large_map_is_reserved_not_committed() {
        // 8 GiB of address space: committing it would fail or take seconds on a 24 GiB host.
        let m = HugeMap::new(8 << 30).expect("reserve");
        assert_eq!(m.as_slice()[(8 << 30) - 1], 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_advice_is_taken_where_the_kernel_offers_huge_pages() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        let m = HugeMap::new(HUGE_PAGE).expect("map");
        if thp.is_ok_and(|s| !s.contains("[never]")) {
            assert!(m.huge_pages_advised());
        }
    }
}
