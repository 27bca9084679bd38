//! Public prefixes in the pool: one copy of the public blocks across isolated namespaces that
//! declare them, private suffixes forked from the namespace root and the public chain, nothing
//! shared without the declaration, public blocks outside tenants' caps.

use std::sync::Arc;

use crate::hash::{BlockHash, ModelFingerprint, NamespaceSalt};
use crate::ids::{NamespaceId, SeqId};
use crate::layout::{KvElem, KvLayout};
use crate::pool::BlockPool;
use crate::public::PublicChain;

const B: usize = 4;
const A: NamespaceId = NamespaceId(1);
const C: NamespaceId = NamespaceId(2);
const PLAIN: NamespaceId = NamespaceId(3);

fn pool(n_blocks: usize) -> BlockPool {
    let layout = KvLayout::new(1, 32, KvElem::F16).with_block_tokens(B);
    BlockPool::new(layout, n_blocks * layout.block_bytes().unwrap()).unwrap()
}

fn root(pool: &BlockPool, salt: &str) -> BlockHash {
    pool.root_hash(&ModelFingerprint([5; 32]), &NamespaceSalt::derive(salt))
}

/// The system prompt: 10 tokens, so 2 whole public blocks and 2 tokens left over.
fn system() -> Vec<u32> {
    (100..110).collect()
}

fn declare(pool: &mut BlockPool, ns: NamespaceId) {
    let common = root(pool, "common");
    let chain = PublicChain::new(common, B, &[system()]);
    pool.set_public_prefixes(ns, Some(Arc::new(chain)));
}

fn run(pool: &mut BlockPool, ns: NamespaceId, salt: &str, tokens: &[u32]) -> (SeqId, usize) {
    let seq = pool.create_seq(ns, root(pool, salt));
    let hit = pool.match_prefix(seq, tokens).unwrap();
    pool.reserve(seq, tokens.len() - hit).unwrap();
    pool.commit(seq, &tokens[hit..]).unwrap();
    pool.check_invariants().unwrap();
    (seq, hit)
}

fn prompt(user: &[u32]) -> Vec<u32> {
    let mut p = system();
    p.extend_from_slice(user);
    p
}

#[test]
fn declared_namespaces_share_the_public_blocks_and_nothing_else() {
    let mut p = pool(64);
    declare(&mut p, A);
    declare(&mut p, C);
    let user: Vec<u32> = (1..=9).collect();
    let (sa, hit_a) = run(&mut p, A, "a", &prompt(&user));
    assert_eq!(hit_a, 0);
    assert_eq!(p.seq_public_blocks(sa).unwrap(), 2);
    assert_eq!(
        p.public_held(),
        2,
        "the public blocks moved to the public account"
    );
    // C sends A's exact prompt, suffix guessed token for token: only the public blocks hit.
    let (sc, hit_c) = run(&mut p, C, "c", &prompt(&user));
    assert_eq!(hit_c, 2 * B);
    assert_eq!(p.public_held(), 2, "one copy of the public blocks");
    let (ha, hc) = (&p.seqs[&sa].hashes, &p.seqs[&sc].hashes);
    assert_eq!(ha[..2], hc[..2]);
    assert!(
        ha[2..].iter().all(|h| !hc.contains(h)),
        "private blocks differ"
    );
    // The first private block chains from H(root_ns, last public hash), not the bare chain.
    let fork = BlockHash::private_fork(&root(&p, "a"), &ha[1]);
    assert_eq!(ha[2], BlockHash::chain(&fork, &prompt(&user)[8..12]));
    assert_ne!(ha[2], BlockHash::chain(&ha[1], &prompt(&user)[8..12]));
    // A namespace without the declaration shares nothing, even with the same salt as nobody.
    let (_, hit_plain) = run(&mut p, PLAIN, "plain", &prompt(&user));
    assert_eq!(hit_plain, 0);
    // The public blocks are the common salt's own blocks: a shared chain hits them.
    let shared = p.create_seq(NamespaceId(9), root(&p, "common"));
    assert_eq!(p.match_prefix(shared, &prompt(&[7, 7, 7])).unwrap(), 2 * B);
    p.check_invariants().unwrap();
}

#[test]
fn a_prompt_that_leaves_the_prefix_early_is_private_from_there() {
    let mut p = pool(64);
    declare(&mut p, A);
    let mut off = system();
    off[5] = 1; // differs inside the second block
    let (s, _) = run(&mut p, A, "a", &off);
    assert_eq!(p.seq_public_blocks(s).unwrap(), 1);
    assert_eq!(p.public_held(), 1);
    // Truncating into the public run and growing again re-enters it.
    p.truncate(s, 4).unwrap();
    p.reserve(s, 6).unwrap();
    p.commit(s, &system()[4..]).unwrap();
    assert_eq!(p.seq_public_blocks(s).unwrap(), 2);
    p.check_invariants().unwrap();
    // chain_hashes predicts what the pool seals.
    let (hashes, n_public) = p.chain_hashes(A, root(&p, "a"), &system());
    assert_eq!(n_public, 2);
    assert_eq!(hashes, p.seqs[&s].hashes);
}

#[test]
fn public_blocks_count_against_no_tenant_cap() {
    let mut p = pool(64);
    declare(&mut p, A);
    declare(&mut p, C);
    // A's cap covers what it allocates while computing (6 blocks for 21 tokens); once sealed,
    // the 2 public blocks leave its account, so it holds its 4 private ones.
    p.set_namespace_cap(A, Some(6));
    let long: Vec<u32> = (1..=11).collect();
    let (sa, _) = run(&mut p, A, "a", &prompt(&long));
    assert_eq!(p.namespace_held(A), 4);
    // C keeping the public blocks in use does not squeeze A's cap ...
    let (_sc, _) = run(&mut p, C, "c", &prompt(&[5; 8]));
    assert_eq!(p.namespace_held(A), 4);
    // ... and A, hitting the public blocks, only allocates its private suffix.
    p.drop_seq(sa).unwrap();
    let (sa2, hit) = run(&mut p, A, "a", &prompt(&[9; 6]));
    assert_eq!(hit, 2 * B);
    assert_eq!(
        p.namespace_held(A),
        6,
        "4 cached from before, 2 new private blocks"
    );
    p.drop_seq(sa2).unwrap();
    let (_sa3, hit) = run(&mut p, A, "a", &prompt(&long));
    assert_eq!(hit, 20, "A's own private blocks stayed cached");
    p.check_invariants().unwrap();
}
