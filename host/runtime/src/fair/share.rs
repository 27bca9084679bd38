//! [`CpuShare`]: how much CPU one namespace's guests may use, host-wide setting applied to every
//! namespace (`RuntimeConfig::cpu_share`).

use std::time::Duration;

/// The CPU each namespace's guests may use: `millicores` on average, with bursts of up to
/// `millicores × burst` before the namespace is throttled. Charged with the time its guests
/// hold a worker, which is never less than their CPU time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuShare {
    /// Average CPU, in thousandths of a core (500: half a core).
    pub millicores: u32,
    /// Window the share is averaged over; a namespace that was idle may run that long at its
    /// share at once (and a throttled one owes at most that much).
    pub burst: Duration,
}

impl Default for CpuShare {
    /// Half a core per namespace, averaged over half a second: a guest that mostly awaits the
    /// engine never gets near it, a spinning one gets half a core.
    fn default() -> Self {
        CpuShare {
            millicores: 500,
            burst: Duration::from_millis(500),
        }
    }
}

impl CpuShare {
    /// Most millicores accepted (a thousand cores).
    pub const MAX_MILLICORES: u32 = 1_000_000;

    /// Checks ranges; errors name the key (`cpu_share.millicores`, `cpu_share.burst`).
    pub fn validate(&self) -> Result<(), String> {
        if self.millicores == 0 || self.millicores > Self::MAX_MILLICORES {
            return Err(format!(
                "cpu_share.millicores = {}: must be from 1 to {}",
                self.millicores,
                Self::MAX_MILLICORES
            ));
        }
        if self.burst < Duration::from_millis(1) || self.burst > Duration::from_secs(60) {
            return Err(format!(
                "cpu_share.burst = {:?}: must be from 1 ms to 60 s",
                self.burst
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid_and_out_of_range_values_are_named() {
        assert_eq!(CpuShare::default().validate(), Ok(()));
        let zero = CpuShare {
            millicores: 0,
            ..CpuShare::default()
        };
        assert!(zero.validate().is_err_and(|e| e.contains("millicores")));
        let huge = CpuShare {
            millicores: u32::MAX,
            ..CpuShare::default()
        };
        assert!(huge.validate().is_err_and(|e| e.contains("millicores")));
        let no_window = CpuShare {
            burst: Duration::ZERO,
            ..CpuShare::default()
        };
        assert!(no_window.validate().is_err_and(|e| e.contains("burst")));
        let long = CpuShare {
            burst: Duration::MAX,
            ..CpuShare::default()
        };
        assert!(long.validate().is_err_and(|e| e.contains("burst")));
    }
}
