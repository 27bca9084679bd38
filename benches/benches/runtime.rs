//! Component runtime benchmarks. `instantiate_call`: a fresh store + instantiate + call of a
//! trivial export (`run(x) -> x + 1`, no imports) with the pooling allocator, once with a bare
//! wasmtime `Store<()>` and once with memoria's per-request store (host state, memory limiter,
//! epoch deadline). `http_hello`: requests/s of the `hello` wasi:http guest through hyper and
//! memoria's runtime at 4 keep-alive connections (client in the same process).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http_body_util::{BodyExt, Empty};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use memoria_kernels::GgmlType;
use memoria_model::llama::Model;
use memoria_model::synth::{Arch, SynthSpec, write_synth};
use memoria_model::tokenizer::Tokenizer;
use memoria_runtime::{Runtime, RuntimeConfig};
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_tenant::{NamespaceSpec, Tenants};
use tokio::net::{TcpListener, TcpStream};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio")
}

fn bare_engine() -> Engine {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(100)
        .total_core_instances(800)
        .total_memories(200)
        .total_tables(800)
        .total_stacks(100);
    let mut cfg = Config::new();
    cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .epoch_interruption(true);
    Engine::new(&cfg).expect("engine")
}

fn memoria_runtime() -> Runtime {
    let dir = std::env::temp_dir().join(format!("memoria-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("model.gguf");
    write_synth(&SynthSpec::tiny(Arch::Llama, GgmlType::F32), &path).expect("synthetic model");
    let model = Model::load(&path).expect("model");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let engine = EngineHandle::start(Arc::new(model), Arc::new(tok), EngineConfig::default())
        .expect("engine");
    let spec: NamespaceSpec = toml::from_str(&format!(
        "component = {:?}\n[limits]\nmax_instances = 8\n",
        env!("MEMORIA_GUEST_HELLO")
    ))
    .expect("spec");
    let tenants = Tenants::new(vec![("bench".into(), spec)]).expect("tenants");
    engine
        .register_namespaces(tenants.registry_table())
        .expect("namespaces registered");
    Runtime::new(&tenants, engine, RuntimeConfig::default()).expect("runtime")
}

fn instantiate_call(c: &mut Criterion) {
    let tokio = rt();
    let wasm = std::fs::read(env!("MEMORIA_GUEST_TRIVIAL")).expect("trivial guest");
    let mut g = c.benchmark_group("instantiate_call");
    g.throughput(Throughput::Elements(1));

    let engine = bare_engine();
    let component = Component::new(&engine, &wasm).expect("compile");
    let pre = Linker::<()>::new(&engine)
        .instantiate_pre(&component)
        .expect("link");
    g.bench_function("wasmtime_alone", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let mut store = Store::new(&engine, ());
                store.set_epoch_deadline(1_000_000);
                let inst = pre
                    .instantiate_async(&mut store)
                    .await
                    .expect("instantiate");
                let run = inst
                    .get_typed_func::<(u32,), (u32,)>(&mut store, "run")
                    .expect("export");
                run.call_async(&mut store, (41,)).await.expect("call")
            })
        })
    });

    let memoria = memoria_runtime();
    let component = Component::new(memoria.wasmtime_engine(), &wasm).expect("compile");
    let pre = memoria.linker().instantiate_pre(&component).expect("link");
    g.bench_function("memoria_store", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let mut store = memoria
                    .new_store("bench")
                    .expect("namespace")
                    .expect("store");
                let inst = pre
                    .instantiate_async(&mut store)
                    .await
                    .expect("instantiate");
                let run = inst
                    .get_typed_func::<(u32,), (u32,)>(&mut store, "run")
                    .expect("export");
                run.call_async(&mut store, (41,)).await.expect("call")
            })
        })
    });
    g.finish();
}

async fn serve(listener: TcpListener, runtime: Runtime) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let _ = stream.set_nodelay(true);
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let runtime = runtime.clone();
                    async move {
                        let path = req
                            .uri()
                            .path()
                            .strip_prefix("/ns/bench")
                            .unwrap_or("/")
                            .to_string();
                        Ok::<_, std::convert::Infallible>(
                            runtime.handle_request("bench", &path, req).await,
                        )
                    }
                });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// `n` requests over one keep-alive connection.
async fn client(addr: std::net::SocketAddr, n: u64) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    for _ in 0..n {
        let req = hyper::Request::builder()
            .uri("/ns/bench/hello")
            .header("host", "localhost")
            .body(Empty::<bytes::Bytes>::new())
            .expect("request");
        let resp = send.send_request(req).await.expect("response");
        assert_eq!(resp.status(), 200);
        resp.into_body().collect().await.expect("body");
    }
}

fn http_hello(c: &mut Criterion) {
    let tokio = rt();
    let runtime = memoria_runtime();
    let addr = tokio.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, runtime));
        addr
    });
    let mut g = c.benchmark_group("http_hello");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("4_connections", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let per = iters.div_ceil(4);
                let started = Instant::now();
                let tasks: Vec<_> = (0..4).map(|_| tokio::spawn(client(addr, per))).collect();
                for t in tasks {
                    t.await.expect("client");
                }
                started.elapsed().mul_f64(iters as f64 / (per * 4) as f64)
            })
        })
    });
    g.finish();
}

criterion_group!(benches, instantiate_call, http_hello);
criterion_main!(benches);
