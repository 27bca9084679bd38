//! AMX benchmarks: the tile peak (`amx/peak`: a loop of four independent 16×16×64 `TDPBSSD`
//! products, one thread) and the prefill matmul's achieved rate (`amx/matmul`: interleaved Q8_0
//! and Q4_0 weights of the 110M model's shapes at n = 512 on the path this process runs:
//! `MEMORIA_SIMD=amx` for tiles, `=vnni` for the default VNNI kernels). Throughput is int8
//! multiply-adds per second in both, so the matmul's figure over the peak's is the fraction of
//! the tile peak reached (the peak is per core: divide by the threads the matmul used). Where
//! the kernel grants no tiles the peak is skipped with a message.

use std::hint::black_box;

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
    let path = if simd::amx() { "tiles" } else { "default" };
    let n = 512usize;
    let mut group = c.benchmark_group("amx");
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0] {
        for (rows, cols) in [(768usize, 768usize), (2048, 768)] {
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
            group.throughput(Throughput::Elements((rows * cols * n) as u64));
            let id = BenchmarkId::new(format!("matmul_{path}_{ty}_{rows}x{cols}"), "n512");
            group.bench_function(id, |b| {
                b.iter(|| matmul_prequantized(black_box(&w), black_box(&xq), &mut out))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_peak, bench_matmul);
criterion_main!(benches);
