//! A throwaway 3-node Redis Cluster for tests, on 127.0.0.1: three [`TestServer`]s started with
//! `--cluster-enabled yes` (free ports for clients and for the cluster bus, each node's
//! `nodes-PORT.conf` in a private temp folder, no persistence), the 16384 hash slots split in
//! three with `CLUSTER ADDSLOTSRANGE`, the nodes joined with `CLUSTER MEET`, ready once
//! `CLUSTER INFO` says `cluster_state:ok` on all three. Killed (and the folder removed) on drop.
//! No server binary: [`TestCluster::start`] fails with [`super::test_server::INSTALL_HINT`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::test_server::{TestServer, free_ports};

/// Nodes of a test cluster (all primaries, no replicas).
pub const NODES: usize = 3;
/// The hash slots each node serves, inclusive.
pub const SLOT_RANGES: [(u16, u16); NODES] = [(0, 5460), (5461, 10922), (10923, 16383)];
/// How long the cluster may take to agree (`cluster_state:ok` on every node).
const READY: Duration = Duration::from_secs(30);

/// A running cluster; killed on drop.
#[derive(Debug)]
pub struct TestCluster {
    nodes: Vec<TestServer>,
    dir: PathBuf,
}

impl TestCluster {
    /// Starts three nodes, assigns the slots, joins them and waits for `cluster_state:ok`.
    pub fn start() -> Result<TestCluster, String> {
        TestServer::binary()?;
        let ports = free_ports(2 * NODES)?;
        let dir = std::env::temp_dir().join(format!(
            "memoria-cluster-{}-{}",
            std::process::id(),
            ports[0]
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut c = TestCluster {
            nodes: Vec::new(),
            dir,
        };
        for i in 0..NODES {
            let (port, bus) = (ports[i], ports[NODES + i]);
            let conf = c.dir.join(format!("nodes-{port}.conf"));
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                &conf.to_string_lossy(),
                "--cluster-port",
                &bus.to_string(),
            ]
            .map(str::to_string);
            c.nodes.push(TestServer::start_on(port, args.to_vec())?);
        }
        for (i, (lo, hi)) in SLOT_RANGES.iter().enumerate() {
            let mut conn = c.conn(i)?;
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(lo)
                .arg(hi)
                .query::<()>(&mut conn)
                .map_err(|e| format!("CLUSTER ADDSLOTSRANGE {lo} {hi} on node {i}: {e}"))?;
        }
        let mut first = c.conn(0)?;
        for i in 1..NODES {
            redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(ports[i])
                .arg(ports[NODES + i])
                .query::<()>(&mut first)
                .map_err(|e| format!("CLUSTER MEET node {i}: {e}"))?;
        }
        c.wait_ok()?;
        Ok(c)
    }

    fn conn(&self, i: usize) -> Result<redis::Connection, String> {
        self.nodes[i]
            .connection()
            .map_err(|e| format!("connecting to cluster node {i}: {e}"))
    }

    /// Waits until every running node reports `cluster_state:ok`.
    pub fn wait_ok(&self) -> Result<(), String> {
        let deadline = Instant::now() + READY;
        loop {
            let ok = (0..NODES).filter(|&i| self.nodes[i].is_running()).all(|i| {
                self.nodes[i]
                    .connection()
                    .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
                    .is_ok_and(|info| info.lines().any(|l| l.trim() == "cluster_state:ok"))
            });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the test cluster did not reach cluster_state:ok within {READY:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `redis://127.0.0.1:PORT` of every node (the seed list for a client).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(TestServer::url).collect()
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &TestServer {
        &self.nodes[i]
    }

    /// Kills node `i` (its slots become unreachable).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Restarts node `i` on its port with its `nodes-PORT.conf` (so with its slots, but no
    /// data) and waits until the cluster is ok again.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.nodes[i].restart()?;
        self.wait_ok()
    }

    /// The hash slot of `key`, as the cluster computes it (`CLUSTER KEYSLOT` on a running node).
    pub fn slot(&self, key: &str) -> redis::RedisResult<u16> {
        let i = (0..NODES)
            .find(|&i| self.nodes[i].is_running())
            .unwrap_or(0);
        let mut c = self.nodes[i].connection()?;
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut c)
    }

    /// The node serving `key`.
    pub fn node_of(&self, key: &str) -> redis::RedisResult<usize> {
        let s = self.slot(key)?;
        Ok(SLOT_RANGES
            .iter()
            .position(|(lo, hi)| (*lo..=*hi).contains(&s))
            .unwrap_or(0))
    }

    /// A plain connection to the node serving `key` (to read or damage its value).
    pub fn connection_for(&self, key: &str) -> redis::RedisResult<redis::Connection> {
        self.nodes[self.node_of(key)?].connection()
    }

    /// `DBSIZE` of each node, in order.
    pub fn dbsizes(&self) -> redis::RedisResult<Vec<u64>> {
        self.nodes
            .iter()
            .map(|n| redis::cmd("DBSIZE").query(&mut n.connection()?))
            .collect()
    }

    /// The keys matching `pattern` on every running node.
    pub fn keys(&self, pattern: &str) -> redis::RedisResult<Vec<String>> {
        let mut all = Vec::new();
        for n in self.nodes.iter().filter(|n| n.is_running()) {
            let mut c = n.connection()?;
            all.extend(
                redis::cmd("KEYS")
                    .arg(pattern)
                    .query::<Vec<String>>(&mut c)?,
            );
        }
        Ok(all)
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
