//! AMX benchmarks: the tile peak (`amx/peak`: a loop of four independent 16×16×64 `TDPBSSD`
//! products, one thread) and the prefill matmul's achieved rate (`amx/matmul`: interleaved
//! Q8_0, Q4_0, Q4_K, IQ4_XS and Q6_K weights of the 110M model's shapes at n = 512 on the path
//! this process runs: `MEMORIA_SIMD=amx` for tiles everywhere, `=vnni` for the VNNI kernels,
//! unset for the default split). Throughput is int8 multiply-adds per second in both; before
//! each matmul's criterion run a short timing prints its rate as a fraction of the tile peak
//! measured here (per thread: the matmul's rate is divided by the pool's threads). Where the
//! kernel grants no tiles the peak is skipped with a message and no fraction is printed.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use memoria_kernels::matmul::Interleaved;
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul_prequantized, quantize_row, simd,
};

/// Deterministic pseudo-random values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// The best of `reps` timings of `f`, in seconds.
fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// The tile peak of one thread in int8 multiply-adds per ns, `None` without tiles.
fn tile_peak() -> Option<f64> {
    let iters = 100_000u64;
    let macs = memoria_kernels::amx::peak_loop(iters)?;
    let secs = best_of(5, || {
        black_box(memoria_kernels::amx::peak_loop(black_box(iters)));
    });
    Some(macs as f64 / secs / 1e9)
}

fn bench_peak(c: &mut Criterion) {
    if memoria_kernels::amx::peak_loop(1).is_none() {
        eprintln!("amx/peak skipped: this CPU/kernel does not grant AMX tiles");
        return;
    }
    let iters = 10_000u64;
    let macs = memoria_kernels::amx::peak_loop(iters).expect("granted above");
    let mut group = c.benchmark_group("amx");
    group.throughput(Throughput::Elements(macs));
    group.bench_function("peak_tdpbssd_1thread", |b| {
        b.iter(|| memoria_kernels::amx::peak_loop(black_box(iters)))
    });
    group.finish();
}

fn bench_matmul(c: &mut Criterion) {
    if let Err(e) = simd::check_forced() {
        eprintln!("amx/matmul skipped: {e}");
        return;
    }
    let path = match std::env::var("MEMORIA_SIMD").as_deref() {
        Ok("amx") => "tiles",
        Ok("vnni") => "vnni",
        _ => "default",
    };
    let peak = tile_peak();
    let threads = memoria_kernels::threads::current_threads().max(1);
    match peak {
        Some(p) => eprintln!("amx: tile peak {p:.0} MAC/ns per thread; {threads} threads"),
        None => eprintln!("amx: no tiles granted, no fraction of the tile peak"),
    }
    let n = 512usize;
    let mut group = c.benchmark_group("amx");
    let types = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4K,
        GgmlType::IQ4XS,
        GgmlType::Q6K,
    ];
    for ty in types {
        for (rows, cols) in [(2048usize, 768usize), (768, 2048)] {
            let rb = ty.row_bytes(cols).expect("block aligned");
            let mut data = vec![0u8; rows * rb];
            let w = values(rows * cols, 1);
            for (src, dst) in w.chunks_exact(cols).zip(data.chunks_exact_mut(rb)) {
                quantize_row(ty, src, dst).expect("lengths");
            }
            let plain = WeightMatrix::new(ty, &data, rows, cols).expect("shape");
            let Some(copy) = Interleaved::build(&plain) else {
                eprintln!("amx/matmul skipped: this process reads no interleaved weights");
                return;
            };
            let w = plain.with_interleaved(Some(&copy));
            let mut xq = QuantizedActivations::new();
            xq.quantize(ty.vec_dot_type(), &values(n * cols, 2), n, cols);
            let mut out = vec![0.0f32; n * rows];
            let macs = (rows * cols * n) as f64;
            let name = format!("matmul_{path}_{ty}_{rows}x{cols}");
            if let Some(p) = peak {
                // A few untimed calls first: the first ones grow the matmul's buffers.
                best_of(3, || matmul_prequantized(&w, &xq, &mut out));
                let secs = best_of(20, || matmul_prequantized(&w, &xq, &mut out));
                let rate = macs / secs / 1e9;
                let per_thread = rate / threads as f64;
                eprintln!(
                    "amx/{name}/n512: {rate:.0} MAC/ns, {:.1}% of the tile peak per thread",
                    100.0 * per_thread / p
                );
            }
            group.throughput(Throughput::Elements(macs as u64));
            group.bench_function(BenchmarkId::new(name, "n512"), |b| {
                b.iter(|| matmul_prequantized(black_box(&w), black_box(&xq), &mut out))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_peak, bench_matmul);
criterion_main!(benches);
