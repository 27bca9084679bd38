//! memoria's persistent prefix-state store: the tiers below the hot K/V pool.
//!
//! - [`Tier`]: a byte store of encoded blocks keyed by [`memoria_kv::BlockHash`], with batch
//!   forms. Tiers never interpret the bytes.
//! - [`codec`]: the versioned, checksummed block format (documented there, byte by byte).
//! - [`ColdTier`]: compressed blocks in RAM under a byte budget (LRU), optionally lossy
//!   (q8_0/q4_0 storage of f16 blocks; hits counted as lossy).
//! - [`RedbTier`]: blocks and saved sessions in a redb file ([`disk::tables`] documents the
//!   tables), written by a write-behind thread so the engine never waits on disk, held to a
//!   disk budget ([`disk::budget`]: LRU eviction of cache blocks, a separate budget for named
//!   saves); a full disk or an I/O error stops its writes, never the engine.
//! - [`TierStack`]: the pool's [`memoria_kv::TierSink`] (demote hot -> cold -> redb) and, per
//!   request, its [`memoria_kv::TierSource`] (promote from cold, then redb). Every read is
//!   verified (checksum, model fingerprint, K/V type, layout, namespace salt, tokens); a
//!   corrupt or foreign block is a miss, is removed, and is counted. Evicted blocks are
//!   encoded for the cold tier on a demotion thread, not the engine's (module `demote_queue`).
//! - [`remote`]: blocks shared between hosts through Valkey/Redis, a lossy cache (misses,
//!   timeouts, a down server and bad values are counted misses), read off the engine thread
//!   and written behind it, guarded by a circuit breaker; values never carry the salt.
//! - [`HotRecord`]: the hot prefixes `[cache] auto_pin` kept pinned, saved in redb so a
//!   restarted host re-warms them (namespaces by name, never by salt; capped and checksummed).
//! - [`maintenance`]: offline `stats`, `verify`, `compact`, `clear` and `repair` over a store
//!   directory; [`salvage`] copies what still reads in a damaged file into a fresh one.
//!
//! A damaged file never panics the process: every redb call runs under `catch_unwind`
//! (`guard`), and a panic or corruption error becomes a typed [`StoreError`] at open or a
//! counted miss at run time.
//!
//! Invariant across the crate: nothing read from a tier reaches the pool unverified, and every
//! length read from stored bytes is checked before allocating.

mod backing;
pub mod codec;
mod cold;
mod demote_queue;
pub mod disk;
mod error;
mod guard;
mod hot;
pub mod intake;
pub mod maintenance;
mod memory;
mod options;
pub mod remote;
mod residency;
pub mod routes;
pub mod salvage;
mod session;
mod stack;
mod stack_remote;
mod stats;
mod sync;
mod tier;

pub use codec::{BlockIdentity, CodecError, Encoding, Expect};
pub use cold::ColdTier;
pub use disk::{Ack, DiskOptions, RedbTier};
pub use error::{DAMAGED_ADVICE, StoreError};
pub use hot::{HotEntry, HotError, HotRecord, MAX_HOT_ENTRIES, MAX_HOT_NAME, MAX_HOT_TOKENS};
pub use intake::Intake;
pub use options::{Lossy, StoreOptions};
pub use remote::{Endpoint, RemoteOptions, RemoteSnapshot, RemoteTier, WriteMode};
pub use residency::{Move, Residency};
pub use routes::{RouteEntry, RoutesRecord};
pub use session::{MAX_SESSION_TOKENS, SessionError, SessionRecord};
pub use stack::{Fetched, StoreSource, TierStack};
pub use stack_remote::{DEFAULT_LABEL, MAX_PREFETCH_BLOCKS, RemoteKeys, prefetch_wait};
pub use stats::{StoreSnapshot, TierSnapshot, TierStats};
pub use tier::Tier;
