//! `exp_ref` against f64's `exp`, and every vector path against `exp_ref`, bit for bit.

use super::*;

/// Inputs over the whole range, both ends, the clamp edges and the special values.
fn inputs() -> Vec<f32> {
    let mut v: Vec<f32> = (0..400_000)
        .map(|i| LO - 2.0 + (HI - LO + 4.0) * i as f32 / 400_000.0)
        .collect();
    v.extend((0..4000).map(|i| (i as f32 - 2000.0) * 1e-4));
    v.extend([
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        -87.336_55,
        -87.5,
        -103.97,
        88.722_8,
        88.722_84,
        88.8,
        LO,
        HI,
        -1e30,
        1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ]);
    v
}

/// Distance in units in the last place between two finite non-negative floats.
fn ulps(a: f32, b: f32) -> u32 {
    a.to_bits().abs_diff(b.to_bits())
}

#[test]
fn exp_ref_is_within_one_ulp_of_the_exact_value() {
    let mut worst = (0, 0.0f32);
    for x in inputs() {
        let got = exp_ref(x);
        if x.is_nan() {
            assert!(got.is_nan(), "exp(NaN) = {got}");
            continue;
        }
        let want = f64::from(x).exp() as f32;
        if want == 0.0 || want.is_subnormal() {
            // Below the normal range: within one step of the smallest subnormal.
            assert!(
                (got - want).abs() <= 2.0 * f32::from_bits(1),
                "x={x}: {got} vs {want}"
            );
            continue;
        }
        let d = ulps(got, want);
        if d > worst.0 {
            worst = (d, x);
        }
    }
    assert!(worst.0 <= 1, "worst {} ULP at x = {}", worst.0, worst.1);
}

#[test]
fn exp_ref_special_values() {
    assert_eq!(exp_ref(0.0), 1.0);
    assert_eq!(exp_ref(-0.0), 1.0);
    assert_eq!(exp_ref(f32::NEG_INFINITY).to_bits(), 0);
    assert_eq!(exp_ref(-200.0).to_bits(), 0);
    assert_eq!(exp_ref(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp_ref(100.0), f32::INFINITY);
    assert_eq!(exp_ref(f32::NAN).to_bits(), f32::NAN.to_bits());
    assert!(exp_ref(88.7).is_finite());
}

/// Every length from 0 to 40 (vector bodies and scalar tails), several shifts.
fn check_exp_path(name: &str, path: impl Fn(&mut [f32], f32)) {
    let all = inputs();
    for shift in [0.0f32, 3.5, -12.25] {
        let mut got = all.clone();
        path(&mut got, shift);
        for (x, g) in all.iter().zip(&got) {
            let want = exp_ref(x - shift);
            assert_eq!(g.to_bits(), want.to_bits(), "{name}: x={x} shift={shift}");
        }
    }
    for n in 0..40 {
        let mut got: Vec<f32> = all[..n].to_vec();
        path(&mut got, 1.0);
        for (x, g) in all[..n].iter().zip(&got) {
            assert_eq!(
                g.to_bits(),
                exp_ref(x - 1.0).to_bits(),
                "{name}: n={n} x={x}"
            );
        }
    }
}

fn silu_ref(g: &mut [f32], u: &[f32]) {
    for (g, &u) in g.iter_mut().zip(u) {
        *g = *g / (1.0 + exp_ref(-*g)) * u;
    }
}

fn check_silu_path(name: &str, path: impl Fn(&mut [f32], &[f32]) -> usize) {
    let gate: Vec<f32> = inputs().into_iter().map(|x| x * 0.5).collect();
    let up: Vec<f32> = (0..gate.len())
        .map(|i| (i % 97) as f32 * 0.03 - 1.4)
        .collect();
    for n in [0, 1, 7, 8, 15, 16, 17, 33, gate.len()] {
        let mut got = gate[..n].to_vec();
        let done = path(&mut got, &up[..n]);
        silu_ref(&mut got[done..], &up[done..n]);
        let mut want = gate[..n].to_vec();
        silu_ref(&mut want, &up[..n]);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{name}: gate {} up {}",
                gate[i],
                up[i]
            );
        }
    }
}

#[test]
fn the_dispatched_paths_give_exp_refs_bits() {
    check_exp_path("dispatched", exp_shifted_in_place);
    check_silu_path("dispatched", |g, u| {
        silu_mul(g, u);
        g.len()
    });
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_avx2_path_gives_exp_refs_bits() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        eprintln!("no AVX2 + FMA on this CPU: the AVX2 path cannot run here");
        return;
    }
    check_exp_path("avx2", |x, s| {
        // SAFETY: avx2 and fma checked above.
        let done = unsafe { avx2::exp_shifted(x, s) };
        for v in &mut x[done..] {
            *v = exp_ref(*v - s);
        }
    });
    // SAFETY: avx2 and fma checked above; lengths equal.
    check_silu_path("avx2", |g, u| unsafe { avx2::silu_mul(g, u) });
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_avx512_path_gives_exp_refs_bits() {
    if !is_x86_feature_detected!("avx512f") {
        eprintln!("no AVX-512F on this CPU: the AVX-512 path cannot run here");
        return;
    }
    check_exp_path("avx512", |x, s| {
        // SAFETY: avx512f checked above.
        let done = unsafe { avx512::exp_shifted(x, s) };
        for v in &mut x[done..] {
            *v = exp_ref(*v - s);
        }
    });
    // SAFETY: avx512f checked above; lengths equal.
    check_silu_path("avx512", |g, u| unsafe { avx512::silu_mul(g, u) });
}
