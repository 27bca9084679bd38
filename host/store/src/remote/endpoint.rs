//! Where the remote tier's data lives: one Valkey/Redis server (`[store.remote] url`,
//! `--remote`) or a Redis Cluster (`[store.remote] cluster`, `--remote-cluster`: its seed
//! nodes; the rest of the topology is read from the cluster), with the checks both forms share.

/// Most seed nodes accepted for a cluster (a bound on a list from configuration).
pub const MAX_CLUSTER_NODES: usize = 64;

/// One server or one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `redis://HOST:PORT[/DB]` (or `valkey://`).
    Server(String),
    /// Seed nodes of a Redis Cluster, `redis://HOST:PORT` each (database 0: a cluster has no
    /// other). Keys spread over the hash slots; MGETs are split per slot.
    Cluster(Vec<String>),
}

impl Endpoint {
    /// `redis://HOST:PORT`, or `cluster redis://A, redis://B` (for logs and messages).
    pub fn describe(&self) -> String {
        match self {
            Endpoint::Server(u) => u.clone(),
            Endpoint::Cluster(nodes) => format!("cluster {}", nodes.join(", ")),
        }
    }

    /// Whether it is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Endpoint::Cluster(_))
    }

    /// Checks the URL(s); the message names the configuration key.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Endpoint::Server(u) => check_scheme(u).map_err(|e| format!("store.remote.url {e}")),
            Endpoint::Cluster(nodes) => {
                if nodes.is_empty() || nodes.len() > MAX_CLUSTER_NODES {
                    return Err(format!(
                        "store.remote.cluster: list 1..={MAX_CLUSTER_NODES} node URLs \
                         (redis://HOST:PORT), got {}",
                        nodes.len()
                    ));
                }
                for (i, u) in nodes.iter().enumerate() {
                    let at = format!("store.remote.cluster[{i}]");
                    check_scheme(u).map_err(|e| format!("{at} {e}"))?;
                    if !matches!(database(u), "" | "0") {
                        return Err(format!(
                            "{at} {u:?}: a Redis Cluster has only database 0; drop the /{}",
                            database(u)
                        ));
                    }
                    if nodes[..i].contains(u) {
                        return Err(format!("{at} {u:?} is listed twice"));
                    }
                }
                Ok(())
            }
        }
    }
}

/// `valkey://` spelled as redis-rs expects (`redis://`; the wire protocol is the same).
pub(crate) fn for_client(url: &str) -> String {
    url.replacen("valkey://", "redis://", 1)
}

fn check_scheme(u: &str) -> Result<(), String> {
    let rest = u
        .strip_prefix("redis://")
        .or_else(|| u.strip_prefix("valkey://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
        _ => Err(format!("{u:?}: expected redis://HOST:PORT")),
    }
}

/// The path after `HOST:PORT` (the database number), without its slash.
fn database(u: &str) -> &str {
    let rest = u.split_once("://").map_or(u, |(_, r)| r);
    rest.split_once('/').map_or("", |(_, db)| db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_and_clusters_are_checked_with_the_key_named() {
        assert!(Endpoint::Server("redis://h:1/2".into()).validate().is_ok());
        assert!(Endpoint::Server("valkey://h:1".into()).validate().is_ok());
        let e = Endpoint::Server("http://h".into()).validate().unwrap_err();
        assert!(e.starts_with("store.remote.url"), "{e}");
        assert!(Endpoint::Server("redis://".into()).validate().is_err());
        let c = |v: &[&str]| Endpoint::Cluster(v.iter().map(|s| s.to_string()).collect());
        assert!(c(&["redis://a:1", "valkey://b:2/0"]).validate().is_ok());
        for (bad, says) in [
            (c(&[]), "1..=64"),
            (c(&["redis://a:1", "http://b"]), "cluster[1]"),
            (c(&["redis://a:1/3"]), "only database 0"),
            (c(&["redis://a:1", "redis://a:1"]), "twice"),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(
                e.contains(says) && e.contains("store.remote.cluster"),
                "{e}"
            );
        }
        let many: Vec<String> = (0..65).map(|i| format!("redis://h:{i}")).collect();
        assert!(Endpoint::Cluster(many).validate().is_err());
        assert_eq!(
            c(&["redis://a:1", "redis://b:2"]).describe(),
            "cluster redis://a:1, redis://b:2"
        );
        assert_eq!(for_client("valkey://h:1"), "redis://h:1");
    }
}
