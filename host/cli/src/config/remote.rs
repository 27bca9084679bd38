//! `[store.remote]` (and `--remote URL`, `--remote-cluster URL,...`, `--remote-key-file PATH`):
//! the shared Valkey/Redis tier's settings, one server (`url`) or a Redis Cluster (`cluster`,
//! its seed nodes), and the key its values are authenticated with (`auth_key_file`, required
//! with a tier: a clear error says how to make one), decoded strictly and checked into
//! [`RemoteOptions`]; and the public label each namespace's blocks carry in remote keys
//! (`shared`, the namespace's name, or `group.NAME`, per its isolation).

use std::path::{Path, PathBuf};

use memoria_store::remote::RemoteKey;
use memoria_store::{Endpoint, RemoteOptions, WriteMode};
use serde::Deserialize;

/// `[store.remote]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRemote {
    pub url: Option<String>,
    /// A Redis Cluster's seed nodes (instead of `url`).
    pub cluster: Option<Vec<String>>,
    pub ttl_s: Option<u64>,
    pub key_prefix: Option<String>,
    pub timeout_ms: Option<u64>,
    pub max_inflight_bytes: Option<usize>,
    pub write: Option<String>,
    pub write_linger_ms: Option<u64>,
    /// The file holding the key every remote value is authenticated with (and this host's
    /// namespace salts derived from): the same file on every host sharing the tier.
    pub auth_key_file: Option<PathBuf>,
    /// Publish host events for `memoria route --events` (see `config::events`).
    pub events: Option<bool>,
    pub advertise: Option<String>,
    pub host_id: Option<String>,
    pub events_maxlen: Option<u64>,
    pub liveness_ttl_s: Option<u64>,
}

/// Where the data lives: a flag (`--remote URL` or `--remote-cluster URL,...`, not both) wins
/// over the file's `url` or `cluster` (not both); None when none is given.
fn endpoint(
    r: &RawRemote,
    flag: Option<&str>,
    flag_cluster: &[String],
) -> anyhow::Result<Option<Endpoint>> {
    if r.url.is_some() && r.cluster.is_some() {
        anyhow::bail!(
            "store.remote: set url (one server) or cluster (a Redis Cluster's nodes), not both"
        );
    }
    Ok(match (flag, flag_cluster) {
        (Some(_), [_, ..]) => {
            anyhow::bail!("pass --remote URL or --remote-cluster URL,..., not both")
        }
        (Some(url), []) => Some(Endpoint::Server(url.to_string())),
        (None, [_, ..]) => Some(Endpoint::Cluster(flag_cluster.to_vec())),
        (None, []) => match (&r.url, &r.cluster) {
            (Some(url), _) => Some(Endpoint::Server(url.clone())),
            (None, Some(nodes)) => Some(Endpoint::Cluster(nodes.clone())),
            (None, None) => None,
        },
    })
}

/// The remote tier's options: a flag wins over the file's endpoint; None when neither names
/// one. `flag_cluster`: the `--remote-cluster` node URLs (empty when not given); `key_flag`:
/// `--remote-key-file`, which wins over `auth_key_file`.
pub fn resolve(
    raw: Option<&RawRemote>,
    flag: Option<&str>,
    flag_cluster: &[String],
    key_flag: Option<&Path>,
) -> anyhow::Result<Option<RemoteOptions>> {
    let empty = RawRemote::default();
    let r = raw.unwrap_or(&empty);
    let Some(endpoint) = endpoint(r, flag, flag_cluster)? else {
        if raw.is_some() {
            anyhow::bail!(
                "store.remote: set url = \"redis://HOST:PORT\" or cluster = [\"redis://HOST:PORT\", ...] \
                 (or pass --remote URL / --remote-cluster URL,...)"
            );
        }
        return Ok(None);
    };
    let d = RemoteOptions {
        endpoint,
        ..RemoteOptions::default()
    };
    let write = match r.write.as_deref() {
        None => d.write,
        Some(w) => WriteMode::parse(w).ok_or_else(|| {
            anyhow::anyhow!("store.remote.write = {w:?}: use \"all\" or \"second-hit\"")
        })?,
    };
    let auth = match key_flag.or(r.auth_key_file.as_deref()) {
        Some(path) => {
            let (key, warning) = RemoteKey::load(path).map_err(|e| {
                anyhow::anyhow!("store.remote.auth_key_file / --remote-key-file: {e}")
            })?;
            if let Some(w) = warning {
                eprintln!("memoria: warning: {w}");
            }
            Some(key)
        }
        None => None,
    };
    let o = RemoteOptions {
        ttl_s: r.ttl_s.unwrap_or(d.ttl_s),
        auth,
        key_prefix: r.key_prefix.clone().unwrap_or(d.key_prefix.clone()),
        timeout_ms: r.timeout_ms.unwrap_or(d.timeout_ms),
        max_inflight_bytes: r.max_inflight_bytes.unwrap_or(d.max_inflight_bytes),
        write,
        write_linger_ms: r.write_linger_ms.unwrap_or(d.write_linger_ms),
        ..d
    };
    o.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(o))
}

/// A key file for tests of configurations with a remote tier (every such tier needs one).
#[cfg(test)]
pub(crate) fn test_key_file() -> PathBuf {
    // Written once per test process (tests run in parallel: a rewrite could be read half done).
    static FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let p = std::env::temp_dir().join(format!("memoria-config-key-{}", std::process::id()));
        std::fs::write(&p, "0123456789abcdef".repeat(4)).unwrap();
        p
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RawConfig;
    use memoria_tenant::Isolation;

    use super::test_key_file as key_file;

    fn resolve(
        raw: Option<&RawRemote>,
        flag: Option<&str>,
        cluster: &[String],
    ) -> anyhow::Result<Option<RemoteOptions>> {
        super::resolve(raw, flag, cluster, Some(&key_file()))
    }

    #[test]
    fn a_tier_without_a_key_is_refused_saying_how_to_make_one() {
        let raw = RawConfig::parse("[store.remote]\nurl = \"redis://h:1\"\n").unwrap();
        let e = super::resolve(raw.store.remote.as_ref(), None, &[], None).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("auth_key_file") && e.contains("--remote-key-file"),
            "{e}"
        );
        assert!(e.contains("openssl rand -hex 32"), "{e}");
        let e = super::resolve(None, Some("redis://h:1"), &[], None).unwrap_err();
        assert!(format!("{e:#}").contains("auth_key_file"), "{e:#}");
        // No tier, no key needed.
        assert!(super::resolve(None, None, &[], None).unwrap().is_none());
        // From the file's key, or the flag's (a short key is refused, naming the file).
        let f = key_file();
        let text = format!(
            "[store.remote]\nurl = \"redis://h:1\"\nauth_key_file = {:?}\n",
            f.display().to_string()
        );
        let raw = RawConfig::parse(&text).unwrap();
        let o = super::resolve(raw.store.remote.as_ref(), None, &[], None)
            .unwrap()
            .unwrap();
        assert!(o.auth.is_some());
        let short = f.with_extension("short");
        std::fs::write(&short, "abc").unwrap();
        let e = super::resolve(raw.store.remote.as_ref(), None, &[], Some(&short)).unwrap_err();
        assert!(format!("{e:#}").contains("at least 32"), "{e:#}");
        let _ = std::fs::remove_file(short);
    }

    #[test]
    fn the_flag_wins_fields_are_checked_and_labels_follow_isolation() {
        let raw = RawConfig::parse(
            "[store.remote]\nurl = \"redis://10.0.0.1:6379\"\nttl_s = 60\nwrite = \"second-hit\"\nwrite_linger_ms = 20\n",
        )
        .unwrap();
        let o = resolve(raw.store.remote.as_ref(), None, &[])
            .unwrap()
            .unwrap();
        let server = |u: &str| Endpoint::Server(u.into());
        assert_eq!(
            (&o.endpoint, o.ttl_s),
            (&server("redis://10.0.0.1:6379"), 60)
        );
        assert_eq!((o.write, o.write_linger_ms), (WriteMode::SecondHit, 20));
        let o = resolve(
            raw.store.remote.as_ref(),
            Some("redis://127.0.0.1:7000"),
            &[],
        )
        .unwrap()
        .unwrap();
        assert_eq!(o.endpoint, server("redis://127.0.0.1:7000"));
        assert!(resolve(None, None, &[]).unwrap().is_none());
        for (bad, key) in [
            ("ttl_s = 0", "ttl_s"),
            ("write = \"some\"", "write"),
            ("key_prefix = \"a:b\"", "key_prefix"),
            ("url = \"http://x\"", "url"),
            ("timeout_ms = 0", "timeout_ms"),
            ("write_linger_ms = 3600000", "write_linger_ms"),
        ] {
            let text = format!("[store.remote]\nurl = \"redis://h:1\"\n{bad}\n");
            let text = if key == "url" {
                format!("[store.remote]\n{bad}\n")
            } else {
                text
            };
            let raw = RawConfig::parse(&text).unwrap();
            let e = resolve(raw.store.remote.as_ref(), None, &[]).unwrap_err();
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
        let raw = RawConfig::parse("[store.remote]\nttl_s = 5\n").unwrap();
        let e = resolve(raw.store.remote.as_ref(), None, &[]).unwrap_err();
        assert!(e.to_string().contains("cluster = ["), "no url: {e}");
        assert!(RawConfig::parse("[store.remote]\nbogus = 1\n").is_err());
        assert_eq!(Isolation::Shared.label("x"), "shared");
        assert_eq!(
            memoria_tenant::MAX_LABEL,
            memoria_store::remote::keys::MAX_LABEL
        );
    }

    #[test]
    fn a_cluster_is_one_of_url_or_cluster_from_the_file_or_a_flag() {
        let nodes = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cluster = |v: &[&str]| Endpoint::Cluster(nodes(v));
        let raw = RawConfig::parse(
            "[store.remote]\ncluster = [\"redis://10.0.0.1:7000\", \"valkey://10.0.0.2:7000\"]\n",
        )
        .unwrap();
        let r = raw.store.remote.as_ref();
        let o = resolve(r, None, &[]).unwrap().unwrap();
        assert_eq!(
            o.endpoint,
            cluster(&["redis://10.0.0.1:7000", "valkey://10.0.0.2:7000"])
        );
        // A flag of either form wins over the file's endpoint; the two flags exclude each other.
        let o = resolve(r, Some("redis://h:1"), &[]).unwrap().unwrap();
        assert_eq!(o.endpoint, Endpoint::Server("redis://h:1".into()));
        let flag = nodes(&["redis://a:1", "redis://b:2", "redis://c:3"]);
        let o = resolve(None, None, &flag).unwrap().unwrap();
        assert_eq!(
            o.endpoint,
            cluster(&["redis://a:1", "redis://b:2", "redis://c:3"])
        );
        let e = resolve(None, Some("redis://h:1"), &flag).unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
        for (bad, says) in [
            (
                "url = \"redis://h:1\"\ncluster = [\"redis://h:2\"]",
                "not both",
            ),
            ("cluster = []", "store.remote.cluster"),
            ("cluster = [\"http://h:1\"]", "store.remote.cluster[0]"),
            ("cluster = [\"redis://h:1/2\"]", "database 0"),
            ("cluster = \"redis://h:1\"", "sequence"),
        ] {
            let e = match RawConfig::parse(&format!("[store.remote]\n{bad}\n")) {
                Ok(raw) => resolve(raw.store.remote.as_ref(), None, &[])
                    .unwrap_err()
                    .to_string(),
                Err(e) => format!("{e:#}"),
            };
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(Isolation::Isolated.label("team a:1"), "team_a_1");
        assert_eq!(Isolation::Group("sup".into()).label("x"), "group.sup");
    }
}
