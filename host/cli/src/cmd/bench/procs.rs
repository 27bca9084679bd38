//! Child processes of the process-level benchmarks: `memoria serve` hosts and `memoria route`,
//! spawned from this binary on 127.0.0.1 port 0, the address read from the first stdout line
//! (within a deadline), stderr kept in a file for error messages, killed when dropped; and a
//! scratch folder removed when dropped.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

/// A scratch folder under the system temp folder, removed on drop.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `$TMP/memoria-bench-{name}-{pid}-{nanos}`, created.
    pub fn new(name: &str) -> anyhow::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "memoria-bench-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running child (`memoria serve` or `memoria route`), killed on drop.
#[derive(Debug)]
pub struct Proc {
    pub addr: SocketAddr,
    child: Child,
    stderr: PathBuf,
}

impl Proc {
    /// Runs this binary with `args` plus `--host 127.0.0.1 --port 0` and waits (at most `wait`)
    /// for its `memoria: listening on http://ADDR` line; stderr goes to `dir/{name}.stderr`.
    pub fn spawn(
        name: &str,
        args: &[OsString],
        dir: &Path,
        wait: Duration,
    ) -> anyhow::Result<Proc> {
        let exe = std::env::current_exe().context("locating this binary")?;
        let stderr = dir.join(format!("{name}.stderr"));
        let err_file = std::fs::File::create(&stderr)
            .with_context(|| format!("creating {}", stderr.display()))?;
        let mut child = Command::new(exe)
            .args(args)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err_file)
            .spawn()
            .with_context(|| format!("spawning {name}"))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let (tx, rx) = mpsc::channel();
        // Reads the first line, then drains stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let mut p = Proc {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
            stderr,
        };
        let line = rx.recv_timeout(wait).unwrap_or_default();
        match line.trim().strip_prefix("memoria: listening on http://") {
            Some(a) => {
                p.addr = a
                    .parse()
                    .with_context(|| format!("{name}: listening address {a:?}"))?;
                Ok(p)
            }
            None => {
                p.kill();
                bail!(
                    "{name} did not start within {} s (stdout {:?}); its stderr:\n{}",
                    wait.as_secs(),
                    line.trim(),
                    p.stderr_tail()
                )
            }
        }
    }

    /// The last 4 KiB of what it wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let cut = s.len().saturating_sub(4096);
        let start = (cut..s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_string()
    }

    /// Kills it and reaps it (idempotent).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
