//! A damaged or full store through the CLI: a byte-flip loop over `memoria.redb`
//! where `memoria store verify` and a store-backed `memoria run` exit 0 or 1 with a message,
//! never 101; `memoria store repair` and `memoria serve --store-recover` leave a usable store
//! and say what they did; named saves past `[store] max_saves_mb` answer 507.

use std::path::Path;
use std::process::Output;

use serde_json::json;

use super::{memoria, model, s, temp_store};
use crate::serve::client::post;
use crate::serve::server::Server;

const PROMPT: &str = "Once upon a time there was a little girl named Lily who loved to play \
                      outside in the sunshine with her dog and her friends every single day";

fn run_on(dir: &Path) -> Output {
    memoria(&[
        "run",
        "-m",
        s(&model()),
        "-p",
        PROMPT,
        "-n",
        "4",
        "--temp",
        "0",
        "-t",
        "1",
        "--store",
        s(dir),
    ])
}

fn corrupt(file: &Path, pristine: &[u8], at: usize) {
    let mut b = pristine.to_vec();
    b[at..at + 4].copy_from_slice(&[0xFF; 4]);
    std::fs::write(file, b).expect("write the damaged copy");
}

/// Exit 0, or exit 1 with an `error:` line; never a panic (101).
fn assert_clean_exit(o: &Output, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(101), "{what} panicked: {err}");
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{what}: exit {:?}: {err}",
        o.status
    );
    if !o.status.success() {
        assert!(err.contains("error:"), "{what}: no reason given: {err}");
    }
}

#[test]
fn byte_flips_in_the_store_file_never_exit_101() {
    let dir = temp_store("flip");
    assert!(run_on(&dir).status.success());
    let file = dir.join("memoria.redb");
    let pristine = std::fs::read(&file).expect("store file");
    let mut offsets = vec![0, 16, 40, 64, 320];
    offsets.extend((4096..pristine.len()).step_by(4096).map(|p| p + 40));
    offsets.push(8192);
    offsets.retain(|o| o + 4 <= pristine.len());
    let mut refused = None;
    let (mut verify_failed, mut run_failed) = (0, 0);
    for &at in &offsets {
        corrupt(&file, &pristine, at);
        let v = memoria(&["store", "verify", "--store", s(&dir)]);
        assert_clean_exit(&v, &format!("store verify at {at}"));
        verify_failed += usize::from(!v.status.success());
        corrupt(&file, &pristine, at);
        let r = run_on(&dir);
        assert_clean_exit(&r, &format!("run --store at {at}"));
        if !r.status.success() {
            run_failed += 1;
            let err = String::from_utf8_lossy(&r.stderr);
            if err.contains("damaged") {
                assert!(err.contains("memoria store repair --store"), "{err}");
                assert!(err.contains("--store-recover"), "{err}");
                refused.get_or_insert(at);
            }
        }
    }
    eprintln!(
        "{} offsets: verify failed at {verify_failed}, run refused at {run_failed}",
        offsets.len()
    );
    assert!(verify_failed > 0, "some flips must be detected");
    let at = refused.expect("some flip makes the store unopenable");

    // `store repair` leaves a store that verifies and serves.
    corrupt(&file, &pristine, at);
    let r = memoria(&["store", "repair", "--store", s(&dir)]);
    assert_clean_exit(&r, "store repair");
    assert!(r.status.success());
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(
        out.contains("salvaged it") || out.contains("repaired"),
        "{out}"
    );
    assert!(
        memoria(&["store", "verify", "--store", s(&dir)])
            .status
            .success()
    );
    assert!(run_on(&dir).status.success());

    // serve refuses a damaged store with the advice, and starts fresh with --store-recover.
    corrupt(&file, &pristine, at);
    let o = crate::bin::command()
        .args([
            "serve",
            "-m",
            s(&model()),
            "--store",
            s(&dir),
            "--port",
            "0",
        ])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn serve");
    assert_clean_exit(&o, "serve on a damaged store");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("memoria store repair") && err.contains("--store-recover"),
        "{err}"
    );
    let srv = Server::start(
        "store-recover",
        &["-m", s(&model()), "--store", s(&dir), "--store-recover"],
    );
    let err = srv.stderr();
    assert!(err.contains("--store-recover salvaged it"), "{err}");
    assert!(err.contains("disk budget"), "{err}");
    drop(srv);
    let aside = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .count();
    assert!(aside >= 1, "the damaged file was kept aside");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn saves_past_max_saves_mb_answer_507_and_the_engine_serves_on() {
    let dir = temp_store("saves-507");
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.with_extension("toml");
    std::fs::write(
        &config,
        format!(
            "[store]\npath = {:?}\nmax_disk_mb = 16\nmax_saves_mb = 1\n",
            s(&dir)
        ),
    )
    .expect("config");
    let srv = Server::start(
        "saves-507",
        &[
            "-m",
            s(&model()),
            "--config",
            s(&config),
            "--admin-key",
            "admin-key-for-tests",
            "-c",
            "512",
        ],
    );
    assert!(
        srv.stderr().contains("disk budget 16 MiB"),
        "{}",
        srv.stderr()
    );
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    let text = PROMPT.repeat(9);
    let mut ok = 0;
    let refusal = loop {
        let r = post(
            srv.addr,
            "/admin/sessions/save",
            &json!({"name": format!("s{ok}"), "text": text}),
            &admin,
        );
        if r.status != 200 {
            break r;
        }
        ok += 1;
        assert!(ok < 2000, "the saves' budget never filled");
    };
    assert_eq!(refusal.status, 507, "{}", refusal.text());
    let v = refusal.json();
    assert_eq!(v["error"]["code"], "insufficient_storage", "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("max_saves_mb") && !msg.contains("shutting down"),
        "{msg}"
    );
    assert!(ok >= 10, "{ok} saves fit in 1 MiB");
    // The engine is up: a completion and a restore still work.
    let r = post(
        srv.addr,
        "/v1/completions",
        &json!({"prompt": "Once upon a time", "max_tokens": 4}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(
        srv.addr,
        "/admin/sessions/restore",
        &json!({"name": "s0"}),
        &admin,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    drop(srv);
    let _ = std::fs::remove_file(&config);
    let _ = std::fs::remove_dir_all(&dir);
}
