//! Matmul micro-timings on given shapes: `matmul_shapes TYPE:ROWSxCOLS... [--n N,...] [--reps R]`
//! prints the median and minimum time per call (µs) and multiply-adds per ns (at the minimum)
//! for each (shape, n), with
//! the SIMD path `MEMORIA_SIMD` selects, over the interleaved copy where the CPU reads it (pin
//! threads with `RAYON_NUM_THREADS`).

use std::hint::black_box;
use std::time::Instant;

use memoria_kernels::matmul::Interleaved;
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul_prequantized, quantize_row,
};

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn parse_type(s: &str) -> Option<GgmlType> {
    GgmlType::ALL
        .into_iter()
        .find(|t| t.to_string().eq_ignore_ascii_case(s))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut shapes = Vec::new();
    let mut ns = vec![1usize, 128];
    let mut reps = 20usize;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--n" => {
                i += 1;
                let list = args.get(i).map(String::as_str).unwrap_or("");
                ns = list.split(',').filter_map(|v| v.parse().ok()).collect();
            }
            "--reps" => {
                i += 1;
                reps = args
                    .get(i)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(reps)
                    .max(1);
            }
            spec => {
                let parsed = spec.split_once(':').and_then(|(t, dims)| {
                    let (r, c) = dims.split_once('x')?;
                    Some((
                        parse_type(t)?,
                        r.parse::<usize>().ok()?,
                        c.parse::<usize>().ok()?,
                    ))
                });
                match parsed {
                    Some(s) => shapes.push(s),
                    None => {
                        eprintln!("bad shape {spec:?}: want TYPE:ROWSxCOLS, e.g. q4_K:2048x640");
                        std::process::exit(2);
                    }
                }
            }
        }
        i += 1;
    }
    for (ty, rows, cols) in shapes {
        let Some(rb) = ty.row_bytes(cols) else {
            eprintln!("{ty}: {cols} columns are not block aligned");
            continue;
        };
        let x = values(rows * cols, 1);
        let mut data = vec![0u8; rows * rb];
        for (src, dst) in x.chunks_exact(cols).zip(data.chunks_exact_mut(rb)) {
            quantize_row(ty, src, dst).expect("row");
        }
        let plain = WeightMatrix::new(ty, &data, rows, cols).expect("shape");
        // The interleaved copy the model loader makes where the CPU reads that layout.
        let copy = Interleaved::build(&plain);
        let w = plain.with_interleaved(copy.as_ref());
        for &n in &ns {
            let act = values(n * cols, 2);
            let mut xq = QuantizedActivations::new();
            xq.quantize(ty.vec_dot_type(), &act, n, cols);
            let mut out = vec![0.0f32; n * rows];
            matmul_prequantized(&w, &xq, &mut out);
            let mut times: Vec<f64> = (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    matmul_prequantized(black_box(&w), black_box(&xq), &mut out);
                    t.elapsed().as_secs_f64()
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let (min, med) = (times[0], times[times.len() / 2]);
            let macs = (rows * cols * n) as f64;
            println!(
                "{ty} {rows}x{cols} n={n}: median {:.1} us, min {:.1} us ({:.2} MAC/ns)",
                med * 1e6,
                min * 1e6,
                macs / min / 1e9
            );
        }
    }
}
