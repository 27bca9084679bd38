//! The redb file layout: every table of a memoria store, as typed `const` definitions.
//! Invariants: a key of [`BLOCKS`] and of [`BLOCK_INDEX`] are present together (written and
//! removed in the same transaction); [`META`] holds [`FORMAT_KEY`] = [`STORE_FORMAT`] from the
//! first open on.
//!
//! ```text
//! table        key                         value
//! blocks       block hash [u8; 32]         codec bytes (crate::codec, self-verifying); a
//!              or tail key [u8; 32]        retained partial tail under its parent's tail key
//!                                          (the same codec, padded: see crate::stack's tails)
//! block_index  block hash [u8; 32]         (encoded length u64, last-use stamp u64)
//! sessions     (namespace id u64, name)    session record (crate::session, checksummed)
//! hot          "top"                       hot-prefix record (crate::hot, checksummed)
//!              "routes"                    routing keys of stored blocks (crate::routes, checksummed)
//! meta         "format_version" | "clock"  u64
//! models       model fingerprint [u8; 32]  description: "n_layer=.. kv_dim=.. elem=.. block=.."
//! ```
//!
//! `block_index` lets an opening process rebuild the disk budget's LRU order without reading
//! any block; stamps come from the `clock` counter, persisted at every commit.

use redb::TableDefinition;

/// Encoded blocks by hash.
pub const BLOCKS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("blocks");
/// Per block: encoded length and last-use stamp (disk budget LRU).
pub const BLOCK_INDEX: TableDefinition<[u8; 32], (u64, u64)> = TableDefinition::new("block_index");
/// Saved sessions by namespace and name.
pub const SESSIONS: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("sessions");
/// Host records: the saved hot prefixes (under [`HOT_KEY`]) and the routing keys of stored
/// blocks (under [`ROUTES_KEY`]).
pub const HOT: TableDefinition<&str, &[u8]> = TableDefinition::new("hot");
/// Store-wide values.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Models whose blocks the store has held.
pub const MODELS: TableDefinition<[u8; 32], &str> = TableDefinition::new("models");

/// [`META`] key of the table layout version.
pub const FORMAT_KEY: &str = "format_version";
/// [`HOT`] key of the hot-prefix record.
pub const HOT_KEY: &str = "top";
/// [`HOT`] key of the routing-key record.
pub const ROUTES_KEY: &str = "routes";
/// [`META`] key of the last-use clock.
pub const CLOCK_KEY: &str = "clock";
/// The table layout version this build reads and writes.
pub const STORE_FORMAT: u64 = 1;
/// File name of the database inside a store directory.
pub const DB_FILE: &str = "memoria.redb";
