//! `[server]` keys and flags about the listener: the address `--host` names, and the
//! connection limits (head and body timeouts, the slowest body rate, connections at once).

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context, bail};

use super::file;

/// The address `--host` names: an IP address, or a name such as `localhost` (its first
/// address).
pub(super) fn host_ip(host: &str) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    let bad = || {
        format!(
            "server.host / --host: {host:?} is neither an IP address (e.g. 127.0.0.1 or 0.0.0.0) nor a name this machine resolves"
        )
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    use std::net::ToSocketAddrs;
    let mut addrs = (host, 0u16).to_socket_addrs().with_context(bad)?;
    addrs
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| anyhow::anyhow!(bad()))
}

/// `[server] header_timeout_s`, `body_timeout_s`, `min_body_bytes_per_s` and
/// `max_connections`, checked.
pub(super) fn connection_limits(
    s: &file::RawServer,
) -> anyhow::Result<(Duration, Duration, u64, usize)> {
    const MAX_TIMEOUT_S: u64 = 3600;
    let mut secs = [30u64; 2];
    for (i, (key, v)) in [
        ("header_timeout_s", s.header_timeout_s),
        ("body_timeout_s", s.body_timeout_s),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(t) = v {
            if !(1..=MAX_TIMEOUT_S).contains(&t) {
                bail!("server.{key} = {t}: use 1 to {MAX_TIMEOUT_S}");
            }
            secs[i] = t;
        }
    }
    let rate = s.min_body_bytes_per_s.unwrap_or(1024);
    if rate == 0 {
        bail!("server.min_body_bytes_per_s: must be at least 1");
    }
    let max_connections = s.max_connections.unwrap_or(1024);
    if !(1..=1 << 20).contains(&max_connections) {
        bail!(
            "server.max_connections = {max_connections}: use 1 to {}",
            1 << 20
        );
    }
    Ok((
        Duration::from_secs(secs[0]),
        Duration::from_secs(secs[1]),
        rate,
        max_connections,
    ))
}
