//! Partial tails through the stack: kept on disk after a reopen and staged after the chain's
//! whole blocks; damaged, foreign and other continuations' tails are misses with their reason.

use std::path::PathBuf;

use memoria_kv::staging::{StageRequest, Stager, TailMiss, WantedBlock, WantedTail};
use memoria_kv::{KvElem, KvLayout, NamespaceSalt};

use super::*;
use crate::StoreOptions;
use crate::stack::tests::{known, open_known};

const MODEL: ModelFingerprint = ModelFingerprint([6; 32]);

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memoria-tail-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn layout() -> KvLayout {
    KvLayout::new(2, 32, KvElem::F16).with_block_tokens(4)
}

fn opts() -> StoreOptions {
    StoreOptions {
        cold_budget_bytes: 0,
        ..StoreOptions::default()
    }
}

/// One whole block (tokens 0..4) of `salt`'s chain and the 3-token tail after it:
/// (root, block hash, block bytes, tail).
fn setup(salt: &NamespaceSalt) -> (BlockHash, BlockHash, Vec<u8>, PartialBlock) {
    let l = layout();
    let root = BlockHash::root(&MODEL, l.elem, l.block_tokens, salt);
    let h0 = BlockHash::chain(&root, &[0, 1, 2, 3]);
    let n = l.block_bytes().unwrap();
    let data: Vec<u8> = (0..n).map(|j| (j % 251) as u8).collect();
    let tail = PartialBlock {
        parent: h0,
        tokens: vec![7, 8, 9],
        data: (0..n).map(|j| (j % 13 + 1) as u8).collect(),
    };
    (root, h0, data, tail)
}

fn write(st: &TierStack, salt: NamespaceSalt, h0: BlockHash, data: &[u8], tail: PartialBlock) {
    let identity = BlockIdentity {
        model: MODEL,
        layout: layout(),
        salt,
        hash: h0,
    };
    assert!(st.persist(identity, &[0, 1, 2, 3], data, false));
    assert!(st.persist_tail(MODEL, layout(), salt, tail));
    st.flush().unwrap();
}

/// Stages block 0 and the tail after it for a prompt continuing with `rest`.
fn stage(
    st: &TierStack,
    root: BlockHash,
    h0: BlockHash,
    rest: &[u32],
) -> memoria_kv::staging::Staged {
    st.stage(StageRequest {
        model: MODEL,
        layout: layout(),
        root,
        public: (0, root),
        tokens: vec![0, 1, 2, 3],
        wanted: vec![WantedBlock { index: 0, hash: h0 }],
        tail: Some(WantedTail {
            parent: h0,
            tokens: rest.to_vec(),
        }),
        loan: None,
    })
}

#[test]
fn a_kept_tail_is_staged_after_a_reopen_with_its_filled_slots_only() {
    let d = dir("reopen");
    let salt = NamespaceSalt::derive("t");
    let (root, h0, data, tail) = setup(&salt);
    let want = tail.data.clone();
    {
        let st = open_known(&d, opts());
        write(&st, salt, h0, &data, tail);
        // A later tail under the same parent replaces it.
        let (_, _, _, mut newer) = setup(&salt);
        newer.tokens = vec![7, 8];
        assert!(st.persist_tail(MODEL, layout(), salt, newer));
        st.flush().unwrap();
        assert_eq!(st.snapshot().redb.blocks, 2, "one block, one tail");
    }
    let st = open_known(&d, opts());
    let mut staged = stage(&st, root, h0, &[7, 8, 5]);
    assert_eq!(staged.hits(), 1);
    assert_eq!(staged.tail_tokens(), Some(&[7, 8][..]));
    assert_eq!(staged.tail_miss(), None);
    let got = staged.slot_mut(1).unwrap().to_vec();
    // The unfilled slots were zeroed before writing; the filled ones are the tail's.
    let row = layout().row_bytes().unwrap();
    for (part, (g, w)) in got
        .chunks_exact(4 * row)
        .zip(want.chunks_exact(4 * row))
        .enumerate()
    {
        assert_eq!(&g[..2 * row], &w[..2 * row], "part {part}");
        assert!(g[2 * row..].iter().all(|&x| x == 0), "part {part}");
    }
    assert_eq!(st.snapshot().redb.tail_hits, 1);
    assert_eq!(st.snapshot().redb.hits, 1, "whole blocks only");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn another_continuation_a_damaged_tail_and_another_namespace_are_misses() {
    let d = dir("misses");
    let salt = NamespaceSalt::derive("t");
    let (root, h0, data, tail) = setup(&salt);
    let st = open_known(&d, opts());
    write(&st, salt, h0, &data, tail);
    // Other tokens after the block: kept, not used.
    let staged = stage(&st, root, h0, &[9, 9]);
    assert_eq!(staged.tail_miss(), Some(TailMiss::Differs));
    assert_eq!(staged.tail_tokens(), None);
    assert!(st.on_disk(&BlockHash::tail_key(&h0)));
    // Another namespace asking under the same parent hash (it cannot chain to it, but a
    // forged request could): the salt does not give its root, the value is removed.
    let other = NamespaceSalt::derive("u");
    let (other_root, ..) = setup(&other);
    let staged = stage(&st, other_root, h0, &[7]);
    assert_eq!(
        staged.tail_miss(),
        Some(TailMiss::Absent),
        "its block is foreign first"
    );
    let foreign = st.stage_tail(
        MODEL,
        layout(),
        other_root,
        &WantedTail {
            parent: h0,
            tokens: vec![7],
        },
        &mut vec![0; layout().block_bytes().unwrap()],
    );
    assert_eq!(foreign, Err(TailMiss::Foreign));
    assert_eq!(
        st.snapshot().redb.foreign_removed,
        2,
        "the block, then the tail"
    );
    assert!(!st.on_disk(&BlockHash::tail_key(&h0)));
    // A damaged value: removed and counted.
    let (_, _, _, tail) = setup(&salt);
    assert!(st.persist_tail(MODEL, layout(), salt, tail));
    st.flush().unwrap();
    let key = BlockHash::tail_key(&h0);
    let mut bad = st.disk().unwrap().get(&key).unwrap();
    let at = bad.len() - 3;
    bad[at] ^= 0x41;
    st.disk().unwrap().remove(&key);
    st.disk().unwrap().put(&key, bad);
    st.flush().unwrap();
    let mut out = vec![0; layout().block_bytes().unwrap()];
    let want = WantedTail {
        parent: h0,
        tokens: vec![7],
    };
    assert_eq!(
        st.stage_tail(MODEL, layout(), root, &want, &mut out),
        Err(TailMiss::Corrupt(LostTier::Disk))
    );
    assert!(!st.on_disk(&key));
    assert_eq!(st.snapshot().redb.corrupt_removed, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_padding_is_corrupt_and_a_full_or_empty_tail_is_never_kept() {
    let salt = NamespaceSalt::derive("t");
    let (root, h0, _, tail) = setup(&salt);
    let l = layout();
    let n = l.block_bytes().unwrap();
    let key = BlockHash::tail_key(&h0);
    let identity = BlockIdentity {
        model: MODEL,
        layout: l,
        salt,
        hash: key,
    };
    let expect = Expect {
        model: MODEL,
        layout: l,
        hash: key,
        root: Some(root),
        salt: Some(salt),
        tokens: None,
    };
    let mut out = vec![0; n];
    for tokens in [[7, PAD, 8, PAD], [PAD; 4], [7, 8, 9, 10]] {
        let v = codec::encode(&identity, &tokens, &tail.data, codec::Encoding::Raw).unwrap();
        assert!(matches!(
            read(&v, &expect, &[7], &mut out),
            Err(Bad::Codec(CodecError::OutOfRange { .. }))
        ));
    }
    let v = codec::encode(
        &identity,
        &[7, 8, PAD, PAD],
        &tail.data,
        codec::Encoding::Raw,
    )
    .unwrap();
    assert!(matches!(read(&v, &expect, &[7, 8, 9], &mut out), Ok(t) if t == [7, 8]));
    let st = known(TierStack::in_memory(opts()));
    let mut full = tail;
    full.tokens = vec![1, 2, 3, 4];
    assert!(
        !st.persist_tail(MODEL, l, salt, full),
        "no disk, and a whole block"
    );
}
