//! What one more row costs in a forward pass on the machine at hand, as a fraction of a
//! one-row pass: the figure [`super::DraftLength`] weighs a draft's expected tokens against.
//! Fitted from the engine's own passes (time against rows, a line through the recent passes of
//! up to [`FIT_ROWS`] rows, older passes weighing less), so drafting follows the CPU and model
//! it runs on; until the passes seen differ enough in size, [`ROW_COST`] stands in.

use std::time::Duration;

use super::length::ROW_COST;

/// Passes of more rows than this (long prompt chunks) are left out of the fit: per-row costs
/// fall as a pass grows, and a draft's pass is short.
pub const FIT_ROWS: usize = 33;
/// The weight of the newest pass in the running sums.
const WEIGHT: f64 = 1.0 / 64.0;
/// The least total weight (about 14 passes) the line is fitted from.
const MIN_WEIGHT: f64 = 0.2;
/// The least spread of row counts (variance, rows²) the line is fitted from.
const MIN_SPREAD: f64 = 0.25;
/// The range a fitted cost is held to.
const LOWEST: f64 = 0.01;
const HIGHEST: f64 = 1.0;

/// The running fit (or a fixed figure).
#[derive(Clone, Debug)]
pub struct RowCost {
    fixed: Option<f64>,
    /// Exponentially weighted sums of 1, rows, seconds, rows², rows·seconds.
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
    /// The latest fitted figure (kept while the passes seen are all of one size).
    last: f64,
}

impl RowCost {
    /// A fit starting from [`ROW_COST`]; `fixed` pins the figure instead (reproducible draft
    /// lengths, whatever the timings).
    pub fn new(fixed: Option<f64>) -> RowCost {
        RowCost {
            fixed: fixed.map(|c| {
                if c.is_finite() {
                    c.clamp(0.0, HIGHEST)
                } else {
                    ROW_COST
                }
            }),
            w: 0.0,
            x: 0.0,
            y: 0.0,
            xx: 0.0,
            xy: 0.0,
            last: ROW_COST,
        }
    }

    /// Records a forward pass of `rows` rows that took `took`.
    pub fn observe(&mut self, rows: usize, took: Duration) {
        if self.fixed.is_some() || rows == 0 || rows > FIT_ROWS {
            return;
        }
        let (x, y) = (rows as f64, took.as_secs_f64());
        let keep = 1.0 - WEIGHT;
        self.w = self.w * keep + WEIGHT;
        self.x = self.x * keep + WEIGHT * x;
        self.y = self.y * keep + WEIGHT * y;
        self.xx = self.xx * keep + WEIGHT * x * x;
        self.xy = self.xy * keep + WEIGHT * x * y;
        if let Some(c) = self.fit() {
            self.last = c;
        }
    }

    /// The cost of a row past the first, as a fraction of a one-row pass.
    pub fn get(&self) -> f64 {
        self.fixed.unwrap_or(self.last)
    }

    /// The line's slope over its value at one row, when the passes seen spread enough.
    fn fit(&self) -> Option<f64> {
        let mx = self.x / self.w;
        let my = self.y / self.w;
        let var = self.xx / self.w - mx * mx;
        // NaN never passes.
        if self.w < MIN_WEIGHT || var.is_nan() || var < MIN_SPREAD {
            return None;
        }
        let slope = (self.xy / self.w - mx * my) / var;
        let one = my + slope * (1.0 - mx);
        if one.is_nan() || one <= 0.0 || !slope.is_finite() {
            return None;
        }
        Some((slope / one).clamp(LOWEST, HIGHEST))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Duration {
        Duration::from_secs_f64(v / 1000.0)
    }

    #[test]
    fn the_fit_finds_the_cost_of_a_row() {
        // A pass costs 6 ms plus 1.5 ms a row past the first: a row is a quarter of a pass.
        let mut c = RowCost::new(None);
        assert_eq!(c.get(), ROW_COST, "the prior before any pass");
        for i in 0..400 {
            let rows = [1, 1, 3, 1, 5, 9, 2][i % 7];
            c.observe(rows, ms(6.0 + 1.5 * (rows - 1) as f64));
        }
        assert!((c.get() - 0.25).abs() < 1e-6, "{}", c.get());
        // Long prompt chunks are left out, and passes of one size keep the last figure.
        for _ in 0..1000 {
            c.observe(512, ms(100.0));
            c.observe(1, ms(6.0));
        }
        assert!((c.get() - 0.25).abs() < 0.01, "{}", c.get());
    }

    #[test]
    fn it_follows_a_change_of_machine_and_stays_in_range() {
        let mut c = RowCost::new(None);
        for i in 0..2000 {
            let rows = 1 + i % 4;
            c.observe(rows, ms(10.0 + 0.5 * (rows - 1) as f64));
        }
        assert!((c.get() - 0.05).abs() < 0.005, "{}", c.get());
        // Rows that cost nothing or less than nothing, then absurdly much: held to the range.
        for i in 0..2000 {
            let rows = 1 + i % 4;
            c.observe(rows, ms(10.0 - 2.0 * (rows - 1) as f64));
        }
        assert_eq!(c.get(), LOWEST);
        for i in 0..2000 {
            let rows = 1 + i % 4;
            c.observe(rows, ms(1.0 + 40.0 * (rows - 1) as f64));
        }
        assert_eq!(c.get(), HIGHEST);
    }

    #[test]
    fn a_fixed_cost_ignores_the_timings() {
        let mut c = RowCost::new(Some(0.3));
        for rows in 1..10 {
            c.observe(rows, ms(rows as f64 * 100.0));
        }
        assert_eq!(c.get(), 0.3);
        assert_eq!(RowCost::new(Some(f64::NAN)).get(), ROW_COST);
        assert_eq!(RowCost::new(Some(-1.0)).get(), 0.0);
    }
}
