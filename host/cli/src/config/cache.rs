//! `[cache]` keys of the operator view (issue 15): `target_hit_rate`, the hit rate the
//! cache-sizing advisor sizes for (default 0.9; must lie strictly between 0 and 1).

use anyhow::bail;

/// Default `[cache] target_hit_rate`.
pub const DEFAULT_TARGET_HIT_RATE: f64 = 0.9;

/// Validates `[cache] target_hit_rate`.
pub fn target_hit_rate(raw: Option<f64>) -> anyhow::Result<f64> {
    let x = raw.unwrap_or(DEFAULT_TARGET_HIT_RATE);
    if !(x > 0.0 && x < 1.0) {
        bail!("cache.target_hit_rate = {x}: use a fraction strictly between 0 and 1 (e.g. 0.9)");
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::target_hit_rate;

    #[test]
    fn target_hit_rate_defaults_and_is_checked() {
        assert_eq!(target_hit_rate(None).unwrap(), 0.9);
        assert_eq!(target_hit_rate(Some(0.85)).unwrap(), 0.85);
        for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            let e = target_hit_rate(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("cache.target_hit_rate"), "{e}");
        }
    }
}
