//! Token-granular reuse: a finished sequence's partial last block stays cached (a retained
//! tail) and a prompt continuing it reuses its tokens, copying it on first write; isolation,
//! eviction and the tier sink treat it like any cached block, except that it never leaves RAM.

use super::*;

const B: usize = 16;

/// A sequence of `tokens`, finished (dropped) at once.
fn finished(p: &mut BlockPool, r: BlockHash, tokens: &[u32]) {
    let s = seq_with(p, 0, r, tokens);
    p.drop_seq(s).unwrap();
}

#[test]
fn kv_a_finished_partial_block_is_reused_token_for_token_and_copied_on_write() {
    let mut p = pool(B, 16);
    let r = root(&p, "s");
    let first: Vec<u32> = (0..40).collect(); // 2 full blocks + 8 tokens
    finished(&mut p, r, &first);
    p.check_invariants().unwrap();

    let mut prompt = first.clone();
    prompt.extend([100, 101, 102]);
    let s = p.create_seq(NamespaceId(0), r);
    assert_eq!(
        p.match_prefix(s, &prompt).unwrap(),
        40,
        "all 40 cached tokens"
    );
    verify(&p, s);
    let cow = p.snapshot().total.cow_copies;
    append(&mut p, s, &prompt[40..]).unwrap();
    verify(&p, s);
    assert_eq!(
        p.snapshot().total.cow_copies,
        cow + 1,
        "the shared tail was copied"
    );
    p.check_invariants().unwrap();

    // The tail is still there for another prompt, which diverges inside it.
    let mut other: Vec<u32> = first[..36].to_vec();
    other.extend([7, 7, 7]);
    let o = p.create_seq(NamespaceId(0), r);
    assert_eq!(p.match_prefix(o, &other).unwrap(), 36);
    verify(&p, o);
    append(&mut p, o, &other[36..]).unwrap();
    verify(&p, o);
    let snap = p.snapshot().total;
    assert_eq!(snap.tail_hits, 2);
    p.drop_seq(s).unwrap();
    p.drop_seq(o).unwrap();
    p.check_invariants().unwrap();

    // s's longer tail (43 tokens) superseded the 40-token one; a prompt of exactly
    // `first` + 1 still reuses 40 tokens from it (the last is left to compute).
    let mut again = first.clone();
    again.push(100);
    let a = p.create_seq(NamespaceId(0), r);
    assert_eq!(p.match_prefix(a, &again).unwrap(), 40);
    verify(&p, a);
    p.drop_seq(a).unwrap();
    p.check_invariants().unwrap();
}

#[test]
fn kv_tails_never_cross_namespaces_or_diverged_blocks() {
    let mut p = pool(B, 16);
    let r = root(&p, "a");
    let tokens: Vec<u32> = (0..40).collect();
    finished(&mut p, r, &tokens);
    let mut prompt = tokens.clone();
    prompt.push(1);

    // Another salt: neither the full blocks nor the tail.
    let other = root(&p, "b");
    let s = p.create_seq(NamespaceId(1), other);
    assert_eq!(p.match_prefix(s, &prompt).unwrap(), 0);
    p.drop_seq(s).unwrap();

    // Same tail tokens after a different second block: only the first block matches.
    let mut diverged = prompt.clone();
    diverged[20] = 999;
    let s = p.create_seq(NamespaceId(0), r);
    assert_eq!(p.match_prefix(s, &diverged).unwrap(), 16);
    p.drop_seq(s).unwrap();
    assert_eq!(p.snapshot().total.tail_hits, 0);
    p.check_invariants().unwrap();
}

#[test]
fn kv_tails_are_evicted_like_cached_blocks_but_never_demoted() {
    let mut p = pool(B, 6);
    let rec = Recorder::default();
    p.set_sink(Box::new(rec.clone()));
    let r = root(&p, "s");
    for i in 0..8u32 {
        // 1 full block + 5 tokens each: 2 blocks per finished sequence, 6 in the pool.
        let tokens: Vec<u32> = (0..21).map(|t| t + 1000 * i).collect();
        finished(&mut p, r, &tokens);
        p.check_invariants().unwrap();
    }
    let snap = p.snapshot().total;
    assert!(snap.evict_capacity > 0, "the pool was full: {snap:?}");
    // Only sealed blocks reach the sink: 21-token sequences have one each.
    let demoted = rec.hashes();
    for h in &demoted {
        assert!(
            (0..8u32).any(|i| {
                let tokens: Vec<u32> = (0..16).map(|t| t + 1000 * i).collect();
                chain(r, &tokens, B)[0] == *h
            }),
            "a non-sealed block was demoted"
        );
    }
    // The newest sequence's tail is still reusable.
    let mut prompt: Vec<u32> = (0..21).map(|t| t + 7000).collect();
    prompt.push(5);
    let s = p.create_seq(NamespaceId(0), r);
    assert_eq!(p.match_prefix(s, &prompt).unwrap(), 21);
    verify(&p, s);
    p.drop_seq(s).unwrap();
    p.check_invariants().unwrap();
}
