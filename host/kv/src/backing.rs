//! The engine's interface to the tiers below its hot pool: what a scheduler needs from a store
//! (staging reads, the write hand-off, named saves, remote prefetches), so the scheduler
//! depends on this interface and never on a concrete store. Namespaces are named by id: salts,
//! labels and keys are looked up behind the interface and never cross it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::hash::{BlockHash, ModelFingerprint};
use crate::ids::NamespaceId;
use crate::layout::{KvElem, KvLayout};
use crate::public::PublicChain;
use crate::registry::Namespaces;
use crate::staging::Stager;
use crate::tier::TierSink;

/// A boxed future, as the interface's async methods return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What kind of failure a [`BackingError`] is, as far as a caller acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackingErrorKind {
    /// A disk or saves budget is full.
    Full,
    /// A remote server did not answer (retry later).
    RemoteUnavailable,
    /// Anything else (I/O, a damaged file, an unknown namespace).
    Other,
}

/// A store's failure as the engine reports it: the store's own message and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackingError {
    pub kind: BackingErrorKind,
    pub message: String,
}

impl BackingError {
    pub fn new(kind: BackingErrorKind, message: impl Into<String>) -> BackingError {
        BackingError {
            kind,
            message: message.into(),
        }
    }

    /// Whether a disk or saves budget is full.
    pub fn is_full(&self) -> bool {
        self.kind == BackingErrorKind::Full
    }

    /// Whether a remote server did not answer.
    pub fn is_unavailable(&self) -> bool {
        self.kind == BackingErrorKind::RemoteUnavailable
    }
}

impl fmt::Display for BackingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BackingError {}

/// One block's bytes as the pool holds them.
pub struct BlockBytes {
    pub hash: BlockHash,
    pub tokens: Vec<u32>,
    pub data: Vec<u8>,
}

/// A retained partial tail as the pool holds it: the hash it continues (see
/// [`BlockHash::parent_at`]), its filled slots' tokens (fewer than a block's) and its block's
/// bytes (the unfilled slots' bytes are meaningless).
pub struct PartialBlock {
    pub parent: BlockHash,
    pub tokens: Vec<u32>,
    pub data: Vec<u8>,
}

/// A saved session as a store hands it back: verified for the namespace that asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedSession {
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
    /// Every token of the context, computed or pending.
    pub tokens: Vec<u32>,
}

/// Runs once a save is durable, or with the error.
pub type SaveDone = Box<dyn FnOnce(Result<(), BackingError>) + Send>;

/// The write side: every block the engine writes through, evicts or writes again, and every
/// session it saves, handed over as raw bytes and a namespace id. Never blocks the caller on
/// a store lock, a transaction or the network.
pub trait HandOff: Send + Sync {
    /// Jobs handed over so far: a point to wait for with [`HandOff::wait_handled`].
    fn sent(&self) -> u64;
    /// Waits (bounded) until every job handed over before `point` is dealt with.
    fn wait_handled(&self, point: u64);
    /// The pool's eviction sink: evicted blocks are handed over like the rest.
    fn sink(self: Arc<Self>) -> Box<dyn TierSink>;
    /// A freshly sealed block of `ns` to write through (`public`: keyed as the shared
    /// namespaces' blocks; `force`: past the write queue's bound).
    fn sealed(&self, ns: NamespaceId, public: bool, force: bool, block: BlockBytes);
    /// A block the remote server lost, to write there again.
    fn rewrite(&self, ns: NamespaceId, public: bool, block: BlockBytes);
    /// A retained partial tail of `ns`, to keep on this host's disk under its parent's tail
    /// key (replacing the one kept there).
    fn tail(&self, ns: NamespaceId, tail: PartialBlock);
    /// Saves a session of `ns` as `name` (its tokens and whole blocks' chain hashes) after
    /// every block handed over before it; `done` runs when it is durable, or with the error.
    fn save(
        &self,
        ns: NamespaceId,
        name: String,
        hashes: Vec<BlockHash>,
        tokens: Vec<u32>,
        done: SaveDone,
    );
}

/// A context's chain as the pool keys it, hashed by the caller from the registry's root: the
/// root, its whole blocks' hashes (the leading `n_public` of them public, keyed under
/// `public`'s common root). No salt: the store looks the namespace's up by id.
#[derive(Clone, Copy, Debug)]
pub struct ChainKeys<'a> {
    pub root: BlockHash,
    pub hashes: &'a [BlockHash],
    pub n_public: usize,
    pub public: Option<&'a PublicChain>,
}

/// The tiers below the hot pool, as the engine uses them. Reads for the engine happen off its
/// thread ([`Stager`] on a staging thread, the `async` methods on the callers' tasks).
pub trait Backing: Stager + fmt::Debug + Send + Sync {
    /// The namespace registry the store reads salts and labels from (the engine registers its
    /// namespaces here).
    fn namespaces(&self) -> Arc<Namespaces>;
    /// Whether this host keeps saves and written-through blocks on disk.
    fn has_disk(&self) -> bool;
    /// Whether a remote tier is attached (prefetches, remote saves).
    fn has_remote(&self) -> bool;
    /// Whether blocks outlive the process (a disk or a remote tier): sealed blocks are
    /// written through and sessions can be saved by name.
    fn durable(&self) -> bool {
        self.has_disk() || self.has_remote()
    }
    /// The write side for blocks of `model` laid out as `layout`.
    fn hand_off(self: Arc<Self>, model: ModelFingerprint, layout: KvLayout) -> Arc<dyn HandOff>;
    /// Writes out whatever is queued (on shutdown).
    fn flush(&self) -> Result<(), BackingError>;
    /// The session `ns` saved as `name` on this host's disk, if any (blocking: call it off the
    /// engine thread). A save made under another salt of the namespace is not found.
    fn load_saved(&self, ns: NamespaceId, name: &str)
    -> Result<Option<SavedSession>, BackingError>;
    /// The session `ns` saved as `name` in the remote tier (any host's save), verified;
    /// `Ok(None)` when there is none or no remote tier.
    fn load_saved_remote<'a>(
        &'a self,
        ns: NamespaceId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SavedSession>, BackingError>>;
    /// Stages the remote tier's blocks of a context of `ns` that starts at the chain's root,
    /// keyed as `chain` (the caller's hashes of `tokens`' whole blocks), waiting no longer
    /// than computing them would take at `per_token`. Returns the blocks staged.
    fn prefetch<'a>(
        &'a self,
        shape: (ModelFingerprint, KvLayout),
        ns: NamespaceId,
        chain: ChainKeys<'a>,
        tokens: &'a [u32],
        per_token: Option<Duration>,
    ) -> BoxFuture<'a, usize>;
}

/// Two handles are equal when they are the same store.
impl PartialEq for dyn Backing {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self as *const dyn Backing, other as *const dyn Backing)
    }
}
