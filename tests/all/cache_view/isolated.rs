//! `isolated` misses through `memoria serve`: two isolated namespaces send the same prompt;
//! the second one's blocks miss as `isolated` (the tokens are cached under the first one's
//! salt), counted as a number only: nothing in its `/stats` entry names the other namespace,
//! and the first namespace's own counters are untouched.

use serde_json::json;

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

#[test]
fn cache_view_isolated_misses_are_counted_without_naming_the_holder() {
    let dir = temp_dir("isolated-misses");
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        "[server]\nadmin_key = \"admin-key-isolated\"\n\n[namespaces.alpha]\nisolation = \
         \"isolated\"\napi_keys = [\"alpha-key-isolated\"]\n\n[namespaces.beta]\nisolation = \
         \"isolated\"\napi_keys = [\"beta-key-isolated\"]\n",
    )
    .expect("config");
    let s = Server::start(
        "isolated-misses",
        &["-m", &model(), "--config", cfg.to_str().expect("utf-8")],
    );
    let prompt: Vec<u32> = (0..16 * 6 + 1).map(|i| 3 + (i * 37 % 500)).collect();
    let body = json!({"prompt": prompt, "max_tokens": 1, "temperature": 0});
    for key in ["alpha-key-isolated", "beta-key-isolated"] {
        let auth = format!("Bearer {key}");
        let r = post(
            s.addr,
            "/v1/completions",
            &body,
            &[("Authorization", &auth)],
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = get(
        s.addr,
        "/stats",
        &[("Authorization", "Bearer admin-key-isolated")],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let st = r.json();
    let alpha = &st["namespaces"]["alpha"]["misses"];
    let beta = &st["namespaces"]["beta"]["misses"];
    assert_eq!(alpha["isolated"], 0, "{alpha}");
    assert_eq!(alpha["cold"], 6, "{alpha}");
    assert_eq!(beta["isolated"], 6, "{beta}");
    assert_eq!(beta["cold"], 0, "{beta}");
    assert_eq!(beta["tokens"]["isolated"], 6 * 16, "{beta}");
    let beta_entry = st["namespaces"]["beta"].to_string();
    assert!(!beta_entry.contains("alpha"), "{beta_entry}");
    assert_eq!(st["state_cache"]["misses_by_reason"]["isolated"], 6);
    let m = get(
        s.addr,
        "/metrics",
        &[("Authorization", "Bearer admin-key-isolated")],
    )
    .text();
    assert!(
        m.contains("memoria_kv_misses_total{namespace=\"beta\",reason=\"isolated\"} 6"),
        "{m}"
    );
}
