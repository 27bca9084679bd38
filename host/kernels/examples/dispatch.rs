//! Micro-bench of the per-matmul dispatch cost at decode sizes (one token, Q4_1 weights with
//! 576 columns as in SmolLM2-135M): the same row tasks run serially, as rayon tasks, and on the
//! [`memoria_kernels::threads::Pool`]; plus the cost of an empty parallel loop on each.
//!
//! `cargo run --release -p memoria-kernels --example dispatch -- [threads] [iters]`

use std::hint::black_box;
use std::time::Instant;

use memoria_kernels::threads::Pool;
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul_prequantized, quantize_row,
};
use rayon::prelude::*;

fn median_us(mut f: impl FnMut(), iters: usize) -> f64 {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    let mut t: Vec<f64> = (0..iters)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2).max(1);
    let iters: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000)
        .max(10);
    let ty = GgmlType::Q4_1;
    let cols = 576;
    let serial = Pool::new(1);
    let pool = Pool::new(threads);
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    println!("threads={threads} iters={iters} (median µs per call)");
    for tasks in [8usize, 16, 64] {
        let e_pool = median_us(
            || {
                pool.for_each(tasks, &|t| {
                    black_box(t);
                })
            },
            iters,
        );
        let e_rayon = median_us(
            || {
                rayon.install(|| {
                    (0..tasks).into_par_iter().for_each(|t| {
                        black_box(t);
                    })
                })
            },
            iters,
        );
        println!("empty loop, {tasks:>2} tasks: rayon {e_rayon:7.2}  pool {e_pool:7.2}");
    }
    let rb = ty.row_bytes(cols).expect("576 is a multiple of 32");
    let mut seed = 1u32;
    let mut rnd = move || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
    };
    let x: Vec<f32> = (0..cols).map(|_| rnd()).collect();
    let mut xq = QuantizedActivations::new();
    xq.quantize(ty.vec_dot_type(), &x, 1, cols);
    for rows in [576usize, 1536, 49152] {
        let mut data = vec![0u8; rows * rb];
        let mut row = vec![0.0f32; cols];
        for dst in data.chunks_exact_mut(rb) {
            row.iter_mut().for_each(|v| *v = rnd());
            quantize_row(ty, &row, dst).expect("row length");
        }
        let w = WeightMatrix::new(ty, &data, rows, cols).expect("weights");
        let mut out = vec![0.0f32; rows];
        // The driver's split: ~4 tasks per thread, multiples of 8 rows.
        let per_task = rows.div_ceil(threads * 4).next_multiple_of(8);
        let t_serial = median_us(
            || serial.install(|| matmul_prequantized(&w, &xq, &mut out)),
            iters,
        );
        let t_pool = median_us(
            || pool.install(|| matmul_prequantized(&w, &xq, &mut out)),
            iters,
        );
        let t_rayon = median_us(
            || {
                rayon.install(|| {
                    out.par_chunks_mut(per_task).enumerate().for_each(|(i, o)| {
                        let r0 = i * per_task;
                        let sub = WeightMatrix::new(
                            ty,
                            &data[r0 * rb..(r0 + o.len()) * rb],
                            o.len(),
                            cols,
                        )
                        .expect("sub-matrix");
                        serial.install(|| matmul_prequantized(&sub, &xq, o));
                    })
                })
            },
            iters,
        );
        let ideal = t_serial / threads as f64;
        println!(
            "{rows:>5}x{cols}: serial {t_serial:8.2}  rayon {t_rayon:8.2} (+{:6.2} over serial/{threads})  pool {t_pool:8.2} (+{:6.2})",
            t_rayon - ideal,
            t_pool - ideal
        );
    }
}
