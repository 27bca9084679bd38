//! The admin API's component routes against a running `memoria serve`: deploy, replace and
//! delete a namespace's components over HTTP (admin key only, size-limited, invalid ones refused
//! in OpenAI's error format), their counters in `/metrics` and `/stats`, deployments that
//! survive a restart, and `POST /admin/reload` loading the components a changed config names.

use std::path::Path;

use serde_json::json;

use super::client::{Resp, get, post, request, request_head_only};
use super::server::{Server, model, temp_dir};
use super::{assert_openai_error, promtool_check};

const ADMIN: (&str, &str) = ("Authorization", "Bearer admin-key-for-deploys");
const ALPHA: (&str, &str) = ("Authorization", "Bearer alpha-key-deploy1");
const BETA: (&str, &str) = ("Authorization", "Bearer beta-key-deploy01");

fn guest_bytes(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("guest binary")
}

fn config(folder: &Path, beta_component: Option<&str>) -> String {
    let mut text = format!(
        "[server]\nadmin_key = \"admin-key-for-deploys\"\nmax_component_bytes = 100000\ncomponents_dir = {:?}\n\n[namespaces.alpha]\napi_keys = [\"alpha-key-deploy1\"]\n",
        folder.display().to_string()
    );
    if let Some(c) = beta_component {
        text.push_str(&format!(
            "\n[namespaces.beta]\napi_keys = [\"beta-key-deploy01\"]\ncomponent = {c:?}\n"
        ));
    }
    text
}

fn put(s: &Server, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    request(s.addr, "PUT", path, headers, body)
}

fn page(s: &Server, path: &str, key: (&str, &str)) -> (u16, String) {
    let r = get(s.addr, path, &[key]);
    (r.status, r.text())
}

#[test]
fn serve_admin_deploys_replaces_and_deletes_components() {
    let dir = temp_dir("deploy");
    let folder = dir.join("components");
    let _ = std::fs::remove_dir_all(&folder);
    let cfg = dir.join("host.toml");
    std::fs::write(&cfg, config(&folder, None)).expect("config");
    let args = ["-m", &model(), "--config", cfg.to_str().expect("utf-8")];
    let s = Server::start("deploy", &args);
    let hello = guest_bytes(env!("MEMORIA_GUEST_HELLO"));
    let misbehave = guest_bytes(env!("MEMORIA_GUEST_MISBEHAVE"));
    let default = "/admin/namespaces/alpha/component";

    let r = get(s.addr, "/ns/alpha/x", &[ALPHA]);
    assert_eq!(r.status, 404, "{}", r.text());
    assert_openai_error(&r, "no component yet");
    assert_eq!(put(&s, default, &[], &hello).status, 401);
    assert_eq!(put(&s, default, &[ALPHA], &hello).status, 403);

    let r = put(&s, default, &[ADMIN], &hello);
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(
        v["digest"],
        json!(blake3::hash(&hello).to_hex().to_string())
    );
    assert_eq!(v["persisted"], json!(true), "{v}");
    assert_eq!(v["replaced"], json!(false), "{v}");
    assert_eq!(
        page(&s, "/ns/alpha/x", ALPHA),
        (200, "hello from /ns/alpha/x".into())
    );
    assert_eq!(
        get(s.addr, "/ns/alpha/x", &[BETA]).status,
        401,
        "another key does not reach alpha's component"
    );

    let big = guest_bytes(env!("MEMORIA_GUEST_CHAT")).len().to_string();
    let r = request_head_only(s.addr, "PUT", default, &[ADMIN, ("Content-Length", &big)]);
    assert_eq!(r.status, 413, "{}", r.text());
    assert_openai_error(&r, "component over max_component_bytes");
    for (bad, why) in [
        (&b"\0asm\x01\0\0\0"[..], "core WebAssembly module"),
        (&b"{\"not\": \"wasm\"}"[..], "not a WebAssembly binary"),
        (&hello[..hello.len() / 2], "invalid component"),
    ] {
        let r = put(&s, default, &[ADMIN], bad);
        assert_eq!(r.status, 400, "{}", r.text());
        assert_openai_error(&r, why);
        let e = &r.json()["error"];
        assert_eq!(e["param"], json!("component"), "{e}");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains(why)),
            "{e}"
        );
    }
    assert_eq!(
        page(&s, "/ns/alpha/x", ALPHA),
        (200, "hello from /ns/alpha/x".into()),
        "refused deploys change nothing"
    );

    let r = put(
        &s,
        "/admin/namespaces/alpha/components/raw",
        &[ADMIN],
        &misbehave,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(page(&s, "/ns/alpha/raw/q", ALPHA), (200, "ok".into()));
    let r = put(
        &s,
        "/admin/namespaces/alpha/components/Bad.Route",
        &[ADMIN],
        &hello,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], json!("route"));
    // Reserved route names are refused at deploy: a component under `v1` would shadow
    // /ns/alpha/v1/... (the namespace's OpenAI routes).
    for reserved in ["v1", "admin", "health", "metrics", "stats"] {
        let r = put(
            &s,
            &format!("/admin/namespaces/alpha/components/{reserved}"),
            &[ADMIN],
            &hello,
        );
        assert_eq!(r.status, 400, "{reserved}: {}", r.text());
        assert_eq!(r.json()["error"]["param"], json!("route"));
        let msg = r.json()["error"]["message"].to_string();
        assert!(msg.contains("reserved"), "{reserved}: {msg}");
    }
    let r = put(&s, "/admin/namespaces/nope/component", &[ADMIN], &hello);
    assert_eq!(r.status, 404, "{}", r.text());

    let r = get(s.addr, "/admin/namespaces/alpha/components", &[ADMIN]);
    assert_eq!(r.status, 200, "{}", r.text());
    let routes: Vec<_> = r.json()["data"]
        .as_array()
        .expect("list")
        .iter()
        .map(|c| c["route"].clone())
        .collect();
    assert_eq!(routes, [json!(null), json!("raw")]);
    let listed = get(s.addr, "/admin/namespaces", &[ADMIN]).json();
    let alpha = listed["data"]
        .as_array()
        .expect("list")
        .iter()
        .find(|n| n["name"] == "alpha")
        .cloned()
        .expect("alpha listed");
    assert_eq!(alpha["components"].as_array().map(Vec::len), Some(2));

    let r = put(&s, default, &[ADMIN], &misbehave);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["replaced"], json!(true));
    assert_eq!(page(&s, "/ns/alpha/x", ALPHA), (200, "ok".into()));
    let r = put(&s, default, &[ADMIN], &hello);
    assert_eq!(r.status, 200, "{}", r.text());

    let raw = "/admin/namespaces/alpha/components/raw";
    let r = request(s.addr, "DELETE", raw, &[ADMIN], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        page(&s, "/ns/alpha/raw/q", ALPHA),
        (200, "hello from /ns/alpha/raw/q".into()),
        "the default component serves the deleted route's paths"
    );
    let r = request(s.addr, "DELETE", raw, &[ADMIN], b"");
    assert_eq!(r.status, 404, "{}", r.text());
    assert_openai_error(&r, "deleting twice");

    let r = get(s.addr, "/metrics", &[ADMIN]);
    assert_eq!(r.status, 200);
    let m = r.text();
    promtool_check("deploy", &m);
    for line in [
        "memoria_component_deploys_total{result=\"ok\"} 4",
        "memoria_component_deploys_total{result=\"refused\"} 3",
        "memoria_components{namespace=\"alpha\"} 1",
    ] {
        assert!(m.lines().any(|l| l == line), "no {line:?} in\n{m}");
    }
    let stats = get(s.addr, "/stats", &[ADMIN]).json();
    let alpha = &stats["components"]["namespaces"]["alpha"];
    assert_eq!(alpha["requests"], json!(5), "{stats}");
    assert_eq!(alpha["failures"], json!(0), "{stats}");

    drop(s);
    let s = Server::start("deploy", &args);
    assert_eq!(
        page(&s, "/ns/alpha/x", ALPHA),
        (200, "hello from /ns/alpha/x".into()),
        "a deployment survives a restart"
    );

    let hello_path = env!("MEMORIA_GUEST_HELLO");
    std::fs::write(&cfg, config(&folder, Some(hello_path))).expect("config");
    let r = post(s.addr, "/admin/reload", &json!({}), &[ADMIN]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        page(&s, "/ns/beta/x", BETA),
        (200, "hello from /ns/beta/x".into()),
        "reload loads the components of new namespaces"
    );
    let missing = dir.join("missing.wasm");
    std::fs::write(&cfg, config(&folder, missing.to_str())).expect("config");
    let r = post(s.addr, "/admin/reload", &json!({}), &[ADMIN]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("missing.wasm"), "{}", r.text());
    assert_eq!(
        page(&s, "/ns/beta/x", BETA),
        (200, "hello from /ns/beta/x".into()),
        "a refused reload keeps the running components"
    );
    let r = request(s.addr, "DELETE", default, &[ADMIN], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get(s.addr, "/ns/alpha/x", &[ALPHA]);
    assert_eq!(r.status, 404, "{}", r.text());
}
