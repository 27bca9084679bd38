//! The validated set of namespaces: ids, key digests, look-ups by name and by key, and the
//! namespace registry table they give the engine (where each salt is derived, once).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use memoria_kv::{NamespaceEntry, NamespaceId, NamespaceTable, SaltSecret};
use serde::Deserialize;

use crate::{HitTiming, Isolation, Limits, PublicPrefix, TenantError};

/// One namespace as configured (`[namespaces.NAME]` in host.toml).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceSpec {
    /// `shared`, `isolated` or `group:NAME`.
    #[serde(default = "default_isolation")]
    pub isolation: Isolation,
    /// Bearer keys that select this namespace (empty: open, when the host has no global key).
    #[serde(default)]
    pub api_keys: Vec<String>,
    /// Quotas and component limits.
    #[serde(default)]
    pub limits: Limits,
    /// The tenant's WebAssembly component, if it has one (serves every `/ns/NAME/...` path).
    #[serde(default)]
    pub component: Option<PathBuf>,
    /// Components by first path segment: `/ns/NAME/{key}/...` goes to `components[key]`
    /// (checked before `component`).
    #[serde(default)]
    pub components: BTreeMap<String, PathBuf>,
    /// Texts to prefill and pin at start-up.
    #[serde(default)]
    pub preload: Vec<String>,
    /// `pad` or `off`: whether hits' first tokens wait for a miss's time (see [`HitTiming`];
    /// unset: `pad` for shared groups, `off` otherwise).
    #[serde(default)]
    pub hit_timing: Option<HitTiming>,
    /// Prompt starts whose whole K/V blocks are shared with every namespace declaring the same
    /// text (isolated and group namespaces; see README "Public prefixes").
    #[serde(default)]
    pub public_prefixes: Vec<PublicPrefix>,
    /// `auto` or `off`: speculative decoding (see [`crate::SpeculationMode`]).
    #[serde(default)]
    pub speculation: crate::SpeculationMode,
    /// Most draft tokens verified per step (1 to 32; unset: 8).
    #[serde(default)]
    pub draft_max: Option<usize>,
}

impl NamespaceSpec {
    /// Whether this namespace pads the first token of its hits.
    pub fn pads_hits(&self) -> bool {
        HitTiming::resolve(self.hit_timing, &self.isolation) == HitTiming::Pad
    }

    /// How this namespace's generations draft: off, or up to `draft_max` tokens, from its
    /// group's memory too unless it pads its hits.
    pub fn draft_policy(&self) -> crate::DraftPolicy {
        match self.speculation {
            crate::SpeculationMode::Off => crate::DraftPolicy {
                max_draft: 0,
                group: false,
            },
            crate::SpeculationMode::Auto => crate::DraftPolicy {
                max_draft: self
                    .draft_max
                    .unwrap_or(crate::DEFAULT_DRAFT_MAX)
                    .min(crate::MAX_DRAFT_MAX),
                group: !self.pads_hits(),
            },
        }
    }
}

fn default_isolation() -> Isolation {
    Isolation::Isolated
}

/// A validated namespace with its host-derived id (its salt lives in the registry table only,
/// see [`Tenants::registry_table`]).
#[derive(Debug)]
pub struct Namespace {
    pub id: NamespaceId,
    pub name: String,
    pub spec: NamespaceSpec,
    /// The texts of `spec.public_prefixes`, read at configuration load.
    pub public_prefixes: Vec<String>,
}

/// Every namespace of a host.
#[derive(Debug, Default)]
pub struct Tenants {
    by_name: HashMap<String, Arc<Namespace>>,
    by_key: HashMap<[u8; 32], Arc<Namespace>>,
    ordered: Vec<Arc<Namespace>>,
    /// The host secret salts are derived with (see `isolation`), if it has one.
    salt_secret: Option<SaltSecret>,
}

fn key_digest(key: &str) -> [u8; 32] {
    *blake3::hash(key.as_bytes()).as_bytes()
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Tenants {
    /// Validates `specs` (in order; ids are assigned 1, 2, ... in that order).
    pub fn new(specs: Vec<(String, NamespaceSpec)>) -> Result<Tenants, TenantError> {
        let mut t = Tenants::default();
        for (i, (name, spec)) in specs.into_iter().enumerate() {
            if !valid_name(&name) {
                return Err(TenantError::BadName(name));
            }
            if t.by_name.contains_key(&name) {
                return Err(TenantError::Duplicate(name));
            }
            spec.limits.validate(&name)?;
            crate::speculation::validate(&name, spec.draft_max)?;
            if spec.isolation == Isolation::Shared && !spec.public_prefixes.is_empty() {
                return Err(TenantError::BadPublicPrefix {
                    ns: name,
                    why: "a shared namespace already shares every block; declare public prefixes on isolated or group namespaces".into(),
                });
            }
            let public_prefixes = crate::public::resolve(&name, &spec.public_prefixes)?;
            let ns = Arc::new(Namespace {
                public_prefixes,
                id: NamespaceId(u32::try_from(i + 1).unwrap_or(u32::MAX)),
                name: name.clone(),
                spec,
            });
            for key in &ns.spec.api_keys {
                if key.trim().is_empty() {
                    return Err(TenantError::BadKey {
                        ns: name,
                        why: "a key is empty".into(),
                    });
                }
                if t.by_key.insert(key_digest(key), ns.clone()).is_some() {
                    return Err(TenantError::BadKey {
                        ns: name,
                        why: "the same key is given to two namespaces".into(),
                    });
                }
            }
            t.by_name.insert(name, ns.clone());
            t.ordered.push(ns);
        }
        Ok(t)
    }

    /// The namespace called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Namespace>> {
        self.by_name.get(name)
    }

    /// The namespace a bearer key belongs to.
    pub fn by_key(&self, key: &str) -> Option<&Arc<Namespace>> {
        self.by_key.get(&key_digest(key))
    }

    /// All namespaces in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Namespace>> {
        self.ordered.iter()
    }

    /// Number of namespaces.
    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }

    /// The namespace registry table to register with the engine: each namespace's id, public
    /// label, salt (derived from its isolation policy and name), priority and block cap, and
    /// the common salt public prefixes are keyed under.
    pub fn registry_table(&self) -> NamespaceTable {
        let secret = self.salt_secret.as_ref();
        NamespaceTable::new(
            Some(Isolation::common_salt(secret)),
            self.ordered.iter().map(|ns| ns.registry_entry(secret)),
        )
    }

    /// These namespaces with their salts derived from `secret` as well as their names (a host
    /// with a remote tier: see `isolation`).
    pub fn with_salt_secret(mut self, secret: Option<SaltSecret>) -> Tenants {
        self.salt_secret = secret;
        self
    }
}

impl Namespace {
    /// This namespace's registry entry, its salt derived with `secret` when there is one.
    fn registry_entry(&self, secret: Option<&SaltSecret>) -> NamespaceEntry {
        let iso = &self.spec.isolation;
        NamespaceEntry::new(self.id, iso.label(&self.name), iso.salt(&self.name, secret))
            .with_policy(self.spec.limits.priority, self.spec.limits.max_blocks)
    }

    /// Whether `key` is one of this namespace's keys.
    pub fn accepts_key(&self, key: &str) -> bool {
        let d = key_digest(key);
        self.spec.api_keys.iter().any(|k| key_digest(k) == d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(toml_text: &str) -> NamespaceSpec {
        toml::from_str(toml_text).expect("spec")
    }

    #[test]
    fn registry_validates_and_looks_up() {
        let t = Tenants::new(vec![
            (
                "alpha".into(),
                spec("isolation = \"isolated\"\napi_keys = [\"alpha-key-1\"]"),
            ),
            ("gamma".into(), spec("isolation = \"group:shared\"")),
            ("delta".into(), spec("isolation = \"group:shared\"")),
        ])
        .expect("valid");
        assert_eq!(t.len(), 3);
        assert_eq!(
            t.by_key("alpha-key-1").map(|n| n.name.as_str()),
            Some("alpha")
        );
        assert!(t.by_key("nope-nope-nope").is_none());
        let table = t.registry_table();
        let salt = |name: &str| t.get(name).and_then(|n| table.salt(n.id));
        assert_eq!(salt("gamma"), salt("delta"));
        assert!(salt("gamma").is_some());
        assert_ne!(salt("alpha"), salt("gamma"));
        assert_eq!(salt("alpha"), Some(Isolation::Isolated.salt("alpha", None)));
        let alpha = t.get("alpha").and_then(|n| table.get(n.id));
        assert_eq!(alpha.map(|e| e.label.as_str()), Some("alpha"));
        let gamma = t.get("gamma").and_then(|n| table.get(n.id));
        assert_eq!(gamma.map(|e| e.label.as_str()), Some("group.shared"));
        assert_eq!(table.common_salt(), Some(Isolation::common_salt(None)));
        // With the host's secret, every salt is derived from it too.
        let secret = memoria_kv::SaltSecret::new([7; 32]);
        let alpha_id = t.get("alpha").map(|n| n.id).expect("alpha");
        let t = t.with_salt_secret(Some(secret));
        let keyed = t.registry_table();
        assert_eq!(
            keyed.salt(alpha_id),
            Some(Isolation::Isolated.salt("alpha", Some(&secret)))
        );
        assert_ne!(keyed.salt(alpha_id), table.salt(alpha_id));
        assert_eq!(
            keyed.common_salt(),
            Some(Isolation::common_salt(Some(&secret)))
        );
        assert!(t.get("alpha").is_some_and(|n| n.accepts_key("alpha-key-1")));
        assert!(t.get("gamma").is_some_and(|n| n.spec.pads_hits()));
        assert!(!t.get("alpha").is_some_and(|n| n.spec.pads_hits()));
        assert!(!spec("isolation = \"group:g\"\nhit_timing = \"off\"").pads_hits());
        assert!(spec("hit_timing = \"pad\"").pads_hits());
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let err = Tenants::new(vec![("Bad Name".into(), spec(""))]).expect_err("bad name");
        assert!(err.to_string().contains("Bad Name"));
        let err =
            toml::from_str::<NamespaceSpec>("isolation = \"open\"").expect_err("bad isolation");
        assert!(
            err.to_string().contains("shared, isolated or group:NAME"),
            "{err}"
        );
        let err = toml::from_str::<NamespaceSpec>("hit_timing = \"on\"").expect_err("bad timing");
        assert!(err.to_string().contains("pad"), "{err}");
        let err = toml::from_str::<NamespaceSpec>("colour = 1").expect_err("unknown key");
        assert!(err.to_string().contains("colour"), "{err}");
        let err = Tenants::new(vec![("a".into(), spec("[limits]\nmax_concurrent = 0"))])
            .expect_err("limit");
        assert_eq!(
            err.to_string(),
            "namespaces.a.limits.max_concurrent: 0 is out of range: use 1 to 65536"
        );
        let dup = spec("api_keys = [\"same-key-123\"]");
        let err =
            Tenants::new(vec![("a".into(), dup.clone()), ("b".into(), dup)]).expect_err("dup key");
        assert!(matches!(err, TenantError::BadKey { .. }));
        let err = Tenants::new(vec![(
            "s".into(),
            spec("isolation = \"shared\"\npublic_prefixes = [\"You are helpful.\"]"),
        )])
        .expect_err("public on shared");
        assert!(matches!(err, TenantError::BadPublicPrefix { .. }), "{err}");
        let t = Tenants::new(vec![(
            "i".into(),
            spec("public_prefixes = [\"You are helpful.\"]"),
        )])
        .expect("isolated may declare");
        assert_eq!(
            t.get("i").map(|n| n.public_prefixes.clone()),
            Some(vec!["You are helpful.".to_string()])
        );
    }
}
