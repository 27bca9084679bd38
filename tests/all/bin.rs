//! The `memoria` binary under test: the workspace's own `memoria` package, built by cargo in the
//! profile of this test binary (`cargo build -p memoria`, run once per test process: a no-op when
//! `cargo test --workspace` already built it, and never stale when only this package was asked
//! for). The tests package declares no binary of its own, so `cargo run` has one to run.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The path of the freshly built `memoria` binary.
pub fn memoria() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build)
}

/// A command running the `memoria` binary.
pub fn command() -> Command {
    Command::new(memoria())
}

fn build() -> PathBuf {
    // target/<profile>/deps/all-<hash>: the profile folder is two levels up.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lies in <target>/<profile>/deps");
    let target_dir = profile_dir
        .parent()
        .expect("the profile folder lies in the target folder");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(other) => other.to_string(),
        None => "dev".to_string(),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = Command::new(cargo)
        .args(["build", "--quiet", "-p", "memoria", "--bin", "memoria"])
        .args(["--profile", &profile, "--manifest-path", manifest])
        .arg("--target-dir")
        .arg(target_dir)
        .output()
        .expect("running cargo to build the memoria binary");
    assert!(
        out.status.success(),
        "cargo build -p memoria failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = profile_dir.join("memoria");
    assert!(bin.is_file(), "{} was not built", bin.display());
    bin
}
