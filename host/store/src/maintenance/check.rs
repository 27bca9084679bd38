//! redb's integrity check without making a damaged file worse. Opening a redb file for writing
//! marks it "recovery required" in its header until a clean close; an integrity check that
//! fails leaves the mark (redb will not record a clean shutdown over a state it could not
//! verify), so the next plain open runs a repair that fails, and a file `memoria serve` could
//! still read (every save restorable) becomes one nobody can open. Invariant: an operation run
//! through [`keeping_header`] that fails on a damaged file leaves the file's header page exactly
//! as it was before (nothing else is written when such an operation fails: a failed check
//! commits nothing).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::disk::open_redb;
use crate::disk::tables::DB_FILE;
use crate::error::{DbResult, StoreError};
use crate::guard::contain;

/// Bytes of the file put back: redb's header (320 bytes) lies in its first page.
const HEADER_PAGE: u64 = 4096;

fn head(path: &Path) -> std::io::Result<(Vec<u8>, u64)> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut b = Vec::with_capacity(HEADER_PAGE.min(len) as usize);
    Read::by_ref(&mut f).take(HEADER_PAGE).read_to_end(&mut b)?;
    Ok((b, len))
}

fn put_back(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.seek(SeekFrom::Start(0))?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Runs `op` on the store in `dir`; if it fails because the file is damaged, the header page is
/// put back as it was (when the file's length did not change), so the failure leaves no mark.
pub(crate) fn keeping_header<T>(
    dir: &Path,
    op: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let path = dir.join(DB_FILE);
    let before = head(&path).ok();
    let r = op();
    if let (Err(e), Some((bytes, len))) = (&r, before)
        && e.is_damaged()
        && std::fs::metadata(&path).is_ok_and(|m| m.len() == len)
        && head(&path).is_ok_and(|(now, _)| now != bytes)
        && let Err(io) = put_back(&path, &bytes)
    {
        return Err(StoreError::Open {
            path: path.display().to_string(),
            msg: format!(
                "the file is damaged ({}), and putting its header back after the check failed: {io}",
                e.damage()
            ),
        });
    }
    r
}

/// redb's integrity check on the store file in `dir` (every page's checksum): `Ok(true)` intact,
/// `Ok(false)` repaired in place (redb went back to its last intact commit), a damaged-file
/// error when redb cannot repair it, in which case the file is left as it was.
pub fn check(dir: &Path) -> Result<bool, StoreError> {
    keeping_header(dir, || {
        contain("check integrity", || {
            let mut db = open_redb(&dir.join(DB_FILE), 1 << 20, false)?;
            db.check_integrity().db("check integrity")
        })
    })
}
