//! Reading what still reads from a damaged store file: each table is scanned in key order in
//! short runs, each run under `catch_unwind`; a run that fails (a redb error or panic on a
//! damaged page) keeps the entries read before the failure, and the scan resumes past the
//! damage by probing later keys ([`probes_after`]), counting each skip. Invariants: the file is
//! only read (through any [`ReadableDatabase`]: a read-only handle, or the live handle of a
//! server that met the damage); keys handed on are strictly increasing (a damaged leaf that
//! yields keys out of order ends its run); a scan is bounded by an entry budget, so a damaged
//! page can never make it loop.

use std::ops::Bound;

use redb::{Key, ReadableDatabase, ReadableTable, TableDefinition, Value};

use crate::error::{DbResult, StoreError};
use crate::guard::contain;

/// Entries one run reads at most.
const RUN_ENTRIES: usize = 256;
/// Value bytes one run reads at most (at least one entry).
const RUN_BYTES: usize = 32 << 20;
/// Damaged stretches one table's scan skips before giving up on the rest of it.
const MAX_SKIPS: u64 = 4096;

/// A key type the scan can step past damage in.
pub(crate) trait Probe: Sized + Clone + Ord {
    /// Keys after `k`, nearest first, to resume from when the run after `k` failed.
    fn probes_after(k: &Self) -> Vec<Self>;
    /// Keys to resume from when the very first run failed.
    fn probes_from_start() -> Vec<Self>;
}

impl Probe for [u8; 32] {
    fn probes_after(k: &Self) -> Vec<Self> {
        // `k` plus 1, plus 256, ... plus 256^31 (lower bytes cleared): ever larger strides over
        // uniformly spread hashes, the first that reads is past the damaged page.
        (0..32)
            .rev()
            .filter_map(|byte| {
                let mut next = *k;
                next[byte + 1..].fill(0);
                let mut i = byte;
                loop {
                    let (v, carry) = next[i].overflowing_add(1);
                    next[i] = v;
                    if !carry {
                        return Some(next);
                    }
                    i = i.checked_sub(1)?;
                }
            })
            .collect()
    }

    fn probes_from_start() -> Vec<Self> {
        (1..=255u8)
            .step_by(8)
            .map(|b| {
                let mut k = [0u8; 32];
                k[0] = b;
                k
            })
            .collect()
    }
}

impl Probe for (u64, String) {
    fn probes_after((ns, name): &Self) -> Vec<Self> {
        // Shorter prefixes of the name with their last character incremented ("s123" -> "s124",
        // "s13", "s2", "t"), then the next namespaces.
        let mut v = Vec::new();
        let mut prefix = name.clone();
        while let Some(c) = prefix.pop() {
            if let Some(n) = char::from_u32(u32::from(c) + 1) {
                v.push((*ns, format!("{prefix}{n}")));
            }
        }
        v.extend((1..=4).filter_map(|d| ns.checked_add(d).map(|n| (n, String::new()))));
        v
    }

    fn probes_from_start() -> Vec<Self> {
        (0..4).map(|n| (n, String::new())).collect()
    }
}

impl Probe for String {
    fn probes_after(k: &Self) -> Vec<Self> {
        let mut v = Vec::new();
        let mut prefix = k.clone();
        while let Some(c) = prefix.pop() {
            if let Some(n) = char::from_u32(u32::from(c) + 1) {
                v.push(format!("{prefix}{n}"));
            }
        }
        v
    }

    fn probes_from_start() -> Vec<Self> {
        Vec::new()
    }
}

/// One table's entries as owned values, by key type.
pub(crate) trait Owned: Key + 'static {
    type Owned: Probe;
    fn own(k: Self::SelfType<'_>) -> Self::Owned;
    /// The borrowed form of an owned key, for a range bound.
    fn with_borrowed<R>(k: &Self::Owned, f: impl FnOnce(Self::SelfType<'_>) -> R) -> R;
}

impl Owned for [u8; 32] {
    type Owned = [u8; 32];
    fn own(k: [u8; 32]) -> [u8; 32] {
        k
    }
    fn with_borrowed<R>(k: &[u8; 32], f: impl FnOnce([u8; 32]) -> R) -> R {
        f(*k)
    }
}

impl Owned for (u64, &'static str) {
    type Owned = (u64, String);
    fn own((ns, name): (u64, &str)) -> (u64, String) {
        (ns, name.to_string())
    }
    fn with_borrowed<R>((ns, name): &(u64, String), f: impl FnOnce((u64, &str)) -> R) -> R {
        f((*ns, name.as_str()))
    }
}

impl Owned for &'static str {
    type Owned = String;
    fn own(k: &str) -> String {
        k.to_string()
    }
    fn with_borrowed<R>(k: &String, f: impl FnOnce(&str) -> R) -> R {
        f(k.as_str())
    }
}

/// How a table's scan went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Damaged stretches stepped over (their entries are lost, their number unknown).
    pub skipped: u64,
    /// Whether the scan stopped before the table's end (the rest could not be reached).
    pub stopped: bool,
    /// What the first failure said.
    pub first_error: Option<String>,
}

/// A run's outcome: the entries read, and whether the table ended, or the failure.
enum Run {
    End,
    More,
    Failed(String),
}

/// Reads the run of at most [`RUN_ENTRIES`] entries after `from` into `out` (entries read before
/// a failure stay there), each value mapped by `keep` (`None`: not copied, still counted as seen
/// by the caller through `seen`).
fn run<D, K, V, T>(
    db: &D,
    table: TableDefinition<K, V>,
    from: &Bound<K::Owned>,
    seen: &mut Vec<K::Owned>,
    out: &mut Vec<(K::Owned, T)>,
    keep: &mut impl FnMut(&K::Owned, V::SelfType<'_>) -> Option<T>,
) -> Run
where
    D: ReadableDatabase,
    K: Owned,
    V: Value + 'static,
{
    let last = seen.last().cloned();
    let r = contain("salvage read", || {
        let txn = db.begin_read().db("begin read")?;
        let t = match txn.open_table(table) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(true),
            Err(e) => return Err(e).db("open table"),
        };
        let (mut bytes, mut n) = (0usize, 0usize);
        let iter = match from {
            Bound::Unbounded => t.iter().db("scan")?,
            Bound::Included(k) => K::with_borrowed(k, |b| t.range(b..)).db("scan")?,
            Bound::Excluded(k) => K::with_borrowed(k, |b| {
                t.range::<K::SelfType<'_>>((Bound::Excluded(b), Bound::Unbounded))
            })
            .db("scan")?,
        };
        let mut prev = last;
        for e in iter {
            let (k, v) = e.db("read entry")?;
            let key = K::own(k.value());
            if prev.as_ref().is_some_and(|p| *p >= key) {
                return Err(StoreError::Damaged {
                    what: "read entry",
                    msg: "keys out of order".into(),
                });
            }
            prev = Some(key.clone());
            let value = v.value();
            bytes += V::as_bytes(&value).as_ref().len();
            if let Some(t) = keep(&key, value) {
                out.push((key.clone(), t));
            }
            seen.push(key);
            n += 1;
            if n >= RUN_ENTRIES || bytes >= RUN_BYTES {
                return Ok(false);
            }
        }
        Ok(true)
    });
    match r {
        Ok(true) => Run::End,
        Ok(false) => Run::More,
        Err(e) => Run::Failed(e.to_string()),
    }
}

/// Scans `table` of `db` from its start, calling `batch` with each run's kept entries (in key
/// order) and recording every key seen in `seen`; steps over damaged stretches. `keep` maps a
/// value to what is kept (`None`: seen, not kept). `budget` bounds the entries read.
pub(crate) fn scan<D, K, V, T>(
    db: &D,
    table: TableDefinition<K, V>,
    seen: &mut Vec<K::Owned>,
    mut keep: impl FnMut(&K::Owned, V::SelfType<'_>) -> Option<T>,
    mut batch: impl FnMut(Vec<(K::Owned, T)>) -> Result<(), StoreError>,
    budget: u64,
) -> Result<ScanEnd, StoreError>
where
    D: ReadableDatabase,
    K: Owned,
    V: Value + 'static,
{
    let mut end = ScanEnd::default();
    let mut from = Bound::Unbounded;
    let mut probes: Option<std::vec::IntoIter<K::Owned>> = None;
    loop {
        if seen.len() as u64 >= budget {
            end.stopped = true;
            break;
        }
        let mut out = Vec::new();
        let before = seen.len();
        let r = run(db, table, &from, seen, &mut out, &mut keep);
        if !out.is_empty() {
            batch(out)?;
        }
        match r {
            Run::End => break,
            Run::More => {
                probes = None;
                from = Bound::Excluded(seen.last().cloned().expect("a run read an entry"));
            }
            Run::Failed(e) => {
                if seen.len() > before {
                    // Progress before the failure: resume right after the last good key first.
                    probes = None;
                    from = Bound::Excluded(seen.last().cloned().expect("an entry was read"));
                    continue;
                }
                if probes.is_none() {
                    end.first_error.get_or_insert(e);
                    end.skipped += 1;
                    if end.skipped > MAX_SKIPS {
                        end.stopped = true;
                        break;
                    }
                    probes = Some(
                        match seen.last() {
                            Some(k) => K::Owned::probes_after(k),
                            None => K::Owned::probes_from_start(),
                        }
                        .into_iter(),
                    );
                }
                match probes.as_mut().and_then(Iterator::next) {
                    Some(p) => from = Bound::Included(p),
                    None => {
                        end.stopped = true;
                        break;
                    }
                }
            }
        }
    }
    Ok(end)
}

/// The value under one key (`None`: absent, or it did not read).
pub(crate) fn get<D, K, V, T>(
    db: &D,
    table: TableDefinition<K, V>,
    key: &K::Owned,
    keep: impl FnOnce(V::SelfType<'_>) -> Option<T>,
) -> Option<T>
where
    D: ReadableDatabase,
    K: Owned,
    V: Value + 'static,
{
    contain("salvage read", || {
        let txn = db.begin_read().db("begin read")?;
        let t = txn.open_table(table).db("open table")?;
        let v = K::with_borrowed(key, |b| t.get(b)).db("read entry")?;
        Ok(v.and_then(|v| keep(v.value())))
    })
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_step_past_a_key_in_ever_larger_strides() {
        let mut k = [0u8; 32];
        k[31] = 0xFF;
        k[30] = 7;
        let p = <[u8; 32]>::probes_after(&k);
        assert_eq!(p.len(), 32);
        assert!(p.iter().all(|q| *q > k), "every probe is past the key");
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "nearest first");
        assert_eq!(p[0][30..], [8, 0]);
        assert_eq!(
            <[u8; 32]>::probes_after(&[0xFF; 32]),
            Vec::<[u8; 32]>::new()
        );
        let s = <(u64, String)>::probes_after(&(3, "s19".into()));
        assert_eq!(
            s[..3],
            [(3, "s1:".into()), (3, "s2".into()), (3, "t".into())]
        );
        assert!(s.contains(&(4, String::new())));
        assert!(s.iter().all(|q| *q > (3, "s19".to_string())));
    }
}
