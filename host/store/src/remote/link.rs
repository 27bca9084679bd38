//! The remote tier's connection, one type for both deployments: a redis-rs `ConnectionManager`
//! to one server, or a `cluster_async::ClusterConnection` to a Redis Cluster. Commands go
//! through [`Link`] unchanged: redis-rs routes a cluster's single-key commands by hash slot,
//! splits a multi-slot MGET per slot and puts the answers back in key order, and sums DBSIZE
//! over the primaries. What differs is handled here: a cluster pipeline must stay within one
//! slot, so [`Link::set_many`] sends one pipeline per slot (concurrently), and `INFO memory`
//! answers once per primary, so [`Link::used_memory`] adds them up.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::endpoint::{Endpoint, for_client};

/// What a [`Link`] is made from.
pub(crate) enum Connector {
    Server(redis::Client),
    Cluster(Box<ClusterClient>),
}

impl Connector {
    /// Parses the endpoint's URL(s); connects nothing. `timeout` bounds each network step.
    pub fn new(endpoint: &Endpoint, timeout: Duration) -> Result<Connector, String> {
        match endpoint {
            Endpoint::Server(url) => redis::Client::open(for_client(url))
                .map(Connector::Server)
                .map_err(|e| format!("store.remote.url {url:?}: {e}")),
            Endpoint::Cluster(nodes) => {
                let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
                ClusterClient::builder(nodes.iter().map(|u| for_client(u)))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .min_retry_wait((ms / 4).max(1))
                    .max_retry_wait(ms)
                    .build()
                    .map(|c| Connector::Cluster(Box::new(c)))
                    .map_err(|e| format!("store.remote.cluster {nodes:?}: {e}"))
            }
        }
    }

    /// Connects (a cluster's slot map is read from its seed nodes).
    pub async fn connect(&self, timeout: Duration) -> RedisResult<Link> {
        match self {
            Connector::Server(client) => {
                let cfg = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(timeout);
                client
                    .get_connection_manager_with_config(cfg)
                    .await
                    .map(Link::Server)
            }
            Connector::Cluster(client) => client.get_async_connection().await.map(Link::Cluster),
        }
    }
}

/// A connection to the server or the cluster (cheap to clone: both are multiplexed handles).
#[derive(Clone)]
pub(crate) enum Link {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl redis::aio::ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Server(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Server(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}

/// `SET key value EX ttl` for every write of `group` (indices into `sets`).
fn pipeline(sets: &[(String, Vec<u8>)], group: &[usize], ttl: u64) -> Pipeline {
    let mut p = redis::pipe();
    for &i in group {
        let (k, v) = &sets[i];
        p.cmd("SET").arg(k).arg(v).arg("EX").arg(ttl).ignore();
    }
    p
}

/// Indices of `keys` grouped by hash slot, groups in order of first appearance.
pub(crate) fn by_slot<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<Vec<usize>> {
    let mut at: HashMap<Slot, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, k) in keys.enumerate() {
        let g = *at.entry(Slot::for_key(k)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    groups
}

impl Link {
    /// Writes every `(key, value)` with `SET .. EX ttl`, pipelined: one pipeline to a server,
    /// one per hash slot (all in flight together) to a cluster. Answers whether each write was
    /// acknowledged; an error only when none was (the first error, for the breaker's count).
    pub async fn set_many(
        &mut self,
        sets: &[(String, Vec<u8>)],
        ttl: u64,
    ) -> RedisResult<Vec<bool>> {
        let all: Vec<usize> = (0..sets.len()).collect();
        let c = match self {
            Link::Server(m) => {
                pipeline(sets, &all, ttl).query_async::<()>(m).await?;
                return Ok(vec![true; sets.len()]);
            }
            Link::Cluster(c) => c,
        };
        let mut tasks = tokio::task::JoinSet::new();
        for group in by_slot(sets.iter().map(|(k, _)| k.as_str())) {
            let p = pipeline(sets, &group, ttl);
            let mut c = c.clone();
            tasks.spawn(async move { (group, p.query_async::<()>(&mut c).await) });
        }
        let mut acked = vec![false; sets.len()];
        let mut first_err = None;
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok((group, Ok(()))) => group.into_iter().for_each(|i| acked[i] = true),
                Ok((_, Err(e))) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert_with(|| {
                        (redis::ErrorKind::Client, "a slot's write task failed").into()
                    });
                }
            }
        }
        match first_err {
            Some(e) if !acked.contains(&true) => Err(e),
            _ => Ok(acked),
        }
    }

    /// `used_memory` of `INFO memory`, summed over a cluster's primaries (a primary that did
    /// not answer adds nothing).
    pub async fn used_memory(&mut self) -> RedisResult<u64> {
        let v: Value = redis::cmd("INFO").arg("memory").query_async(self).await?;
        Ok(used_memory_reply(&v))
    }
}

/// `used_memory` of an `INFO memory` reply: one node's text, or a cluster's map of node to text.
fn used_memory_reply(v: &Value) -> u64 {
    match v {
        Value::Map(per_node) => per_node.iter().map(|(_, v)| used_memory_of(v)).sum(),
        v => used_memory_of(v),
    }
}

/// `used_memory` of one node's `INFO memory` reply (0 when absent or not text).
fn used_memory_of(v: &Value) -> u64 {
    let text: String = match redis::from_redis_value_ref(v) {
        Ok(t) => t,
        Err(_) => return 0,
    };
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_group_by_slot_in_order_and_info_replies_add_up() {
        // "{a}x" and "{a}y" share a slot (hash tag); "b" is elsewhere.
        assert_eq!(
            by_slot(["{a}x", "b", "{a}y"].into_iter()),
            vec![vec![0, 2], vec![1]]
        );
        let info = |n: u64| Value::BulkString(format!("# Memory\r\nused_memory:{n}\r\n").into());
        assert_eq!(used_memory_of(&info(42)), 42);
        assert_eq!(used_memory_of(&Value::Nil), 0);
        let per_node = Value::Map(vec![
            (Value::BulkString(b"a:1".to_vec()), info(10)),
            (Value::BulkString(b"b:2".to_vec()), info(32)),
        ]);
        assert_eq!(used_memory_reply(&per_node), 42);
        assert_eq!(used_memory_reply(&info(7)), 7);
    }
}
