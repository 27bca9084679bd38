//! Spawning `memoria route` for a test in front of running hosts: `--port 0`, the address
//! parsed from its first stdout line, stderr kept for failure messages, killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};

use crate::serve::server::{Server, model, temp_dir};

/// A running router.
pub struct Router {
    child: Child,
    pub addr: SocketAddr,
    stderr: PathBuf,
}

impl Router {
    /// Starts `memoria route -m MODEL --backend ... ARGS` over `hosts`, polling every 100 ms.
    pub fn start(name: &str, hosts: &[&Server], args: &[&str]) -> Router {
        let stderr = temp_dir(name).join("route-stderr.txt");
        let err_file = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = crate::bin::command();
        cmd.args(["route", "-m", &model(), "--port", "0", "--poll-ms", "100"]);
        for h in hosts {
            cmd.arg("--backend").arg(format!("http://{}", h.addr));
        }
        let mut child = cmd
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(err_file)
            .spawn()
            .expect("spawn memoria route");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let Some(addr) = line.trim().strip_prefix("memoria: listening on http://") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "memoria route did not start: stdout {line:?}, stderr:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        };
        let addr = addr.parse().expect("socket address");
        Router {
            child,
            addr,
            stderr,
        }
    }

    /// What the router wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
