//! Spawning `memoria serve` for a test: `--port 0`, the address parsed from its first stdout
//! line, stderr kept in a file for failure messages, killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};

use crate::shared;

/// A running server.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
}

/// The stories260K model's path.
pub fn model() -> String {
    shared::path("models/stories260K-f32.gguf")
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// A private temp folder for one test.
/// A small random-weight llama (dim 128, 2 layers, a 512-piece vocabulary) with `context`
/// tokens of context, written to `out` by `memoria model synth` unless already there.
pub fn small_synth(out: &std::path::Path, context: u32) -> String {
    if !out.is_file() {
        let st = crate::bin::command()
            .args(["model", "synth"])
            .arg(out)
            .args([
                "--dim", "128", "--layers", "2", "--heads", "4", "--ffn", "384",
            ])
            .args(["--vocab-size", "512", "--context", &context.to_string()])
            .status()
            .expect("memoria model synth");
        assert!(st.success(), "memoria model synth failed");
    }
    out.to_str().expect("utf-8 path").to_string()
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memoria-serve-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

impl Server {
    /// Starts `memoria serve ARGS --port 0 --host 127.0.0.1`, with an empty models folder (so a
    /// server without `-m` runs the demo model whatever `memoria pull` put on this machine).
    pub fn start(name: &str, args: &[&str]) -> Server {
        let models = temp_dir(name).join("no-models");
        std::fs::create_dir_all(&models).expect("empty models folder");
        Server::start_with_models(name, args, &models)
    }

    /// Starts `memoria serve ARGS --port 0 --host 127.0.0.1` with extra environment variables
    /// (e.g. `MEMORIA_FAULT`, which only debug builds read).
    pub fn start_with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let models = temp_dir(name).join("no-models");
        std::fs::create_dir_all(&models).expect("empty models folder");
        Server::spawn(name, args, &models, env)
    }

    /// Starts `memoria serve ARGS --port 0 --host 127.0.0.1` with `MEMORIA_MODELS=models`.
    pub fn start_with_models(name: &str, args: &[&str], models: &std::path::Path) -> Server {
        Server::spawn(name, args, models, &[])
    }

    fn spawn(name: &str, args: &[&str], models: &std::path::Path, env: &[(&str, &str)]) -> Server {
        let stderr = temp_dir(name).join("stderr.txt");
        let err_file = std::fs::File::create(&stderr).expect("stderr file");
        let mut child = crate::bin::command()
            .arg("serve")
            .args(args)
            .args(remote_key_args(args))
            .args(["--port", "0", "--host", "127.0.0.1", "-t", "1"])
            .env("RUST_BACKTRACE", "0")
            .env("MEMORIA_MODELS", models)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(err_file)
            .spawn()
            .expect("spawn memoria serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        let mut r = BufReader::new(stdout);
        r.read_line(&mut line).expect("read the listening line");
        let Some(addr) = line.trim().strip_prefix("memoria: listening on http://") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "memoria serve did not start: stdout {line:?}, stderr:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        };
        let addr = addr.parse().expect("socket address");
        Server {
            child,
            addr,
            stderr,
        }
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// The remote key file every test host shares, as a deployment's hosts do (written once per
/// test process).
pub fn remote_key_file() -> PathBuf {
    let p = std::env::temp_dir().join(format!("memoria-test-remote-{}.key", std::process::id()));
    if !p.exists() {
        std::fs::write(
            &p,
            "memoria test remote key: 0123456789abcdef0123456789abcdef",
        )
        .expect("remote key file");
    }
    p
}

/// `--remote-key-file` with the tests' key when `args` put the host on a remote tier (a
/// `--remote` flag or a config file with `[store.remote]`) and name no key file themselves.
fn remote_key_args(args: &[&str]) -> Vec<String> {
    let flagged = args
        .iter()
        .any(|a| *a == "--remote" || *a == "--remote-cluster");
    let configured = args
        .windows(2)
        .filter(|w| w[0] == "--config")
        .any(|w| std::fs::read_to_string(w[1]).is_ok_and(|t| t.contains("[store.remote]")));
    if (flagged || configured) && !args.contains(&"--remote-key-file") {
        let key = remote_key_file();
        vec![
            "--remote-key-file".into(),
            key.to_string_lossy().into_owned(),
        ]
    } else {
        Vec::new()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
