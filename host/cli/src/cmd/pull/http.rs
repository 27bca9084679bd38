//! Resumable HTTP(S) download into a `.part` file: a partial file left by an interrupted run is
//! continued with a `Range` request (and started over when the server ignores or refuses it).
//! Redirects are followed; a bearer token goes only to the host it was given for.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use ureq::config::RedirectAuthHeaders;
use ureq::http::{StatusCode, header};

use super::progress;

/// A response status that ends the download (the error `download` returns for it).
#[derive(Debug)]
pub struct HttpStatus {
    pub url: String,
    pub status: StatusCode,
}

impl std::fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: HTTP {}", self.url, self.status)
    }
}

impl std::error::Error for HttpStatus {}

/// Downloads `url` into `part`, continuing what `part` already holds, sending `bearer` (if any)
/// as `Authorization: Bearer` to `url`'s host (and redirects to that host, not to others).
/// Returns the file's size.
pub fn download(url: &str, part: &Path, bearer: Option<&str>) -> anyhow::Result<u64> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .redirect_auth_headers(RedirectAuthHeaders::SameHost)
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .user_agent(concat!("memoria/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    for _attempt in 0..2 {
        let have = std::fs::metadata(part).map_or(0, |m| m.len());
        let mut req = agent.get(url);
        if have > 0 {
            req = req.header(header::RANGE, format!("bytes={have}-"));
        }
        if let Some(token) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let resp = req.call().with_context(|| format!("requesting {url}"))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let length = match headers.get(header::CONTENT_LENGTH) {
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .with_context(|| format!("{url}: bad Content-Length {v:?}"))?,
            ),
            None => None,
        };
        let start = match status {
            StatusCode::OK => 0,
            StatusCode::PARTIAL_CONTENT if have > 0 => {
                let from = content_range_start(&headers)
                    .with_context(|| format!("{url}: 206 without a valid Content-Range"))?;
                if from != have {
                    bail!("{url}: asked for bytes from {have}, the server sent from {from}");
                }
                have
            }
            StatusCode::RANGE_NOT_SATISFIABLE if have > 0 => {
                eprintln!(
                    "pull: the server refused to continue the partial download ({have} bytes); starting over"
                );
                std::fs::remove_file(part)
                    .with_context(|| format!("removing {}", part.display()))?;
                continue;
            }
            status => {
                return Err(HttpStatus {
                    url: url.to_string(),
                    status,
                }
                .into());
            }
        };
        let total = length.map(|l| start + l);
        if start > 0 {
            eprintln!("pull: resuming {url} at byte {start}");
        } else {
            match total {
                Some(t) => eprintln!("pull: downloading {url} ({t} bytes)"),
                None => eprintln!("pull: downloading {url} (size not given)"),
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(part)
            .with_context(|| format!("opening {}", part.display()))?;
        file.set_len(start)
            .and_then(|_| file.seek(SeekFrom::Start(start)).map(|_| ()))
            .with_context(|| format!("preparing {}", part.display()))?;
        let bar = progress::bytes(total.unwrap_or(0), "downloading");
        bar.set_position(start);
        let mut body = resp.into_body().into_reader();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = start;
        loop {
            let n = match body.read(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    bar.abandon();
                    file.flush().ok();
                    bail!(
                        "the download of {url} was interrupted after {got} bytes ({e}); {} keeps them: run the same command again to resume",
                        part.display()
                    );
                }
            };
            if n == 0 {
                break;
            }
            file.write_all(&buf[..n])
                .with_context(|| format!("writing {}", part.display()))?;
            got += n as u64;
            bar.set_position(got);
        }
        file.sync_all()
            .with_context(|| format!("writing {}", part.display()))?;
        bar.finish_and_clear();
        if let Some(t) = total
            && got != t
        {
            bail!("{url}: expected {t} bytes, received {got}; run again to resume");
        }
        return Ok(got);
    }
    bail!("{url}: the server keeps refusing the download range")
}

/// The first byte of a `Content-Range: bytes FROM-TO/TOTAL` header.
fn content_range_start(h: &ureq::http::HeaderMap) -> Option<u64> {
    let v = h.get(header::CONTENT_RANGE)?.to_str().ok()?;
    let range = v.trim().strip_prefix("bytes ")?;
    let (from, _) = range.split_once('-')?;
    from.trim().parse().ok()
}
