//! `[store.remote]` (and `--remote URL`): the shared Valkey/Redis tier's settings, decoded
//! strictly and checked into [`RemoteOptions`]; and the public label each namespace's blocks
//! carry in remote keys (`shared`, the namespace's name, or `group.NAME`, per its isolation).

use memoria_store::{RemoteOptions, WriteMode};
use memoria_tenant::Isolation;
use serde::Deserialize;

/// `[store.remote]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRemote {
    pub url: Option<String>,
    pub ttl_s: Option<u64>,
    pub key_prefix: Option<String>,
    pub timeout_ms: Option<u64>,
    pub max_inflight_bytes: Option<usize>,
    pub write: Option<String>,
}

/// The remote tier's options: `--remote` wins over `store.remote.url`; None when neither.
pub fn resolve(
    raw: Option<&RawRemote>,
    flag: Option<&str>,
) -> anyhow::Result<Option<RemoteOptions>> {
    let empty = RawRemote::default();
    let r = raw.unwrap_or(&empty);
    let Some(url) = flag.map(str::to_string).or(r.url.clone()) else {
        if raw.is_some() {
            anyhow::bail!("store.remote: set url = \"redis://HOST:PORT\" (or pass --remote URL)");
        }
        return Ok(None);
    };
    let d = RemoteOptions::with_url(url);
    let write = match r.write.as_deref() {
        None => d.write,
        Some(w) => WriteMode::parse(w).ok_or_else(|| {
            anyhow::anyhow!("store.remote.write = {w:?}: use \"all\" or \"second-hit\"")
        })?,
    };
    let o = RemoteOptions {
        ttl_s: r.ttl_s.unwrap_or(d.ttl_s),
        key_prefix: r.key_prefix.clone().unwrap_or(d.key_prefix.clone()),
        timeout_ms: r.timeout_ms.unwrap_or(d.timeout_ms),
        max_inflight_bytes: r.max_inflight_bytes.unwrap_or(d.max_inflight_bytes),
        write,
        ..d
    };
    o.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(o))
}

/// The label of namespace `name`'s blocks: one per salt (shared namespaces share blocks, so
/// they share a label). Characters outside `[A-Za-z0-9._-]` become `_`, cut to 64 bytes; a
/// clash of labels only merges names in SCAN output, never blocks (keys carry the hash).
pub fn label(isolation: &Isolation, name: &str) -> String {
    let raw = match isolation {
        Isolation::Shared => "shared".to_string(),
        Isolation::Isolated => name.to_string(),
        Isolation::Group(g) => format!("group.{g}"),
    };
    let mut l: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(memoria_store::remote::keys::MAX_LABEL)
        .collect();
    if l.is_empty() {
        l.push('_');
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RawConfig;

    #[test]
    fn the_flag_wins_fields_are_checked_and_labels_follow_isolation() {
        let raw = RawConfig::parse(
            "[store.remote]\nurl = \"redis://10.0.0.1:6379\"\nttl_s = 60\nwrite = \"second-hit\"\n",
        )
        .unwrap();
        let o = resolve(raw.store.remote.as_ref(), None).unwrap().unwrap();
        assert_eq!((o.url.as_str(), o.ttl_s), ("redis://10.0.0.1:6379", 60));
        assert_eq!(o.write, WriteMode::SecondHit);
        let o = resolve(raw.store.remote.as_ref(), Some("redis://127.0.0.1:7000"))
            .unwrap()
            .unwrap();
        assert_eq!(o.url, "redis://127.0.0.1:7000");
        assert!(resolve(None, None).unwrap().is_none());
        for (bad, key) in [
            ("ttl_s = 0", "ttl_s"),
            ("write = \"some\"", "write"),
            ("key_prefix = \"a:b\"", "key_prefix"),
            ("url = \"http://x\"", "url"),
            ("timeout_ms = 0", "timeout_ms"),
        ] {
            let text = format!("[store.remote]\nurl = \"redis://h:1\"\n{bad}\n");
            let text = if key == "url" {
                format!("[store.remote]\n{bad}\n")
            } else {
                text
            };
            let raw = RawConfig::parse(&text).unwrap();
            let e = resolve(raw.store.remote.as_ref(), None).unwrap_err();
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
        let raw = RawConfig::parse("[store.remote]\nttl_s = 5\n").unwrap();
        assert!(resolve(raw.store.remote.as_ref(), None).is_err(), "no url");
        assert!(RawConfig::parse("[store.remote]\nbogus = 1\n").is_err());
        assert_eq!(label(&Isolation::Shared, "x"), "shared");
        assert_eq!(label(&Isolation::Isolated, "team a:1"), "team_a_1");
        assert_eq!(label(&Isolation::Group("sup".into()), "x"), "group.sup");
    }
}
