//! The heap thresholds `memoria` sets at start (`memoria::heap`), checked in a process of its
//! own: malloc's statistics are process-wide, so no other test may allocate meanwhile.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_large_block_comes_from_the_heap_once_thresholds_are_set() {
    /// Chunks malloc currently serves with their own mapping.
    fn mapped_chunks() -> usize {
        // SAFETY: mallinfo2 only reads malloc's statistics.
        unsafe { libc::mallinfo2() }.hblks
    }
    if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.")) {
        // The environment's own malloc settings are kept.
        assert!(!memoria::heap::keep_freed_memory());
        return;
    }
    let before = mapped_chunks();
    let plain = std::hint::black_box(vec![1u8; 8 << 20]);
    assert_eq!(
        mapped_chunks(),
        before + 1,
        "glibc maps 8 MiB on its own by default"
    );
    drop(plain);
    assert!(memoria::heap::keep_freed_memory());
    let before = mapped_chunks();
    let kept = std::hint::black_box(vec![1u8; 8 << 20]);
    assert_eq!(
        mapped_chunks(),
        before,
        "a 8 MiB block now comes from the heap"
    );
    drop(kept);
}
