//! memoria-kv's block pool: prefix sharing, namespace isolation, eviction order (LRU-2,
//! priority, pins, TTL, leaf-first), quotas, tier hooks, copy-on-write, dedup, truncate, errors
//! and stats. The random-operation property test lives in host/kv/tests/pool_model.rs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memoria_kv::{
    BlockHash, BlockPool, BlockState, KvElem, KvLayout, KvPart, ModelFingerprint, NamespaceId,
    NamespaceSalt, PinLevel, PoolError, SeqId, TierSink, TierSource,
};

mod tails;

const N_LAYER: usize = 2;
const KV_DIM: usize = 32;

fn pool(block_tokens: usize, n_blocks: usize) -> BlockPool {
    let layout = KvLayout::new(N_LAYER, KV_DIM, KvElem::Q8_0).with_block_tokens(block_tokens);
    BlockPool::new(layout, n_blocks * layout.block_bytes().unwrap()).unwrap()
}

fn root(pool: &BlockPool, salt: &str) -> BlockHash {
    pool.root_hash(
        &ModelFingerprint::of(b"kv-tests"),
        &NamespaceSalt::derive(salt),
    )
}

/// Row content as a function of the whole prefix up to the position (like real K/V).
fn prefix_keys(tokens: &[u32]) -> Vec<u64> {
    let mut acc = 0x243f_6a88_85a3_08d3u64;
    tokens
        .iter()
        .map(|&t| {
            acc = (acc ^ u64::from(t))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(31);
            acc
        })
        .collect()
}

fn expected_row(key: u64, layer: usize, part: KvPart, len: usize) -> Vec<u8> {
    let k = key.rotate_left((layer * 11 + part as usize * 5) as u32);
    (0..len)
        .map(|j| (k >> ((j % 8) * 8)) as u8 ^ j as u8)
        .collect()
}

/// reserve + write rows + commit, as the engine does.
fn append(pool: &mut BlockPool, seq: SeqId, new: &[u32]) -> Result<(), PoolError> {
    let slots = pool.reserve(seq, new.len())?;
    let mut all = pool.seq_tokens(seq)?.to_vec();
    all.extend_from_slice(new);
    let keys = prefix_keys(&all);
    let row = pool.row_bytes();
    for s in &slots {
        for layer in 0..N_LAYER {
            for part in [KvPart::K, KvPart::V] {
                pool.row_mut(s.block, layer, part, s.slot)
                    .copy_from_slice(&expected_row(keys[s.pos], layer, part, row));
            }
        }
    }
    pool.commit(seq, new)
}

fn verify(pool: &BlockPool, seq: SeqId) {
    let b = pool.layout().block_tokens;
    let table = pool.block_table(seq).unwrap();
    for (pos, key) in prefix_keys(pool.seq_tokens(seq).unwrap())
        .into_iter()
        .enumerate()
    {
        for layer in 0..N_LAYER {
            for part in [KvPart::K, KvPart::V] {
                let got = pool.row(table[pos / b], layer, part, pos % b);
                assert_eq!(
                    got,
                    &expected_row(key, layer, part, got.len())[..],
                    "pos {pos}"
                );
            }
        }
    }
}

fn seq_with(pool: &mut BlockPool, ns: u32, root: BlockHash, tokens: &[u32]) -> SeqId {
    let s = pool.create_seq(NamespaceId(ns), root);
    append(pool, s, tokens).unwrap();
    s
}

fn chain(root: BlockHash, tokens: &[u32], b: usize) -> Vec<BlockHash> {
    let mut prev = root;
    tokens
        .chunks_exact(b)
        .map(|c| {
            prev = BlockHash::chain(&prev, c);
            prev
        })
        .collect()
}

/// One demoted block: hash, namespace, tokens, bytes.
type Demoted = (BlockHash, NamespaceId, Vec<u32>, Vec<u8>);

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Demoted>>>);

impl TierSink for Recorder {
    fn demote(&mut self, hash: &BlockHash, ns: NamespaceId, tokens: &[u32], data: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push((*hash, ns, tokens.to_vec(), data.to_vec()));
    }
}

impl Recorder {
    fn hashes(&self) -> Vec<BlockHash> {
        self.0.lock().unwrap().iter().map(|e| e.0).collect()
    }
}

struct MapSource(HashMap<BlockHash, Vec<u8>>);

impl TierSource for MapSource {
    fn fetch(&mut self, hash: &BlockHash, out: &mut [u8]) -> bool {
        match self.0.get(hash) {
            Some(d) if d.len() == out.len() => {
                out.copy_from_slice(d);
                true
            }
            _ => false,
        }
    }
}

#[test]
fn kv_prefix_sharing_16_sessions_hold_one_copy_of_the_prefix() {
    let mut p = pool(16, 2048);
    let r = root(&p, "shared");
    let prefix: Vec<u32> = (0..1000).map(|i| (i * 7 + 3) % 512).collect();
    let prompts: Vec<Vec<u32>> = (0..16u32)
        .map(|c| {
            prefix
                .iter()
                .copied()
                .chain((0..20).map(|i| 1000 + c * 20 + i))
                .collect()
        })
        .collect();
    let mut seqs = Vec::new();
    for prompt in &prompts {
        let s = p.create_seq(NamespaceId(0), r);
        let hits = p.match_prefix(s, prompt).unwrap();
        assert_eq!(hits, if seqs.is_empty() { 0 } else { 992 });
        append(&mut p, s, &prompt[hits..]).unwrap();
        seqs.push(s);
    }
    // 62 full prefix blocks shared, plus 2 private blocks (positions 992..1020) per session.
    assert_eq!(p.used_blocks(), 62 + 16 * 2);
    let first = p.block_table(seqs[0]).unwrap()[..62].to_vec();
    for &s in &seqs {
        assert_eq!(&p.block_table(s).unwrap()[..62], &first[..]);
        verify(&p, s);
    }
    let snap = p.snapshot();
    assert_eq!(snap.total.hit_tokens, 15 * 992);
    assert_eq!(snap.total.prefill_tokens_saved(), 15 * 992);
    let unshared = 16 * 1020usize.div_ceil(16) as u64 * snap.block_bytes;
    assert!(
        snap.bytes_used() * 100 <= unshared * 12,
        "{} vs {unshared}",
        snap.bytes_used()
    );
}

#[test]
fn kv_namespaces_with_different_salts_never_share_blocks() {
    let mut p = pool(16, 64);
    let (a, b) = (root(&p, "tenant-a"), root(&p, "tenant-b"));
    let tokens: Vec<u32> = (0..100).collect();
    let sa = seq_with(&mut p, 1, a, &tokens);
    let sb = p.create_seq(NamespaceId(2), b);
    assert_eq!(p.match_prefix(sb, &tokens).unwrap(), 0);
    append(&mut p, sb, &tokens).unwrap();
    // No dedup across salts either: two full copies.
    assert_eq!(p.used_blocks(), 2 * 7);
    assert!(
        p.block_table(sa)
            .unwrap()
            .iter()
            .all(|x| !p.block_table(sb).unwrap().contains(x))
    );
    assert_eq!(p.snapshot().total.dedups, 0);
    // Another namespace configured with the same salt does share.
    let sa2 = p.create_seq(NamespaceId(3), a);
    assert_eq!(p.match_prefix(sa2, &tokens).unwrap(), 96);
    assert_eq!(
        p.block_table(sa2).unwrap(),
        &p.block_table(sa).unwrap()[..6]
    );
    verify(&p, sa2);
}

#[test]
fn kv_match_prefix_leaves_the_last_token_to_compute() {
    let mut p = pool(16, 16);
    let r = root(&p, "s");
    let tokens: Vec<u32> = (0..48).collect();
    let s = seq_with(&mut p, 0, r, &tokens);
    p.drop_seq(s).unwrap();
    // A prompt ending on a block boundary takes its cached last block for all but its last
    // token; one ending inside a block stops at its whole blocks (no tail was retained here).
    for (len, want) in [
        (48, 47),
        (47, 32),
        (33, 32),
        (32, 31),
        (17, 16),
        (16, 15),
        (1, 0),
        (0, 0),
    ] {
        let s = p.create_seq(NamespaceId(0), r);
        assert_eq!(
            p.match_prefix(s, &tokens[..len]).unwrap(),
            want,
            "prompt of {len}"
        );
        p.check_invariants().expect("pool invariants");
        p.drop_seq(s).unwrap();
    }
    p.check_invariants().expect("pool invariants");
}

#[test]
fn kv_lru2_evicts_blocks_touched_once_before_blocks_touched_twice() {
    let mut p = pool(4, 3);
    let rec = Recorder::default();
    p.set_sink(Box::new(rec.clone()));
    let r = root(&p, "s");
    let (x, y) = ([1, 2, 3, 4], [5, 6, 7, 8]);
    let sx = seq_with(&mut p, 0, r, &x);
    p.drop_seq(sx).unwrap();
    let again = p.create_seq(NamespaceId(0), r);
    assert_eq!(p.match_prefix(again, &[1, 2, 3, 4, 9]).unwrap(), 4);
    p.drop_seq(again).unwrap();
    // Y is touched after X's last access: plain LRU would evict X, LRU-2 evicts Y.
    let sy = seq_with(&mut p, 0, r, &y);
    p.drop_seq(sy).unwrap();
    let hx = BlockHash::chain(&r, &x);
    let hy = BlockHash::chain(&r, &y);
    let filler = seq_with(&mut p, 0, r, &[0; 3]);
    assert_eq!(p.snapshot().total.evict_capacity, 0);
    append(&mut p, filler, &[0; 3]).unwrap();
    assert_eq!(rec.hashes(), vec![hy]);
    assert!(p.lookup(&hx).is_some());
    p.truncate(filler, 0).unwrap();
    append(&mut p, filler, &[9; 10]).unwrap();
    assert_eq!(rec.hashes().len(), 3);
    // The filler's block is newer but was touched once: it still goes before X.
    assert_eq!(rec.hashes()[1..], [BlockHash::chain(&r, &[0; 4]), hx]);
    assert_eq!(p.snapshot().total.evict_capacity, 3);
}

#[test]
fn kv_lower_priority_namespace_is_evicted_first() {
    let mut p = pool(4, 3);
    let rec = Recorder::default();
    p.set_sink(Box::new(rec.clone()));
    let r = root(&p, "s");
    p.set_namespace_priority(NamespaceId(1), 5);
    p.set_namespace_priority(NamespaceId(2), -1);
    let hi = seq_with(&mut p, 1, r, &[1, 1, 1, 1]);
    p.drop_seq(hi).unwrap();
    let lo = seq_with(&mut p, 2, r, &[2, 2, 2, 2]);
    p.drop_seq(lo).unwrap();
    // Make the low-priority block the more valuable one by recency and frequency.
    for _ in 0..2 {
        let s = p.create_seq(NamespaceId(2), r);
        assert_eq!(p.match_prefix(s, &[2, 2, 2, 2, 0]).unwrap(), 4);
        p.drop_seq(s).unwrap();
    }
    let filler = seq_with(&mut p, 0, r, &[7; 6]);
    assert_eq!(rec.hashes(), vec![BlockHash::chain(&r, &[2, 2, 2, 2])]);
    // A per-block priority pin outranks the namespace's priority.
    p.set_namespace_priority(NamespaceId(1), -10);
    assert_eq!(
        p.pin_prefix(&r, &[1, 1, 1, 1], PinLevel::Priority(100), None),
        1
    );
    p.drop_seq(filler).unwrap();
    let _next = seq_with(&mut p, 0, r, &[8; 5]);
    assert_eq!(rec.hashes().last(), Some(&BlockHash::chain(&r, &[7; 4])));
    assert!(p.lookup(&BlockHash::chain(&r, &[1; 4])).is_some());
}

#[test]
fn kv_pinned_blocks_are_never_evicted() {
    let mut p = pool(4, 4);
    let r = root(&p, "s");
    let pinned: Vec<u32> = (0..8).collect();
    let s = seq_with(&mut p, 0, r, &pinned);
    assert_eq!(p.pin_prefix(&r, &pinned, PinLevel::Pinned, None), 2);
    p.drop_seq(s).unwrap();
    assert_eq!(p.evict_cached(usize::MAX), 0);
    let t = seq_with(&mut p, 0, r, &[50; 8]);
    let before = p.block_table(t).unwrap().to_vec();
    let err = append(&mut p, t, &[51; 4]).unwrap_err();
    assert!(
        matches!(err, PoolError::OutOfBlocks { needed: 1, .. }),
        "{err}"
    );
    assert_eq!(p.seq_len(t).unwrap(), 8);
    assert_eq!(p.block_table(t).unwrap(), &before[..]);
    for h in chain(r, &pinned, 4) {
        assert!(p.lookup(&h).is_some());
    }
    assert_eq!(p.unpin_prefix(&r, &pinned), 2);
    append(&mut p, t, &[51; 4]).unwrap();
    verify(&p, t);
    p.check_invariants().unwrap();
}

#[test]
fn kv_timed_pins_expire_on_the_injected_clock() {
    let mut p = pool(4, 4);
    let t0 = Instant::now();
    p.set_now(t0);
    let r = root(&p, "s");
    let warm = [3, 1, 4, 1];
    let s = seq_with(&mut p, 0, r, &warm);
    p.drop_seq(s).unwrap();
    let other = seq_with(&mut p, 0, r, &[2, 7, 1, 8]);
    p.drop_seq(other).unwrap();
    assert_eq!(
        p.pin_prefix(&r, &warm, PinLevel::Pinned, Some(Duration::from_secs(10))),
        1
    );
    let h = BlockHash::chain(&r, &warm);
    p.set_now(t0 + Duration::from_secs(9));
    assert_eq!(p.evict_cached(usize::MAX), 1);
    assert_eq!(
        p.block_info(p.lookup(&h).unwrap()).unwrap().pin,
        Some(PinLevel::Pinned)
    );
    p.set_now(t0 + Duration::from_secs(11));
    let id = p.lookup(&h).unwrap();
    assert_eq!(p.block_info(id).unwrap().pin, None);
    assert_eq!(p.evict_cached(1), 1);
    assert!(p.lookup(&h).is_none());
    let snap = p.snapshot();
    assert_eq!((snap.total.evict_ttl, snap.total.evict_explicit), (1, 1));
}

#[test]
fn kv_namespace_cap_evicts_own_cached_blocks_then_errors() {
    let mut p = pool(4, 16);
    let r = root(&p, "s");
    p.set_namespace_cap(NamespaceId(1), Some(3));
    let old = seq_with(&mut p, 1, r, &[1; 8]);
    p.drop_seq(old).unwrap();
    let neighbour = seq_with(&mut p, 2, r, &[9; 8]);
    p.drop_seq(neighbour).unwrap();
    assert_eq!(p.namespace_held(NamespaceId(1)), 2);
    let s = seq_with(&mut p, 1, r, &[5; 12]);
    assert_eq!(p.namespace_held(NamespaceId(1)), 3);
    let snap = p.snapshot();
    assert_eq!(snap.total.evict_quota, 2);
    assert_eq!(snap.total.evict_capacity, 0);
    // The other namespace's cache was left alone.
    assert!(p.lookup(&BlockHash::chain(&r, &[9; 4])).is_some());
    let err = append(&mut p, s, &[6]).unwrap_err();
    assert_eq!(
        err,
        PoolError::QuotaExceeded {
            ns: NamespaceId(1),
            cap: 3,
            held: 3,
            needed: 1
        }
    );
    assert_eq!(p.seq_len(s).unwrap(), 12);
    p.set_namespace_cap(NamespaceId(1), None);
    append(&mut p, s, &[6]).unwrap();
    verify(&p, s);
}

#[test]
fn kv_evicted_blocks_are_demoted_and_promoted_back() {
    let mut p = pool(4, 8);
    let rec = Recorder::default();
    p.set_sink(Box::new(rec.clone()));
    let r = root(&p, "s");
    let tokens: Vec<u32> = (10..23).collect();
    let s = seq_with(&mut p, 4, r, &tokens);
    let table = p.block_table(s).unwrap().to_vec();
    let images: Vec<Vec<u8>> = table[..3]
        .iter()
        .map(|&b| p.block_data(b).to_vec())
        .collect();
    p.drop_seq(s).unwrap();
    // 3 sealed blocks and the retained 1-token tail; only the sealed ones reach the sink.
    assert_eq!(p.evict_cached(usize::MAX), 4);
    let hashes = chain(r, &tokens, 4);
    {
        let got = rec.0.lock().unwrap();
        assert_eq!(got.len(), 3);
        for (i, h) in hashes.iter().enumerate() {
            let e = got.iter().find(|e| e.0 == *h).unwrap();
            assert_eq!(
                (e.1, &e.2[..], &e.3),
                (NamespaceId(4), &tokens[i * 4..i * 4 + 4], &images[i])
            );
        }
    }
    let mut source = MapSource(
        rec.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.0, e.3.clone()))
            .collect(),
    );
    // Keep block 0 in RAM, the rest come from the source, in prefix order.
    let warm = seq_with(&mut p, 4, r, &tokens[..4]);
    let s2 = p.create_seq(NamespaceId(4), r);
    assert_eq!(p.match_prefix_from(s2, &tokens, &mut source).unwrap(), 12);
    assert_eq!(
        p.block_table(s2).unwrap()[0],
        p.block_table(warm).unwrap()[0]
    );
    assert_eq!(p.snapshot().total.promotions, 2);
    append(&mut p, s2, &tokens[12..]).unwrap();
    verify(&p, s2);
    // A source that lacks a block ends the match there.
    p.drop_seq(s2).unwrap();
    p.drop_seq(warm).unwrap();
    p.evict_cached(usize::MAX);
    source.0.remove(&hashes[1]);
    let s3 = p.create_seq(NamespaceId(4), r);
    assert_eq!(p.match_prefix_from(s3, &tokens, &mut source).unwrap(), 4);
    verify(&p, s3);
    p.check_invariants().unwrap();
}

#[test]
fn kv_fork_shares_blocks_and_copies_the_tail_on_write() {
    let mut p = pool(4, 8);
    let r = root(&p, "s");
    let a = seq_with(&mut p, 0, r, &[1, 2, 3, 4, 5, 6]);
    let b = p.fork(a).unwrap();
    assert_eq!(p.used_blocks(), 2);
    assert_eq!(p.block_table(a).unwrap(), p.block_table(b).unwrap());
    append(&mut p, b, &[7, 8, 9]).unwrap();
    assert_eq!(p.snapshot().total.cow_copies, 1);
    assert_ne!(p.block_table(a).unwrap()[1], p.block_table(b).unwrap()[1]);
    assert_eq!(p.block_table(a).unwrap()[0], p.block_table(b).unwrap()[0]);
    verify(&p, a);
    verify(&p, b);
    // a's tail is now private: written in place.
    append(&mut p, a, &[70]).unwrap();
    assert_eq!(p.snapshot().total.cow_copies, 1);
    assert_eq!(p.snapshot().total.forks, 1);
    verify(&p, a);
    verify(&p, b);
}

#[test]
fn kv_sealing_an_identical_block_dedups() {
    let mut p = pool(4, 8);
    let r = root(&p, "s");
    let tokens = [4, 4, 2, 2, 9, 9, 1, 1, 5];
    let a = seq_with(&mut p, 0, r, &tokens);
    let b = seq_with(&mut p, 1, r, &tokens);
    assert_eq!(p.snapshot().total.dedups, 2);
    assert_eq!(
        p.block_table(a).unwrap()[..2],
        p.block_table(b).unwrap()[..2]
    );
    assert_eq!(p.used_blocks(), 2 + 2);
    verify(&p, b);
    p.check_invariants().unwrap();
}

#[test]
fn kv_truncate_then_reappend_keeps_the_sealed_block_intact() {
    let mut p = pool(4, 8);
    let r = root(&p, "s");
    let tokens: Vec<u32> = (0..10).collect();
    let s = seq_with(&mut p, 0, r, &tokens);
    p.truncate(s, 6).unwrap();
    assert_eq!(p.block_table(s).unwrap().len(), 2);
    append(&mut p, s, &[60, 61, 62, 63]).unwrap();
    assert_eq!(p.snapshot().total.cow_copies, 1);
    assert_eq!(
        p.seq_tokens(s).unwrap(),
        &[0, 1, 2, 3, 4, 5, 60, 61, 62, 63]
    );
    verify(&p, s);
    // The original second block is still cached, unmodified.
    let again = p.create_seq(NamespaceId(0), r);
    assert_eq!(p.match_prefix(again, &tokens).unwrap(), 8);
    verify(&p, again);
    assert!(matches!(
        p.truncate(s, 11),
        Err(PoolError::TruncatePastEnd {
            len: 11,
            seq_len: 10,
            ..
        })
    ));
    p.truncate(s, 0).unwrap();
    append(&mut p, s, &[1, 2]).unwrap();
    verify(&p, s);
    p.check_invariants().unwrap();
}

#[test]
fn kv_eviction_is_leaf_first_so_matches_have_no_holes() {
    let mut p = pool(4, 8);
    let rec = Recorder::default();
    p.set_sink(Box::new(rec.clone()));
    let r = root(&p, "s");
    let tokens: Vec<u32> = (100..116).collect();
    let s = seq_with(&mut p, 0, r, &tokens);
    // Re-seal the last block twice: it becomes the most recently and frequently used, which
    // LRU-2 alone would keep longest.
    for _ in 0..2 {
        p.truncate(s, 12).unwrap();
        append(&mut p, s, &tokens[12..]).unwrap();
    }
    assert_eq!(p.snapshot().total.dedups, 2);
    p.drop_seq(s).unwrap();
    let hashes = chain(r, &tokens, 4);
    for k in (0..4).rev() {
        assert_eq!(p.evict_cached(1), 1);
        assert_eq!(rec.hashes().last(), Some(&hashes[k]));
        let probe = p.create_seq(NamespaceId(0), r);
        let mut prompt = tokens.clone();
        prompt.push(0);
        assert_eq!(p.match_prefix(probe, &prompt).unwrap(), 4 * k);
        p.drop_seq(probe).unwrap();
        p.check_invariants().unwrap();
    }
}

#[test]
fn kv_caller_mistakes_are_errors_not_panics() {
    let mut p = pool(4, 4);
    let r = root(&p, "s");
    let s = p.create_seq(NamespaceId(0), r);
    p.drop_seq(s).unwrap();
    let unknown = PoolError::UnknownSeq(s);
    assert_eq!(p.drop_seq(s), Err(unknown.clone()));
    assert_eq!(p.reserve(s, 1).unwrap_err(), unknown);
    assert_eq!(p.commit(s, &[1]), Err(unknown.clone()));
    assert_eq!(p.fork(s), Err(unknown.clone()));
    assert_eq!(p.truncate(s, 0), Err(unknown.clone()));
    assert_eq!(p.match_prefix(s, &[1, 2]), Err(unknown.clone()));
    assert_eq!(p.block_table(s).map(<[_]>::len), Err(unknown));
    let t = p.create_seq(NamespaceId(0), r);
    assert!(matches!(
        p.commit(t, &[1]),
        Err(PoolError::CommitMismatch {
            reserved: 0,
            got: 1,
            ..
        })
    ));
    p.reserve(t, 2).unwrap();
    assert!(matches!(
        p.reserve(t, 1),
        Err(PoolError::ReservationPending { reserved: 2, .. })
    ));
    assert!(matches!(
        p.fork(t),
        Err(PoolError::ReservationPending { .. })
    ));
    assert!(matches!(
        p.match_prefix(t, &[1, 2]),
        Err(PoolError::SeqNotEmpty { .. })
    ));
    p.truncate(t, 0).unwrap();
    assert_eq!(p.used_blocks(), 0, "truncate cancels the reservation");
    assert!(matches!(
        p.reserve(t, 17),
        Err(PoolError::OutOfBlocks {
            needed: 5,
            available: 4
        })
    ));
    assert!(matches!(
        p.reserve(t, usize::MAX),
        Err(PoolError::OutOfBlocks { .. })
    ));
    let bad = KvLayout::new(2, 48, KvElem::Q4_0);
    assert!(matches!(
        BlockPool::new(bad, 1 << 20),
        Err(PoolError::BadLayout { .. })
    ));
    let ok = KvLayout::new(2, 64, KvElem::F16);
    assert!(matches!(
        BlockPool::new(ok, 100),
        Err(PoolError::BudgetTooSmall { .. })
    ));
    p.check_invariants().unwrap();
}

#[test]
fn kv_stats_are_readable_from_other_threads_and_show_no_fragmentation() {
    let mut p = pool(4, 32);
    let stats = p.stats();
    let r = root(&p, "s");
    let mut seqs = Vec::new();
    for i in 0..8u32 {
        let n = 3 + (i as usize * 5) % 11;
        seqs.push(seq_with(
            &mut p,
            i % 3,
            r,
            &(0..n as u32).map(|t| t * 13 + i).collect::<Vec<_>>(),
        ));
    }
    for s in seqs.iter().step_by(2) {
        p.drop_seq(*s).unwrap();
    }
    let reader = std::thread::spawn(move || stats.snapshot());
    let snap = reader.join().unwrap();
    // The arena's prefault thread may commit more pages meanwhile: that figure only grows.
    let mut now = p.snapshot();
    assert!(now.blocks_committed >= snap.blocks_committed, "{now:?}");
    now.blocks_committed = snap.blocks_committed;
    assert_eq!(snap, now);
    assert_eq!(snap.total.seqs_active, 4);
    assert_eq!(snap.blocks_free + snap.blocks_used + snap.blocks_cached, 32);
    assert_eq!(snap.bytes_total(), 32 * p.block_bytes() as u64);
    // Only partial tails waste slots: at most B - 1 per live sequence.
    assert!(snap.wasted_slots <= 4 * 3, "{}", snap.wasted_slots);
    assert!(snap.fragmentation() < 0.5);
    let per_ns: u64 = snap.namespaces.iter().map(|(_, c)| c.blocks_used).sum();
    assert_eq!(per_ns, snap.blocks_used);
    // Every free or cached block is usable by any sequence: no compaction needed.
    let big = p.create_seq(NamespaceId(9), r);
    let room = (p.free_blocks() + p.cached_blocks()) * 4;
    append(&mut p, big, &vec![1; room]).unwrap();
    assert_eq!(p.free_blocks() + p.cached_blocks(), 0);
    assert_eq!(
        p.block_info(p.block_table(big).unwrap()[0]).unwrap().state,
        BlockState::Used
    );
    p.check_invariants().unwrap();
}
