//! The router side of events: find the live hosts (`SCAN MATCH {prefix}:host:*`, then `MGET`
//! their liveness values) and read their streams (`XREAD COUNT n STREAMS ...` from each
//! stream's last id). One server only (`redis://`): a cluster's SCAN is per node. Every reply
//! is checked; what does not parse is skipped and counted by the caller.

use std::time::Duration;

use redis::Value;

use super::super::Endpoint;
use super::super::link::{Connector, Link};
use super::format::{StreamRead, parse_xread};
use super::liveness::Liveness;
use super::liveness_key;

/// Most hosts one discovery returns, and most SCAN rounds it makes.
const MAX_HOSTS: usize = 4096;
const MAX_SCAN_ROUNDS: usize = 1024;

/// A connection for reading events.
pub struct Follower {
    connector: Connector,
    link: Option<Link>,
    prefix: String,
    timeout: Duration,
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
    /// Parses `url` (`redis://HOST:PORT[/DB]`); connects on first use.
    pub fn new(url: &str, key_prefix: &str, timeout: Duration) -> Result<Follower, String> {
        let endpoint = Endpoint::Server(url.to_string());
        endpoint
            .validate()
            .map_err(|e| e.replace("store.remote.url", "--events"))?;
        super::super::keys::check_label(key_prefix).map_err(|e| format!("--events-prefix: {e}"))?;
        Ok(Follower {
            connector: Connector::new(&endpoint, timeout)?,
            link: None,
            prefix: key_prefix.to_string(),
            timeout,
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

    /// The hosts whose liveness key exists now, and how many keys held something else.
    pub async fn hosts(&mut self) -> Result<(Vec<LiveHost>, u64), String> {
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
        let mut bad = 0;
        for (k, v) in keys.iter().zip(values) {
            let parsed = match &v {
                Value::Nil => continue, // expired since the SCAN
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
        assert!(Follower::new("http://x", "memoria", Duration::from_millis(5)).is_err());
        assert!(Follower::new("redis://h:1", "a:b", Duration::from_millis(5)).is_err());
    }
}
