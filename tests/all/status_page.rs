//! `GET /ui` in a real browser: Debian's headless `chromium` loads the status page of a running
//! `memoria serve` (admin key in the URL fragment, as an operator would bookmark it) while a
//! client keeps it busy; the rendered DOM must hold the charts and carry the figures `/stats`
//! reports (a real Valkey/Redis remote tier included, as the bar's fourth segment), and a
//! screenshot is kept (its path is printed). Chromium is required: CI installs
//! it (`.ci/run`), and a machine without it fails here rather than skipping.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use serde_json::{Value, json};

use memoria_store::remote::test_server::TestServer;

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

const ADMIN: &str = "admin-key-for-the-page";

/// The browser: `$MEMORIA_CHROMIUM`, else the first of Debian's and others' names on PATH.
pub(crate) fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(p) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
        {
            return p;
        }
    }
    panic!(
        "headless chromium not found (apt-get install chromium, or set MEMORIA_CHROMIUM); \
         the status page test needs a real browser"
    );
}

/// Runs headless chromium on `url` with `extra` flags, after `budget_ms` of page time.
pub(crate) fn browse(profile: &Path, url: &str, budget_ms: u32, extra: &[&str]) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--window-size=1280,1500",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of attribute `attr` of the first element whose opening tag contains `marker`.
fn attr(dom: &str, marker: &str, attr: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!(" {attr}=\"");
    let v = tag.find(&key)? + key.len();
    let len = tag[v..].find('"')?;
    Some(tag[v..v + len].replace("&amp;", "&"))
}

fn num(dom: &str, marker: &str, name: &str) -> f64 {
    let v = attr(dom, marker, name).unwrap_or_else(|| panic!("no {name} on {marker} in the page"));
    v.parse()
        .unwrap_or_else(|_| panic!("{marker} {name}={v:?} is not a number"))
}

/// The `<tr data-ns=...>` row of namespace `ns`, as text.
fn row<'a>(dom: &'a str, ns: &str) -> &'a str {
    let at = dom
        .find(&format!("<tr data-ns=\"{ns}\""))
        .unwrap_or_else(|| panic!("no row for namespace {ns}"));
    let end = at + dom[at..].find("</tr>").expect("row end");
    &dom[at..end]
}

fn stats(s: &Server) -> Value {
    let r = get(
        s.addr,
        "/stats",
        &[("Authorization", &format!("Bearer {ADMIN}"))],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A counter read from the page lies between the `/stats` readings before and after.
fn between(what: &str, page: f64, before: &Value, after: &Value) {
    let (lo, hi) = (f(before), f(after));
    assert!(
        lo <= page && page <= hi,
        "{what}: page shows {page}, /stats went from {lo} to {hi}"
    );
}

#[test]
fn status_page_renders_live_figures_in_headless_chromium() {
    let browser = chromium();
    let remote = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = temp_dir("status-page");
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nadmin_key = \"{ADMIN}\"\n\n[cache]\nauto_pin = 4\n\n[namespaces.alpha]\nisolation = \"isolated\"\napi_keys = [\"alpha-key-page1\"]\n\n[namespaces.beta]\nisolation = \"group:g\"\napi_keys = [\"beta-key-page01\"]\n[namespaces.beta.limits]\nmax_blocks = 4000\n"
        ),
    )
    .expect("config");
    let s = Server::start(
        "status-page",
        &[
            "-m",
            &model(),
            "--config",
            cfg.to_str().expect("utf-8"),
            "--store",
            dir.join("store").to_str().expect("utf-8"),
            "--remote",
            &remote.url(),
        ],
    );
    // The page shell is public, its figures are not.
    let page = get(s.addr, "/ui", &[]);
    assert_eq!(page.status, 200);
    assert!(page.text().contains("id=\"hit-rate-chart\""));
    assert!(
        page.header("content-security-policy")
            .is_some_and(|c| c.contains("connect-src 'self'"))
    );
    assert_eq!(get(s.addr, "/stats", &[]).status, 401);

    // Without the key the page asks for it instead of showing figures.
    let locked = browse(
        &dir.join("profile-nokey"),
        &format!("http://{}/ui", s.addr),
        2000,
        &["--dump-dom"],
    );
    assert_eq!(
        attr(&locked, "id=\"status\"", "data-state").as_deref(),
        Some("auth")
    );
    assert!(attr(&locked, "id=\"key-form\"", "hidden").is_none());

    // A short load: repeated prompts in both namespaces (hits after the first of each).
    let complete = |addr, key: &str, i: usize| {
        let body = json!({"prompt": format!("Once upon a time there was a little girl named Lily. She loved to play {}", i % 3), "max_tokens": 4, "temperature": 0});
        let r = post(
            addr,
            "/v1/completions",
            &body,
            &[("Authorization", &format!("Bearer {key}"))],
        );
        assert_eq!(r.status, 200, "{}", r.text());
    };
    for i in 0..6 {
        complete(s.addr, "alpha-key-page1", i);
        complete(s.addr, "beta-key-page01", i);
    }
    // The remote tier's size is polled every 2 s: wait until it shows the blocks written.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while stats(&s)["tiers"]["remote"]["blocks"].as_u64().unwrap_or(0) == 0 {
        assert!(
            std::time::Instant::now() < until,
            "the remote size never polled"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let before = stats(&s);
    let stop = Arc::new(AtomicBool::new(false));
    // Back to back from two clients: the page's virtual clock runs ahead of the real one, so
    // requests must land between its refreshes for the hit-rate chart to get points.
    let load: Vec<_> = ["alpha-key-page1", "beta-key-page01"]
        .into_iter()
        .map(|key| {
            let (stop, addr) = (stop.clone(), s.addr);
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Relaxed) {
                    complete(addr, key, i);
                    i += 1;
                }
                i
            })
        })
        .collect();
    let url = format!("http://{}/ui#key={ADMIN}", s.addr);
    let dom = browse(&dir.join("profile"), &url, 6000, &["--dump-dom"]);
    let after = stats(&s);

    // Live: several refreshes, authenticated with the key from the fragment.
    assert_eq!(
        attr(&dom, "id=\"status\"", "data-state").as_deref(),
        Some("ok"),
        "the page did not load /stats:\n{dom}"
    );
    let polls = num(&dom, "id=\"status\"", "data-polls");
    assert!(polls >= 3.0, "only {polls} refreshes");
    assert_eq!(
        attr(&dom, "id=\"model\"", "data-value").as_deref(),
        after["model"].as_str()
    );

    // Tiers: a stacked bar per unit; the hot tier holds blocks, its bytes are blocks × block size.
    let hot_blocks = num(&dom, "data-tier=\"hot\" data-value", "data-value");
    assert!(
        dom.contains("<svg id=\"tier-blocks-bar\"") && dom.contains("<svg id=\"tier-bytes-bar\"")
    );
    assert!(hot_blocks > 0.0 && hot_blocks <= f(&after["pool"]["blocks_total"]));
    let hot_row = &dom[dom.find("<tr data-tier=\"hot\"").expect("hot tier row")..];
    let row_blocks = num(hot_row, "data-tier=\"hot\"", "data-blocks");
    let row_bytes = num(hot_row, "data-tier=\"hot\"", "data-bytes");
    assert_eq!(row_bytes, row_blocks * f(&after["pool"]["block_bytes"]));
    // The remote tier: the server's keys and memory, a segment of each bar and a table row.
    let remote_blocks = num(&dom, "data-tier=\"remote\" data-value", "data-value");
    assert!(
        remote_blocks > 0.0 && remote_blocks <= f(&after["tiers"]["remote"]["blocks"]),
        "remote blocks on the page {remote_blocks}: {}",
        after["tiers"]
    );
    let remote_row = &dom[dom
        .find("<tr data-tier=\"remote\"")
        .expect("remote tier row")..];
    assert!(num(remote_row, "data-tier=\"remote\"", "data-bytes") > 0.0);

    // Hit rate: a line with points, and the overall figure between the two /stats readings.
    assert!(num(&dom, "id=\"hit-rate-line\"", "data-points") >= 1.0);
    assert!(attr(&dom, "id=\"hit-rate-line\"", "points").is_some_and(|p| p.contains(',')));
    between(
        "state cache hits",
        num(&dom, "id=\"hit-rate\"", "data-hits"),
        &before["state_cache"]["hits"],
        &after["state_cache"]["hits"],
    );
    between(
        "state cache misses",
        num(&dom, "id=\"hit-rate\"", "data-misses"),
        &before["state_cache"]["misses"],
        &after["state_cache"]["misses"],
    );
    assert!(f(&after["state_cache"]["hits"]) > 0.0);

    // Engine: counters in range, a derived token rate.
    between(
        "engine steps",
        num(&dom, "data-field=\"steps\"", "data-value"),
        &before["engine"]["steps"],
        &after["engine"]["steps"],
    );
    assert!(num(&dom, "data-field=\"tokens_per_s\"", "data-value") >= 0.0);
    assert!(num(&dom, "data-field=\"queue_depth\"", "data-value") >= 0.0);
    // `[cache] auto_pin = 4`: the repeated story prefixes are pinned, and the page says how many.
    assert!(f(&after["pool"]["auto_pinned_blocks"]) > 0.0, "{after}");
    between(
        "auto-pinned blocks",
        num(&dom, "data-field=\"auto_pinned_blocks\"", "data-value"),
        &json!(0),
        &json!(
            f(&before["pool"]["auto_pinned_blocks"]).max(f(&after["pool"]["auto_pinned_blocks"]))
        ),
    );

    // Namespaces: a row each with hits in range, quota use against beta's block quota.
    for ns in ["alpha", "beta"] {
        let r = row(&dom, ns);
        between(
            &format!("{ns} hits"),
            num(r, "data-field=\"hits\"", "data-value"),
            &before["namespaces"][ns]["state_cache"]["hits"],
            &after["namespaces"][ns]["state_cache"]["hits"],
        );
        assert!(r.contains("data-field=\"miss_reasons\""));
    }
    let beta = row(&dom, "beta");
    assert!(beta.contains("/4000"), "beta's quota use: {beta}");
    assert_eq!(
        attr(beta, "data-field=\"hit_timing\"", "data-value").as_deref(),
        Some("pad")
    );
    assert_eq!(
        attr(
            row(&dom, "alpha"),
            "data-field=\"hit_timing\"",
            "data-value"
        )
        .as_deref(),
        Some("off")
    );

    // Advisor: its curve when /stats has one, else "not available".
    match after.get("advisor").filter(|a| a.is_object()) {
        Some(a) => {
            let n = a["curve"].as_array().map_or(0, Vec::len);
            assert_eq!(num(&dom, "id=\"advisor-chart\"", "data-points"), n as f64);
            assert_eq!(dom.matches("class=\"advisor-point").count(), n);
        }
        None => {
            assert_eq!(
                attr(&dom, "id=\"advisor-summary\"", "data-available").as_deref(),
                Some("false")
            );
            assert!(dom.contains(">not available</p>"));
        }
    }

    // Lower tiers: a bar segment and a row each for every tier /stats lists.
    for tier in ["cold", "disk"] {
        if let Some(t) = after["tiers"].get(tier) {
            let marker = format!("<tr data-tier=\"{tier}\"");
            assert!(dom.contains(&marker), "no {tier} row though /stats has {t}");
            assert!(dom.contains(&format!("data-tier=\"{tier}\" data-value")));
        }
    }
    assert!(after["tiers"]["hot"].is_object());

    // A screenshot for the CI artefacts, still under load.
    let shots = std::env::var_os("MEMORIA_ARTIFACTS").map_or_else(|| dir.clone(), PathBuf::from);
    std::fs::create_dir_all(&shots).expect("artefact folder");
    let png = shots.join("status-page.png");
    let _ = std::fs::remove_file(&png);
    browse(
        &dir.join("profile-shot"),
        &url,
        20_000,
        &[&format!("--screenshot={}", png.display())],
    );
    stop.store(true, Relaxed);
    let requests: usize = load
        .into_iter()
        .map(|t| t.join().expect("load thread"))
        .sum();
    assert!(requests > 0);
    let bytes =
        std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000);
    println!(
        "status page screenshot: {} (browser {})",
        png.display(),
        browser.display()
    );
}
