//! `hit_timing`: whether the first token of a request served from cached blocks is held back to
//! the time a miss would have taken (`pad`), so that another tenant cannot tell from the time to
//! first token that a prompt was cached (Gu et al., ICML 2025), or released at once (`off`).
//! Default: `pad` for shared groups (their blocks are shared with other tenants), `off` for
//! isolated namespaces and `shared` ones (the default namespace among them).

use serde::Deserialize;

use crate::Isolation;

/// The `hit_timing` option of a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HitTiming {
    /// First tokens of hits are released no earlier than a miss's estimated first token.
    Pad,
    /// Hits are released as soon as they are ready.
    Off,
}

impl HitTiming {
    /// The option in effect: the configured one, else the default for `isolation`.
    pub fn resolve(configured: Option<HitTiming>, isolation: &Isolation) -> HitTiming {
        configured.unwrap_or(match isolation {
            Isolation::Group(_) => HitTiming::Pad,
            Isolation::Shared | Isolation::Isolated => HitTiming::Off,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_pad_by_default_and_the_option_wins() {
        let g = Isolation::Group("g".into());
        assert_eq!(HitTiming::resolve(None, &g), HitTiming::Pad);
        assert_eq!(HitTiming::resolve(None, &Isolation::Shared), HitTiming::Off);
        assert_eq!(
            HitTiming::resolve(None, &Isolation::Isolated),
            HitTiming::Off
        );
        assert_eq!(HitTiming::resolve(Some(HitTiming::Off), &g), HitTiming::Off);
        assert_eq!(
            HitTiming::resolve(Some(HitTiming::Pad), &Isolation::Isolated),
            HitTiming::Pad
        );
    }
}
