//! What the remote tier's tests against a real server and against a real cluster share: a
//! block layout, deterministic tokens and block bytes, stacks with only the remote tier, and
//! sealing and restoring a context the way the engine does.
// Each test binary uses its own subset of these.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_kv::{BlockHash, KvElem, KvLayout, ModelFingerprint, NamespaceSalt, TierSource};
use memoria_store::{
    BlockIdentity, RemoteOptions, RemoteTier, SessionRecord, StoreOptions, TierStack,
};

pub const B: usize = 16;
pub const MODEL: ModelFingerprint = ModelFingerprint([3; 32]);

/// Registers a namespace keyed with `salt` under the public `label` in the stack's registry
/// (as the engine does for a configured namespace), with the next free id.
pub fn register_label(stack: &TierStack, salt: NamespaceSalt, label: &str) {
    let reg = stack.namespaces();
    let id = u32::try_from(reg.snapshot().len()).expect("few namespaces") + 1;
    reg.insert(memoria_kv::NamespaceEntry::new(
        memoria_kv::NamespaceId(id),
        label,
        salt,
    ));
}

pub fn layout() -> KvLayout {
    KvLayout::new(2, 64, KvElem::F16).with_block_tokens(B)
}

/// A stack with no local tiers but the remote (nothing can be served from elsewhere).
pub fn host(o: RemoteOptions) -> Arc<TierStack> {
    let stack = TierStack::in_memory(StoreOptions {
        cold_budget_bytes: 0,
        ..StoreOptions::default()
    });
    Arc::new(stack.with_remote(RemoteTier::start(o).expect("remote")))
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub fn tokens(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 31 + seed * 7 + 5) % 1000)
        .collect()
}

/// The bytes of block `i` of a context (deterministic, compressible-ish).
pub fn block_data(tokens: &[u32], i: usize) -> Vec<u8> {
    let n = layout().block_bytes().unwrap() / 2;
    (0..n)
        .flat_map(|j| {
            let v = ((tokens[i * B + j % B] as usize + j) % 211) as f32 / 64.0 - 1.5;
            half::f16::from_f32(v).to_le_bytes()
        })
        .collect()
}

/// The identity of block `hash` of this layout and model, keyed with `salt`.
pub fn identity(salt: NamespaceSalt, hash: BlockHash) -> BlockIdentity {
    BlockIdentity {
        model: MODEL,
        layout: layout(),
        salt,
        hash,
    }
}

/// Seals every full block of `tokens` on `stack` (as the engine's write-through does).
pub fn seal(stack: &TierStack, salt: NamespaceSalt, tokens: &[u32]) -> Vec<BlockHash> {
    seal_with(stack, salt, tokens, |i| block_data(tokens, i))
}

/// [`seal`] with block `i`'s bytes from `data(i)`.
pub fn seal_with(
    stack: &TierStack,
    salt: NamespaceSalt,
    tokens: &[u32],
    data: impl Fn(usize) -> Vec<u8>,
) -> Vec<BlockHash> {
    let root = BlockHash::root(&MODEL, KvElem::F16, B, &salt);
    let chain = SessionRecord::chain(&root, tokens, B);
    for (i, h) in chain.iter().enumerate() {
        stack.persist(
            identity(salt, *h),
            &tokens[i * B..(i + 1) * B],
            &data(i),
            false,
        );
    }
    assert!(stack.remote().unwrap().flush(Duration::from_secs(5)));
    chain
}

/// Fetches blocks of `tokens` the way the engine's prefix match does: (blocks served in order,
/// each equal to what was sealed).
pub fn restore(stack: &TierStack, salt: NamespaceSalt, tokens: &[u32]) -> usize {
    let root = BlockHash::root(&MODEL, KvElem::F16, B, &salt);
    let chain = SessionRecord::chain(&root, tokens, B);
    let mut src = stack.source(MODEL, layout(), root, tokens);
    let mut out = vec![0u8; layout().block_bytes().unwrap()];
    let mut n = 0;
    for (i, h) in chain.iter().enumerate() {
        if !src.fetch(h, &mut out) {
            break;
        }
        assert_eq!(out, block_data(tokens, i), "block {i} differs");
        n += 1;
    }
    n
}

pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn chain_root(salt: NamespaceSalt) -> BlockHash {
    BlockHash::root(&MODEL, KvElem::F16, B, &salt)
}

/// Prefetches `tokens` (a context of namespace `salt`, no public prefixes) from the remote
/// tier, keyed as the engine keys it: the chain hashed here from the salt's root.
pub async fn prefetch(
    stack: &TierStack,
    salt: NamespaceSalt,
    tokens: &[u32],
    per_token: Option<Duration>,
) -> usize {
    let root = chain_root(salt);
    let (hashes, n_public) = memoria_kv::context_chain(&root, None, tokens, B);
    let chain = memoria_kv::backing::ChainKeys {
        root,
        hashes: &hashes,
        n_public,
        public: None,
    };
    let keys = memoria_store::RemoteKeys {
        salt,
        chain,
        common_salt: None,
    };
    stack
        .prefetch_remote((MODEL, layout()), keys, tokens, per_token)
        .await
}
