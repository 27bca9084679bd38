//! `memoria bench cluster` end to end on stories260K and a real Valkey/Redis server started by
//! the test: the JSON report has every phase's figures, host B took most of A's prompt from the
//! remote tier (computing fewer tokens than the prompt) with A's text, the run's keys are gone
//! afterwards, and bad input fails with a message naming the flag.

use memoria_store::remote::test_server::TestServer;
use serde_json::Value;

use super::{memoria, model, s};

#[test]
fn bench_cluster_reports_a_remote_prefix_on_two_hosts() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = srv.url();
    let m = model();
    let out = memoria(&[
        "bench",
        "cluster",
        "-m",
        s(&m),
        "--remote",
        &url,
        "--prefix",
        "200",
        "--reps",
        "2",
        "--clients",
        "4",
        "--question-tokens",
        "10",
        "-n",
        "8",
        "--decode-tokens",
        "32",
        "-t",
        "1",
        "--timeout-s",
        "120",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench cluster failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let p = &v["prefix"];
    let prompt = p["prompt_tokens"].as_u64().expect("prompt_tokens");
    assert!((190..=200).contains(&prompt), "{p}");
    for k in [
        "ttft_remote_ms",
        "ttft_compute_ms",
        "speedup",
        "bytes_fetched",
        "fetch_p50_ms",
    ] {
        assert!(p[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {p}");
    }
    assert!(p["fetch_p99_ms"].as_f64().is_some(), "{p}");
    assert!(
        p["b_computed_tokens"].as_f64().expect("computed") < prompt as f64,
        "{p}"
    );
    assert!(
        p["b_remote_tokens"].as_f64().expect("remote") >= 160.0,
        "{p}"
    );
    assert_eq!(p["same_text"], true, "{p}");
    assert_eq!(p["a_drained"], true, "{p}");
    let r = &v["round"];
    for side in ["one_host", "cluster"] {
        assert_eq!(r[side]["ok"], 4, "{r}");
        assert!(r[side]["wall_s"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(
            r[side]["computed_tokens"].as_u64().is_some_and(|x| x > 0),
            "{r}"
        );
        assert!(r[side]["prefix_computations"].as_f64().is_some(), "{r}");
    }
    assert!(r["route_over_one_host"].as_f64().is_some(), "{r}");
    assert_eq!(r["rounds"], 2, "{r}");
    for side in ["one_host_walls_s", "cluster_walls_s"] {
        let walls = r[side].as_array().expect("walls");
        assert_eq!(walls.len(), 2, "{r}");
        assert!(
            walls.iter().all(|w| w.as_f64().is_some_and(|x| x > 0.0)),
            "{r}"
        );
    }
    assert!(
        r["cluster_prefix_computations_max"].as_f64().is_some(),
        "{r}"
    );
    let d = &v["decode"];
    assert_eq!(d["tokens"], 32, "{d}");
    for k in ["tokens_per_s_remote_on", "tokens_per_s_remote_off"] {
        assert!(d[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {d}");
    }
    assert!(d["slowdown_pct"].as_f64().is_some(), "{d}");
    assert!(d["pair_slowdown_pct"].as_f64().is_some(), "{d}");
    // --reps 2: one pair of hosts, measured on-first and off-first.
    assert_eq!(d["process_pairs"], 1, "{d}");
    for k in ["runs_remote_on", "runs_remote_off"] {
        assert_eq!(d[k].as_array().map(Vec::len), Some(2), "{k}: {d}");
    }
    let prefix = v["remote"]["key_prefix"].as_str().expect("key_prefix");
    assert!(
        v["remote"]["keys_deleted_after"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{v}"
    );
    let mut conn = srv.connection().expect("connect");
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut conn)
        .expect("KEYS");
    assert!(left.is_empty(), "the run's keys remain: {left:?}");
}

#[test]
fn bench_cluster_refuses_bad_input() {
    let m = model();
    for (flag, value) in [("--hosts", "1"), ("--prefix", "4000"), ("--reps", "0")] {
        let out = memoria(&["bench", "cluster", "-m", s(&m), flag, value]);
        assert!(!out.status.success(), "{flag} {value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
}
