//! Builds the guest components (guest/, a workspace of its own) for wasm32-wasip2 so that
//! `cargo test` needs no manual step, and tells the tests where they are through
//! `MEMORIA_GUEST_<NAME>` environment variables (wasmtime's test-programs pattern).
//!
//! The guests get their own target folder (`<target>/guests`) and none of the host build's
//! flags or wrappers (clippy's, coverage's), so they are built the same way from every command.

use std::path::PathBuf;
use std::process::Command;

const GUESTS: &[&str] = &[
    "chat",
    "classify",
    "agent",
    "hello",
    "hostcalls",
    "misbehave",
    "trivial",
    "unsatisfied",
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("workspace root").to_path_buf();
    let guest = root.join("guest");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("guests");
    println!("cargo:rerun-if-changed={}", guest.display());
    println!("cargo:rerun-if-changed={}", root.join("wit").display());

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&guest)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("CARGO_PROFILE_")
            || k.starts_with("CARGO_FEATURE_")
            || k.starts_with("CARGO_CFG_")
        {
            cmd.env_remove(k);
        }
    }
    let status = cmd.status().expect("running cargo for the guests");
    assert!(
        status.success(),
        "building the guest components failed (is the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`)"
    );
    let out = target.join("wasm32-wasip2").join("release");
    for name in GUESTS {
        let path = out.join(format!("{name}.wasm"));
        assert!(
            path.is_file(),
            "guest {name} was not built: {}",
            path.display()
        );
        println!(
            "cargo:rustc-env=MEMORIA_GUEST_{}={}",
            name.to_uppercase(),
            path.display()
        );
    }
}
