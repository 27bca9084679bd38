//! memoria-tenant: who a request belongs to. Namespaces with an isolation policy (which sets the
//! K/V hash salt), API keys, quotas and component limits, as plain validated data.
//!
//! Invariants: a namespace's salt and id are derived here from configuration only, never from a
//! request, and the salt goes straight into the registry table the engine owns
//! ([`Tenants::registry_table`]); API keys are kept as blake3 digests and looked up by digest.

mod hit_pad;
mod hit_timing;
mod isolation;
mod limits;
mod public;
mod registry;
mod speculation;

pub use hit_pad::{BUCKET, HitPad, MAX_PAD};
pub use hit_timing::HitTiming;
pub use isolation::{Isolation, MAX_LABEL, standalone};
pub use limits::{Limits, MAX_QUEUE, MAX_SLOTS, MAX_TOKENS};
pub use public::{MAX_PUBLIC_PREFIX_BYTES, MAX_PUBLIC_PREFIXES, PrefixFile, PublicPrefix};
pub use registry::{Namespace, NamespaceSpec, Tenants};
pub use speculation::{DEFAULT_DRAFT_MAX, DraftPolicy, MAX_DRAFT_MAX, SpeculationMode};

/// Why a tenant configuration is invalid; messages name the namespace and key to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TenantError {
    #[error("namespace name {0:?}: use 1-64 characters of a-z, 0-9, '-' or '_'")]
    BadName(String),
    #[error("namespace {0:?} is defined twice")]
    Duplicate(String),
    #[error("namespaces.{ns}.isolation: {why}")]
    BadIsolation { ns: String, why: String },
    #[error("namespaces.{ns}.api_keys: {why}")]
    BadKey { ns: String, why: String },
    #[error("namespaces.{ns}.public_prefixes: {why}")]
    BadPublicPrefix { ns: String, why: String },
    #[error("namespaces.{ns}.limits.{key}: {why}")]
    BadLimit {
        ns: String,
        key: &'static str,
        why: String,
    },
}
