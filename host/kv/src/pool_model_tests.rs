//! Property test: random create/append/match/fork/truncate/drop/evict/pin/clock operations on a
//! small pool, checked after every step against a reference model (each sequence's tokens and
//! the bytes each position must hold) and the pool's own invariants.

use std::time::{Duration, Instant};

use crate::{
    BlockHash, BlockPool, KvElem, KvLayout, KvPart, ModelFingerprint, NamespaceId, NamespaceSalt,
    PinLevel, PoolError, SeqId,
};
use proptest::prelude::*;

const B: usize = 4;
const N_LAYER: usize = 2;
const KV_DIM: usize = 4;
const ROW: usize = KV_DIM * 4;
const N_BLOCKS: usize = 24;
const MAX_SEQS: usize = 8;

/// K/V content is a function of the whole prefix, as in a causal model: position p's rows
/// depend on tokens 0..=p.
fn prefix_keys(tokens: &[u32]) -> Vec<u64> {
    let mut acc = 0x9e37_79b9_7f4a_7c15u64;
    tokens
        .iter()
        .map(|&t| {
            acc = (acc ^ u64::from(t))
                .wrapping_mul(0xbf58_476d_1ce4_e5b9)
                .rotate_left(29);
            acc
        })
        .collect()
}

fn row_bytes(key: u64, layer: usize, part: KvPart) -> [u8; ROW] {
    let k = key.rotate_left((layer * 7 + part as usize * 13) as u32);
    std::array::from_fn(|j| (k >> ((j % 8) * 8)) as u8 ^ j as u8)
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        ns: u8,
        from: usize,
        keep: usize,
        extra: Vec<u32>,
    },
    Append {
        seq: usize,
        tokens: Vec<u32>,
    },
    Fork {
        seq: usize,
    },
    Truncate {
        seq: usize,
        keep_pct: usize,
    },
    Drop {
        seq: usize,
    },
    Evict {
        n: usize,
    },
    Pin {
        seq: usize,
        ttl: Option<u64>,
    },
    Unpin {
        rec: usize,
    },
    Advance {
        secs: u64,
    },
}

fn tokens() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(0u32..3, 1..10)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..3, any::<usize>(), 0usize..40, prop::collection::vec(0u32..3, 0..10))
            .prop_map(|(ns, from, keep, extra)| Op::Create { ns, from, keep, extra }),
        5 => (any::<usize>(), tokens()).prop_map(|(seq, tokens)| Op::Append { seq, tokens }),
        2 => any::<usize>().prop_map(|seq| Op::Fork { seq }),
        2 => (any::<usize>(), 0usize..=100).prop_map(|(seq, keep_pct)| Op::Truncate { seq, keep_pct }),
        2 => any::<usize>().prop_map(|seq| Op::Drop { seq }),
        1 => (1usize..6).prop_map(|n| Op::Evict { n }),
        1 => (any::<usize>(), prop::option::of(1u64..20)).prop_map(|(seq, ttl)| Op::Pin { seq, ttl }),
        1 => any::<usize>().prop_map(|rec| Op::Unpin { rec }),
        1 => (1u64..10).prop_map(|secs| Op::Advance { secs }),
    ]
}

struct Live {
    id: SeqId,
    root: BlockHash,
    tokens: Vec<u32>,
}

struct PinRec {
    root: BlockHash,
    tokens: Vec<u32>,
    hashes: Vec<BlockHash>,
    until: Option<Instant>,
}

struct Harness {
    pool: BlockPool,
    roots: [BlockHash; 3],
    live: Vec<Live>,
    pins: Vec<PinRec>,
    now: Instant,
}

impl Harness {
    fn new() -> Self {
        let layout = KvLayout::new(N_LAYER, KV_DIM, KvElem::F32).with_block_tokens(B);
        let block_bytes = layout.block_bytes().unwrap();
        let mut pool = BlockPool::new(layout, N_BLOCKS * block_bytes + 7).unwrap();
        let now = Instant::now();
        pool.set_now(now);
        pool.set_namespace_cap(NamespaceId(2), Some(12));
        pool.set_namespace_priority(NamespaceId(1), 1);
        let fp = ModelFingerprint::of(b"prop");
        let shared = pool.root_hash(&fp, &NamespaceSalt::derive("shared"));
        let isolated = pool.root_hash(&fp, &NamespaceSalt::derive("isolated"));
        Self {
            pool,
            roots: [shared, shared, isolated],
            live: Vec::new(),
            pins: Vec::new(),
            now,
        }
    }

    fn append(&mut self, i: usize, new: &[u32]) -> Result<(), PoolError> {
        let id = self.live[i].id;
        let slots = self.pool.reserve(id, new.len())?;
        let mut all = self.live[i].tokens.clone();
        all.extend_from_slice(new);
        let keys = prefix_keys(&all);
        for s in &slots {
            for layer in 0..N_LAYER {
                for part in [KvPart::K, KvPart::V] {
                    self.pool
                        .row_mut(s.block, layer, part, s.slot)
                        .copy_from_slice(&row_bytes(keys[s.pos], layer, part));
                }
            }
        }
        self.pool.commit(id, new).unwrap();
        self.live[i].tokens = all;
        Ok(())
    }

    fn expect_capacity_error(r: Result<(), PoolError>) {
        if let Err(e) = r {
            assert!(
                matches!(
                    e,
                    PoolError::OutOfBlocks { .. } | PoolError::QuotaExceeded { .. }
                ),
                "{e}"
            );
        }
    }

    /// Re-applies every live pin record: timed ones by expiry, then permanent ones, so the
    /// strongest pin on a shared block wins.
    fn reapply_pins(&mut self) {
        let now = self.now;
        self.pins.retain(|p| p.until.is_none_or(|u| u > now));
        self.pins.sort_by_key(|p| (p.until.is_none(), p.until));
        for p in &self.pins {
            let ttl = p.until.map(|u| u - now);
            let n = self
                .pool
                .pin_prefix(&p.root, &p.tokens, PinLevel::Pinned, ttl);
            assert_eq!(n, p.hashes.len(), "pinned blocks went missing");
        }
    }

    fn apply(&mut self, op: Op) {
        let n_live = self.live.len();
        match op {
            Op::Create {
                ns,
                from,
                keep,
                extra,
            } => {
                if n_live >= MAX_SEQS {
                    return;
                }
                let mut prompt: Vec<u32> = match n_live {
                    0 => Vec::new(),
                    _ => {
                        let src = &self.live[from % n_live].tokens;
                        src[..keep.min(src.len())].to_vec()
                    }
                };
                prompt.extend(extra);
                let root = self.roots[ns as usize];
                let id = self.pool.create_seq(NamespaceId(u32::from(ns)), root);
                let hits = self.pool.match_prefix(id, &prompt).unwrap();
                // Token-granular: full blocks, then possibly part of a retained tail.
                assert!(
                    hits <= prompt.len().saturating_sub(1),
                    "hits {hits} of {}",
                    prompt.len()
                );
                assert_eq!(self.pool.seq_tokens(id).unwrap(), &prompt[..hits]);
                self.live.push(Live {
                    id,
                    root,
                    tokens: prompt[..hits].to_vec(),
                });
                if hits < prompt.len() {
                    let r = self.append(n_live, &prompt[hits..]);
                    Self::expect_capacity_error(r);
                }
            }
            Op::Append { seq, tokens } if n_live > 0 => {
                let r = self.append(seq % n_live, &tokens);
                Self::expect_capacity_error(r);
            }
            Op::Fork { seq } if n_live > 0 && n_live < MAX_SEQS => {
                let src = &self.live[seq % n_live];
                let id = self.pool.fork(src.id).unwrap();
                let (root, tokens) = (src.root, src.tokens.clone());
                self.live.push(Live { id, root, tokens });
            }
            Op::Truncate { seq, keep_pct } if n_live > 0 => {
                let l = &mut self.live[seq % n_live];
                let len = l.tokens.len() * keep_pct / 100;
                self.pool.truncate(l.id, len).unwrap();
                l.tokens.truncate(len);
            }
            Op::Drop { seq } if n_live > 0 => {
                let l = self.live.swap_remove(seq % n_live);
                self.pool.drop_seq(l.id).unwrap();
                assert!(matches!(
                    self.pool.seq_len(l.id),
                    Err(PoolError::UnknownSeq(_))
                ));
            }
            Op::Evict { n } => {
                self.pool.evict_cached(n);
            }
            Op::Pin { seq, ttl } if n_live > 0 && self.pins.len() < 3 => {
                let l = &self.live[seq % n_live];
                let full = l.tokens.len() / B * B;
                let tokens = l.tokens[..full].to_vec();
                let mut prev = l.root;
                let hashes = tokens
                    .chunks(B)
                    .map(|c| {
                        prev = BlockHash::chain(&prev, c);
                        prev
                    })
                    .collect();
                let until = ttl.map(|s| self.now + Duration::from_secs(s));
                self.pins.push(PinRec {
                    root: l.root,
                    tokens,
                    hashes,
                    until,
                });
                self.reapply_pins();
            }
            Op::Unpin { rec } if !self.pins.is_empty() => {
                let p = self.pins.swap_remove(rec % self.pins.len());
                self.pool.unpin_prefix(&p.root, &p.tokens);
                self.reapply_pins();
            }
            Op::Advance { secs } => {
                self.now += Duration::from_secs(secs);
                self.pool.set_now(self.now);
                let now = self.now;
                self.pins.retain(|p| p.until.is_none_or(|u| u > now));
            }
            _ => {}
        }
    }

    fn check(&self) {
        self.pool.check_invariants().unwrap();
        let p = &self.pool;
        assert_eq!(
            p.free_blocks() + p.used_blocks() + p.cached_blocks(),
            N_BLOCKS
        );
        let snap = p.snapshot();
        assert_eq!(
            snap.blocks_free + snap.blocks_used + snap.blocks_cached,
            N_BLOCKS as u64
        );
        assert_eq!(snap.total.seqs_active, self.live.len() as u64);
        // Every missed block and token is counted under exactly one reason.
        for c in std::iter::once(&snap.total).chain(snap.namespaces.iter().map(|(_, c)| c)) {
            assert_eq!(c.misses.total_blocks(), c.miss_blocks);
            assert_eq!(c.misses.tokens.iter().sum::<u64>(), c.miss_tokens);
        }
        let mut refs = [0u32; N_BLOCKS];
        for l in &self.live {
            assert_eq!(p.seq_tokens(l.id).unwrap(), &l.tokens[..]);
            let table = p.block_table(l.id).unwrap();
            assert_eq!(table.len(), l.tokens.len().div_ceil(B));
            for b in table {
                refs[b.index()] += 1;
            }
            for (pos, key) in prefix_keys(&l.tokens).into_iter().enumerate() {
                let block = table[pos / B];
                for layer in 0..N_LAYER {
                    for part in [KvPart::K, KvPart::V] {
                        assert_eq!(
                            p.row(block, layer, part, pos % B),
                            &row_bytes(key, layer, part),
                            "seq {} pos {pos} layer {layer} {part:?}",
                            l.id
                        );
                    }
                }
            }
        }
        for (i, &r) in refs.iter().enumerate() {
            let info = p
                .block_info(crate::BlockId::from_index(i).unwrap())
                .unwrap();
            assert_eq!(info.refcount, r, "block {i}");
        }
        for rec in &self.pins {
            for h in &rec.hashes {
                let id = p.lookup(h).expect("a pinned block was evicted");
                assert_eq!(p.block_info(id).unwrap().pin, Some(PinLevel::Pinned));
            }
        }
    }

    fn drain(mut self) {
        for l in std::mem::take(&mut self.live) {
            self.pool.drop_seq(l.id).unwrap();
        }
        assert_eq!(self.pool.used_blocks(), 0, "blocks leaked");
        assert_eq!(self.pool.snapshot().total.seqs_active, 0);
        for p in std::mem::take(&mut self.pins) {
            self.pool.unpin_prefix(&p.root, &p.tokens);
        }
        self.pool.evict_cached(usize::MAX);
        self.pool.check_invariants().unwrap();
        assert_eq!(
            self.pool.free_blocks(),
            N_BLOCKS,
            "cached blocks left after evicting all"
        );
        assert_eq!(self.pool.snapshot().wasted_slots, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_reference_model(ops in prop::collection::vec(op(), 1..80)) {
        let mut h = Harness::new();
        for op in ops {
            h.apply(op);
            h.check();
        }
        h.drain();
    }
}
