//! `[cache]` keys of the operator view: `target_hit_rate`, the hit rate the
//! cache-sizing advisor sizes for (default 0.9; must lie strictly between 0 and 1), and
//! `auto_pin`, how many of the most reused prefixes stay pinned (default 0: off; at most 64).

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

/// Most prefixes `[cache] auto_pin` may keep pinned.
pub const MAX_AUTO_PIN: usize = 64;

/// Validates `[cache] auto_pin`.
pub fn auto_pin(raw: Option<usize>) -> anyhow::Result<usize> {
    let k = raw.unwrap_or(0);
    if k > MAX_AUTO_PIN {
        bail!("cache.auto_pin = {k}: use 0 (off) to {MAX_AUTO_PIN}");
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::{auto_pin, target_hit_rate};

    #[test]
    fn auto_pin_defaults_off_and_is_bounded() {
        assert_eq!(auto_pin(None).unwrap(), 0);
        assert_eq!(auto_pin(Some(8)).unwrap(), 8);
        assert!(
            auto_pin(Some(65))
                .unwrap_err()
                .to_string()
                .contains("cache.auto_pin")
        );
    }

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
