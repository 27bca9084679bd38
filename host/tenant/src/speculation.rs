//! A namespace's speculative decoding (`speculation = "auto" | "off"`, `draft_max`): whether its
//! generations draft tokens for the engine to verify, how many at most, and from what. Drafts
//! come from the session's own context and from the memory of its isolation group (the
//! namespaces sharing its salt); a namespace that pads its hits' timing (`hit_timing = "pad"`)
//! drafts from its own context only, since how fast a group-memory draft is accepted would show
//! what others of the group wrote. Speculation never changes a token, only the speed.

use serde::Deserialize;

use crate::TenantError;

/// The `speculation` option of a namespace (default `auto`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeculationMode {
    /// Draft where it pays: each session's draft length follows its acceptance.
    #[default]
    Auto,
    /// One token per step.
    Off,
}

/// The most draft tokens `draft_max` allows per step.
pub const MAX_DRAFT_MAX: usize = 32;
/// `draft_max` when unset.
pub const DEFAULT_DRAFT_MAX: usize = 8;

/// How a namespace's generations draft, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DraftPolicy {
    /// Most draft tokens per step (0: off).
    pub max_draft: usize,
    /// Whether drafts may come from the isolation group's memory.
    pub group: bool,
}

/// Checks `draft_max` (1 to [`MAX_DRAFT_MAX`]).
pub(crate) fn validate(ns: &str, draft_max: Option<usize>) -> Result<(), TenantError> {
    match draft_max {
        Some(n) if !(1..=MAX_DRAFT_MAX).contains(&n) => Err(TenantError::BadLimit {
            ns: ns.to_string(),
            key: "draft_max",
            why: format!("{n} is out of range: use 1 to {MAX_DRAFT_MAX}"),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::{DraftPolicy, NamespaceSpec, Tenants};

    fn spec(text: &str) -> NamespaceSpec {
        toml::from_str(text).expect("spec")
    }

    #[test]
    fn the_policy_follows_the_mode_the_length_and_the_padding() {
        let on = |max_draft, group| DraftPolicy { max_draft, group };
        assert_eq!(spec("").draft_policy(), on(8, true));
        assert_eq!(spec("draft_max = 3").draft_policy(), on(3, true));
        assert_eq!(spec("speculation = \"off\"").draft_policy(), on(0, false));
        // A padded namespace drafts from its own context only.
        assert_eq!(spec("hit_timing = \"pad\"").draft_policy(), on(8, false));
        assert_eq!(
            spec("isolation = \"group:g\"").draft_policy(),
            on(8, false),
            "groups pad by default"
        );
        assert!(toml::from_str::<NamespaceSpec>("speculation = \"fast\"").is_err());
    }

    #[test]
    fn an_out_of_range_draft_max_names_the_key() {
        for bad in ["draft_max = 0", "draft_max = 33"] {
            let e = Tenants::new(vec![("a".into(), spec(bad))]).expect_err(bad);
            let msg = e.to_string();
            assert!(
                msg.contains("draft_max") && msg.contains("1 to 32"),
                "{msg}"
            );
        }
    }
}
