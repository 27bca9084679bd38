//! `memoria pull` of Hugging Face files against a 127.0.0.1 server laid out as the hub
//! (`/{owner}/{repo}/resolve/main/{file}`, reached through `HF_ENDPOINT`): every form of the
//! reference asks for the same path; redirects are followed (a renamed repository on the same
//! host, then the file store on another host); `HF_TOKEN` goes to the hub's host and not to the
//! other one; refusals say what to do and leave nothing behind.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use crate::shared;

/// Every request the hub saw: its path and its Authorization header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A hub on 127.0.0.1: `old/repo` redirects (307, same host) to `owner/repo`, whose files
/// redirect (302) to `http://localhost:PORT/cdn/NAME` (another host name for the same server),
/// which serves `body`; `gated/repo` answers 401; anything else 404.
struct Hub {
    endpoint: String,
    seen: Seen,
}

impl Hub {
    fn start(body: Vec<u8>) -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("addr").port();
        let seen: Seen = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                answer(conn, port, &body, &log);
            }
        });
        Hub {
            endpoint: format!("http://127.0.0.1:{port}"),
            seen,
        }
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().expect("seen").clone()
    }
}

fn answer(mut conn: TcpStream, port: u16, body: &[u8], seen: &Seen) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
    let mut request = String::new();
    if reader.read_line(&mut request).unwrap_or(0) == 0 {
        return;
    }
    let path = request.split(' ').nth(1).unwrap_or("").to_string();
    let mut auth = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("authorization")
        {
            auth = Some(v.trim().to_string());
        }
    }
    seen.lock().expect("seen").push((path.clone(), auth));
    let redirect = |code: &str, to: String| {
        format!(
            "HTTP/1.1 {code}\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    };
    let (head, data): (String, &[u8]) = if let Some(rest) = path.strip_prefix("/old/repo/") {
        (
            redirect("307 Temporary Redirect", format!("/owner/repo/{rest}")),
            &[],
        )
    } else if let Some(file) = path.strip_prefix("/owner/repo/resolve/main/") {
        let name = file.rsplit('/').next().unwrap_or(file);
        let to = format!("http://localhost:{port}/cdn/{name}");
        (redirect("302 Found", to), &[])
    } else if path.starts_with("/cdn/") {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        (head, body)
    } else if path.starts_with("/gated/repo/") {
        let head = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (head.to_string(), &[])
    } else {
        let head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (head.to_string(), &[])
    };
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(data);
    let _ = conn.flush();
}

fn models_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memoria-pull-hf-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).expect("models folder");
    dir
}

fn pull(hub: &Hub, models: &Path, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = crate::bin::command();
    cmd.arg("pull")
        .args(args)
        .env("MEMORIA_MODELS", models)
        .env("HF_ENDPOINT", &hub.endpoint)
        .env_remove("HF_TOKEN")
        .env("RUST_BACKTRACE", "0");
    if let Some(t) = token {
        cmd.env("HF_TOKEN", t);
    }
    cmd.output().expect("spawn memoria pull")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read models folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn stories() -> Vec<u8> {
    std::fs::read(shared::path("models/stories260K-f32.gguf")).expect("stories260K")
}

/// A renamed repository, a file in a folder: two redirects, the token sent to the hub's host
/// only, the file installed under its own name.
#[test]
fn pull_hf_follows_redirects_and_keeps_the_token_on_the_hub() {
    let body = stories();
    let hub = Hub::start(body.clone());
    let dir = models_dir("redirects");
    let out = pull(&hub, &dir, Some("hf_secret"), &["old/repo/q4/model.gguf"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dest = dir.join("model.gguf");
    assert_eq!(text(&out.stdout).trim(), dest.to_str().expect("utf-8"));
    assert_eq!(std::fs::read(&dest).expect("installed"), body);
    assert_eq!(entries(&dir), ["model.gguf"]);
    let bearer = Some("Bearer hf_secret".to_string());
    assert_eq!(
        hub.seen(),
        [
            (
                "/old/repo/resolve/main/q4/model.gguf".to_string(),
                bearer.clone()
            ),
            ("/owner/repo/resolve/main/q4/model.gguf".to_string(), bearer),
            ("/cdn/model.gguf".to_string(), None),
        ]
    );
}

/// `owner/repo/FILE`, `hf://`, `repo:FILE`, `--hf-repo/--hf-file` and `-m` ask for the same
/// path; without HF_TOKEN no Authorization header is sent; `-o` names the file.
#[test]
fn pull_hf_every_form_resolves_to_the_same_file() {
    let body = stories();
    let forms: [&[&str]; 5] = [
        &["owner/repo/q4/model.gguf"],
        &["hf://owner/repo/q4/model.gguf"],
        &["owner/repo:q4/model.gguf"],
        &["--hf-repo", "owner/repo", "--hf-file", "q4/model.gguf"],
        &["-m", "owner/repo/q4/model.gguf", "-o", "named.gguf"],
    ];
    for (i, args) in forms.iter().enumerate() {
        let hub = Hub::start(body.clone());
        let dir = models_dir(&format!("form{i}"));
        let out = pull(&hub, &dir, None, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let name = if i == 4 { "named.gguf" } else { "model.gguf" };
        assert_eq!(entries(&dir), [name], "{args:?}");
        assert_eq!(
            hub.seen(),
            [
                ("/owner/repo/resolve/main/q4/model.gguf".to_string(), None),
                ("/cdn/model.gguf".to_string(), None),
            ],
            "{args:?}"
        );
    }
}

/// A missing file and a gated repository are refused with what to do, nothing installed.
#[test]
fn pull_hf_refusals_say_why() {
    let hub = Hub::start(stories());
    let dir = models_dir("refused");
    let out = pull(&hub, &dir, None, &["owner/nothing/model.gguf"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("no file \"model.gguf\" in owner/nothing") && err.contains("404"),
        "{err}"
    );
    let out = pull(&hub, &dir, None, &["gated/repo/model.gguf"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("set HF_TOKEN") && err.contains("401"), "{err}");
    let out = pull(&hub, &dir, Some("t"), &["gated/repo/model.gguf"]);
    assert!(
        text(&out.stderr).contains("does not give access"),
        "{}",
        text(&out.stderr)
    );
    let out = pull(&hub, &dir, None, &["owner/repo:Q4_K_M"]);
    assert!(
        text(&out.stderr).contains("not a .gguf file"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(entries(&dir), Vec::<String>::new());
    let out = crate::bin::command()
        .args(["pull", "owner/repo/m.gguf"])
        .env("MEMORIA_MODELS", &dir)
        .env("HF_ENDPOINT", "ftp://example")
        .output()
        .expect("spawn memoria pull");
    assert!(
        text(&out.stderr).contains("HF_ENDPOINT"),
        "{}",
        text(&out.stderr)
    );
}
