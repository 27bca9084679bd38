//! Miss reasons on a real block pool: cold, partial, evicted (and the tier where the block
//! was lost), expired, corrupt and isolated, each counted once per missed block, per
//! namespace and in total, with blocks and tokens adding up to the pool's miss counters.

use std::time::{Duration, Instant};

use memoria_kv::{
    BlockHash, BlockPool, CountersSnapshot, KvElem, KvLayout, LostTier, MissReason,
    ModelFingerprint, NamespaceId, NamespaceSalt, PinLevel, SourceMiss, TierSink, TierSource,
};

const B: usize = 4;

fn pool(n_blocks: usize) -> BlockPool {
    let layout = KvLayout::new(2, 32, KvElem::Q8_0).with_block_tokens(B);
    BlockPool::new(layout, n_blocks * layout.block_bytes().unwrap()).unwrap()
}

fn root(p: &BlockPool, salt: &str) -> BlockHash {
    p.root_hash(
        &ModelFingerprint::of(b"misses"),
        &NamespaceSalt::derive(salt),
    )
}

/// One request: match the prompt (from `src` when given), compute the rest, finish.
fn request(
    p: &mut BlockPool,
    ns: u32,
    root: BlockHash,
    prompt: &[u32],
    src: Option<&mut dyn TierSource>,
) {
    let s = p.create_seq(NamespaceId(ns), root);
    let hit = match src {
        Some(src) => p.match_prefix_from(s, prompt, src).unwrap(),
        None => p.match_prefix(s, prompt).unwrap(),
    };
    let rest = &prompt[hit..];
    p.reserve(s, rest.len()).unwrap();
    p.commit(s, rest).unwrap();
    p.drop_seq(s).unwrap();
}

fn ns(p: &BlockPool, id: u32) -> CountersSnapshot {
    let snap = p.snapshot();
    snap.namespaces
        .iter()
        .find(|(n, _)| *n == NamespaceId(id))
        .map(|(_, c)| *c)
        .unwrap()
}

fn blocks(c: &CountersSnapshot, r: MissReason) -> u64 {
    c.misses.blocks_for(r)
}

fn consistent(c: &CountersSnapshot) {
    assert_eq!(c.misses.total_blocks(), c.miss_blocks, "{c:?}");
    assert_eq!(c.misses.tokens.iter().sum::<u64>(), c.miss_tokens, "{c:?}");
}

/// A prompt of `n` tokens starting at `base`.
fn prompt(base: u32, n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| base + i).collect()
}

#[test]
fn cache_view_cold_partial_evicted_and_isolated_misses() {
    let mut p = pool(32);
    let (ra, rb) = (root(&p, "a"), root(&p, "b"));
    let pr = prompt(100, 3 * B + 1);
    request(&mut p, 1, ra, &pr, None);
    let c = ns(&p, 1);
    assert_eq!(blocks(&c, MissReason::Cold), 3);
    assert_eq!(blocks(&c, MissReason::Partial), 1);
    assert_eq!(c.misses.tokens_for(MissReason::Cold), 3 * B as u64);
    assert_eq!(c.misses.tokens_for(MissReason::Partial), 1);
    consistent(&c);

    // The same prompt again: the 3 blocks hit; only the partial block misses.
    request(&mut p, 1, ra, &pr, None);
    let c = ns(&p, 1);
    assert_eq!((c.hit_blocks, blocks(&c, MissReason::Partial)), (3, 2));

    // Namespace 2 under another salt: the same tokens are resident under a's salt.
    request(&mut p, 2, rb, &pr, None);
    let c2 = ns(&p, 2);
    assert_eq!(blocks(&c2, MissReason::Isolated), 3);
    assert_eq!(blocks(&c2, MissReason::Cold), 0);
    consistent(&c2);
    assert_eq!(
        blocks(&ns(&p, 1), MissReason::Isolated),
        0,
        "only the asking namespace counts"
    );

    // Everything evicted (no lower tier): the blocks were lost at the hot tier.
    assert!(p.evict_cached(usize::MAX) > 0);
    request(&mut p, 1, ra, &pr, None);
    let c = ns(&p, 1);
    assert_eq!(blocks(&c, MissReason::Evicted), 3);
    assert_eq!(c.misses.evicted_at(LostTier::Hot), 3);
    consistent(&c);
    // A prompt sharing the first block, then new blocks: 1 hit, then cold.
    let mut longer = pr[..B].to_vec();
    longer.extend(prompt(900, 2 * B + 1));
    request(&mut p, 1, ra, &longer, None);
    let c = ns(&p, 1);
    assert_eq!(blocks(&c, MissReason::Cold), 3 + 2);
    let total = p.snapshot().total;
    consistent(&total);
    assert_eq!(
        blocks(&total, MissReason::Isolated) + blocks(&total, MissReason::Evicted),
        6
    );
}

#[test]
fn cache_view_expired_pins_count_as_expired() {
    let mut p = pool(16);
    let t0 = Instant::now();
    p.set_now(t0);
    let r = root(&p, "a");
    let pr = prompt(7, 2 * B + 1);
    request(&mut p, 1, r, &pr, None);
    assert_eq!(
        p.pin_prefix(&r, &pr, PinLevel::Pinned, Some(Duration::from_secs(5))),
        2
    );
    p.set_now(t0 + Duration::from_secs(6));
    // The two lapsed blocks and the retained partial tail.
    assert_eq!(p.evict_cached(usize::MAX), 3);
    request(&mut p, 1, r, &pr, None);
    let c = ns(&p, 1);
    assert_eq!(blocks(&c, MissReason::Expired), 2);
    assert_eq!(blocks(&c, MissReason::Evicted), 0);
    consistent(&c);
}

/// A sink that keeps nothing but says evicted blocks go to the cold tier.
struct ColdSink;

impl TierSink for ColdSink {
    fn demote(&mut self, _: &BlockHash, _: NamespaceId, _: &[u32], _: &[u8]) {}

    fn keeps(&self) -> Option<LostTier> {
        Some(LostTier::Cold)
    }
}

/// A source whose every value fails verification on disk, or that has nothing.
struct BadSource(bool);

impl TierSource for BadSource {
    fn fetch(&mut self, _: &BlockHash, _: &mut [u8]) -> bool {
        false
    }

    fn last_miss(&self) -> SourceMiss {
        if self.0 {
            SourceMiss::Corrupt(LostTier::Disk)
        } else {
            SourceMiss::Absent
        }
    }
}

#[test]
fn cache_view_blocks_lost_below_the_hot_tier_and_corrupt_ones() {
    let mut p = pool(16);
    p.set_sink(Box::new(ColdSink));
    let r = root(&p, "a");
    let pr = prompt(40, 3 * B + 2);
    request(&mut p, 3, r, &pr, None);
    p.evict_cached(usize::MAX);
    // The source lacks them: lost at the cold tier (where the sink put them).
    request(&mut p, 3, r, &pr, Some(&mut BadSource(false)));
    let c = ns(&p, 3);
    assert_eq!(c.misses.evicted_at(LostTier::Cold), 3);
    p.evict_cached(usize::MAX);
    // The first block fails verification; the walk stops there, the rest are evicted.
    request(&mut p, 3, r, &pr, Some(&mut BadSource(true)));
    let c = ns(&p, 3);
    assert_eq!(blocks(&c, MissReason::Corrupt), 1);
    assert_eq!(blocks(&c, MissReason::Evicted), 3 + 2);
    consistent(&c);
}
