//! A host's liveness value: `{"addr": "http://host:port", "load": N, "epoch": E}`, written with
//! a short TTL and parsed back strictly (a value that is not this shape is no host).

use serde::{Deserialize, Serialize};

/// Longest accepted address, bytes.
const MAX_ADDR: usize = 256;

/// What a liveness key holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Liveness {
    /// The base URL routers know the host by (`--backend`).
    pub addr: String,
    /// Requests queued on the host (engine queue plus admission queues).
    pub load: u64,
    /// The host's current epoch (its events' `epoch`).
    pub epoch: u64,
}

impl Liveness {
    /// The value to store.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a stored value; None unless it is exactly this shape with a plausible address.
    pub fn parse(bytes: &[u8]) -> Option<Liveness> {
        let l: Liveness = serde_json::from_slice(bytes).ok()?;
        (!l.addr.is_empty() && l.addr.len() <= MAX_ADDR && l.addr.is_ascii()).then_some(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let l = Liveness {
            addr: "http://127.0.0.1:9".into(),
            load: 3,
            epoch: 17,
        };
        assert_eq!(Liveness::parse(l.encode().as_bytes()), Some(l));
        for bad in [
            &b"{}"[..],
            b"nonsense",
            b"{\"addr\":\"\",\"load\":1,\"epoch\":1}",
            b"{\"addr\":\"h\",\"load\":-1,\"epoch\":1}",
            b"{\"addr\":\"h\",\"load\":1,\"epoch\":1,\"tokens\":[1]}",
        ] {
            assert_eq!(
                Liveness::parse(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
