//! Tile peak: int8 multiply-adds per ns of four independent 16×16×64 `TDPBSSD` products.
fn main() {
    let iters = 10_000_000u64;
    let t = std::time::Instant::now();
    let Some(macs) = memoria_kernels::amx::peak_loop(iters) else {
        eprintln!("no AMX tiles");
        return;
    };
    let s = t.elapsed().as_secs_f64();
    println!(
        "{:.0} MAC/ns, {:.2} ns per 16x16x64 product",
        macs as f64 / s / 1e9,
        s * 1e9 / (iters * 4) as f64
    );
}
