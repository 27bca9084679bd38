//! Fair guests: while one namespace's guests spin in `/misbehave/loop`, a neighbour
//! namespace's chat requests keep their latency (p50 within 2× of the unloaded baseline: a
//! throttled namespace's guests wake one slice apart, so they hold at most their share of the
//! workers at any moment), and the spinning namespace's CPU account shows it was throttled and
//! held to its CPU share. Driven in process on two tokio workers, like a small host.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memoria_runtime::{CpuShare, NsCountersSnapshot, Runtime, RuntimeConfig};
use memoria_tenant::{NamespaceSpec, Tenants};

use crate::tenants::{call, engine, guest};

/// Guests spinning at once in the busy namespace: three per worker, so without a share they
/// would hold both workers all the time.
const LOOPS: usize = 6;
/// How long each measurement sends neighbour chats (one after the other, at least 20).
const MEASURE: Duration = Duration::from_secs(1);
/// A short neighbour chat: a few awaited host calls and token steps, each of which needs a
/// free worker again, so it measures scheduling rather than one lucky poll.
const CHAT: &str = r#"{"message": "Where is the ball?", "max_tokens": 8}"#;

fn spec(components: &[&str], limits: &str) -> NamespaceSpec {
    let mut text = String::from("isolation = \"isolated\"\n[components]\n");
    for g in components {
        text.push_str(&format!("{g} = {:?}\n", guest(g).display().to_string()));
    }
    text.push_str("[limits]\n");
    text.push_str(limits);
    toml::from_str(&text).expect("namespace spec")
}

fn runtime(share: Option<CpuShare>) -> Runtime {
    let specs = [
        // Loops end at their 2.5 s wall time, so every one of them is bounded.
        (
            "busy",
            spec(&["misbehave"], "max_instances = 8\nwall_time_ms = 2500\n"),
        ),
        ("calm", spec(&["chat"], "max_instances = 8\n")),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s))
    .collect();
    let tenants = Tenants::new(specs).expect("tenants");
    let cfg = RuntimeConfig {
        cpu_share: share,
        ..RuntimeConfig::default()
    };
    let eng = engine();
    eng.register_namespaces(tenants.registry_table())
        .expect("namespaces registered");
    Runtime::new(&tenants, eng, cfg).expect("runtime loads the guests")
}

fn counters(rt: &Runtime, ns: &str) -> NsCountersSnapshot {
    rt.stats()
        .per_namespace()
        .into_iter()
        .find(|c| c.namespace == ns)
        .expect("namespace counters")
}

/// The median latency of neighbour chats sent one after the other for `MEASURE`.
async fn chat_p50(rt: &Runtime) -> Duration {
    let mut took = Vec::new();
    let begun = Instant::now();
    while took.len() < 20 || begun.elapsed() < MEASURE {
        let started = Instant::now();
        let (status, text, _) = call(rt, "calm", "/chat", CHAT).await;
        took.push(started.elapsed());
        assert_eq!(status, 200, "{text}");
    }
    took.sort();
    took[took.len() / 2]
}

/// Keeps `LOOPS` spinning requests in flight in the busy namespace until `stop`.
fn start_loops(rt: &Runtime, stop: &Arc<AtomicBool>) -> Vec<tokio::task::JoinHandle<usize>> {
    (0..LOOPS)
        .map(|_| {
            let (rt, stop) = (rt.clone(), stop.clone());
            tokio::spawn(async move {
                let mut done = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (status, text, _) = call(&rt, "busy", "/misbehave/loop", "").await;
                    assert_eq!(status, 500, "the loop only ends at its deadline: {text}");
                    assert!(text.contains("wall-time limit"), "{text}");
                    done += 1;
                }
                done
            })
        })
        .collect()
}

fn secs(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_namespace_keeps_to_its_share_and_its_neighbours_keep_their_latency() {
    let share = CpuShare::default();
    let rt = runtime(Some(share));
    for _ in 0..3 {
        let (status, text, _) = call(&rt, "calm", "/chat", CHAT).await;
        assert_eq!(status, 200, "warm-up: {text}");
    }
    let baseline = chat_p50(&rt).await;

    let stop = Arc::new(AtomicBool::new(false));
    let loops = start_loops(&rt, &stop);
    // Measure once the busy namespace has spent its burst and is being held to its share.
    let waited = Instant::now();
    while counters(&rt, "busy").throttled == 0 && waited.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (before, window) = (counters(&rt, "busy"), Instant::now());
    let loaded = chat_p50(&rt).await;
    let (window, after) = (window.elapsed(), counters(&rt, "busy"));
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        assert!(l.await.expect("loop task") >= 1, "every loop ran");
    }

    let used = secs(after.worker_nanos.saturating_sub(before.worker_nanos));
    let cpu = secs(after.cpu_nanos.saturating_sub(before.cpu_nanos));
    let cores = f64::from(share.millicores) / 1000.0;
    eprintln!(
        "fairness: neighbour chat p50 {baseline:?} alone, {loaded:?} next to {LOOPS} loops; \
         busy held workers {used:.3} s (CPU {cpu:.3} s) in {window:?} (share {cores} cores), \
         throttled {} times for {:.3} s",
        after.throttled,
        secs(after.throttled_nanos),
    );
    assert!(
        loaded <= baseline * 2,
        "neighbour p50 {loaded:?} next to the loops, {baseline:?} alone"
    );
    assert!(
        after.throttled > 0 && after.throttled_nanos > 0,
        "the looping namespace was throttled: {after:?}"
    );
    // Over the window it owes at most one burst more than its share, plus one epoch tick per
    // loop; without a share the loops would use both cores.
    let w = window.as_secs_f64();
    let allowed = cores * w + cores * share.burst.as_secs_f64() + LOOPS as f64 * 0.01;
    assert!(
        used <= allowed,
        "busy held workers {used:.3} s in {w:.3} s, at most {allowed:.3} s allowed"
    );
    assert!(
        used >= cores * w / 4.0,
        "the loops' time is counted: {used:.3} s in {w:.3} s"
    );
    // Per slice CPU time never exceeds the wall time the worker was held; the two snapshots
    // may each split one slice per loop between the counters.
    assert!(
        cpu > 0.0 && cpu <= used + LOOPS as f64 * 0.01,
        "thread CPU time {cpu:.3} s is counted and within the {used:.3} s the workers were held"
    );
    let calm = counters(&rt, "calm");
    assert!(
        calm.cpu_nanos > 0,
        "the neighbour's guest CPU is counted too"
    );
    assert_eq!(calm.throttled, 0, "the neighbour stayed within its share");
}
