//! Header forwarding: everything end to end (Authorization included) passes both ways; the
//! hop-by-hop headers (RFC 9110 §7.6.1, and any the `Connection` header names) stay on their
//! hop, and `Host`/`Content-Length` are set for the upstream request.

use hyper::HeaderMap;
use hyper::header::{self, HeaderName};

const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The end-to-end headers of `from`, without `Host` and `Content-Length` when `request`.
pub fn end_to_end(from: &HeaderMap, request: bool) -> HeaderMap {
    let named: Vec<String> = from
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    let mut out = HeaderMap::with_capacity(from.len());
    for (k, v) in from {
        let name = k.as_str();
        let dropped = HOP_BY_HOP.contains(&name)
            || named.iter().any(|n| n == name)
            || (request && (k == header::HOST || k == header::CONTENT_LENGTH));
        if !dropped {
            out.append(HeaderName::clone(k), v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn hop_by_hop_headers_stay() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer k"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("host", "router"),
            ("content-length", "12"),
            ("content-type", "application/json"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let req = end_to_end(&h, true);
        let names: Vec<&str> = req.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["authorization", "content-type"]);
        let resp = end_to_end(&h, false);
        assert!(resp.contains_key("content-length") && resp.contains_key("host"));
        assert!(!resp.contains_key("x-private"));
    }
}
