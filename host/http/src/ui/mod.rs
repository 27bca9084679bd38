//! `GET /ui`: the status page, one self-contained HTML document (its CSS and script embedded,
//! nothing fetched but `/stats`) that refreshes every second from `/stats`. The page itself holds
//! no figures, so it is served to anyone; the figures come from `/stats`, which needs the admin
//! key on a host with keys: the page asks for it, keeps it in the tab's `sessionStorage` and
//! sends it as `Authorization: Bearer` (or takes it from a `#key=` fragment, which browsers never
//! send to the server, and removes the fragment at once). A strict Content-Security-Policy keeps
//! the page from reaching anything but this host.

use std::sync::LazyLock;

use http::{HeaderValue, StatusCode, header};

use crate::body::{Response, bytes_response};

const HTML: &str = include_str!("page.html");
const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// The policy: only same-origin fetches; inline style and script only (the page's own).
const CSP: &str = "default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; \
                   script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

static PAGE: LazyLock<String> =
    LazyLock::new(|| HTML.replacen("/*CSS*/", CSS, 1).replacen("/*JS*/", JS, 1));

/// The page.
pub fn page() -> Response {
    let mut r = bytes_response(StatusCode::OK, "text/html; charset=utf-8", PAGE.as_str());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_embeds_its_style_and_script_and_loads_nothing_else() {
        assert!(!PAGE.contains("/*CSS*/") && !PAGE.contains("/*JS*/"));
        assert!(PAGE.contains("#hit-rate-line") && PAGE.contains("fetch(\"/stats\""));
        for outside in ["http://", "https://", "src=", "<link"] {
            let hits: Vec<&str> = PAGE
                .lines()
                .filter(|l| l.contains(outside) && !l.contains("www.w3.org/2000/svg"))
                .collect();
            assert!(hits.is_empty(), "{outside}: {hits:?}");
        }
        let r = page();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(
            r.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .is_ok_and(|v| v.contains("connect-src 'self'"))
        );
    }
}
