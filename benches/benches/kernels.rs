//! Kernel benchmarks: matmul of 768×768 and 2048×768 weights in Q8_0, Q4_0, Q4_K, Q6_K and F16
//! at n = 1 (decode, memory-bound) and n = 64 (prefill, compute-bound). Throughput is reported
//! in multiply-adds (rows × cols × n elements) per second; GFLOP/s is twice that. Where the
//! process reads a type interleaved (AVX-512 VNNI), `TYPE_il` ids time that copy beside the
//! GGML rows. `matmul_small_batch` times the shapes of a small model's verifying pass (a
//! speculative draft of 4–8 tokens plus the session's own: n = 1, 4, 8, 9) in Q4_1 and Q8_0,
//! interleaved where the process reads them so; the weights stay in cache, so the figure is the
//! kernel's arithmetic rate (`taskset -c 0` times one core).

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use memoria_kernels::matmul::Interleaved;
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul_prequantized, quantize_row,
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

fn quantize_matrix(ty: GgmlType, x: &[f32], cols: usize) -> Vec<u8> {
    let rb = ty.row_bytes(cols).expect("block aligned");
    let mut out = vec![0u8; x.len() / cols * rb];
    for (src, dst) in x.chunks_exact(cols).zip(out.chunks_exact_mut(rb)) {
        quantize_row(ty, src, dst).expect("lengths");
    }
    out
}

fn bench_matmul(c: &mut Criterion) {
    let types = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4K,
        GgmlType::Q6K,
        GgmlType::F16,
    ];
    let shapes = [(768usize, 768usize), (2048, 768)];
    let mut group = c.benchmark_group("matmul");
    for ty in types {
        for (rows, cols) in shapes {
            let data = quantize_matrix(ty, &values(rows * cols, 1), cols); // [rows, row_bytes]
            let plain = WeightMatrix::new(ty, &data, rows, cols).expect("shape");
            let copy = Interleaved::build(&plain);
            let mut layouts = vec![(ty.to_string(), plain)];
            if copy.is_some() {
                layouts.push((format!("{ty}_il"), plain.with_interleaved(copy.as_ref())));
            }
            for (n, (name, w)) in [1usize, 64]
                .into_iter()
                .flat_map(|n| layouts.iter().map(move |l| (n, l)))
            {
                time_matmul(&mut group, name, w, n);
            }
        }
    }
    group.finish();
}

/// Times `w` against `n` activation rows under the id `{name}_{rows}x{cols}/n{n}`.
fn time_matmul(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, w: &WeightMatrix, n: usize) {
    let (ty, rows, cols) = (w.ty, w.rows, w.cols);
    let x = values(n * cols, 2); // [n, cols]
    let mut xq = QuantizedActivations::new();
    xq.quantize(ty.vec_dot_type(), &x, n, cols);
    let mut out = vec![0.0f32; n * rows]; // [n, rows]
    group.throughput(Throughput::Elements((rows * cols * n) as u64));
    let id = BenchmarkId::new(format!("{name}_{rows}x{cols}"), format!("n{n}"));
    group.bench_with_input(id, &n, |b, _| {
        b.iter(|| matmul_prequantized(black_box(w), black_box(&xq), &mut out))
    });
}

fn bench_small_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("matmul_small_batch");
    for (ty, rows, cols) in [
        (GgmlType::Q4_1, 1536usize, 576usize),
        (GgmlType::Q8_0, 4096, 576),
    ] {
        let data = quantize_matrix(ty, &values(rows * cols, 1), cols);
        let plain = WeightMatrix::new(ty, &data, rows, cols).expect("shape");
        let copy = Interleaved::build(&plain);
        let w = plain.with_interleaved(copy.as_ref());
        for n in [1usize, 4, 8, 9] {
            time_matmul(&mut group, &ty.to_string(), &w, n);
        }
    }
    group.finish();
}

criterion_group!(benches, bench_matmul, bench_small_batch);
criterion_main!(benches);
