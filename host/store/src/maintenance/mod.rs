//! Offline operations on a store directory, for `memoria store stats|verify|compact|clear|
//! repair`: they open the database exclusively (redb refuses while a server holds it) and never
//! run on the engine's path. Invariants: `verify` reads every value and reports, it changes
//! nothing unless asked to remove bad entries (redb's own integrity check may roll an
//! unfinished commit back, as any open after a crash does; a check that fails leaves the file
//! as it was, see [`check`]); on a damaged file it says what a repair would keep; `repair`
//! salvages every entry that still reads and verifies before setting a damaged file aside
//! ([`crate::salvage`]); `clear` removes a block's value and index entry together; every
//! operation runs under `catch_unwind`, so a damaged file is an error, never a panic; only
//! [`repair`], [`move_aside`] and the salvage ever rename the file.

mod check;

use std::collections::BTreeMap;
use std::path::Path;

use memoria_kv::NamespaceSalt;
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde::Serialize;

use crate::codec;
use crate::disk::open_database;
use crate::disk::tables::{
    BLOCK_INDEX, BLOCKS, DB_FILE, HOT, HOT_KEY, MODELS, ROUTES_KEY, SESSIONS,
};
use crate::error::{DbResult, StoreError};
use crate::guard::{LeakOnUnwind, contain};
use crate::hot::HotRecord;
use crate::routes::RoutesRecord;
use crate::salvage::{self, SalvageReport};
use crate::session::SessionRecord;

pub use check::check;
pub(crate) use check::keeping_header;

/// Why a host record's bytes were refused, if they were.
type Refusal = fn(&[u8]) -> Option<String>;

/// What a store holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StoreStats {
    pub file_bytes: u64,
    pub blocks: u64,
    /// Encoded bytes of all blocks.
    pub block_bytes: u64,
    /// Decoded bytes of all blocks (the K/V they restore).
    pub raw_bytes: u64,
    pub sessions: u64,
    /// Model fingerprint (hex) -> description.
    pub models: BTreeMap<String, String>,
    /// Namespace tag (16 hex digits of a one-way digest of its salt, never the salt) ->
    /// (blocks, encoded bytes).
    pub namespaces: BTreeMap<String, (u64, u64)>,
    /// Encoding name -> blocks.
    pub encodings: BTreeMap<String, u64>,
    /// Blocks whose header does not parse.
    pub unreadable: u64,
}

/// One bad entry found by [`verify`].
#[derive(Clone, Debug, Serialize)]
pub struct BadEntry {
    pub table: &'static str,
    pub key: String,
    pub reason: String,
}

/// The result of a verification pass.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    pub file_ok: bool,
    pub blocks_checked: u64,
    pub sessions_checked: u64,
    /// Whether a saved hot-prefix record was found (and checked).
    pub hot_checked: bool,
    /// Whether a saved routing-key record was found (and checked).
    pub routes_checked: bool,
    pub bad: Vec<BadEntry>,
    pub removed: u64,
    /// What is wrong with the file itself, when redb's check failed and could not repair it.
    pub damage: Option<String>,
    /// On a damaged file: what `memoria store repair` would keep and lose (read, not changed).
    pub salvageable: Option<SalvageReport>,
}

impl VerifyReport {
    /// Whether nothing bad was found.
    pub fn ok(&self) -> bool {
        self.file_ok && self.bad.is_empty()
    }
}

/// What [`clear`] removed.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ClearReport {
    pub blocks: u64,
    pub sessions: u64,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A stable public tag for the blocks of one salt: the salt itself never leaves the host.
fn salt_label(s: &NamespaceSalt) -> String {
    hex(&blake3::derive_key("memoria store stats namespace tag v1", &s.0)[..8])
}

fn not_a_store(dir: &Path) -> StoreError {
    StoreError::Open {
        path: dir.display().to_string(),
        msg: format!("no {DB_FILE} here (not a memoria store)"),
    }
}

fn existing(dir: &Path) -> Result<crate::disk::RedbFile, StoreError> {
    if !dir.join(DB_FILE).is_file() {
        return Err(not_a_store(dir));
    }
    open_database(dir)
}

/// Counts and sizes of everything in the store at `dir`.
pub fn stats(dir: &Path) -> Result<StoreStats, StoreError> {
    contain("stats", || stats_inner(dir))
}

fn stats_inner(dir: &Path) -> Result<StoreStats, StoreError> {
    let db = existing(dir)?;
    let mut s = StoreStats {
        file_bytes: std::fs::metadata(dir.join(DB_FILE))?.len(),
        ..StoreStats::default()
    };
    let txn = db.begin_read().db("begin read")?;
    let blocks = txn.open_table(BLOCKS).db("open blocks")?;
    for e in blocks.iter().db("scan blocks")? {
        let (_, v) = e.db("read block")?;
        let bytes = v.value();
        s.blocks += 1;
        s.block_bytes += bytes.len() as u64;
        match codec::parse_header(bytes) {
            Ok(h) => {
                s.raw_bytes += h.raw_len;
                let n = s
                    .namespaces
                    .entry(salt_label(&h.identity.salt))
                    .or_default();
                n.0 += 1;
                n.1 += bytes.len() as u64;
                *s.encodings
                    .entry(format!("{:?}", h.encoding).to_lowercase())
                    .or_default() += 1;
            }
            Err(_) => s.unreadable += 1,
        }
    }
    s.sessions = txn
        .open_table(SESSIONS)
        .db("open sessions")?
        .len()
        .db("count sessions")?;
    for e in txn
        .open_table(MODELS)
        .db("open models")?
        .iter()
        .db("scan models")?
    {
        let (k, v) = e.db("read model")?;
        s.models.insert(hex(&k.value()), v.value().to_string());
    }
    Ok(s)
}

/// Reads and checks every block (checksum, header, key = hash, index entry), every saved
/// session and the saved hot prefixes; with `remove_bad`, deletes what fails. On a file redb's
/// check finds damaged beyond its repair, nothing is changed (not even with `remove_bad`) and
/// the report says what a repair would keep ([`VerifyReport::salvageable`]).
pub fn verify(dir: &Path, remove_bad: bool) -> Result<VerifyReport, StoreError> {
    if !dir.join(DB_FILE).is_file() {
        return Err(not_a_store(dir));
    }
    let damage = match check(dir) {
        Ok(clean) => match keeping_header(dir, || {
            contain("verify", || verify_inner(dir, remove_bad, clean))
        }) {
            Ok(r) => return Ok(r),
            Err(e) if e.is_damaged() => e.damage(),
            Err(e) => return Err(e),
        },
        Err(e) if e.is_damaged() => e.damage(),
        Err(e) => return Err(e),
    };
    let s = salvage::count(dir, damage.clone())?;
    Ok(VerifyReport {
        file_ok: false,
        blocks_checked: s.blocks_kept + s.blocks_lost,
        sessions_checked: s.sessions_kept + s.sessions_lost,
        bad: s
            .lost_sessions
            .iter()
            .map(|k| BadEntry {
                table: "sessions",
                key: k.clone(),
                reason: "does not read or verify".into(),
            })
            .collect(),
        damage: Some(damage),
        salvageable: Some(s),
        ..VerifyReport::default()
    })
}

fn verify_inner(dir: &Path, remove_bad: bool, clean: bool) -> Result<VerifyReport, StoreError> {
    let db = existing(dir)?;
    let mut r = VerifyReport {
        file_ok: clean,
        ..VerifyReport::default()
    };
    let mut bad_blocks = Vec::new();
    let mut bad_sessions = Vec::new();
    let mut bad_hot: Vec<&'static str> = Vec::new();
    {
        let txn = db.begin_read().db("begin read")?;
        let blocks = txn.open_table(BLOCKS).db("open blocks")?;
        let bix = txn.open_table(BLOCK_INDEX).db("open block_index")?;
        for e in blocks.iter().db("scan blocks")? {
            let (k, v) = e.db("read block")?;
            let (key, bytes) = (k.value(), v.value());
            r.blocks_checked += 1;
            let why = match codec::verify(bytes) {
                Err(e) => Some(e.to_string()),
                Ok(h) if h.identity.hash.0 != key => Some("stored under another hash".into()),
                Ok(_) => match bix.get(key).db("read block_index")? {
                    None => Some("no block_index entry".into()),
                    Some(ix) if ix.value().0 != bytes.len() as u64 => {
                        Some("block_index length differs".into())
                    }
                    Some(_) => None,
                },
            };
            if let Some(reason) = why {
                r.bad.push(BadEntry {
                    table: "blocks",
                    key: hex(&key),
                    reason,
                });
                bad_blocks.push(key);
            }
        }
        for e in bix.iter().db("scan block_index")? {
            let (k, _) = e.db("read block_index")?;
            if blocks.get(k.value()).db("read block")?.is_none() {
                r.bad.push(BadEntry {
                    table: "block_index",
                    key: hex(&k.value()),
                    reason: "no block for this entry".into(),
                });
                bad_blocks.push(k.value());
            }
        }
        let sessions = txn.open_table(SESSIONS).db("open sessions")?;
        for e in sessions.iter().db("scan sessions")? {
            let (k, v) = e.db("read session")?;
            r.sessions_checked += 1;
            if let Err(err) = SessionRecord::decode(v.value()) {
                let (ns, name) = k.value();
                r.bad.push(BadEntry {
                    table: "sessions",
                    key: format!("{ns}/{name}"),
                    reason: err.to_string(),
                });
                bad_sessions.push((ns, name.to_string()));
            }
        }
        match txn.open_table(HOT) {
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(e).db("open hot"),
            Ok(hot) => {
                // Each host record under its key, checked by its own decoder.
                let records: [(&'static str, Refusal); 2] = [
                    (HOT_KEY, |b| {
                        HotRecord::decode(b).err().map(|e| e.to_string())
                    }),
                    (ROUTES_KEY, |b| {
                        RoutesRecord::decode(b).err().map(|e| e.to_string())
                    }),
                ];
                for (key, refused) in records {
                    let Some(v) = hot.get(key).db("read host record")? else {
                        continue;
                    };
                    if key == HOT_KEY {
                        r.hot_checked = true;
                    } else {
                        r.routes_checked = true;
                    }
                    if let Some(reason) = refused(v.value()) {
                        r.bad.push(BadEntry {
                            table: "hot",
                            key: key.to_string(),
                            reason,
                        });
                        bad_hot.push(key);
                    }
                }
            }
        }
    }
    if remove_bad && !(bad_blocks.is_empty() && bad_sessions.is_empty() && bad_hot.is_empty()) {
        let txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
        {
            let mut blocks = LeakOnUnwind::new(txn.open_table(BLOCKS).db("open blocks")?);
            let mut bix = LeakOnUnwind::new(txn.open_table(BLOCK_INDEX).db("open block_index")?);
            let mut sessions = LeakOnUnwind::new(txn.open_table(SESSIONS).db("open sessions")?);
            for k in &bad_blocks {
                blocks.remove(*k).db("remove block")?;
                bix.remove(*k).db("remove block_index")?;
            }
            for (ns, name) in &bad_sessions {
                sessions.remove((*ns, name.as_str())).db("remove session")?;
            }
            if !bad_hot.is_empty() {
                let mut hot = LeakOnUnwind::new(txn.open_table(HOT).db("open hot")?);
                for k in &bad_hot {
                    hot.remove(*k).db("remove host record")?;
                }
            }
        }
        txn.into_inner().commit().db("commit")?;
        r.removed = (bad_blocks.len() + bad_sessions.len() + bad_hot.len()) as u64;
    }
    Ok(r)
}

/// Compacts the file; returns its size before and after.
pub fn compact(dir: &Path) -> Result<(u64, u64), StoreError> {
    contain("compact", || compact_inner(dir))
}

fn compact_inner(dir: &Path) -> Result<(u64, u64), StoreError> {
    let mut db = existing(dir)?;
    let before = std::fs::metadata(dir.join(DB_FILE))?.len();
    let mut rounds = 0;
    while rounds < 8 && db.compact().db("compact")? {
        rounds += 1;
    }
    drop(db);
    let after = std::fs::metadata(dir.join(DB_FILE))?.len();
    Ok((before, after))
}

/// Removes every block and saved session of the namespace with `salt`, or everything.
pub fn clear(dir: &Path, salt: Option<NamespaceSalt>) -> Result<ClearReport, StoreError> {
    contain("clear", || clear_inner(dir, salt))
}

fn clear_inner(dir: &Path, salt: Option<NamespaceSalt>) -> Result<ClearReport, StoreError> {
    let db = existing(dir)?;
    let mut report = ClearReport::default();
    let txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
    {
        let mut blocks = LeakOnUnwind::new(txn.open_table(BLOCKS).db("open blocks")?);
        let mut bix = LeakOnUnwind::new(txn.open_table(BLOCK_INDEX).db("open block_index")?);
        let mut sessions = LeakOnUnwind::new(txn.open_table(SESSIONS).db("open sessions")?);
        let mut keys = Vec::new();
        for e in blocks.iter().db("scan blocks")? {
            let (k, v) = e.db("read block")?;
            let ours = match salt {
                None => true,
                Some(s) => codec::parse_header(v.value()).is_ok_and(|h| h.identity.salt == s),
            };
            if ours {
                keys.push(k.value());
            }
        }
        for k in &keys {
            blocks.remove(*k).db("remove block")?;
            bix.remove(*k).db("remove block_index")?;
        }
        report.blocks = keys.len() as u64;
        let mut names = Vec::new();
        for e in sessions.iter().db("scan sessions")? {
            let (k, v) = e.db("read session")?;
            let ours = match salt {
                None => true,
                Some(s) => SessionRecord::decode(v.value()).is_ok_and(|r| r.salt == s),
            };
            if ours {
                let (ns, name) = k.value();
                names.push((ns, name.to_string()));
            }
        }
        for (ns, name) in &names {
            sessions.remove((*ns, name.as_str())).db("remove session")?;
        }
        report.sessions = names.len() as u64;
        if salt.is_none() {
            // The saved hot prefixes name their chains by tokens: a full clear drops them too,
            // and the routing keys of the blocks it removed.
            let mut hot = LeakOnUnwind::new(txn.open_table(HOT).db("open hot")?);
            hot.remove(HOT_KEY).db("remove hot prefixes")?;
            hot.remove(ROUTES_KEY).db("remove routing keys")?;
        }
    }
    txn.into_inner().commit().db("commit")?;
    Ok(report)
}

/// What [`repair`] did.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RepairReport {
    /// The file was usable: redb's check passed (`rolled_back`: redb repaired it by going back
    /// to its previous commit) and `removed` bad entries were deleted.
    Repaired { rolled_back: bool, removed: u64 },
    /// The file was damaged beyond redb's repair: what still read and verified was copied into
    /// a fresh store file, and the damaged one kept aside (see the report).
    Salvaged(SalvageReport),
}

/// Renames the store file in `dir` to `memoria.redb.corrupt-<unix seconds>` (a suffix is added
/// if that name is taken); returns the new path.
pub fn move_aside(dir: &Path) -> Result<std::path::PathBuf, StoreError> {
    let from = dir.join(DB_FILE);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut to = dir.join(format!("{DB_FILE}.corrupt-{secs}"));
    let mut n = 1;
    while to.exists() {
        to = dir.join(format!("{DB_FILE}.corrupt-{secs}-{n}"));
        n += 1;
    }
    std::fs::rename(&from, &to).map_err(|e| StoreError::Open {
        path: from.display().to_string(),
        msg: format!("moving the damaged file aside to {}: {e}", to.display()),
    })?;
    Ok(to)
}

/// Repairs the store in `dir`: redb's integrity check and repair (back to the last intact
/// commit), then removal of every bad block and session. A file damaged beyond redb's repair is
/// salvaged ([`crate::salvage::salvage`]): every entry that still reads and verifies is copied
/// into a fresh file, which takes the store's name, and the damaged file is kept aside. Errors
/// that are not damage (no store here, the file is in use, a newer format) change nothing.
pub fn repair(dir: &Path) -> Result<RepairReport, StoreError> {
    if !dir.join(DB_FILE).is_file() {
        return Err(not_a_store(dir));
    }
    let damage = match check(dir) {
        Ok(clean) => {
            match keeping_header(dir, || contain("repair", || verify_inner(dir, true, clean))) {
                Ok(r) => {
                    return Ok(RepairReport::Repaired {
                        rolled_back: !clean,
                        removed: r.removed,
                    });
                }
                Err(e) if e.is_damaged() => e.damage(),
                Err(e) => return Err(e),
            }
        }
        Err(e) if e.is_damaged() => e.damage(),
        Err(e) => return Err(e),
    };
    salvage::salvage(dir, damage).map(RepairReport::Salvaged)
}
