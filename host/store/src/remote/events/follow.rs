//! The router side of events: find the live hosts and read their streams from each stream's
//! last id. On one server: `SCAN MATCH {prefix}:host:*`, `MGET` of their liveness values and
//! one `XREAD COUNT n STREAMS ...` for all streams. On a Redis Cluster, where a SCAN sees one
//! node: the hosts' registry set `{prefix}:hosts` (`SMEMBERS`; each host adds its id when it
//! refreshes its liveness key, and a reader removes the ids whose liveness key expired), the
//! liveness values by `MGET` (split per slot by the cluster client), and one `XREAD` per
//! stream (streams live in different slots). Every reply is checked; what does not parse is
//! skipped and counted by the caller.

use std::time::Duration;

use redis::Value;

use super::super::Endpoint;
use super::super::link::{Connector, Link};
use super::format::{StreamRead, parse_xread};
use super::liveness::Liveness;
use super::{hosts_key, liveness_key};

/// Most hosts one discovery returns, and most SCAN rounds it makes.
const MAX_HOSTS: usize = 4096;
const MAX_SCAN_ROUNDS: usize = 1024;

/// A connection for reading events.
pub struct Follower {
    connector: Connector,
    link: Option<Link>,
    prefix: String,
    timeout: Duration,
    cluster: bool,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// One live host: its id (the key's last part), liveness value and stream key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveHost {
    pub id: String,
    pub liveness: Liveness,
    pub stream: String,
}

impl Follower {
    /// Checks `endpoint` (one server `redis://HOST:PORT[/DB]`, or a cluster's seed nodes);
    /// connects on first use.
    pub fn new(
        endpoint: Endpoint,
        key_prefix: &str,
        timeout: Duration,
    ) -> Result<Follower, String> {
        endpoint.validate().map_err(|e| {
            e.replace("store.remote.url", "--events")
                .replace("store.remote.cluster", "--events-cluster")
        })?;
        super::super::keys::check_label(key_prefix).map_err(|e| format!("--events-prefix: {e}"))?;
        Ok(Follower {
            connector: Connector::new(&endpoint, timeout)?,
            link: None,
            prefix: key_prefix.to_string(),
            timeout,
            cluster: matches!(endpoint, Endpoint::Cluster(_)),
        })
    }

    async fn link(&mut self) -> Result<&mut Link, String> {
        if self.link.is_none() {
            let c = tokio::time::timeout(self.timeout * 2, self.connector.connect(self.timeout))
                .await
                .map_err(|_| "connecting: timed out".to_string())?
                .map_err(|e| format!("connecting: {e}"))?;
            self.link = Some(c);
        }
        self.link
            .as_mut()
            .ok_or_else(|| "no connection".to_string())
    }

    async fn query(&mut self, cmd: redis::Cmd) -> Result<Value, String> {
        let timeout = self.timeout;
        let l = self.link().await?;
        match tokio::time::timeout(timeout, cmd.query_async::<Value>(l)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".into()),
        }
    }

    /// The liveness keys of the hosts in the registry set (a cluster's way to find them), and
    /// how many members are not host ids.
    async fn registered(&mut self) -> Result<(Vec<String>, u64), String> {
        let mut c = redis::cmd("SMEMBERS");
        c.arg(hosts_key(&self.prefix));
        let v = self.query(c).await?;
        let members = match v {
            Value::Array(m) | Value::Set(m) => m,
            Value::Nil => Vec::new(),
            _ => return Err("a bad SMEMBERS reply".into()),
        };
        let mut bad = 0;
        let mut keys = Vec::new();
        for m in members.iter().take(MAX_HOSTS) {
            let id = match m {
                Value::BulkString(b) => std::str::from_utf8(b)
                    .ok()
                    .filter(|id| super::super::keys::check_label(id).is_ok()),
                _ => None,
            };
            match id {
                Some(id) => keys.push(liveness_key(&self.prefix, id)),
                None => bad += 1,
            }
        }
        Ok((keys, bad))
    }

    /// Takes the ids of hosts whose liveness key expired out of the registry set (best
    /// effort: the next round tries again).
    async fn unregister(&mut self, ids: &[String]) {
        if ids.is_empty() {
            return;
        }
        let mut c = redis::cmd("SREM");
        c.arg(hosts_key(&self.prefix));
        for id in ids {
            c.arg(id);
        }
        let _ = self.query(c).await;
    }

    /// The keys matching `{prefix}:host:*` (one server's way to find the hosts).
    async fn scanned(&mut self) -> Result<Vec<String>, String> {
        let pattern = liveness_key(&self.prefix, "*");
        let mut keys: Vec<String> = Vec::new();
        let mut cursor = "0".to_string();
        for _ in 0..MAX_SCAN_ROUNDS {
            let mut c = redis::cmd("SCAN");
            c.arg(&cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(256);
            let (next, batch) = scan_reply(&self.query(c).await?).ok_or("a bad SCAN reply")?;
            keys.extend(batch);
            cursor = next;
            if cursor == "0" || keys.len() >= MAX_HOSTS {
                break;
            }
        }
        Ok(keys)
    }

    /// The hosts whose liveness key exists now, and how many keys (or registry members) held
    /// something else.
    pub async fn hosts(&mut self) -> Result<(Vec<LiveHost>, u64), String> {
        let (mut keys, mut bad) = if self.cluster {
            self.registered().await?
        } else {
            (self.scanned().await?, 0)
        };
        keys.sort();
        keys.dedup();
        keys.truncate(MAX_HOSTS);
        if keys.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let mut c = redis::cmd("MGET");
        for k in &keys {
            c.arg(k);
        }
        let Value::Array(values) = self.query(c).await? else {
            return Err("a bad MGET reply".into());
        };
        let head = liveness_key(&self.prefix, "");
        let mut hosts = Vec::new();
        let mut expired = Vec::new();
        for (k, v) in keys.iter().zip(values) {
            let parsed = match &v {
                // Expired since the SCAN, or a registered host that is gone.
                Value::Nil => {
                    if let Some(id) = k.strip_prefix(&head) {
                        expired.push(id.to_string());
                    }
                    continue;
                }
                Value::BulkString(b) => Liveness::parse(b),
                _ => None,
            };
            match (parsed, k.strip_prefix(&head)) {
                (Some(liveness), Some(id)) if !id.is_empty() => hosts.push(LiveHost {
                    id: id.to_string(),
                    liveness,
                    stream: super::stream_key(&self.prefix, id),
                }),
                _ => bad += 1,
            }
        }
        if self.cluster {
            self.unregister(&expired).await;
        }
        Ok((hosts, bad))
    }

    /// New entries of each `(stream key, last id)` (at most `count` per stream), and how many
    /// parts of the reply were not streams.
    pub async fn read(
        &mut self,
        from: &[(String, String)],
        count: usize,
    ) -> Result<(Vec<(String, StreamRead)>, u64), String> {
        if from.is_empty() {
            return Ok((Vec::new(), 0));
        }
        if self.cluster {
            // One XREAD per stream: each stream key has its own slot.
            let (mut all, mut bad) = (Vec::new(), 0);
            for (k, id) in from {
                let mut c = redis::cmd("XREAD");
                c.arg("COUNT")
                    .arg(count.max(1))
                    .arg("STREAMS")
                    .arg(k)
                    .arg(id);
                let (read, b) = parse_xread(&self.query(c).await?);
                all.extend(read);
                bad += b;
            }
            return Ok((all, bad));
        }
        let mut c = redis::cmd("XREAD");
        c.arg("COUNT").arg(count.max(1)).arg("STREAMS");
        for (k, _) in from {
            c.arg(k);
        }
        for (_, id) in from {
            c.arg(id);
        }
        Ok(parse_xread(&self.query(c).await?))
    }
}

/// `SCAN`'s `[cursor, [key, ...]]`; keys that are not text are left out.
fn scan_reply(v: &Value) -> Option<(String, Vec<String>)> {
    let Value::Array(parts) = v else { return None };
    let [cursor, Value::Array(keys)] = parts.as_slice() else {
        return None;
    };
    let cursor = match cursor {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.to_string(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    if cursor.is_empty() || cursor.len() > 20 || !cursor.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let keys = keys
        .iter()
        .filter_map(|k| match k {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        })
        .collect();
    Some((cursor, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_replies_are_checked() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let ok = Value::Array(vec![
            b("17"),
            Value::Array(vec![b("m:host:a"), Value::Int(1)]),
        ]);
        assert_eq!(
            scan_reply(&ok),
            Some(("17".into(), vec!["m:host:a".into()]))
        );
        for bad in [
            Value::Nil,
            Value::Array(vec![b("-1"), Value::Array(vec![])]),
            Value::Array(vec![b("1")]),
            Value::Array(vec![Value::Int(0), Value::Array(vec![])]),
        ] {
            assert_eq!(scan_reply(&bad), None);
        }
        let ms = Duration::from_millis(5);
        let server = |u: &str| Endpoint::Server(u.to_string());
        assert!(Follower::new(server("http://x"), "memoria", ms).is_err());
        assert!(Follower::new(server("redis://h:1"), "a:b", ms).is_err());
        let e = Follower::new(Endpoint::Cluster(vec![]), "memoria", ms).unwrap_err();
        assert!(e.contains("--events-cluster"), "{e}");
        assert!(Follower::new(Endpoint::Cluster(vec!["redis://h:1".into()]), "m", ms).is_ok());
    }
}
