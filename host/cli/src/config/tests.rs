//! Configuration resolution: flags against the file, numbers out of range, unknown keys and bad
//! values named, connection limits and store budgets checked, the example file valid.

use super::*;

#[test]
fn chat_template_flag_wins_over_the_file() {
    let raw = || RawConfig::parse("[model]\nchat_template = \"gemma\"\n").expect("parses");
    let cfg = resolve(raw(), &Overrides::default()).expect("valid");
    assert_eq!(cfg.chat_template.as_deref(), Some("gemma"));
    let o = Overrides {
        chat_template: Some("llama3".into()),
        ..Overrides::default()
    };
    let cfg = resolve(raw(), &o).expect("valid");
    assert_eq!(cfg.chat_template.as_deref(), Some("llama3"));
    let cfg = resolve(RawConfig::default(), &Overrides::default()).expect("valid");
    assert_eq!(cfg.chat_template, None);
}

#[test]
fn config_numbers_that_would_wrap_or_stop_the_server_are_refused_naming_key_and_range() {
    let with = |o: Overrides| resolve(RawConfig::default(), &o).map(|_| ());
    let e = with(Overrides {
        context: Some(usize::MAX),
        parallel: Some(32),
        ..Overrides::default()
    })
    .expect_err("-c past 2^24");
    assert!(
        e.to_string().contains("model.context / -c") && e.to_string().contains("0 to 16777216"),
        "{e}"
    );
    let e = with(Overrides {
        threads: Some(100_000),
        ..Overrides::default()
    })
    .expect_err("-t 100000");
    assert!(e.to_string().contains("server.threads / -t"), "{e}");
    let e = with(Overrides {
        parallel: Some(1 << 20),
        ..Overrides::default()
    })
    .expect_err("-np");
    assert!(e.to_string().contains("use 1 to 65536"), "{e}");
    for (text, key) in [
        ("[server]\nthreads = 4294967296\n", "server.threads"),
        ("[server]\nqueue = 18446744073709551615\n", "server.queue"),
        (
            "[server]\nretry_after_s = 18446744073709551615\n",
            "server.retry_after_s",
        ),
        (
            "[server]\nmax_body_bytes = 18446744073709551615\n",
            "server.max_body_bytes",
        ),
        (
            "[cache]\nidle_ttl_s = 18446744073709551615\n",
            "cache.idle_ttl_s",
        ),
        ("[cache]\nstep_tokens = 0\n", "cache.step_tokens"),
        ("[model]\ncontext = 18446744073709551615\n", "model.context"),
    ] {
        let raw = RawConfig::parse(text).expect(text);
        let e = resolve(raw, &Overrides::default()).expect_err(text);
        assert!(
            e.to_string().contains(key) && e.to_string().contains(" to "),
            "{text}: {e}"
        );
    }
    // Limits of namespaces: the same rules at start-up and through /admin/reload (both
    // build the registry with `tenants`).
    let raw = RawConfig::parse(
        "[namespaces.g]\nisolation = \"isolated\"\n[namespaces.g.limits]\nmax_instances = 9223372036854775807\n",
    )
    .expect("parses");
    let cfg = resolve(raw, &Overrides::default()).expect("resolves");
    let Err(e) = tenants(cfg.namespaces, None) else {
        panic!("max_instances past its range is refused");
    };
    assert!(
        e.to_string().contains("namespaces.g.limits.max_instances"),
        "{e}"
    );
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let e = RawConfig::parse("[server]\nprot = 1\n").expect_err("typo");
    assert!(e.to_string().contains("prot"), "{e}");
    let e = RawConfig::parse("[cache]\nblock_tokens = \"x\"\n").expect_err("type");
    assert!(e.to_string().contains("block_tokens"), "{e}");
    let raw = RawConfig::parse("[cache]\nblock_tokens = 100000\n").expect("parses");
    let e = resolve(raw, &Overrides::default()).expect_err("range");
    assert!(e.to_string().contains("cache.block_tokens"), "{e}");
    let two = Overrides {
        host: Some("127.0.0.1, ::1".into()),
        ..Overrides::default()
    };
    let cfg = resolve(RawConfig::default(), &two).expect("two hosts");
    assert_eq!(cfg.addr.ip().to_string(), "127.0.0.1");
    assert_eq!(cfg.more_addrs.len(), 1);
    assert_eq!(cfg.more_addrs[0].port(), cfg.addr.port());
    let raw = RawConfig::parse("[server]\nhost = \"localhost:1\"\n").expect("parses");
    assert!(
        resolve(raw, &Overrides::default())
            .expect_err("host")
            .to_string()
            .contains("server.host")
    );
}

#[test]
fn connection_limits_and_budgets_are_checked() {
    let cfg = resolve(RawConfig::default(), &Overrides::default()).expect("defaults");
    assert_eq!(cfg.header_timeout, Duration::from_secs(30));
    assert_eq!(cfg.body_timeout, Duration::from_secs(30));
    assert_eq!(cfg.min_body_rate, 1024);
    assert_eq!(cfg.max_connections, 1024);
    assert!(cfg.status_page, "the status page is on by default");
    let off = RawConfig::parse("[server]\nstatus_page = false\n").expect("parses");
    assert!(
        !resolve(off, &Overrides::default())
            .expect("valid")
            .status_page
    );
    let raw = RawConfig::parse(
        "[server]\nheader_timeout_s = 2\nbody_timeout_s = 1\nmin_body_bytes_per_s = 10\nmax_connections = 4\n",
    )
    .expect("parses");
    let cfg = resolve(raw, &Overrides::default()).expect("valid");
    assert_eq!(
        (
            cfg.header_timeout,
            cfg.body_timeout,
            cfg.min_body_rate,
            cfg.max_connections
        ),
        (Duration::from_secs(2), Duration::from_secs(1), 10, 4)
    );
    for (text, key) in [
        (
            "[server]\nheader_timeout_s = 0\n",
            "server.header_timeout_s",
        ),
        (
            "[server]\nbody_timeout_s = 18446744073709551615\n",
            "server.body_timeout_s",
        ),
        (
            "[server]\nmin_body_bytes_per_s = 0\n",
            "server.min_body_bytes_per_s",
        ),
        ("[server]\nmax_connections = 0\n", "server.max_connections"),
        // Was an unchecked `<< 20` that wrapped to a tiny or zero budget.
        ("[cache]\nbudget_mb = 17592186044416\n", "cache.budget_mb"),
    ] {
        let raw = RawConfig::parse(text).expect("parses");
        let e = resolve(raw, &Overrides::default()).expect_err(text);
        assert!(e.to_string().contains(key), "{text}: {e}");
    }
}

#[test]
fn flags_win_and_the_default_namespace_is_added() {
    let raw = RawConfig::parse(
        "[server]\nport = 9000\nparallel = 2\n[namespaces.alpha]\nisolation = \"isolated\"\napi_keys = [\"alpha-key-1\"]\n",
    )
    .expect("parses");
    let o = Overrides {
        port: Some(0),
        api_key: Some("shared-key-1".into()),
        ..Overrides::default()
    };
    let cfg = resolve(raw, &o).expect("valid");
    assert_eq!(cfg.addr.port(), 0);
    let names: Vec<&str> = cfg.namespaces.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["shared", "alpha"]);
    assert_eq!(cfg.namespaces[0].1.limits.max_concurrent, 2);
    assert_eq!(cfg.namespaces[0].1.api_keys, ["shared-key-1"]);
    let t = tenants(cfg.namespaces, cfg.remote.as_ref()).expect("tenants");
    assert_eq!(
        t.by_key("alpha-key-1").map(|n| n.name.as_str()),
        Some("alpha")
    );
}

#[test]
fn store_ram_budgets_are_read_and_checked() {
    let raw = RawConfig::parse("[store]\ncold_mb = 0\npage_cache_mb = 8\nwrite_queue_mb = 16\n")
        .expect("parse");
    let ram = store_ram(&raw.store).expect("in range");
    assert_eq!(
        ram,
        StoreRam {
            cold_bytes: Some(0),
            page_cache_bytes: Some(8 << 20),
            write_queue_bytes: Some(16 << 20),
        }
    );
    for bad in [
        "[store]\npage_cache_mb = 0\n",
        "[store]\nwrite_queue_mb = 0\n",
        "[store]\ncold_mb = 17592186044416\n",
    ] {
        let raw = RawConfig::parse(bad).expect("parse");
        let e = store_ram(&raw.store).expect_err(bad).to_string();
        assert!(e.contains("store."), "{e}");
    }
}

#[test]
fn store_budgets_are_checked() {
    let raw = RawConfig::parse("[store]\nmax_disk_mb = 100\nmax_saves_mb = 10\n").unwrap();
    let cfg = resolve(raw, &Overrides::default()).expect("valid");
    assert_eq!(cfg.store_max_disk_bytes, Some(100 << 20));
    assert_eq!(cfg.store_max_saves_bytes, Some(10 << 20));
    for bad in [
        "max_disk_mb = 0",
        "max_disk_mb = 3",
        "max_saves_mb = 0",
        "max_disk_mb = 10\nmax_saves_mb = 6",
    ] {
        let raw = RawConfig::parse(&format!("[store]\n{bad}\n")).unwrap();
        let e = resolve(raw, &Overrides::default()).expect_err(bad);
        assert!(e.to_string().contains("store.max_"), "{e}");
    }
    let raw = RawConfig::parse("[store]\nmax_disk_mb = 3\n").unwrap();
    let e = resolve(raw, &Overrides::default()).expect_err("under the minimum");
    assert!(e.to_string().contains("cannot be held under 4 MiB"), "{e}");
    let raw = RawConfig::parse("[store]\nmax_disk_mb = 4\nmax_saves_mb = 1\n").unwrap();
    let cfg = resolve(raw, &Overrides::default()).expect("the minimum is taken");
    assert_eq!(cfg.store_max_disk_bytes, Some(4 << 20));
}

#[test]
fn the_example_file_is_valid() {
    let text = include_str!("../../../../host.example.toml");
    let raw = RawConfig::parse(text).expect("host.example.toml parses");
    let cfg = resolve(raw, &Overrides::default()).expect("host.example.toml validates");
    tenants(cfg.namespaces, cfg.remote.as_ref()).expect("its namespaces validate");
}

#[test]
fn model_aliases_are_read_and_checked() {
    let raw = RawConfig::parse("[model]\naliases = [\"gpt-4o-mini\", \"smol\"]\n").expect("parses");
    let cfg = resolve(raw, &Overrides::default()).expect("valid");
    assert_eq!(cfg.model_aliases, ["gpt-4o-mini", "smol"]);
    let raw = RawConfig::parse("[model]\naliases = [\" \"]\n").expect("parses");
    let e = resolve(raw, &Overrides::default()).expect_err("a blank alias");
    assert!(e.to_string().contains("model.aliases"), "{e}");
}
