//! The measured cost of one more row in a decode step, as a fraction of a one-row step: a
//! least-squares line through the engine's recent small steps (time against rows), so draft
//! lengths follow the model and the machine rather than a constant.

use super::length::ROW_COST;

/// Steps with more rows than this carry prompt chunks (compute-bound) and are left out.
pub const FIT_MAX_ROWS: usize = 64;
/// Steps a fit needs before it replaces [`ROW_COST`].
const MIN_STEPS: u32 = 32;
/// How much of the fit each new step replaces (about the last few hundred steps count).
const DECAY: f64 = 0.01;
/// The least spread of row counts (variance) that gives a slope worth trusting.
const MIN_SPREAD: f64 = 0.25;

/// Decaying sums of a line fit of step seconds on rows.
#[derive(Clone, Debug, Default)]
pub struct RowCost {
    steps: u32,
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl RowCost {
    /// Records a step of `rows` rows that took `secs` seconds (ignored outside the fit's range).
    pub fn observe(&mut self, rows: usize, secs: f64) {
        if rows == 0 || rows > FIT_MAX_ROWS || !secs.is_finite() || secs <= 0.0 {
            return;
        }
        let (x, keep) = (rows as f64, 1.0 - DECAY);
        self.w = self.w * keep + 1.0;
        self.x = self.x * keep + x;
        self.y = self.y * keep + secs;
        self.xx = self.xx * keep + x * x;
        self.xy = self.xy * keep + x * secs;
        self.steps = self.steps.saturating_add(1);
    }

    /// The cost of a row past the first against a one-row step (slope over the fitted time of
    /// one row), within 0.01..=1; [`ROW_COST`] until enough steps of more than one size were
    /// seen or when the fit makes no sense (a falling or negative line).
    pub fn get(&self) -> f64 {
        if self.steps < MIN_STEPS || self.w <= 0.0 {
            return ROW_COST;
        }
        let (mx, my) = (self.x / self.w, self.y / self.w);
        let spread = self.xx / self.w - mx * mx;
        if spread < MIN_SPREAD {
            return ROW_COST;
        }
        let slope = (self.xy / self.w - mx * my) / spread;
        let one_row = my - slope * mx + slope;
        if !(slope.is_finite() && one_row.is_finite()) || slope <= 0.0 || one_row <= 0.0 {
            return ROW_COST;
        }
        (slope / one_row).clamp(0.01, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_finds_the_cost_of_a_row_and_keeps_the_default_until_it_can() {
        let mut c = RowCost::default();
        assert_eq!(c.get(), ROW_COST);
        // A step costs 5 ms plus 1 ms a row: a row is 1/6 of a one-row step. One size only
        // gives no slope to fit.
        for _ in 0..100 {
            c.observe(16, 0.021);
        }
        assert_eq!(c.get(), ROW_COST);
        for i in 0..400 {
            let rows = 1 + i % 24;
            c.observe(rows, 0.005 + 0.001 * rows as f64);
        }
        assert!((c.get() - 1.0 / 6.0).abs() < 1e-6, "{}", c.get());
        // Prompt-sized steps and nonsense are left out.
        c.observe(512, 10.0);
        c.observe(4, f64::NAN);
        c.observe(4, -1.0);
        assert!((c.get() - 1.0 / 6.0).abs() < 1e-6, "{}", c.get());
        // The machine gets slower per row: the estimate follows.
        for i in 0..2000 {
            let rows = 1 + i % 24;
            c.observe(rows, 0.005 + 0.005 * rows as f64);
        }
        assert!((c.get() - 0.5).abs() < 0.02, "{}", c.get());
    }
}
