//! Reproductions of "one request stops the engine for good": a command that panics
//! inside the engine, a step that panics, and an engine loop that dies, injected with
//! `MEMORIA_FAULT` (debug builds only). Each must fail only the request involved (500 naming the
//! command), and the engine must go on, or be restarted with `/health` at 503 meanwhile.

use serde_json::{Value, json};

use super::client::{get, post};
use super::server::{Server, model};
use super::{eventually, stats};

const ADMIN: (&str, &str) = ("Authorization", "Bearer admin-key-faults");

fn completion(s: &Server) -> super::client::Resp {
    post(
        s.addr,
        "/v1/completions",
        &json!({"prompt": "Once upon a time", "max_tokens": 4}),
        &[],
    )
}

fn warm(s: &Server) -> super::client::Resp {
    post(
        s.addr,
        "/admin/warm",
        &json!({"namespace": "shared", "text": "hello there"}),
        &[ADMIN],
    )
}

fn engine_stats(s: &Server) -> Value {
    stats(s)["engine"].clone()
}

#[test]
fn serve_one_admin_request_stops_the_engine_for_good_panicking_command_and_step() {
    let s = Server::start_with_env(
        "fault-command",
        &["-m", &model(), "--admin-key", "admin-key-faults"],
        &[("MEMORIA_FAULT", "command=warm,step=1")],
    );
    // The first step panics: that generation fails with a 500, the next ones succeed.
    let r = completion(&s);
    assert_eq!(r.status, 500, "{}", r.text());
    let msg = r.json()["error"]["message"].to_string();
    assert!(msg.contains("`step`"), "the 500 names the step: {msg}");
    // Every warm panics inside its command: a 500 naming `warm`, the engine carries on.
    for _ in 0..2 {
        let r = warm(&s);
        assert_eq!(r.status, 500, "{}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["code"], json!("engine_command_failed"), "{e}");
        assert!(e["message"].to_string().contains("`warm`"), "{e}");
        assert_eq!(e["type"], json!("server_error"), "{e}");
    }
    for _ in 0..3 {
        let r = completion(&s);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let h = get(s.addr, "/health", &[]);
    assert_eq!(h.status, 200, "{}", h.text());
    let e = engine_stats(&s);
    assert_eq!(e["panics"], json!(3), "{e}");
    assert_eq!(e["restarts"], json!(0), "{e}");
    assert!(
        eventually(100, || engine_stats(&s)["sessions"] == json!(0)),
        "sessions of failed commands stay open: {}",
        engine_stats(&s)
    );
    let pool = &stats(&s)["pool"];
    assert_eq!(pool["blocks_used"], json!(0), "blocks leaked: {pool}");
    assert!(
        s.stderr().contains("panicked"),
        "the panic is logged: {}",
        s.stderr()
    );
}

#[test]
fn serve_one_admin_request_stops_the_engine_for_good_dead_engine_restarts() {
    let s = Server::start_with_env(
        "fault-die",
        &["-m", &model(), "--admin-key", "admin-key-faults"],
        // A 4 s first back-off: the restarting state outlasts a loaded machine's round trips.
        &[("MEMORIA_FAULT", "die=warm,backoff_ms=4000")],
    );
    assert_eq!(completion(&s).status, 200);
    // The engine loop dies on this warm: its caller gets a 500 naming it ...
    let r = warm(&s);
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("`warm`"), "{}", r.text());
    // ... /health answers 503 while the supervisor backs off, generations a 503 that
    // says so, then everything is back. (The 500 can arrive a moment before the supervisor
    // marks the engine down: the reply is sent while the loop unwinds.)
    assert!(
        eventually(40, || get(s.addr, "/health", &[]).status == 503),
        "/health never reported the restart"
    );
    let h = get(s.addr, "/health", &[]);
    assert_eq!(h.status, 503, "{}", h.text());
    assert_eq!(h.json()["status"], json!("engine restarting"));
    let r = completion(&s);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], json!("engine_restarting"));
    assert!(r.header("retry-after").is_some());
    assert!(
        eventually(200, || get(s.addr, "/health", &[]).status == 200),
        "the engine did not come back: {}",
        s.stderr()
    );
    for _ in 0..3 {
        let r = completion(&s);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // `die` fires once: the next warm works.
    let r = warm(&s);
    assert_eq!(r.status, 200, "{}", r.text());
    let e = engine_stats(&s);
    assert_eq!(e["restarts"], json!(1), "{e}");
    assert_eq!(e["up"], json!(true), "{e}");
}
