//! Tests of the interleaved path (every interleaved format): bit-exact agreement with the
//! sequential scalar reference for every token count, batch invariance across batch sizes and
//! threads, closeness to ggml's order, and which matrices qualify.

use super::*;
use crate::dot::sequential::vec_dot_sequential;
use crate::testutil::{Rng, quantize_matrix};
use crate::types::GgmlType;
use interleave::GROUP;

const ROWS: usize = 48;
const INTERLEAVED: [GgmlType; 13] = [
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::IQ4XS,
    GgmlType::Q4_0,
    GgmlType::IQ4NL,
    GgmlType::Mxfp4,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::Q4_1,
    GgmlType::Q5_1,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
];
/// Columns: three blocks of the 32-element formats; two super-blocks for the K-quants.
fn cols(ty: GgmlType) -> usize {
    if ty.block_size() == 256 { 512 } else { 96 }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn weights(ty: GgmlType, rows: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut w = quantize_matrix(ty, &rng.vec(rows * cols(ty), 0.5), cols(ty));
    if ty == GgmlType::Q8_0 {
        // Extreme levels, -128 included (a file may hold it), in the first block of row 0.
        w[2] = 0x80;
        w[3] = 0x7F;
    }
    if ty == GgmlType::Mxfp4 {
        // Row 0's three blocks at the limits: codes 15 and 7 (-12, 12) under the E8M0 scales
        // 0 and 1 (subnormal f32) and 200; row 1's first block at exponent 2.
        for (b, e) in [0u8, 1, 200].into_iter().enumerate() {
            w[17 * b] = e;
            w[17 * b + 1..17 * b + 17].fill(if b % 2 == 0 { 0xFF } else { 0x77 });
        }
        w[3 * 17] = 2;
    }
    if matches!(ty, GgmlType::Q4K | GgmlType::Q5K) {
        // Row 0's first super-block at the limits: scales and mins 63, every level 15 (Q5_K 31).
        w[4..ty.type_size()].fill(0xFF);
    }
    if ty == GgmlType::Q3K {
        // Row 0's first super-block at the limits: every value -4, every scale -32.
        w[..108].fill(0);
    }
    if ty == GgmlType::Q2K {
        // Row 0's first super-block at the limits: every level 3, scales and mins 15.
        w[..80].fill(0xFF);
    }
    if ty == GgmlType::IQ4XS {
        // Row 0's first super-block at the limits: scales 31, 16, -17 and -32 (6-bit 63, 48,
        // 15, 0), indices 0 and 15 (values -127 and 113).
        w[2..8].copy_from_slice(&[0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00]);
        for (i, q) in w[8..136].iter_mut().enumerate() {
            *q = if i % 2 == 0 { 0x00 } else { 0xFF };
        }
    }
    if ty == GgmlType::Q6K {
        // Row 0's first super-block at the limits: every level 63 (q = 31), scales ±127/-128.
        w[..192].fill(0xFF);
        for (j, s) in w[192..208].iter_mut().enumerate() {
            *s = [0x7F, 0x80, 0x81, 0x01][j % 4];
        }
    }
    w
}

#[test]
fn only_the_formats_with_a_sequential_kernel_and_whole_groups_are_interleaved() {
    for ty in GgmlType::ALL {
        let rows = 2 * interleave::GROUP;
        let data = quantize_matrix(ty, &Rng::new(3).vec(rows * 256, 0.5), 256);
        let w = WeightMatrix::new(ty, &data, rows, 256).unwrap();
        let expected = crate::dot::sequential::has_sequential(ty);
        assert_eq!(Interleaved::repack(&w).is_some(), expected, "{ty}");
    }
    let data = weights(GgmlType::Q4_0, 17, 1);
    let w = WeightMatrix::new(GgmlType::Q4_0, &data[..17 * 54], 17, 96).unwrap();
    assert!(
        Interleaved::repack(&w).is_none(),
        "17 rows are not whole groups"
    );
    let iw = Interleaved::repack(
        &WeightMatrix::new(GgmlType::Q4_0, &weights(GgmlType::Q4_0, ROWS, 1), ROWS, 96).unwrap(),
    )
    .unwrap();
    assert_eq!(
        iw.bytes(),
        (ROWS * 54).next_multiple_of(64),
        "the GGML rows' size"
    );
    let data = weights(GgmlType::Mxfp4, ROWS, 2);
    let w = WeightMatrix::new(GgmlType::Mxfp4, &data, ROWS, 96).unwrap();
    let iw = Interleaved::repack(&w).unwrap();
    assert_eq!(
        iw.bytes(),
        (ROWS * 51).next_multiple_of(64),
        "MXFP4: the GGML rows' size too"
    );
}

#[test]
fn interleaved_matmul_equals_the_sequential_reference_bit_for_bit() {
    if !Interleaved::in_use() {
        eprintln!("skipped: this CPU/process does not use the interleaved kernels");
        return;
    }
    for ty in INTERLEAVED
        .into_iter()
        .filter(|&ty| Interleaved::covers(ty))
    {
        let cols = cols(ty);
        let data = weights(ty, ROWS, ty.id() as u64);
        let plain = WeightMatrix::new(ty, &data, ROWS, cols).unwrap();
        let iw = Interleaved::build(&plain).expect("Q4_0/Q8_0 with whole groups");
        let w = plain.with_interleaved(Some(&iw));
        assert!(w.interleaved.is_some());
        let n = 21;
        let mut x = Rng::new(7).vec(n * cols, 1.0);
        // A token at the activations' limit (its largest value quantizes to ±127).
        x[..cols].iter_mut().for_each(|v| *v = v.signum() * 3.0);
        let mut xq = QuantizedActivations::new();
        xq.quantize(ty.vec_dot_type(), &x, n, cols);
        let mut full = vec![0.0; n * ROWS];
        matmul(&w, &x, n, &mut full);
        for t in 0..n {
            for r in 0..ROWS {
                let want = vec_dot_sequential(ty, plain.row(r), xq.row(t));
                assert_eq!(
                    full[t * ROWS + r].to_bits(),
                    want.to_bits(),
                    "{ty} t={t} r={r}"
                );
            }
        }
        // Every batch size and offset gives the same bits (token tiles of 1..=8 and edges).
        for start in [0usize, 3, 8] {
            for len in 1..=(n - start).min(13) {
                let mut part = vec![0.0; len * ROWS];
                matmul(&w, &x[start * cols..(start + len) * cols], len, &mut part);
                assert_eq!(
                    bits(&part),
                    bits(&full[start * ROWS..(start + len) * ROWS]),
                    "{ty} {start}+{len}"
                );
            }
        }
        // And every thread count.
        for threads in [1usize, 3] {
            let pool = crate::threads::Pool::new(threads);
            let mut again = vec![0.0; n * ROWS];
            pool.install(|| matmul(&w, &x, n, &mut again));
            assert_eq!(bits(&again), bits(&full), "{ty} threads={threads}");
        }
    }
}

#[test]
fn interleaved_results_stay_close_to_ggml_order() {
    if !Interleaved::in_use() {
        eprintln!("skipped: this CPU/process does not use the interleaved kernels");
        return;
    }
    for ty in INTERLEAVED
        .into_iter()
        .filter(|&ty| Interleaved::covers(ty))
    {
        let cols = cols(ty);
        let data = weights(ty, ROWS, 11);
        let plain = WeightMatrix::new(ty, &data, ROWS, cols).unwrap();
        let iw = Interleaved::build(&plain).unwrap();
        let x = Rng::new(5).vec(3 * cols, 1.0);
        let (mut a, mut b) = (vec![0.0; 3 * ROWS], vec![0.0; 3 * ROWS]);
        matmul(&plain.with_interleaved(Some(&iw)), &x, 3, &mut a);
        matmul_with(SimdLevel::Scalar, &plain, &x, 3, &mut b);
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() <= 1e-4 * (1.0 + q.abs()), "{ty}: {p} vs {q}");
        }
    }
}

#[test]
fn a_model_built_at_once_shares_one_mapping_and_each_matrix_keeps_its_bits() {
    if !Interleaved::in_use() {
        eprintln!("skipped: this CPU/process does not use the interleaved kernels");
        return;
    }
    let datas: Vec<(GgmlType, Vec<u8>)> = INTERLEAVED
        .iter()
        .filter(|&&ty| Interleaved::covers(ty))
        .map(|&ty| (ty, weights(ty, ROWS, 40 + ty.id() as u64)))
        .collect();
    let mut plains: Vec<WeightMatrix> = datas
        .iter()
        .map(|(ty, d)| WeightMatrix::new(*ty, d, ROWS, cols(*ty)).unwrap())
        .collect();
    // 17 rows are not whole groups: no copy, and no call for it.
    let odd = weights(GgmlType::Q4_0, 17, 9);
    plains.insert(
        2,
        WeightMatrix::new(GgmlType::Q4_0, &odd[..17 * 54], 17, 96).unwrap(),
    );
    let mut copied = Vec::new();
    let built = Interleaved::build_all(&plains, |i| copied.push(i));
    let want: Vec<usize> = (0..plains.len()).filter(|&i| i != 2).collect();
    assert_eq!(copied, want, "each copied matrix reported once, in order");
    assert!(built[2].is_none());
    let first = built[0].as_ref().unwrap();
    for (plain, iw) in plains.iter().zip(&built) {
        let Some(iw) = iw else { continue };
        assert!(iw.shares_memory_with(first), "one mapping for all");
        assert_eq!(iw.group_ptr(0) as usize % 64, 0, "{}", plain.ty);
        let alone = Interleaved::build(plain).unwrap();
        let len = iw.bytes();
        // SAFETY: both copies hold `len` bytes from their first group.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(iw.group_ptr(0), len),
                std::slice::from_raw_parts(alone.group_ptr(0), len),
            )
        };
        assert_eq!(a, b, "{}: the same bytes as built alone", plain.ty);
    }
}

/// One group × tokens `t0..t0 + T` through the AVX2 group kernel of `iw`'s format.
#[cfg(target_arch = "x86_64")]
fn avx2_group<const T: usize>(
    iw: &Interleaved,
    g: usize,
    xq: &QuantizedActivations,
    info: &Avx2Infos,
    t0: usize,
) -> Vec<f32> {
    use crate::dot::avx2::interleaved_avx2::group_avx2;
    use crate::dot::avx2::interleaved_avx2_k::group_k4_avx2;
    use crate::dot::avx2::interleaved_avx2_k16::{group_iq4xs_avx2, group_k16_avx2};
    let nb = iw.blocks();
    let mut out = vec![f32::NAN; T * GROUP];
    let x: [*const u8; T] = std::array::from_fn(|i| xq.row(t0 + i).as_ptr());
    let o = std::array::from_fn(|i| out[i * GROUP..].as_mut_ptr());
    // SAFETY: the caller checked avx2/fma/f16c; group g of `iw` holds nb blocks of its type;
    // each token row holds nb activation blocks and nb infos; each output has 16 f32.
    unsafe {
        match info {
            Avx2Infos::Block32(info) => {
                let inf = std::array::from_fn(|i| info[(t0 + i) * nb..].as_ptr());
                group_avx2::<T>(iw.ty(), iw.group_ptr(g), nb, x, inf, o)
            }
            Avx2Infos::K(info) => {
                let inf = std::array::from_fn(|i| info[(t0 + i) * nb..].as_ptr());
                let q5 = iw.ty() == GgmlType::Q5K;
                group_k4_avx2::<T>(q5, iw.group_ptr(g), nb, x, inf, o)
            }
            Avx2Infos::Sub16(info) => {
                let inf = std::array::from_fn(|i| info[(t0 + i) * nb..].as_ptr());
                group_k16_avx2::<T>(iw.ty(), iw.group_ptr(g), nb, x, inf, o)
            }
            Avx2Infos::Xs(info) => {
                let inf = std::array::from_fn(|i| info[(t0 + i) * nb..].as_ptr());
                group_iq4xs_avx2::<T>(iw.group_ptr(g), nb, x, inf, o)
            }
        }
    };
    out
}

/// The activation infos of the AVX2 kernels' two families.
#[cfg(target_arch = "x86_64")]
enum Avx2Infos {
    Block32(Vec<crate::dot::avx2::interleaved::XInfo>),
    K(Vec<crate::dot::avx2::interleaved_k::KInfo>),
    Sub16(Vec<crate::dot::avx2::interleaved_k::Q6Info>),
    Xs(Vec<crate::dot::avx2::interleaved_iq4xs::XsInfo>),
}

/// The AVX2 group kernels give the sequential reference's bits for every interleaved format
/// and token count 1..=8 (extreme weights and activations included), whichever group kernel
/// this process runs.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_avx2_group_kernel_is_the_sequential_reference_bit_for_bit() {
    use super::driver_interleaved::{
        Block32, GroupKernel, SuperBlock16, SuperBlockIq4Xs, SuperBlockQ4K,
    };
    if !(is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c"))
    {
        eprintln!("skipped: this CPU lacks AVX2/FMA/F16C");
        return;
    }
    for ty in INTERLEAVED {
        let cols = cols(ty);
        let data = weights(ty, ROWS, 3 + ty.id() as u64);
        let plain = WeightMatrix::new(ty, &data, ROWS, cols).unwrap();
        let iw = Interleaved::repack(&plain).unwrap();
        let n = 8;
        let mut x = Rng::new(17).vec(n * cols, 1.0);
        // Token 0 at the activations' limit (its largest value quantizes to ±127).
        x[..cols].iter_mut().for_each(|v| *v = v.signum() * 3.0);
        let mut xq = QuantizedActivations::new();
        xq.quantize(ty.vec_dot_type(), &x, n, cols);
        let nb = iw.blocks();
        fn infos<K: GroupKernel>(k: &K, xq: &QuantizedActivations, nb: usize) -> Vec<K::Info> {
            let mut info = vec![K::Info::default(); xq.n() * nb];
            for (t, dst) in info.chunks_exact_mut(nb).enumerate() {
                k.infos(xq.row(t), dst);
            }
            info
        }
        let info = match ty {
            GgmlType::Q4K | GgmlType::Q5K => {
                Avx2Infos::K(infos(&SuperBlockQ4K(ty == GgmlType::Q5K), &xq, nb))
            }
            GgmlType::Q6K | GgmlType::Q3K | GgmlType::Q2K => {
                Avx2Infos::Sub16(infos(&SuperBlock16(ty), &xq, nb))
            }
            GgmlType::IQ4XS => Avx2Infos::Xs(infos(&SuperBlockIq4Xs, &xq, nb)),
            _ => Avx2Infos::Block32(infos(&Block32(ty), &xq, nb)),
        };
        for g in 0..ROWS / GROUP {
            for len in 1..=n {
                for t0 in [0, n - len] {
                    let got = match len {
                        1 => avx2_group::<1>(&iw, g, &xq, &info, t0),
                        2 => avx2_group::<2>(&iw, g, &xq, &info, t0),
                        3 => avx2_group::<3>(&iw, g, &xq, &info, t0),
                        4 => avx2_group::<4>(&iw, g, &xq, &info, t0),
                        5 => avx2_group::<5>(&iw, g, &xq, &info, t0),
                        6 => avx2_group::<6>(&iw, g, &xq, &info, t0),
                        7 => avx2_group::<7>(&iw, g, &xq, &info, t0),
                        _ => avx2_group::<8>(&iw, g, &xq, &info, t0),
                    };
                    for (i, v) in got.iter().enumerate() {
                        let (t, r) = (t0 + i / GROUP, g * GROUP + i % GROUP);
                        let want = vec_dot_sequential(ty, plain.row(r), xq.row(t));
                        assert_eq!(v.to_bits(), want.to_bits(), "{ty} len={len} t={t} r={r}");
                    }
                }
            }
        }
    }
}
