//! A warm decode step allocates nothing, drafting or not: 16 sessions decode while a counting
//! global allocator watches every thread of this process (the engine thread, the kernels'
//! worker pool, and this test thread draining the token streams) for 40 engine steps, once
//! without speculation and once with drafts verified in the window. Allocation sites, if any,
//! are reported with their backtraces. This file is its own test binary, and its one test runs
//! both windows in turn, so nothing else allocates meanwhile. The window is counted in engine
//! steps (the engine may run ahead of the reader), and every generation has budget and context
//! to spare past it, so none ends inside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use memoria_kernels::GgmlType;
use memoria_kv::{NamespaceEntry, NamespaceId, NamespaceSalt};
use memoria_model::gguf::GgufFile;
use memoria_model::llama::Model;
use memoria_model::synth::{self, SynthSpec};
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::SamplingParams;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, GenerationStream};

/// Counts allocations (not frees) while armed.
struct Counting;

static ARMED: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Distinct allocation sites seen (memoria frames of the backtrace) and how often each allocated.
static SITES: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());
const SITES_KEPT: usize = 32;

thread_local! {
    /// Set while this thread records a backtrace (which allocates itself).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

fn note_allocation(size: usize) {
    if !ARMED.load(SeqCst) || IN_HOOK.with(Cell::get) {
        return;
    }
    ALLOCATIONS.fetch_add(1, SeqCst);
    IN_HOOK.with(|h| h.set(true));
    let site = allocation_site(size);
    if let Ok(mut sites) = SITES.lock() {
        if let Some(seen) = sites.iter_mut().find(|(s, _)| *s == site) {
            seen.1 += 1;
        } else if sites.len() < SITES_KEPT {
            sites.push((site, 1));
        }
    }
    IN_HOOK.with(|h| h.set(false));
}

/// The innermost frames of the current backtrace, with the thread's name.
fn allocation_site(size: usize) -> String {
    let bt = std::backtrace::Backtrace::force_capture().to_string();
    let frames: Vec<&str> = bt
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("at ") && !l.contains("decode_step_allocations"))
        .filter(|l| !l.contains("backtrace") && !l.contains("GlobalAlloc"))
        .take(28)
        .collect();
    let thread = std::thread::current();
    format!(
        "thread {:?}, {size} bytes, via {}",
        thread.name(),
        frames.join(" <- ")
    )
}

// SAFETY: every call forwards to `System` with the same arguments; the bookkeeping allocates
// only through re-entrant calls that are not counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: forwarded as received.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const NS: NamespaceId = NamespaceId(1);
const SESSIONS: usize = 16;
/// Past 64 tokens: each stream's channel (tokio's, in blocks of 32 events) then recycles the
/// blocks its reader has finished instead of allocating new ones.
const WARM_TOKENS: usize = 70;
const COUNTED_STEPS: u64 = 40;
/// Far past the window (warm-up + counted steps + however far the engine runs ahead) and within
/// the 512-token context of the longest prompt (65 tokens).
const MAX_TOKENS: usize = 400;

fn model() -> Model {
    let spec = SynthSpec {
        context: 512,
        ..SynthSpec::tiny(synth::Arch::Llama, GgmlType::Q8_0)
    };
    let bytes = synth::synthesize(&spec).expect("synthesize").to_bytes();
    Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load")
}

/// Reads one token event from every stream, in order (each step gives every session one).
fn one_token_each(streams: &mut [GenerationStream]) {
    for s in streams.iter_mut() {
        match s.blocking_next() {
            Some(Event::Token { .. }) => {}
            other => panic!("expected a token, got {other:?}"),
        }
    }
}

/// Takes every event that has arrived; all must be tokens (no generation ends in the window).
fn drain(streams: &mut [GenerationStream]) -> bool {
    streams
        .iter_mut()
        .all(|s| std::iter::from_fn(|| s.try_next()).all(|ev| matches!(ev, Event::Token { .. })))
}

/// What one counted window saw.
struct Window {
    steps: u64,
    allocations: u64,
    sites: String,
    only_tokens: bool,
    /// Draft tokens verified inside the window.
    drafted: u64,
}

/// 16 sessions generate with `speculation`; counts allocations over [`COUNTED_STEPS`] warm
/// engine steps. `repeat`: each prompt is a short phrase said over and over, which the model
/// goes on repeating, so drafts from the context are made and verified in the window.
fn count_window(speculation: memoria_sched::Speculate, repeat: bool) -> Window {
    let model = model();
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let engine = EngineHandle::start(Arc::new(model), Arc::new(tok), EngineConfig::default())
        .expect("engine");
    engine.namespaces().insert(NamespaceEntry::new(
        NS,
        "allocations",
        NamespaceSalt::derive("allocations"),
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut streams: Vec<GenerationStream> = rt.block_on(async {
        let mut streams = Vec::new();
        for i in 0..SESSIONS {
            let id = engine.open(NS).await.expect("open");
            // Distinct prompts of different lengths: no shared blocks, ragged contexts.
            let prompt: Vec<u32> = (0..20 + 3 * i as u32)
                .map(|j| {
                    let j = if repeat { j % 5 } else { j };
                    300 + (j * 7 + i as u32 * 13) % 200
                })
                .collect();
            engine.append(NS, id, prompt).await.expect("append");
            let mut params = GenerateParams {
                ignore_eos: true,
                speculation,
                ..GenerateParams::greedy(MAX_TOKENS)
            };
            if i % 2 == 1 {
                // Half the sessions sample, with every filter, penalties and stop strings.
                params.sampling = SamplingParams {
                    temperature: 0.8,
                    top_k: 40,
                    top_p: 0.9,
                    min_p: 0.02,
                    repeat_penalty: 1.1,
                    repeat_last_n: 64,
                    frequency_penalty: 0.2,
                    presence_penalty: 0.1,
                    seed: i as u64,
                    ..SamplingParams::greedy()
                };
                // Held back often (text ending in " " or "n"), never matched.
                params.stop = vec![
                    "never in this vocabulary \u{1F999}".into(),
                    " \u{1F999}\u{1F999}".into(),
                ];
            }
            streams.push(engine.generate(NS, id, params).expect("generate"));
        }
        streams
    });
    for _ in 0..WARM_TOKENS {
        one_token_each(&mut streams);
    }
    let drafted = || -> u64 {
        let snap = engine.stats().speculation.snapshot();
        snap.iter().map(|(_, s)| s.drafted).sum()
    };
    let drafted_before = drafted();
    let steps = &engine.stats().steps;
    let first = steps.load(SeqCst);
    let started = Instant::now();
    let mut only_tokens = true;
    ARMED.store(true, SeqCst);
    while steps.load(SeqCst) < first + COUNTED_STEPS && started.elapsed() < Duration::from_secs(120)
    {
        only_tokens &= drain(&mut streams);
        std::thread::sleep(Duration::from_micros(200));
    }
    ARMED.store(false, SeqCst);
    let steps = steps.load(SeqCst) - first;
    let drafted = drafted() - drafted_before;
    let allocations = ALLOCATIONS.swap(0, SeqCst);
    let sites = SITES
        .lock()
        .map(|mut t| {
            let s = t
                .iter()
                .map(|(s, n)| format!("{n:>6} × {s}"))
                .collect::<Vec<_>>()
                .join("\n");
            t.clear();
            s
        })
        .unwrap_or_default();
    engine.shutdown();
    Window {
        steps,
        allocations,
        sites,
        only_tokens,
        drafted,
    }
}

/// Checks a window: enough steps, no generation ended, no allocation.
fn assert_allocates_nothing(w: &Window, what: &str) {
    assert!(
        w.steps >= COUNTED_STEPS,
        "{what}: only {} steps ran",
        w.steps
    );
    assert!(
        w.only_tokens,
        "{what}: a generation ended inside the window"
    );
    assert_eq!(
        w.allocations, 0,
        "{what}: {} allocations in {} warm steps of {SESSIONS} sessions; by site (at most {SITES_KEPT} sites):\n{}",
        w.allocations, w.steps, w.sites
    );
}

/// Both windows run in this one test, one after the other: the counter is process-wide.
#[test]
fn a_warm_decode_step_with_16_sessions_allocates_nothing_drafting_or_not() {
    let plain = count_window(memoria_sched::Speculate::OFF, false);
    assert_allocates_nothing(&plain, "plain decode");
    assert_eq!(plain.drafted, 0, "plain decode drafted");
    // Drafting sessions change the batch's shape from step to step (their verifying rows):
    // the step's buffers are sized for the most rows a step can carry when the engine starts.
    let drafting = count_window(memoria_sched::Speculate::AUTO, true);
    eprintln!(
        "drafting window: {} steps, {} draft tokens verified",
        drafting.steps, drafting.drafted
    );
    assert!(
        drafting.drafted > 0,
        "no draft was verified in the drafting window"
    );
    assert_allocates_nothing(&drafting, "drafting decode");
}
