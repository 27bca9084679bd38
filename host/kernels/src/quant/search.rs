//! The scale searches of ggml's K-quant reference quantizers: `make_qkx2_quants` (asymmetric,
//! scale + min, used by Q4_K) and `make_qx_quants` (symmetric, used by Q6_K).
//!
//! Invariant: same f32 operation order as ggml-quants.c, so the chosen levels are bit-identical.

use super::round::nearest_int;

/// Below this, a group is treated as all zeros (`GROUP_MAX_EPS`).
pub const GROUP_MAX_EPS: f32 = 1e-15;

/// Options of [`make_qkx2_quants`]: the scan of candidate inverse scales.
pub struct Qkx2Search {
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    pub use_mad: bool,
}

/// Quantizes `x` to levels `l` in `[0, nmax]` with `x ≈ scale * l - min`, minimising the
/// `weights`-weighted error over a scan of scales. Returns `(scale, min)`, `min >= 0`.
pub fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    search: &Qkx2Search,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        min = min.min_c(x[i]);
        max = max.max_c(x[i]);
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l[..n].fill(0);
        return (0.0, -min);
    }
    let err = |diff: f32| {
        if search.use_mad {
            diff.abs()
        } else {
            diff * diff
        }
    };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let li = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = li as u8;
        let diff = scale * li as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if search.nstep < 1 {
        return (scale, -min);
    }
    let mut laux = [0u8; 32];
    let laux = &mut laux[..n];
    for is in 0..=search.nstep {
        iscale = (search.rmin + search.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let li = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = li as u8;
            let w = weights[i];
            let lf = li as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Symmetric quantization of `x` to levels `l` in `[0, 2*nmax)` (stored with offset `nmax`),
/// `rmse_type` selecting the error weights as in ggml (1: x², 2: 1, 3: |x|, else sqrt|x|;
/// negative: return early after one refinement). Returns the scale.
pub fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8], rmse_type: i32) -> f32 {
    let n = x.len();
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    if rmse_type == 0 {
        for i in 0..n {
            l[i] = (nmax + level(iscale, x[i])) as i8;
        }
        return 1.0 / iscale;
    }
    let return_early = rmse_type < 0;
    let rmse_type = rmse_type.abs();
    let weight = |v: f32| match rmse_type {
        1 => v * v,
        2 => 1.0,
        3 => v.abs(),
        _ => v.abs().sqrt(),
    };
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let li = level(iscale, x[i]);
        l[i] = (li + nmax) as i8;
        let w = weight(x[i]);
        sumlx += w * x[i] * li as f32;
        suml2 += w * li as f32 * li as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let li = level(iscale, v) as f32;
            let w = weight(v);
            sumlx += w * v * li;
            suml2 += w * li * li;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                l[i] = (nmax + level(iscale, x[i])) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse`: symmetric levels in `[-nmax, nmax)` from the value of
/// largest magnitude, then up to 5 rounds of single-level changes that raise `(Σwxl)² / Σwl²`
/// (weights `x²`). Stores `level + nmax` in `l`; returns the scale.
pub fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let n = x.len();
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l[i] = li as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * li as f32;
        suml2 += w * li as f32 * li as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = l[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l[i] as i32 {
                    let nl = new_l as f32;
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for v in &mut l[..n] {
        *v += nmax as i8;
    }
    sumlx / suml2
}

/// C-style comparisons (`if (x < min) min = x`), which differ from `f32::min` only for NaN.
trait CMinMax {
    fn min_c(self, o: Self) -> Self;
    fn max_c(self, o: Self) -> Self;
}

impl CMinMax for f32 {
    #[inline(always)]
    fn min_c(self, o: f32) -> f32 {
        if o < self { o } else { self }
    }
    #[inline(always)]
    fn max_c(self, o: f32) -> f32 {
        if o > self { o } else { self }
    }
}
