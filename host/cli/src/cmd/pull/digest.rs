//! sha256 of a file (streamed, with a progress bar) and checking a hex digest given by a user.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use super::progress;

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The lowercase hex sha256 of the file at `path`.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = progress::bytes(len, "checking sha256");
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    Ok(hex(&h.finalize()))
}

/// A sha256 given on the command line: 64 hex digits, returned in lowercase.
pub fn parse_sha256(s: &str) -> anyhow::Result<String> {
    let t = s.trim();
    if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--sha256 {s:?} is not a sha256 (64 hex digits)");
    }
    Ok(t.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_text() {
        let path = std::env::temp_dir().join(format!("memoria-digest-{}", std::process::id()));
        std::fs::write(&path, b"abc").expect("write");
        let got = sha256_file(&path).expect("hash");
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(
            got,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parse_sha256_checks_form() {
        let h = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
        assert_eq!(parse_sha256(h).expect("valid"), h.to_ascii_lowercase());
        assert!(parse_sha256("abc").is_err());
        assert!(parse_sha256(&"g".repeat(64)).is_err());
    }
}
