//! Isolation policy of a namespace and the K/V hash salt it implies: `shared` namespaces use the
//! common salt, `isolated` ones a salt of their own, `group:NAME` one salt per group. The salts
//! are derived here only, to fill the host's namespace registry ([`crate::Tenants::registry_table`],
//! [`standalone`]); nothing else derives one. A host with a remote tier derives them from its
//! secret as well as the policy and name ([`SaltSecret`], from the tier's key file), so a salt
//! cannot be computed from a namespace's name, and hosts share blocks only when they share the
//! secret; without one (no block hash leaves the host) they are derived from the name alone.

use std::fmt;

use memoria_kv::{NamespaceEntry, NamespaceId, NamespaceSalt, SaltSecret};
use serde::{Deserialize, Deserializer};

/// Who may share cached K/V blocks with a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Shares blocks with every other `shared` namespace.
    Shared,
    /// Shares with nobody.
    Isolated,
    /// Shares with the namespaces of the same group.
    Group(String),
}

impl Isolation {
    /// Parses `shared`, `isolated` or `group:NAME`.
    pub fn parse(s: &str) -> Result<Isolation, String> {
        match s {
            "shared" => Ok(Isolation::Shared),
            "isolated" => Ok(Isolation::Isolated),
            _ => match s.strip_prefix("group:") {
                Some(g) if !g.is_empty() && g.len() <= 64 => Ok(Isolation::Group(g.to_string())),
                Some(_) => Err("a group name needs 1-64 characters, e.g. group:support".into()),
                None => Err(format!("{s:?}: use shared, isolated or group:NAME")),
            },
        }
    }

    /// The common salt: `shared` namespaces' blocks, and public prefixes' blocks.
    pub(crate) fn common_salt(secret: Option<&SaltSecret>) -> NamespaceSalt {
        derive(secret, "memoria salt v1 shared")
    }

    /// The salt for namespace `ns` under this policy (stable across restarts, and across hosts
    /// with the same secret).
    pub(crate) fn salt(&self, ns: &str, secret: Option<&SaltSecret>) -> NamespaceSalt {
        match self {
            Isolation::Shared => Self::common_salt(secret),
            Isolation::Isolated => derive(secret, &format!("memoria salt v1 isolated:{ns}")),
            Isolation::Group(g) => derive(secret, &format!("memoria salt v1 group:{g}")),
        }
    }
}

impl Isolation {
    /// The public label of namespace `ns` under this policy in remote keys: `shared`, the
    /// isolated namespace's name, or `group.NAME`, with characters outside `[A-Za-z0-9._-]`
    /// replaced by `_` and at most [`MAX_LABEL`] bytes.
    pub fn label(&self, ns: &str) -> String {
        let raw = match self {
            Isolation::Shared => "shared".to_string(),
            Isolation::Isolated => ns.to_string(),
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
            .take(MAX_LABEL)
            .collect();
        if l.is_empty() {
            l.push('_');
        }
        l
    }
}

/// A salt from `label`, keyed with the host's secret when it has one.
fn derive(secret: Option<&SaltSecret>, label: &str) -> NamespaceSalt {
    match secret {
        Some(s) => NamespaceSalt::derive_keyed(s, label),
        None => NamespaceSalt::derive(label),
    }
}

/// Longest public label, in bytes (the remote tier's key limit).
pub const MAX_LABEL: usize = 64;

/// The registry entry of the one namespace a single-process tool serves (`memoria run`, the
/// benches, the crash-test child): id `id`, keyed by the salt derived from `label`, which is
/// also its public label.
pub fn standalone(id: NamespaceId, label: &str) -> NamespaceEntry {
    NamespaceEntry::new(
        id,
        Isolation::Shared.label(label),
        NamespaceSalt::derive(label),
    )
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Isolation::Shared => f.write_str("shared"),
            Isolation::Isolated => f.write_str("isolated"),
            Isolation::Group(g) => write!(f, "group:{g}"),
        }
    }
}

impl<'de> Deserialize<'de> for Isolation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Isolation::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_follow_the_policy() {
        for secret in [None, Some(SaltSecret::new([5; 32]))] {
            let k = secret.as_ref();
            let shared = Isolation::Shared;
            assert_eq!(shared.salt("a", k), shared.salt("b", k));
            let iso = Isolation::Isolated;
            assert_ne!(iso.salt("a", k), iso.salt("b", k));
            assert_ne!(iso.salt("a", k), shared.salt("a", k));
            let g = Isolation::parse("group:x").expect("group");
            assert_eq!(g.salt("a", k), g.salt("b", k));
            assert_ne!(
                g.salt("a", k),
                Isolation::parse("group:y").expect("group").salt("a", k)
            );
        }
        assert!(Isolation::parse("group:").is_err());
        assert!(Isolation::parse("open").is_err());
    }

    #[test]
    fn a_secret_keeps_salts_from_being_derived_from_names() {
        let (a, b) = (SaltSecret::new([1; 32]), SaltSecret::new([2; 32]));
        let iso = Isolation::Isolated;
        assert_ne!(iso.salt("team", Some(&a)), iso.salt("team", None));
        assert_ne!(iso.salt("team", Some(&a)), iso.salt("team", Some(&b)));
        assert_eq!(iso.salt("team", Some(&a)), iso.salt("team", Some(&a)));
        assert_ne!(
            Isolation::common_salt(Some(&a)),
            Isolation::common_salt(None)
        );
    }

    #[test]
    fn labels_follow_the_policy_and_fit_remote_keys() {
        assert_eq!(Isolation::Shared.label("a"), "shared");
        assert_eq!(Isolation::Isolated.label("team-a"), "team-a");
        let g = Isolation::Group("x y".into());
        assert_eq!(g.label("a"), "group.x_y");
        assert_eq!(Isolation::Group("é".repeat(70)).label("a").len(), MAX_LABEL);
    }
}
