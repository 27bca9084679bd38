//! Isolation policy of a namespace and the K/V hash salt it implies: `shared` namespaces use the
//! common salt, `isolated` ones a salt of their own, `group:NAME` one salt per group.

use std::fmt;

use memoria_kv::NamespaceSalt;
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
    pub fn common_salt() -> NamespaceSalt {
        NamespaceSalt::derive("memoria salt v1 shared")
    }

    /// The salt for namespace `ns` under this policy (stable across hosts and restarts).
    pub fn salt(&self, ns: &str) -> NamespaceSalt {
        match self {
            Isolation::Shared => Self::common_salt(),
            Isolation::Isolated => NamespaceSalt::derive(&format!("memoria salt v1 isolated:{ns}")),
            Isolation::Group(g) => NamespaceSalt::derive(&format!("memoria salt v1 group:{g}")),
        }
    }
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
        let shared = Isolation::Shared;
        assert_eq!(shared.salt("a"), shared.salt("b"));
        let iso = Isolation::Isolated;
        assert_ne!(iso.salt("a"), iso.salt("b"));
        assert_ne!(iso.salt("a"), shared.salt("a"));
        let g = Isolation::parse("group:x").expect("group");
        assert_eq!(g.salt("a"), g.salt("b"));
        assert_ne!(
            g.salt("a"),
            Isolation::parse("group:y").expect("group").salt("a")
        );
        assert!(Isolation::parse("group:").is_err());
        assert!(Isolation::parse("open").is_err());
    }
}
