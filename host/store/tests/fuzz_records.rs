//! Fuzz harness of what the store reads back (`cargo test -p memoria-store --test
//! fuzz_records`): encoded K/V blocks (local version 1 and the shared version 2 the remote tier
//! stores) and saved-session records, as random bytes, as byte edits of valid encodings, and as
//! edits re-sealed with a correct checksum (what a buggy or hostile peer could write). Decoding
//! must fail with a typed error or give a value that re-verifies; it must never panic nor make
//! an allocation larger than a constant times the input. `MEMORIA_FUZZ_CASES` raises the case
//! counts for long runs.

use memoria_fuzz::{Edit, TrackingAlloc, largest_allocation};
use memoria_kv::{BlockHash, KvElem, KvLayout, ModelFingerprint, NamespaceSalt};
use memoria_store::SessionRecord;
use memoria_store::codec::{
    self, BlockIdentity, CodecError, Encoding, Expect, FORMAT_VERSION, HEADER_BYTES, MAGIC,
};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc;

const TOKENS: [u32; 4] = [11, 22, 33, 44];

fn elem() -> impl Strategy<Value = KvElem> {
    prop::sample::select(vec![KvElem::F32, KvElem::F16, KvElem::Q8_0, KvElem::Q4_0])
}

fn encoding() -> impl Strategy<Value = Encoding> {
    prop::sample::select(vec![
        Encoding::Raw,
        Encoding::Lz4,
        Encoding::Q8_0,
        Encoding::Q4_0,
    ])
}

fn identity(elem: KvElem) -> BlockIdentity {
    BlockIdentity {
        model: ModelFingerprint([1; 32]),
        layout: KvLayout::new(2, 64, elem).with_block_tokens(TOKENS.len()),
        salt: NamespaceSalt::derive("fuzz"),
        hash: BlockHash([7; 32]),
    }
}

/// The chain root of `id`'s salt.
fn root(id: &BlockIdentity) -> BlockHash {
    BlockHash::root(&id.model, id.layout.elem, id.layout.block_tokens, &id.salt)
}

fn expect(id: &BlockIdentity) -> Expect<'static> {
    Expect {
        model: id.model,
        layout: id.layout,
        hash: id.hash,
        root: Some(root(id)),
        salt: Some(id.salt),
        tokens: Some(&TOKENS),
    }
}

/// Block bytes of `layout`: finite f16 values for f16 blocks (lossy encodings need numbers),
/// a repeating pattern from `seed` otherwise (compressible or not).
fn block_data(id: &BlockIdentity, seed: u8) -> Vec<u8> {
    let n = id.layout.block_bytes().unwrap();
    if id.layout.elem == KvElem::F16 {
        (0..n / 2)
            .flat_map(|i| {
                half::f16::from_f32(((i + seed as usize) % 61) as f32 / 8.0).to_le_bytes()
            })
            .collect()
    } else {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(seed | 1) >> (seed % 4))
            .collect()
    }
}

/// A valid value: local or shared form, any element type and requested encoding.
fn valid_block(elem: KvElem, enc: Encoding, shared: bool, seed: u8) -> (BlockIdentity, Vec<u8>) {
    let id = identity(elem);
    let data = block_data(&id, seed);
    let bytes = if shared {
        codec::encode_shared(&id, &root(&id), &TOKENS, &data, enc)
    } else {
        codec::encode(&id, &TOKENS, &data, enc)
    }
    .unwrap();
    (id, bytes)
}

/// Decodes under the allocation probe; returns the result and the decoded bytes.
fn decode_checked(
    bytes: &[u8],
    id: &BlockIdentity,
) -> Result<(Result<Encoding, CodecError>, Vec<u8>), TestCaseError> {
    let mut out = vec![0u8; id.layout.block_bytes().unwrap()];
    let (r, largest) = largest_allocation(|| {
        let _ = codec::parse_header(bytes);
        let _ = codec::verify(bytes);
        codec::decode_into(bytes, &expect(id), &mut out)
    });
    let limit = 4 * (bytes.len() + out.len()) + 4096;
    prop_assert!(
        largest <= limit,
        "{largest}-byte allocation for {} bytes",
        bytes.len()
    );
    if let Err(e) = &r {
        prop_assert!(!e.to_string().is_empty());
    }
    Ok((r, out))
}

/// An accepted value re-verifies: checksum, identity and tokens all as expected.
fn reverifies(bytes: &[u8], id: &BlockIdentity) -> Result<(), TestCaseError> {
    let h = codec::verify(bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(h.identity.model, id.model);
    prop_assert_eq!(h.identity.layout, id.layout);
    prop_assert_eq!(h.identity.hash, id.hash);
    prop_assert!(h.tokens().eq(TOKENS));
    Ok(())
}

/// Recomputes a block's checksum (BLAKE3 of bytes [0, 136) and [168, end)).
fn reseal_block(b: &mut [u8]) {
    if b.len() < HEADER_BYTES {
        return;
    }
    let mut h = blake3::Hasher::new();
    h.update(&b[..136]);
    h.update(&b[HEADER_BYTES..]);
    b[136..HEADER_BYTES].copy_from_slice(h.finalize().as_bytes());
}

/// Edits that keep the length, so a re-sealed value still reaches the payload decoder.
fn in_place(edits: &[Edit]) -> Vec<Edit> {
    edits
        .iter()
        .filter(|e| matches!(e, Edit::Flip { .. } | Edit::Set { .. }))
        .cloned()
        .collect()
}

fn session(n_tokens: usize, block_tokens: usize) -> SessionRecord {
    let (model, salt) = (ModelFingerprint([3; 32]), NamespaceSalt::derive("fuzz"));
    let tokens: Vec<u32> = (0..n_tokens as u32).map(|t| t * 7 % 1000).collect();
    let root = BlockHash::root(&model, KvElem::F16, block_tokens, &salt);
    SessionRecord {
        model,
        elem: KvElem::F16,
        block_tokens,
        salt,
        hashes: SessionRecord::chain(&root, &tokens, block_tokens),
        tokens,
    }
}

/// Decodes a session record under the allocation probe; an accepted one must re-encode to the
/// same bytes and its hashes must follow its tokens.
fn session_checked(bytes: &[u8]) -> Result<Option<SessionRecord>, TestCaseError> {
    let (r, largest) = largest_allocation(|| SessionRecord::decode(bytes));
    let limit = 2 * bytes.len() + 4096;
    prop_assert!(
        largest <= limit,
        "{largest}-byte allocation for {} bytes",
        bytes.len()
    );
    match r {
        Ok(rec) => {
            prop_assert_eq!(rec.encode(), bytes);
            prop_assert!(rec.check_chain().is_ok());
            Ok(Some(rec))
        }
        Err(e) => {
            prop_assert!(!e.to_string().is_empty());
            Ok(None)
        }
    }
}

fn reseal_session(b: &mut [u8]) {
    if b.len() >= 32 {
        let end = b.len() - 32;
        let sum = *blake3::hash(&b[..end]).as_bytes();
        b[end..].copy_from_slice(&sum);
    }
}

proptest! {
    #![proptest_config(memoria_fuzz::config(3000))]

    /// Any edit of a valid block is refused unless it left the bytes as they were.
    #[test]
    fn store_fuzz_edited_blocks_are_refused(
        elem in elem(),
        enc in encoding(),
        shared in any::<bool>(),
        seed in any::<u8>(),
        edits in memoria_fuzz::edits(4),
    ) {
        let (id, valid) = valid_block(elem, enc, shared, seed);
        let mut bytes = valid.clone();
        memoria_fuzz::apply(&mut bytes, &edits);
        let (r, out) = decode_checked(&bytes, &id)?;
        if r.is_ok() {
            prop_assert_eq!(&bytes, &valid, "an edited block was accepted");
            reverifies(&bytes, &id)?;
            let mut again = vec![0; out.len()];
            codec::decode_into(&valid, &expect(&id), &mut again).unwrap();
            prop_assert_eq!(out, again);
        }
    }

    /// Edits re-sealed with a correct checksum reach the payload decoders (LZ4, q8_0, q4_0):
    /// they fail cleanly or decode a block that re-verifies.
    #[test]
    fn store_fuzz_resealed_blocks_fail_cleanly_or_reverify(
        elem in elem(),
        enc in encoding(),
        shared in any::<bool>(),
        seed in any::<u8>(),
        edits in memoria_fuzz::edits(4),
        payload_only in any::<bool>(),
    ) {
        let (id, valid) = valid_block(elem, enc, shared, seed);
        let mut bytes = valid.clone();
        let tokens_end = HEADER_BYTES + 4 * TOKENS.len();
        if payload_only {
            let mut payload = bytes.split_off(tokens_end);
            memoria_fuzz::apply(&mut payload, &in_place(&edits));
            bytes.extend(payload);
        } else {
            memoria_fuzz::apply(&mut bytes, &edits);
        }
        reseal_block(&mut bytes);
        let (r, _) = decode_checked(&bytes, &id)?;
        if r.is_ok() {
            reverifies(&bytes, &id)?;
        }
    }

    /// Arbitrary bytes, most behind a valid magic and version: refused, or re-verified.
    #[test]
    fn store_fuzz_arbitrary_bytes_are_refused(
        elem in elem(),
        prefix in any::<bool>(),
        tail in prop::collection::vec(any::<u8>(), 0..2048),
        sealed in any::<bool>(),
    ) {
        let id = identity(elem);
        let mut bytes = Vec::new();
        if prefix {
            bytes.extend_from_slice(&MAGIC);
            bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        }
        bytes.extend(tail);
        if sealed {
            reseal_block(&mut bytes);
        }
        let (r, _) = decode_checked(&bytes, &id)?;
        if r.is_ok() {
            reverifies(&bytes, &id)?;
        }
    }

    /// Edited session records are refused unless untouched; re-sealed ones decode only to a
    /// record that re-encodes to the same bytes and whose hashes follow its tokens.
    #[test]
    fn store_fuzz_edited_session_records(
        n_tokens in 0usize..80,
        block_tokens in 1usize..20,
        edits in memoria_fuzz::edits(4),
        resealed in any::<bool>(),
    ) {
        let valid = session(n_tokens, block_tokens).encode();
        let mut bytes = valid.clone();
        memoria_fuzz::apply(&mut bytes, &edits);
        if resealed {
            reseal_session(&mut bytes);
        }
        let rec = session_checked(&bytes)?;
        if rec.is_some() && !resealed {
            prop_assert_eq!(bytes, valid, "an edited record was accepted");
        }
    }

    /// Arbitrary bytes behind the session magic, sealed or not.
    #[test]
    fn store_fuzz_arbitrary_session_bytes(
        tail in prop::collection::vec(any::<u8>(), 0..1024),
        sealed in any::<bool>(),
    ) {
        let mut bytes = b"MEMKVSES\x01\x00".to_vec();
        bytes.extend(tail);
        if sealed {
            reseal_session(&mut bytes);
        }
        session_checked(&bytes)?;
    }
}

/// The harness's valid inputs are valid: every form decodes, and re-sealing an untouched value
/// changes nothing.
#[test]
fn store_fuzz_valid_inputs_decode() {
    for elem in [KvElem::F32, KvElem::F16, KvElem::Q8_0, KvElem::Q4_0] {
        for enc in [Encoding::Raw, Encoding::Lz4, Encoding::Q8_0, Encoding::Q4_0] {
            for shared in [false, true] {
                let (id, bytes) = valid_block(elem, enc, shared, 5);
                let mut resealed = bytes.clone();
                reseal_block(&mut resealed);
                assert_eq!(resealed, bytes);
                let mut out = vec![0; id.layout.block_bytes().unwrap()];
                codec::decode_into(&bytes, &expect(&id), &mut out).unwrap();
            }
        }
    }
    let rec = session(37, 16);
    let mut bytes = rec.encode();
    reseal_session(&mut bytes);
    assert_eq!(SessionRecord::decode(&bytes), Ok(rec));
}
