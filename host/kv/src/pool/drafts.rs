//! The pool's draft index: where each run of 2 to 4 tokens of a resident sealed block (runs
//! that start in its parent's last tokens included) was followed, keyed with the draft group of
//! the chain that sealed the block. A draft is read from the block itself, so the index holds
//! no text of its own and is bounded by its fixed table; a block that leaves the pool leaves
//! the index with it (every hit is checked against the block's group and tokens, and a freed
//! block's group is cleared). Blocks staged in from a lower tier are indexed when they are
//! linked, as blocks sealed here are, so a restarted host drafts from what it restored.

use super::BlockPool;
use crate::draft::ngram::{MAX_N, MIN_N, hash, slots_for};
use crate::ids::NIL;

/// The most slots the table takes (8 bytes each: 4 MiB).
const MAX_SLOTS: usize = 1 << 19;

/// The index's tables, sized with the pool.
pub(crate) struct BlockDrafts {
    /// `slot -> (block + 1, slot of the continuation in the block)`; block 0: empty.
    table: Vec<(u32, u32)>,
    mask: usize,
    /// Per block: the draft group of the chain that sealed it (0: not indexed).
    groups: Vec<u64>,
}

impl BlockDrafts {
    pub fn new(n_blocks: usize, block_tokens: usize) -> Self {
        // Runs reach back into the parent by at most `MAX_N` tokens: smaller blocks are not
        // indexed.
        if block_tokens < MAX_N {
            return BlockDrafts {
                table: Vec::new(),
                mask: 0,
                groups: Vec::new(),
            };
        }
        let runs = n_blocks
            .saturating_mul(block_tokens)
            .saturating_mul(MAX_N - MIN_N + 1);
        let slots = slots_for(runs).min(MAX_SLOTS);
        BlockDrafts {
            table: vec![(0, 0); slots],
            mask: slots - 1,
            groups: vec![0; n_blocks],
        }
    }

    fn slot(&self, group: u64, run: &[u32]) -> usize {
        (hash(run) ^ group.wrapping_mul(0x9e37_79b9_7f4a_7c15)) as usize & self.mask
    }

    /// The bytes the index holds.
    pub fn bytes(&self) -> usize {
        self.table.len() * 8 + self.groups.len() * 8
    }
}

/// Appends `t` to the run window, dropping its oldest token.
fn shift(window: &mut [u32; MAX_N], t: u32) {
    window.copy_within(1.., 0);
    window[MAX_N - 1] = t;
}

impl BlockPool {
    /// Indexes sealed block `id` (linked under `parent`) for drafts of `group`.
    pub(crate) fn index_drafts(&mut self, id: u32, parent: u32, group: u64) {
        if self.drafts.table.is_empty() {
            return;
        }
        let b = self.layout.block_tokens;
        self.drafts.groups[id as usize] = group;
        let mut window = [0u32; MAX_N];
        let mut filled = 0usize;
        if parent != NIL {
            let end = (parent as usize + 1) * b;
            for &t in &self.block_tokens[end - MAX_N..end] {
                shift(&mut window, t);
            }
            filled = MAX_N;
        }
        let at = id as usize * b;
        for p in 0..b {
            for n in MIN_N..=MAX_N.min(filled) {
                let slot = self.drafts.slot(group, &window[MAX_N - n..]);
                self.drafts.table[slot] = (id + 1, p as u32);
            }
            shift(&mut window, self.block_tokens[at + p]);
            filled = (filled + 1).min(MAX_N);
        }
    }

    /// Takes block `id` out of the index (it is being freed).
    pub(crate) fn forget_drafts(&mut self, id: u32) {
        if let Some(g) = self.drafts.groups.get_mut(id as usize) {
            *g = 0;
        }
    }

    /// Writes into `out` (cleared first) up to `max` tokens that followed the last `n` tokens
    /// of `context` in a resident sealed block of `group` (to the block's end), longest `n`
    /// first. Returns the `n` matched (0: no draft). Allocates nothing when `out` has room.
    pub fn draft_from_blocks(
        &self,
        group: u64,
        context: &[u32],
        max: usize,
        out: &mut Vec<u32>,
    ) -> usize {
        out.clear();
        if max == 0 || self.drafts.table.is_empty() || group == 0 {
            return 0;
        }
        let b = self.layout.block_tokens;
        for n in (MIN_N..=MAX_N).rev() {
            let Some(run) = context.len().checked_sub(n).map(|s| &context[s..]) else {
                continue;
            };
            let (entry, pos) = self.drafts.table[self.drafts.slot(group, run)];
            let Some(id) = entry.checked_sub(1) else {
                continue;
            };
            let (idx, pos) = (id as usize, pos as usize);
            if self.drafts.groups[idx] != group
                || self.metas[idx].hash.is_none()
                || !self.run_before(id, pos, run)
            {
                continue;
            }
            let at = idx * b;
            out.extend_from_slice(&self.block_tokens[at + pos..at + (pos + max).min(b)]);
            return n;
        }
        0
    }

    /// Whether the tokens just before slot `pos` of block `id` (running back into its parent's
    /// last tokens) are `run`.
    fn run_before(&self, id: u32, pos: usize, run: &[u32]) -> bool {
        let b = self.layout.block_tokens;
        let parent = self.metas[id as usize].parent;
        run.iter().enumerate().all(|(k, &t)| {
            let back = run.len() - k;
            let at = if back <= pos {
                id as usize * b + pos - back
            } else if parent != NIL {
                (parent as usize + 1) * b - (back - pos)
            } else {
                return false;
            };
            self.block_tokens[at] == t
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::draft::group_key;
    use crate::hash::{BlockHash, ModelFingerprint, NamespaceSalt};
    use crate::ids::NamespaceId;
    use crate::layout::{KvElem, KvLayout};
    use crate::pool::BlockPool;

    fn pool(blocks: usize) -> BlockPool {
        let layout = KvLayout::new(1, 8, KvElem::F16).with_block_tokens(16);
        BlockPool::new(layout, blocks * layout.block_bytes().expect("layout")).expect("pool")
    }

    fn root(p: &BlockPool, salt: &str) -> BlockHash {
        p.root_hash(&ModelFingerprint([1; 32]), &NamespaceSalt::derive(salt))
    }

    /// Runs a sequence of `tokens` in namespace `ns` under `root` and ends it (its whole
    /// blocks stay cached).
    fn run(p: &mut BlockPool, ns: u32, root: BlockHash, tokens: &[u32]) {
        let s = p.create_seq(NamespaceId(ns), root);
        p.reserve(s, tokens.len()).expect("reserve");
        p.commit(s, tokens).expect("commit");
        p.end_seq(s).expect("end");
    }

    fn text(n: u32, base: u32) -> Vec<u32> {
        (0..n).map(|i| base + (i * 7919) % 1000).collect()
    }

    #[test]
    fn a_cached_blocks_continuation_is_drafted_for_its_group_across_block_ends() {
        let mut p = pool(32);
        let r = root(&p, "a");
        let t = text(40, 10);
        run(&mut p, 1, r, &t);
        let g = group_key(&r);
        let mut out = Vec::with_capacity(8);
        // A run inside block 0: the rest of the block, at most `max`.
        assert_eq!(p.draft_from_blocks(g, &t[..5], 8, &mut out), 4);
        assert_eq!(out, t[5..13]);
        assert_eq!(p.draft_from_blocks(g, &t[..12], 8, &mut out), 4);
        assert_eq!(out, t[12..16], "a draft stops at its block's end");
        // A run ending with block 0's last token continues in block 1 (its parent's run).
        assert_eq!(p.draft_from_blocks(g, &t[..16], 8, &mut out), 4);
        assert_eq!(out, t[16..24]);
        // Tokens of the partial tail (32..40) are not indexed; unknown runs draft nothing.
        assert_eq!(p.draft_from_blocks(g, &t[..33], 8, &mut out), 0);
        assert_eq!(p.draft_from_blocks(g, &[5000, 5001], 8, &mut out), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn another_group_never_drafts_a_blocks_text() {
        let mut p = pool(32);
        let (ra, rb) = (root(&p, "a"), root(&p, "b"));
        let canary = text(32, 7000);
        run(&mut p, 1, ra, &canary);
        let mut out = Vec::with_capacity(8);
        assert_eq!(
            p.draft_from_blocks(group_key(&rb), &canary[..8], 8, &mut out),
            0
        );
        assert!(out.is_empty());
        assert_eq!(
            p.draft_from_blocks(group_key(&ra), &canary[..8], 8, &mut out),
            4
        );
        assert_eq!(out, canary[8..16]);
    }

    #[test]
    fn an_evicted_block_is_never_drafted_from() {
        let mut p = pool(4);
        let r = root(&p, "a");
        let g = group_key(&r);
        let first = text(32, 10);
        run(&mut p, 1, r, &first);
        let mut out = Vec::with_capacity(8);
        assert_eq!(p.draft_from_blocks(g, &first[..4], 8, &mut out), 4);
        // Fill the pool with other text: the first blocks are evicted and their ids reused.
        run(&mut p, 1, r, &text(64, 3000));
        assert_eq!(p.draft_from_blocks(g, &first[..4], 8, &mut out), 0);
        assert!(out.is_empty());
        p.check_invariants().expect("invariants");
    }

    #[test]
    fn blocks_staged_in_from_a_lower_tier_are_drafted_from() {
        use crate::misses::LostTier;
        use crate::staging::Staged;
        let mut p = pool(8);
        let r = root(&p, "a");
        let (ns, t) = (NamespaceId(1), text(33, 10));
        let (hashes, _) = p.chain_hashes(ns, r, &t);
        // Two whole blocks come from "disk" (their bytes are irrelevant to drafting).
        let mut staged = Staged::with_loan(None, p.block_bytes(), 2);
        for (k, slot) in staged.slots_mut().enumerate().take(2) {
            slot.fill(k as u8);
        }
        staged.push_hit(hashes[0], 0, LostTier::Disk);
        staged.push_hit(hashes[1], 1, LostTier::Disk);
        let s = p.create_seq(ns, r);
        assert_eq!(p.match_prefix_from(s, &t, &mut staged).expect("match"), 32);
        p.end_seq(s).expect("end");
        let mut out = Vec::with_capacity(8);
        assert_eq!(p.draft_from_blocks(group_key(&r), &t[..18], 8, &mut out), 4);
        assert_eq!(out, t[18..26]);
    }
}
