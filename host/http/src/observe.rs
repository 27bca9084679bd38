//! A hook for watching served prompts: `memoria serve` installs one to publish the routing keys
//! of what its pool now holds (host events). Called on the request's task after a
//! chat or completion request was answered 2xx; it must return at once (queue, never block).

use bytes::Bytes;
use memoria_tenant::Namespace;

/// Watches chat and completion requests a host answered.
pub trait PromptObserver: Send + Sync {
    /// A request in `ns` was answered 2xx: `label` is its route label (`""` for `/v1/...`, the
    /// namespace of `/ns/{namespace}/v1/...`), `path` the API path (`/v1/completions`), `body`
    /// the request body.
    fn served(&self, ns: &Namespace, label: &str, path: &str, body: &Bytes);

    /// Counters: `(name, help, value)`, exposed as `memoria_events_{name}_total` in `/metrics`
    /// and `events.{name}` in `/stats`.
    fn counters(&self) -> Vec<(&'static str, &'static str, u64)>;
}
