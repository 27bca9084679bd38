//! Fuzzing the `memoria:llm` host calls from inside a guest: the `hostcalls` guest runs a
//! program of host calls spelled by the request body (every function, with lengths up to
//! megabytes, token ids past the vocabulary, NaN and infinite sampling values, huge counts and
//! durations, sessions and streams used after others were dropped, and handle numbers forged
//! from the program). For generated programs, each request must end as a 200 with one line per
//! call, or as a 500 that names the guest's own failure (a trap on a forged handle, its memory
//! cap); afterwards the namespace holds no
//! session, a neighbour namespace is served, and the engine is up with no panic counted.
//! `MEMORIA_FUZZ_CASES` raises the case count for long runs.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use memoria_runtime::{Runtime, RuntimeConfig};
use memoria_tenant::{NamespaceSpec, Tenants};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::tenants::{call, engine, guest};

fn spec(component: &str) -> NamespaceSpec {
    let text = format!(
        "isolation = \"isolated\"\n[components]\n{component} = {:?}\n[limits]\n\
         max_instances = 2\nmax_sessions = 16\nmax_tokens_per_request = 12\n\
         wall_time_ms = 20000\nmax_host_call_bytes = 262144\n",
        guest(component).display().to_string()
    );
    toml::from_str(&text).expect("namespace spec")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Open sessions of `ns` once its request has finished.
async fn settled(rt: &Runtime, ns: &str) -> usize {
    for _ in 0..500 {
        if rt.open_sessions(ns) == Some(0) {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rt.open_sessions(ns).expect("namespace")
}

#[test]
fn generated_host_call_programs_never_hurt_the_host() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let eng = engine();
    let tenants = Tenants::new(vec![
        ("fuzz".to_string(), spec("hostcalls")),
        ("calm".to_string(), spec("hello")),
    ])
    .expect("tenants");
    eng.register_namespaces(tenants.registry_table())
        .expect("namespaces registered");
    let rt =
        Arc::new(Runtime::new(&tenants, eng.clone(), RuntimeConfig::default()).expect("runtime"));
    let mut runner = TestRunner::new(memoria_fuzz::config(48));
    let (answered, trapped) = (Cell::new(0usize), Cell::new(0usize));
    let program = proptest::collection::vec(any::<u8>(), 0..400);
    let result = runner.run(&program, |bytes| {
        let (status, text) = tokio.block_on(async {
            let (status, text, _) = call(&rt, "fuzz", "/hostcalls", &hex(&bytes)).await;
            (status, text)
        });
        match status {
            200 => {
                answered.set(answered.get() + 1);
                prop_assert!(
                    text.lines().all(|l| l.starts_with("ok ")
                        || l.starts_with("err ")
                        || l.starts_with("forge ")),
                    "a report line per call: {text}"
                );
            }
            500 => {
                trapped.set(trapped.get() + 1);
                prop_assert!(
                    ["trap", "handle", "wasm", "memory limit"]
                        .iter()
                        .any(|w| text.contains(w)),
                    "a 500 names the guest's failure: {text}"
                );
            }
            s => prop_assert!(false, "status {s}: {text}"),
        }
        let open = tokio.block_on(settled(&rt, "fuzz"));
        prop_assert_eq!(open, 0, "sessions close with their request");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (status, text) = tokio.block_on(async {
        let (status, text, _) = call(&rt, "calm", "/hello", "").await;
        (status, text)
    });
    assert_eq!(status, 200, "the neighbour is served: {text}");
    assert!(eng.is_up(), "the engine is up");
    let s = eng.stats().snapshot();
    assert_eq!(s.panics, 0, "no engine command panicked: {s:?}");
    eprintln!(
        "host-call fuzzing: {} programs answered, {} trapped (forged handles)",
        answered.get(),
        trapped.get()
    );
    assert!(answered.get() > 0, "some programs ran to the end");
}
