//! Where the router itself sent each prefix lately: a request's first routing key noted on the
//! backend it went to, as a cache-aware router inserts a prompt into its tree when it routes
//! it (SGLang), not when the host reports it. Requests that share a prefix and arrive together
//! then meet on one host, which computes the prefix once while the others wait for it, instead
//! of the load weighting sending some to a host that has nothing yet. Entries expire after
//! [`RECENT_TTL`] (by then the host's events, or its cache, speak for it) and are bounded.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;

/// How long a routed prefix counts as held by the backend it went to.
pub const RECENT_TTL: Duration = Duration::from_secs(30);

/// Most prefixes remembered per backend.
const MAX_RECENT: usize = 1 << 16;

/// One backend's recently routed prefixes: first routing key → (when, blocks).
#[derive(Debug, Default)]
pub struct Recent {
    keys: HashMap<BlockHash, (Instant, usize)>,
    order: VecDeque<BlockHash>,
}

impl Recent {
    /// Notes that a prompt of `blocks` full blocks starting with `key` went here at `now`.
    pub fn note(&mut self, key: BlockHash, blocks: usize, now: Instant) {
        if self.keys.insert(key, (now, blocks)).is_none() {
            self.order.push_back(key);
        }
        while self.keys.len() > MAX_RECENT {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.keys.remove(&old);
        }
    }

    /// The blocks of the prefix starting with `key` routed here within the TTL, else 0.
    pub fn matched(&self, key: &BlockHash, now: Instant) -> usize {
        match self.keys.get(key) {
            Some(&(at, blocks)) if now.saturating_duration_since(at) <= RECENT_TTL => blocks,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routed_prefix_counts_until_it_expires() {
        let mut r = Recent::default();
        let t = Instant::now();
        let (a, b) = (BlockHash([1; 32]), BlockHash([2; 32]));
        r.note(a, 5, t);
        assert_eq!(r.matched(&a, t), 5);
        assert_eq!(r.matched(&b, t), 0);
        assert_eq!(r.matched(&a, t + RECENT_TTL + Duration::from_secs(1)), 0);
        r.note(a, 7, t + RECENT_TTL);
        assert_eq!(r.matched(&a, t + RECENT_TTL + Duration::from_secs(1)), 7);
    }
}
