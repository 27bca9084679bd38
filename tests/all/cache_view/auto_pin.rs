//! Hot-prefix warming on a pool: the most reused prefix stays pinned through an explicit
//! eviction of everything else, follows the popularity as it moves, never takes an
//! operator's pin away, and lets go when turned off.

use memoria_kv::{
    BlockHash, BlockPool, KvElem, KvLayout, ModelFingerprint, NamespaceId, NamespaceSalt, PinLevel,
};

const B: usize = 4;

fn pool(n_blocks: usize) -> BlockPool {
    let layout = KvLayout::new(2, 32, KvElem::Q8_0).with_block_tokens(B);
    BlockPool::new(layout, n_blocks * layout.block_bytes().unwrap()).unwrap()
}

fn request(p: &mut BlockPool, root: BlockHash, prompt: &[u32]) {
    let s = p.create_seq(NamespaceId(1), root);
    let hit = p.match_prefix(s, prompt).unwrap();
    let rest = &prompt[hit..];
    p.reserve(s, rest.len()).unwrap();
    p.commit(s, rest).unwrap();
    p.drop_seq(s).unwrap();
}

fn prompt(base: u32, blocks: usize) -> Vec<u32> {
    (0..(blocks * B) as u32 + 1).map(|i| base + i).collect()
}

fn resident(p: &BlockPool, root: BlockHash, prompt: &[u32]) -> usize {
    let mut prev = root;
    let mut n = 0;
    for c in prompt.as_chunks::<B>().0 {
        prev = BlockHash::chain(&prev, c);
        if p.lookup(&prev).is_none() {
            break;
        }
        n += 1;
    }
    n
}

#[test]
fn cache_view_auto_pin_keeps_the_most_reused_prefix() {
    let mut p = pool(64);
    let r = p.root_hash(
        &ModelFingerprint::of(b"auto-pin"),
        &NamespaceSalt::derive("a"),
    );
    p.set_auto_pin(1);
    let (hot, warm) = (prompt(1000, 3), prompt(2000, 3));
    for i in 0..6 {
        request(&mut p, r, &hot);
        if i % 3 == 0 {
            request(&mut p, r, &warm);
        }
    }
    assert_eq!(p.auto_pinned_blocks(), 3);
    assert_eq!(
        p.stats()
            .auto_pinned_blocks
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    p.evict_cached(usize::MAX);
    assert_eq!(resident(&p, r, &hot), 3, "the hot prefix is pinned");
    assert_eq!(resident(&p, r, &warm), 0);
    p.check_invariants().unwrap();

    // Popularity moves to `warm`: it takes the pin, `hot` becomes evictable.
    for _ in 0..40 {
        request(&mut p, r, &warm);
    }
    p.evict_cached(usize::MAX);
    assert_eq!(resident(&p, r, &warm), 3);
    assert_eq!(resident(&p, r, &hot), 0);
    p.check_invariants().unwrap();

    // An operator's pin on `hot` survives the auto pins moving and being turned off.
    request(&mut p, r, &hot);
    assert_eq!(p.pin_prefix(&r, &hot, PinLevel::Pinned, None), 3);
    p.set_auto_pin(0);
    assert_eq!(p.auto_pinned_blocks(), 0);
    p.evict_cached(usize::MAX);
    assert_eq!(resident(&p, r, &hot), 3, "the explicit pin stays");
    assert_eq!(resident(&p, r, &warm), 0, "auto pins are gone");
    p.check_invariants().unwrap();
}
