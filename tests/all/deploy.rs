//! Deploying components into a running runtime (the admin API underneath): deploy,
//! replace and delete per namespace and route, invalid components refused with nothing changed,
//! deployments and deletions kept in the components folder across a restart, running requests
//! left alone by a replace, and config reloads that reload configured components, keep
//! deployments and refuse what the running engine cannot serve.

use std::path::{Path, PathBuf};

use memoria_runtime::{DeployError, Origin, Runtime, RuntimeConfig, RuntimeError, Slot};
use memoria_tenant::{NamespaceSpec, Tenants};

use crate::tenants::{call, engine, guest};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memoria-deploy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn tenants(specs: &[(&str, String)]) -> Tenants {
    Tenants::new(
        specs
            .iter()
            .map(|(n, text)| {
                let spec: NamespaceSpec = toml::from_str(text).expect("namespace spec");
                (n.to_string(), spec)
            })
            .collect(),
    )
    .expect("tenants")
}

fn component_line(path: &Path) -> String {
    format!("component = {:?}\n", path.display().to_string())
}

fn runtime(t: &Tenants, eng: &memoria_sched::EngineHandle, folder: &Path) -> Runtime {
    let compiled = folder.join(".compiled");
    std::fs::create_dir_all(&compiled).expect("cache folder");
    let cfg = RuntimeConfig {
        components_dir: Some(folder.to_path_buf()),
        cache_dir: Some(compiled),
        ..RuntimeConfig::default()
    };
    eng.register_namespaces(t.registry_table())
        .expect("namespaces registered");
    Runtime::new(t, eng.clone(), cfg).expect("runtime starts")
}

async fn text(rt: &Runtime, ns: &str, path: &str) -> (u16, String) {
    let (status, body, _) = call(rt, ns, path, "").await;
    (status, body)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(guest(name)).expect("guest binary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_deploy_replace_delete_and_survive_a_restart() {
    let folder = temp("folder");
    let t = tenants(&[
        ("alpha", String::new()),
        ("beta", component_line(&guest("hello"))),
    ]);
    let eng = engine();
    let rt = runtime(&t, &eng, &folder);
    let (hello, misbehave) = (bytes("hello"), bytes("misbehave"));

    assert!(!rt.has_component("alpha", "/x"));
    assert_eq!(text(&rt, "alpha", "/x").await.0, 404);
    let d = rt.deploy("alpha", Slot::Default, &hello).expect("deploys");
    assert!(!d.replaced);
    assert_eq!(d.info.origin, Origin::Deployed { persisted: true });
    assert_eq!(d.info.digest, blake3::hash(&hello).to_hex().to_string());
    assert_eq!(d.info.bytes, hello.len());
    assert_eq!(
        text(&rt, "alpha", "/x").await,
        (200, "hello from /ns/alpha/x".into())
    );
    let raw = Slot::route("raw").expect("route");
    rt.deploy("alpha", raw.clone(), &misbehave)
        .expect("deploys a route");
    assert_eq!(text(&rt, "alpha", "/raw/y").await, (200, "ok".into()));
    assert_eq!(
        text(&rt, "alpha", "/other").await,
        (200, "hello from /ns/alpha/other".into()),
        "paths no route claims still reach the default component"
    );
    let d = rt
        .deploy("alpha", Slot::Default, &misbehave)
        .expect("replaces");
    assert!(d.replaced);
    assert_eq!(text(&rt, "alpha", "/x").await, (200, "ok".into()));
    let cached = std::fs::read_dir(folder.join(".compiled"))
        .expect("cache folder")
        .count();
    assert_eq!(
        cached, 2,
        "compiled code of replaced components is dropped (misbehave and beta's hello stay)"
    );

    let stored = folder.join("alpha").join("default.wasm");
    let unsatisfied = bytes("unsatisfied");
    for (bad, why) in [
        (&b"\0asm\x01\0\0\0"[..], "core WebAssembly module"),
        (&unsatisfied[..], "unsatisfied import"),
        (&hello[..hello.len() / 2], "invalid component"),
        (&b""[..], "not a WebAssembly binary"),
    ] {
        let e = rt.deploy("alpha", Slot::Default, bad).expect_err("refused");
        assert!(
            matches!(e, DeployError::Invalid(_)) && e.to_string().contains(why),
            "{e}"
        );
        assert_eq!(
            text(&rt, "alpha", "/x").await,
            (200, "ok".into()),
            "a refused deploy changes nothing"
        );
        assert_eq!(std::fs::read(&stored).expect("stored"), misbehave);
    }
    assert!(matches!(
        rt.deploy("nope", Slot::Default, &hello),
        Err(DeployError::UnknownNamespace(_))
    ));

    let listed = rt.components("beta").expect("beta");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].origin, Origin::Config(guest("hello")));
    assert!(rt.remove("beta", &Slot::Default).expect("removes"));
    assert_eq!(text(&rt, "beta", "/x").await.0, 404);
    assert!(!rt.remove("beta", &Slot::Default).expect("nothing left"));
    assert!(rt.components("beta").expect("beta").is_empty());

    drop(rt);
    let rt = runtime(&t, &eng, &folder);
    assert_eq!(text(&rt, "alpha", "/x").await, (200, "ok".into()));
    assert_eq!(text(&rt, "alpha", "/raw/z").await, (200, "ok".into()));
    assert_eq!(
        text(&rt, "beta", "/x").await.0,
        404,
        "a deleted configured component stays deleted after a restart"
    );
    assert!(rt.remove("alpha", &raw).expect("removes the route"));
    rt.deploy("beta", Slot::Default, &hello)
        .expect("deploys over the deletion");

    drop(rt);
    let rt = runtime(&t, &eng, &folder);
    let slots: Vec<Slot> = rt
        .components("alpha")
        .expect("alpha")
        .into_iter()
        .map(|c| c.slot)
        .collect();
    assert_eq!(slots, [Slot::Default]);
    assert_eq!(
        text(&rt, "beta", "/x").await,
        (200, "hello from /ns/beta/x".into())
    );

    std::fs::write(
        folder.join("alpha").join("default.wasm"),
        b"\0asm\x01\0\0\0",
    )
    .expect("corrupt the stored component");
    let e = Runtime::new(
        &t,
        eng.clone(),
        RuntimeConfig {
            components_dir: Some(folder.clone()),
            ..RuntimeConfig::default()
        },
    )
    .expect_err("a broken stored component stops start-up");
    assert!(
        e.to_string()
            .starts_with("namespaces.alpha: the deployed component")
            && e.to_string().contains("core WebAssembly module"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(folder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_reloads_configured_components_and_keeps_deployments() {
    let folder = temp("reload");
    let file = folder.join("alpha.wasm");
    std::fs::copy(guest("hello"), &file).expect("copy");
    let alpha = component_line(&file);
    let t = tenants(&[("alpha", alpha.clone())]);
    let eng = engine();
    let rt = runtime(&t, &eng, &folder.join("deployed"));
    assert_eq!(
        text(&rt, "alpha", "/x").await,
        (200, "hello from /ns/alpha/x".into())
    );
    rt.deploy("alpha", Slot::route("h").expect("route"), &bytes("hello"))
        .expect("deploys");

    std::fs::copy(guest("misbehave"), &file).expect("copy");
    let added = format!("{}\n", component_line(&guest("hello")));
    let t2 = tenants(&[("alpha", alpha.clone()), ("gamma", added)]);
    eng.register_namespaces(t2.registry_table())
        .expect("namespaces registered");
    rt.reload(&t2).expect("reloads");
    assert_eq!(text(&rt, "alpha", "/x").await, (200, "ok".into()));
    assert_eq!(
        text(&rt, "alpha", "/h/y").await,
        (200, "hello from /ns/alpha/h/y".into()),
        "deployments survive a reload"
    );
    assert_eq!(
        text(&rt, "gamma", "/x").await,
        (200, "hello from /ns/gamma/x".into()),
        "a namespace added by the reload is served"
    );

    std::fs::write(&file, b"\0asm\x01\0\0\0").expect("break the file");
    let e = rt.reload(&t2).expect_err("refused");
    assert!(
        matches!(e, RuntimeError::Component { ref ns, .. } if ns == "alpha"),
        "{e}"
    );
    assert_eq!(
        text(&rt, "alpha", "/x").await,
        (200, "ok".into()),
        "a refused reload changes nothing"
    );

    std::fs::copy(guest("misbehave"), &file).expect("copy");
    let big = format!("{alpha}[limits]\nmemory_bytes = {}\n", 1u64 << 34);
    let e = rt
        .reload(&tenants(&[("alpha", big)]))
        .expect_err("needs a restart");
    assert!(
        matches!(e, RuntimeError::NeedsRestart(_)) && e.to_string().contains("restart"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(folder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_does_not_wait_for_or_disturb_running_requests() {
    let folder = temp("running");
    let t = tenants(&[(
        "alpha",
        format!(
            "{}[limits]\nwall_time_ms = 4000\n",
            component_line(&guest("misbehave"))
        ),
    )]);
    let eng = engine();
    let rt = runtime(&t, &eng, &folder);
    let spinning = {
        let rt = rt.clone();
        tokio::spawn(async move { text(&rt, "alpha", "/loop").await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    rt.deploy("alpha", Slot::Default, &bytes("hello"))
        .expect("deploys");
    assert_eq!(
        text(&rt, "alpha", "/x").await,
        (200, "hello from /ns/alpha/x".into())
    );
    assert!(
        !spinning.is_finished(),
        "the deploy and the new request did not wait for the running one, which is still spinning"
    );
    let (status, body) = spinning.await.expect("task");
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("wall-time"), "{body}");
    let _ = std::fs::remove_dir_all(folder);
}

/// The server hands the runtime the namespace it resolved; the runtime serves it by that
/// namespace's id, never by looking its name up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolved_namespace_is_served_by_its_id() {
    use memoria_runtime::ComponentRouter;
    use memoria_tenant::Namespace;

    let folder = temp("by-id");
    let t = tenants(&[
        ("alpha", String::new()),
        ("beta", component_line(&guest("hello"))),
    ]);
    let eng = engine();
    let rt = runtime(&t, &eng, &folder);
    let beta = t.get("beta").expect("beta");
    let alpha = t.get("alpha").expect("alpha");
    assert!(ComponentRouter::has_component(&rt, beta, "/x"));
    assert!(!ComponentRouter::has_component(&rt, alpha, "/x"));
    let like = |id, name: &str| Namespace {
        id,
        name: name.into(),
        spec: beta.spec.clone(),
        public_prefixes: Vec::new(),
    };
    assert!(
        ComponentRouter::has_component(&rt, &like(beta.id, "alpha"), "/x"),
        "beta's id reaches beta's component whatever the name says"
    );
    assert!(
        !ComponentRouter::has_component(&rt, &like(alpha.id, "beta"), "/x"),
        "alpha's id reaches alpha's (empty) table"
    );
    let stray = like(memoria_kv::NamespaceId(u32::MAX), "beta");
    assert!(
        !ComponentRouter::has_component(&rt, &stray, "/x"),
        "an id the runtime does not hold reaches nothing"
    );
    let _ = std::fs::remove_dir_all(&folder);
}
