//! Cross-origin requests from browsers (CORS): which origins may read this host's answers, the
//! preflight answer (`OPTIONS` on any path, given without a key since browsers never send one
//! there), and the headers added to every other response. Invariant: CORS only decides what a
//! browser lets a page read; a keyed host still refuses every request without its key.

use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::body::{Response, bytes_response};

/// The origins a browser page may call from (`--cors-origins`, `[server] cors_origins`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// Any origin (`*`, the default, as llama-server): the request's `Origin` is echoed back.
    #[default]
    Any,
    /// Pages served from this machine only (`localhost`): `localhost`, `127.0.0.1`, `[::1]`.
    Localhost,
    /// These origins exactly (`https://app.example.com,...`); `none` or an empty list: no page.
    List(Vec<String>),
}

impl CorsOrigins {
    /// Reads the flag's value: `*`, `localhost`, `none`, or comma-separated origins.
    pub fn parse(s: &str) -> Result<CorsOrigins, String> {
        let s = s.trim();
        match s {
            "*" => return Ok(CorsOrigins::Any),
            "localhost" => return Ok(CorsOrigins::Localhost),
            "" | "none" => return Ok(CorsOrigins::List(Vec::new())),
            _ => {}
        }
        let mut out = Vec::new();
        for o in s.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            if o == "*" || o == "localhost" {
                return Err(format!(
                    "{o:?} cannot be combined with other origins (use it alone)"
                ));
            }
            if !(o.starts_with("http://") || o.starts_with("https://")) || o.len() > 256 {
                return Err(format!(
                    "{o:?} is not an origin (scheme://host[:port], e.g. https://app.example.com)"
                ));
            }
            out.push(o.trim_end_matches('/').to_ascii_lowercase());
        }
        Ok(CorsOrigins::List(out))
    }

    /// Whether a page from `origin` may read the answers.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            CorsOrigins::Any => true,
            CorsOrigins::Localhost => is_localhost(origin),
            CorsOrigins::List(v) => {
                let o = origin.trim_end_matches('/').to_ascii_lowercase();
                v.contains(&o)
            }
        }
    }
}

/// Whether `origin` (`scheme://host[:port]`) names this machine.
fn is_localhost(origin: &str) -> bool {
    let Some((_, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, tail)) if tail.is_empty() || tail.starts_with(':') => {
                return h == "::1";
            }
            _ => return false,
        }
    } else {
        rest.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1"
}

/// The methods a preflight allows.
const METHODS: &str = "GET, POST, DELETE, OPTIONS";

/// The `Origin` a request came with, when a browser sent one that `origins` allows.
pub fn allowed_origin(origins: &CorsOrigins, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    origins.allows(text).then(|| origin.clone())
}

/// The answer to a preflight (`OPTIONS`): 200, empty, with the allowed methods and the headers
/// the browser asked for (`Authorization` cannot be allowed by `*`, so the list is echoed).
pub fn preflight(origin: Option<HeaderValue>, request: &HeaderMap) -> Response {
    let mut resp = bytes_response(StatusCode::OK, "text/plain", "");
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(METHODS),
    );
    let asked = request
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .filter(|v| !v.as_bytes().trim_ascii().is_empty())
        .cloned()
        .unwrap_or(HeaderValue::from_static("*"));
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    decorate(&mut resp, origin);
    resp
}

/// Adds the CORS headers of an allowed origin to any response.
pub fn decorate(resp: &mut Response, origin: Option<HeaderValue>) {
    let h = resp.headers_mut();
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    let Some(origin) = origin else { return };
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("*"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_match() {
        assert_eq!(CorsOrigins::parse("*").expect("any"), CorsOrigins::Any);
        let local = CorsOrigins::parse("localhost").expect("localhost");
        for ok in [
            "http://localhost",
            "http://localhost:8080",
            "http://127.0.0.1",
            "http://127.0.0.1:3000",
            "http://[::1]",
            "http://[::1]:3000",
        ] {
            assert!(local.allows(ok), "{ok}");
        }
        for bad in [
            "http://web.mydomain.fr",
            "http://notlocalhost",
            "http://localhost.evil.com",
            "http://[::1].evil.com",
            "localhost",
        ] {
            assert!(!local.allows(bad), "{bad}");
        }
        let list = CorsOrigins::parse("https://a.example, http://b.example:81/").expect("list");
        assert!(list.allows("https://a.example"));
        assert!(list.allows("http://B.example:81"));
        assert!(!list.allows("https://c.example"));
        assert!(!CorsOrigins::parse("none").expect("none").allows("http://x"));
        assert!(CorsOrigins::parse("ftp://x").is_err());
        assert!(CorsOrigins::parse("*,http://x").is_err());
    }
}
