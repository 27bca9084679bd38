//! Server-side tools (`/tools`, llama-server's `--tools` and MCP servers): MCP tools listed
//! as `<server>_<tool>` and called over stdio (concurrent calls, the per-call timeout, a
//! crashed server started again, a bad server not hiding a good one, prompt shutdown with a
//! call in flight), the built-in file and shell tools, and the gates: off without the flags,
//! the host's key on a keyed host (never a tenant's), CORS to this machine only, a bad MCP
//! config refused at start-up.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Stream, get, post, request};
use super::server::{Server, temp_dir};

fn mcp_script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/data/mcp/test_server.py").to_string()
}

fn mcp_json(timeout_ms: u64) -> String {
    json!({"mcpServers": {
        "t": {"command": "python3", "args": [mcp_script()], "timeout_ms": timeout_ms},
        "bad": {"command": "memoria-no-such-program-1234", "args": []},
    }})
    .to_string()
}

fn call(s: &Server, tool: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    let r = post(
        s.addr,
        "/tools",
        &json!({"tool": tool, "params": params}),
        headers,
    );
    assert_eq!(r.status, 200, "{tool}: {}", r.text());
    r.json()
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|t| t["tool"].as_str().expect("tool").to_string())
        .collect()
}

#[test]
fn serve_tools_mcp_list_call_timeout_and_respawn() {
    let cfg = mcp_json(1500);
    let s = Server::start("tools-mcp", &["--tools", "all", "--mcp-servers-json", &cfg]);
    let list = get(s.addr, "/tools", &[]);
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    let n = names(&list);
    for want in [
        "t_echo",
        "t_add",
        "t_sleep",
        "read_file",
        "exec_shell_command",
    ] {
        assert!(n.contains(&want.to_string()), "{want} not in {n:?}");
    }
    assert!(!n.iter().any(|t| t.starts_with("bad_")), "{n:?}");
    let echo = list
        .as_array()
        .and_then(|a| a.iter().find(|t| t["tool"] == "t_echo"))
        .expect("t_echo");
    assert_eq!(echo["definition"]["type"], "function");
    assert_eq!(echo["definition"]["function"]["name"], "t_echo");
    assert_eq!(
        echo["definition"]["function"]["parameters"]["type"],
        "object"
    );

    let r = call(&s, "t_echo", json!({"message": "hello"}), &[]);
    assert_eq!(r, json!({"plain_text_response": "echo: hello"}));
    assert_eq!(
        call(&s, "t_add", json!({"a": 3, "b": 5}), &[])["plain_text_response"],
        "8"
    );

    // Concurrent calls on one server: a slow one does not hold up a quick one.
    let addr = s.addr;
    let slow = std::thread::spawn(move || {
        post(
            addr,
            "/tools",
            &json!({"tool": "t_sleep", "params": {"seconds": 0.8}}),
            &[],
        )
    });
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    assert_eq!(
        call(&s, "t_echo", json!({"message": "quick"}), &[])["plain_text_response"],
        "echo: quick"
    );
    assert!(
        t0.elapsed() < Duration::from_millis(600),
        "the quick call waited"
    );
    assert_eq!(
        slow.join().expect("slow call").json()["plain_text_response"],
        "slept"
    );

    // The per-call timeout (1.5 s): an error answer, not a hang.
    let t0 = Instant::now();
    let r = call(&s, "t_sleep", json!({"seconds": 10}), &[]);
    assert!(
        r["error"].as_str().is_some_and(|e| e.contains("timed out")),
        "{r}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5));

    // A crash: the next call starts the server again.
    let pid = call(&s, "t_pid", json!({}), &[])["plain_text_response"].clone();
    let r = call(&s, "t_crash", json!({}), &[]);
    assert!(r.get("error").is_some(), "{r}");
    let again = call(&s, "t_pid", json!({}), &[])["plain_text_response"].clone();
    assert!(again.is_string() && again != pid, "{pid} then {again}");

    // Unknown tools and malformed calls.
    let r = post(s.addr, "/tools", &json!({"tool": "t_nope"}), &[]);
    assert_eq!(r.status, 404, "{}", r.text());
    let r = request(
        s.addr,
        "POST",
        "/tools",
        &[("Content-Type", "application/json")],
        b"{not json",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(get(s.addr, "/health", &[]).status, 200);
}

#[test]
fn serve_tools_stop_promptly_with_a_call_in_flight() {
    let cfg = mcp_json(60_000);
    let mut s = Server::start("tools-stop", &["--mcp-servers-json", &cfg]);
    let addr = s.addr;
    let slow = std::thread::spawn(move || {
        post(
            addr,
            "/tools",
            &json!({"tool": "t_sleep", "params": {"seconds": 30}}),
            &[],
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = s.child.wait().expect("wait");
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "stopping took {:?}",
        t0.elapsed()
    );
    assert!(status.success(), "{status:?}: {}", s.stderr());
    let _ = slow.join();
}

#[test]
fn serve_tools_builtin_files_search_and_shell() {
    let dir = temp_dir("tools-builtin").join("work");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("build")).expect("dir");
    std::fs::write(dir.join("build/junk.txt"), "x").expect("junk");
    let d = dir.to_str().expect("utf-8");
    let s = Server::start("tools-builtin", &["--tools", "all"]);
    let cwd = [("x-tool-cwd", d)];
    let w = call(
        &s,
        "write_file",
        json!({"path": "sub/a.txt", "content": "one\ntwo\n", "cwd": "/nope"}),
        &cwd,
    );
    assert_eq!(w["result"], "file written successfully", "{w}");
    assert_eq!(
        std::fs::read_to_string(dir.join("sub/a.txt")).expect("written"),
        "one\ntwo\n"
    );
    let e = call(
        &s,
        "edit_file",
        json!({"path": "sub/a.txt", "edits": [{"old_text": "two", "new_text": "2"}]}),
        &cwd,
    );
    assert_eq!(e["edits_applied"], 1, "{e}");
    let abs = dir.join("sub/a.txt");
    let r = call(
        &s,
        "read_file",
        json!({"path": abs.to_str().expect("utf-8")}),
        &[],
    );
    assert_eq!(r["plain_text_response"], "one\n2\n");
    let e = call(
        &s,
        "edit_file",
        json!({"path": "sub/a.txt", "edits": [{"old_text": "zzz", "new_text": "y"}]}),
        &cwd,
    );
    assert!(e["error"].as_str().is_some(), "{e}");
    let g = call(
        &s,
        "file_glob_search",
        json!({"path": ".", "include": "*.txt", "type": "all"}),
        &cwd,
    );
    let paths: Vec<_> = g["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["path"].clone())
        .collect();
    assert_eq!(paths, [json!("sub/a.txt")], "{g}");
    let r = call(
        &s,
        "file_glob_search",
        json!({"path": ".", "type": "bogus"}),
        &cwd,
    );
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid type")),
        "{r}"
    );
    let x = call(
        &s,
        "exec_shell_command",
        json!({"command": "pwd; echo err >&2; exit 3"}),
        &cwd,
    );
    let text = x["plain_text_response"].as_str().expect("text");
    assert!(
        text.contains(d) && text.contains("err") && text.ends_with("[exit code: 3]"),
        "{text}"
    );
    let mut st = Stream::open(
        s.addr,
        "/tools",
        &json!({"tool": "exec_shell_command", "params": {"command": "echo hello"}, "stream": true}),
        &[],
    );
    assert_eq!(st.status, 200);
    let mut events = Vec::new();
    while let Some(e) = st.next_event() {
        events.push(serde_json::from_str::<Value>(&e).expect("json event"));
    }
    assert_eq!(events.last(), Some(&json!({"done": true})), "{events:?}");
    let chunks: String = events.iter().filter_map(|e| e["chunk"].as_str()).collect();
    assert!(
        chunks.contains("hello") && chunks.contains("[exit code: 0]"),
        "{chunks}"
    );
    for (rt, msg) in [
        ("fake:x", "unknown tool runtime"),
        ("ssh:-oProxyCommand=touch /tmp/x", "invalid ssh target"),
        ("docker-container:--privileged", "invalid container id"),
    ] {
        let r = post(
            s.addr,
            "/tools",
            &json!({"tool": "exec_shell_command", "params": {"command": "echo hi"}}),
            &[("x-tool-runtime", rt)],
        );
        assert_eq!(r.status, 500, "{rt}: {}", r.text());
        assert!(r.text().contains(msg), "{rt}: {}", r.text());
    }
}

#[test]
fn serve_tools_are_off_by_default_keyed_and_local_only() {
    let off = Server::start("tools-off", &[]);
    assert_eq!(get(off.addr, "/tools", &[]).status, 403);
    assert_eq!(
        post(
            off.addr,
            "/tools",
            &json!({"tool": "read_file", "params": {"path": "/etc/hostname"}}),
            &[]
        )
        .status,
        403
    );
    drop(off);

    let s = Server::start(
        "tools-keyed",
        &["--tools", "all", "--api-key", "tools-key-0001"],
    );
    assert_eq!(get(s.addr, "/tools", &[]).status, 401);
    let r = post(
        s.addr,
        "/tools",
        &json!({"tool": "exec_shell_command", "params": {"command": "echo hi"}}),
        &[],
    );
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        get(
            s.addr,
            "/tools",
            &[("Authorization", "Bearer tools-key-0001")]
        )
        .status,
        200
    );
    drop(s);

    // On a host with tenants, a tenant's key never opens the host's tools; the host's own
    // --api-key and the admin key do.
    let dir = temp_dir("tools-tenants");
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        "[namespaces.tenant]\nisolation = \"isolated\"\napi_keys = [\"tenant-key-0001\"]\n",
    )
    .expect("config written");
    let s = Server::start(
        "tools-tenants",
        &[
            "--tools",
            "all",
            "--api-key",
            "tools-key-0001",
            "--admin-key",
            "tools-admin-0001",
            "--ui-mcp-proxy",
            "--config",
            cfg.to_str().expect("utf-8 path"),
        ],
    );
    let exec = json!({"tool": "exec_shell_command", "params": {"command": "echo hi"}});
    let r = post(
        s.addr,
        "/tools",
        &exec,
        &[("Authorization", "Bearer tenant-key-0001")],
    );
    assert_eq!(r.status, 403, "a tenant's key: {}", r.text());
    assert_eq!(
        get(s.addr, "/tools", &[("X-Api-Key", "tenant-key-0001")]).status,
        403
    );
    // The CORS proxy fetches from the host's network: the same rule.
    let proxied = "/cors-proxy?url=http://127.0.0.1:9/";
    let r = get(
        s.addr,
        proxied,
        &[("Authorization", "Bearer tenant-key-0001")],
    );
    assert_eq!(r.status, 403, "a tenant's key: {}", r.text());
    let r = get(
        s.addr,
        proxied,
        &[("Authorization", "Bearer tools-key-0001")],
    );
    assert_eq!(
        r.status,
        502,
        "the host's key reaches the (dead) target: {}",
        r.text()
    );
    for key in ["Bearer tools-key-0001", "Bearer tools-admin-0001"] {
        assert_eq!(
            get(s.addr, "/tools", &[("Authorization", key)]).status,
            200,
            "{key}"
        );
    }
    for (origin, allowed) in [
        ("http://localhost:8080", true),
        ("http://evil.example", false),
    ] {
        let r = request(
            s.addr,
            "OPTIONS",
            "/completions",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
            ],
            b"",
        );
        assert_eq!(
            r.header("access-control-allow-origin").is_some(),
            allowed,
            "{origin}"
        );
    }
}

#[test]
fn serve_tools_bad_mcp_config_stops_start_up() {
    for args in [
        vec!["--tools", "all", "--mcp-servers-json", "not valid json"],
        vec!["--mcp-servers-config", "/nonexistent/memoria-mcp.json"],
        vec!["--tools", "no_such_tool"],
    ] {
        let out = crate::bin::command()
            .arg("serve")
            .args(&args)
            .args(["--port", "0", "--host", "127.0.0.1"])
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("spawn");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(
            err.contains("--mcp-servers") || err.contains("--tools"),
            "{args:?}: {err}"
        );
    }
}
