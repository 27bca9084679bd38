//! Lending blocks to a writer on another thread and taking them back (see `crate::loan`):
//! only free blocks are lent, at most half of them (lending never evicts, and a loan asked for
//! a prompt the tiers turn out not to hold leaves the other sessions room meanwhile), and only
//! within the namespace's cap; the prefix match adopts a lent block that holds the block it
//! wants instead of promoting a copy.

use super::BlockPool;
use crate::hash::BlockHash;
use crate::ids::NamespaceId;
use crate::loan::Loan;
use crate::tier::TierSource;

impl BlockPool {
    /// Lends `n` free blocks, attributed to `ns`, for another thread to fill; `None` (nothing
    /// lent) when they would be more than half the free blocks or `ns`'s cap has no room.
    pub fn lend(&mut self, ns: NamespaceId, n: usize) -> Option<Loan> {
        self.reclaim_loans();
        if n == 0 || n > self.free.len() / 2 {
            return None;
        }
        let slot = self.ns_slot(ns);
        let room = self.namespaces[slot]
            .cap
            .is_none_or(|cap| self.namespaces[slot].held.saturating_add(n) <= cap);
        if !room {
            return None;
        }
        let mut blocks = Vec::with_capacity(n);
        for _ in 0..n {
            // Cannot fail (`n` blocks are free); should it, what was taken goes back.
            let Ok(id) = self.alloc(slot) else {
                for (id, _) in blocks {
                    self.lent.retain(|&l| l != id);
                    self.decref(id);
                }
                return None;
            };
            self.lent.push(id);
            blocks.push((id, self.arena.lend(id).1));
        }
        let map = self.arena.lend(blocks[0].0).0;
        Some(Loan::new(
            map,
            blocks,
            self.block_bytes,
            self.returns.clone(),
        ))
    }

    /// Takes back the blocks that dropped loans gave back (one atomic load when none did).
    pub fn reclaim_loans(&mut self) {
        let mut back = std::mem::take(&mut self.returned);
        self.returns.take(&mut back);
        for id in back.drain(..) {
            if let Some(k) = self.lent.iter().position(|&l| l == id) {
                self.lent.swap_remove(k);
                self.decref(id);
            }
        }
        self.returned = back;
    }

    /// Blocks lent out and neither adopted nor taken back yet.
    pub fn lent_blocks(&self) -> usize {
        self.lent.len()
    }

    /// The block this pool lent in which `src` staged block `hash`, now the pool's again
    /// (one reference, unlinked, its bytes the block's); `None` when `src` holds it elsewhere.
    pub(crate) fn adopt_lent(&mut self, hash: &BlockHash, src: &mut dyn TierSource) -> Option<u32> {
        let (loan, k) = src.lent(hash)?;
        if !loan.lent_by(&self.returns) {
            return None;
        }
        let id = loan.adopt(k)?;
        // Always found: a loan of this pool names only blocks lent and not given back.
        let at = self.lent.iter().position(|&l| l == id)?;
        self.lent.swap_remove(at);
        Some(id)
    }

    /// Lent blocks, for the invariant check (each holds one reference).
    pub(crate) fn lent_ids(&self) -> &[u32] {
        &self.lent
    }
}

#[cfg(test)]
mod tests {
    use crate::hash::{BlockHash, ModelFingerprint, NamespaceSalt};
    use crate::ids::{BlockId, NamespaceId};
    use crate::layout::{KvElem, KvLayout};
    use crate::misses::LostTier;
    use crate::pool::BlockPool;
    use crate::staging::Staged;

    const B: usize = 4;
    const NS: NamespaceId = NamespaceId(1);

    fn pool(n_blocks: usize) -> BlockPool {
        let layout = KvLayout::new(1, 32, KvElem::F16).with_block_tokens(B);
        BlockPool::new(layout, n_blocks * layout.block_bytes().unwrap()).unwrap()
    }

    fn root(pool: &BlockPool) -> BlockHash {
        pool.root_hash(&ModelFingerprint([5; 32]), &NamespaceSalt::derive("loans"))
    }

    #[test]
    fn a_staged_block_in_a_lent_block_is_linked_in_place_and_the_rest_come_back() {
        let mut p = pool(8);
        let tokens: Vec<u32> = (0..9).collect(); // two whole blocks and one token to compute
        let (hashes, _) = p.chain_hashes(NS, root(&p), &tokens);
        let loan = p.lend(NS, 3).expect("3 of 8 free");
        assert_eq!((p.free_blocks(), p.lent_blocks()), (5, 3));
        p.check_invariants().expect("lent blocks are accounted");
        // Another thread stages two blocks into the loan, as the staging thread does.
        let bytes = p.block_bytes();
        let (h0, h1) = (hashes[0], hashes[1]);
        let staged = std::thread::spawn(move || {
            let mut st = Staged::with_loan(Some(loan), bytes, 3);
            assert!(st.is_lent());
            for (k, slot) in st.slots_mut().enumerate().take(2) {
                slot.fill(k as u8 + 40);
            }
            st.push_hit(h0, 0, LostTier::Disk);
            st.push_hit(h1, 1, LostTier::Disk);
            st
        })
        .join()
        .unwrap();
        let mut staged = staged;
        let seq = p.create_seq(NS, root(&p));
        assert_eq!(p.match_prefix_from(seq, &tokens, &mut staged).unwrap(), 8);
        let table: Vec<BlockId> = p.block_table(seq).unwrap().to_vec();
        assert_eq!(p.lent_blocks(), 1, "two adopted, one still lent");
        assert!(p.block_data(table[0]).iter().all(|&x| x == 40));
        assert!(p.block_data(table[1]).iter().all(|&x| x == 41));
        assert!(p.holds(&hashes[1]));
        drop(staged);
        p.reclaim_loans();
        assert_eq!((p.lent_blocks(), p.free_blocks()), (0, 6));
        p.check_invariants().unwrap();
        p.drop_seq(seq).unwrap();
        p.check_invariants().unwrap();
        assert_eq!(
            p.cached_blocks(),
            2,
            "the adopted blocks are sealed and cached"
        );
    }

    #[test]
    fn a_staged_tail_joins_the_retained_tails_in_its_lent_block() {
        let mut p = pool(8);
        let tokens: Vec<u32> = (0..7).collect(); // one whole block, then 4, 5 and the last
        let (hashes, _) = p.chain_hashes(NS, root(&p), &tokens[..B]);
        let bytes = p.block_bytes();
        let mut st = Staged::with_loan(p.lend(NS, 3), bytes, 3);
        for (k, slot) in st.slots_mut().enumerate() {
            slot.fill(k as u8 + 50);
        }
        st.push_hit(hashes[0], 0, LostTier::Disk);
        // A tail of another parent is never taken; this one continues with 4, 5, then differs.
        st.push_tail(BlockHash([9; 32]), vec![4], 2);
        let seq = p.create_seq(NS, root(&p));
        assert_eq!(p.match_prefix_from(seq, &tokens, &mut st).unwrap(), 4);
        p.drop_seq(seq).unwrap();
        st.push_tail(hashes[0], vec![4, 5, 9], 1);
        let seq = p.create_seq(NS, root(&p));
        assert_eq!(p.match_prefix_from(seq, &tokens, &mut st).unwrap(), 6);
        let table = p.block_table(seq).unwrap().to_vec();
        assert!(
            p.block_data(table[1]).iter().all(|&x| x == 51),
            "linked in place"
        );
        assert_eq!(p.lent_blocks(), 1, "the unused slot is still lent");
        p.check_invariants().unwrap();
        drop(st);
        p.reclaim_loans();
        p.drop_seq(seq).unwrap();
        p.check_invariants().unwrap();
        // Hot now: a later prompt takes the same tail without any source.
        let seq = p.create_seq(NS, root(&p));
        assert_eq!(p.match_prefix(seq, &tokens).unwrap(), 6);
        p.drop_seq(seq).unwrap();
        p.check_invariants().unwrap();
    }

    #[test]
    fn a_loan_dropped_on_another_thread_unused_gives_every_block_back() {
        let mut p = pool(4);
        let loan = p.lend(NS, 2).expect("half the free blocks");
        assert_eq!(p.free_blocks(), 2);
        std::thread::spawn(move || drop(loan)).join().unwrap();
        assert_eq!(p.free_blocks(), 2, "taken back on the pool's thread only");
        p.reclaim_loans();
        assert_eq!((p.free_blocks(), p.lent_blocks()), (4, 0));
        p.check_invariants().unwrap();
    }

    #[test]
    fn nothing_is_lent_past_the_free_blocks_or_the_namespace_cap() {
        let mut p = pool(8);
        assert!(p.lend(NS, 5).is_none(), "more than half the free blocks");
        assert!(p.lend(NS, 0).is_none());
        p.set_namespace_cap(NS, Some(2));
        assert!(p.lend(NS, 3).is_none());
        let two = p.lend(NS, 2).expect("within the cap");
        assert_eq!(two.len(), 2);
        assert!(p.lend(NS, 1).is_none(), "the cap is held by the loan");
        assert_eq!(p.free_blocks(), 6);
        drop(two);
        p.reclaim_loans();
        p.check_invariants().unwrap();
    }

    #[test]
    fn a_loan_of_another_pool_is_never_adopted() {
        let mut a = pool(4);
        let mut b = pool(4);
        let tokens: Vec<u32> = (0..5).collect();
        let (hashes, _) = a.chain_hashes(NS, root(&a), &tokens);
        let bytes = b.block_bytes();
        let mut st = Staged::with_loan(b.lend(NS, 1), bytes, 1);
        st.slots_mut().next().unwrap().fill(9);
        st.push_hit(hashes[0], 0, LostTier::Disk);
        let seq = a.create_seq(NS, root(&a));
        // Pool `a` copies the block from `b`'s loan instead of taking `b`'s block.
        assert_eq!(a.match_prefix_from(seq, &tokens, &mut st).unwrap(), 4);
        assert_eq!(a.lent_blocks(), 0);
        assert_eq!(b.lent_blocks(), 1);
        let id = a.block_table(seq).unwrap()[0];
        assert!(a.block_data(id).iter().all(|&x| x == 9));
        drop(st);
        b.reclaim_loans();
        assert_eq!(b.free_blocks(), 4);
        a.check_invariants().unwrap();
        b.check_invariants().unwrap();
    }
}
