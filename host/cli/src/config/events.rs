//! `[store.remote] events = true` and its keys: host events for `memoria route --events` (see
//! `memoria_store::remote::events`). `advertise` (default `http://` + the listening address)
//! is the URL routers know this host by; `host_id` (default: derived from `advertise`) names
//! its stream and liveness key; `events_maxlen` bounds the stream; `liveness_ttl_s` is how
//! long the host stays in routers' tables after its last refresh.

use memoria_store::RemoteOptions;

use super::remote::RawRemote;

/// Events settings before the listening address is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventsSettings {
    pub advertise: Option<String>,
    pub host_id: Option<String>,
    pub maxlen: u64,
    pub liveness_ttl_s: u64,
}

impl EventsSettings {
    /// The publisher's settings, `listening` filling in what was not configured.
    pub fn complete(
        &self,
        listening: std::net::SocketAddr,
    ) -> memoria_store::remote::events::EventsConfig {
        let advertise = self
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{listening}"));
        let host_id = self
            .host_id
            .clone()
            .unwrap_or_else(|| memoria_store::remote::events::host_id_from(&advertise));
        memoria_store::remote::events::EventsConfig {
            host_id,
            advertise: advertise.trim_end_matches('/').to_string(),
            maxlen: self.maxlen,
            liveness_ttl_s: self.liveness_ttl_s,
        }
    }
}

/// The settings when `events = true` (which needs a remote endpoint); checked now, as far as
/// they can be before the listening address is known.
pub fn resolve(
    raw: Option<&RawRemote>,
    remote: Option<&RemoteOptions>,
) -> anyhow::Result<Option<EventsSettings>> {
    let Some(r) = raw.filter(|r| r.events == Some(true)) else {
        return Ok(None);
    };
    if remote.is_none() {
        anyhow::bail!("store.remote.events needs store.remote.url (or --remote)");
    }
    let s = EventsSettings {
        advertise: r.advertise.clone(),
        host_id: r.host_id.clone(),
        maxlen: r.events_maxlen.unwrap_or(10_000),
        liveness_ttl_s: r.liveness_ttl_s.unwrap_or(3),
    };
    let probe = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
    s.complete(probe)
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RawConfig;

    fn settings(text: &str) -> anyhow::Result<Option<EventsSettings>> {
        let raw = RawConfig::parse(text)?;
        let key = super::super::remote::test_key_file();
        let remote =
            super::super::remote::resolve(raw.store.remote.as_ref(), None, &[], Some(&key))?;
        resolve(raw.store.remote.as_ref(), remote.as_ref())
    }

    #[test]
    fn events_default_to_the_listening_address_and_are_checked() {
        let s = settings("[store.remote]\nurl = \"redis://h:1\"\nevents = true\n")
            .unwrap()
            .unwrap();
        let c = s.complete("10.0.0.5:8080".parse().unwrap());
        assert_eq!(
            (c.advertise.as_str(), c.host_id.as_str(), c.liveness_ttl_s),
            ("http://10.0.0.5:8080", "10.0.0.5_8080", 3)
        );
        let off = settings("[store.remote]\nurl = \"redis://h:1\"\n").unwrap();
        assert!(off.is_none());
        for (bad, says) in [
            ("host_id = \"a b\"", "host_id"),
            ("advertise = \"h:80\"", "advertise"),
            ("liveness_ttl_s = 0", "liveness_ttl_s"),
            ("events_maxlen = 1", "events_maxlen"),
        ] {
            let text = format!("[store.remote]\nurl = \"redis://h:1\"\nevents = true\n{bad}\n");
            let e = settings(&text).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
