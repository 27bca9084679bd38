//! [`CpuBucket`]: a namespace's CPU share as a token bucket. It holds guest nanoseconds (the
//! time slices held a worker, never less than their CPU time), refills at `millicores / 1000`
//! of them per wall nanosecond up to `millicores × burst`, and every slice a guest runs is
//! taken out. Below zero the namespace owes time; its guests pause for as long as the refill
//! takes to pay the debt back.
//!
//! A namespace in debt is also held to its share *at any moment*, not only on average: every
//! pause hands out the next wake-up slot, and slots are one slice's refill time apart (a slice
//! is one epoch tick of running). Guests that went to sleep together wake one after another, so
//! a half-core namespace has at most one guest on a worker at a time and the other workers stay
//! free for its neighbours.
//!
//! Pure arithmetic on explicit times (wall nanoseconds since any fixed origin), all saturating,
//! so it is tested without a clock. The debt is capped at one full bucket: a namespace that
//! stops is back to its share within `burst`, however much it overran.

use std::time::Duration;

use super::CpuShare;

/// Shortest pause: below it the timer's resolution (1 ms in tokio) decides anyway.
pub(crate) const MIN_PAUSE: Duration = Duration::from_millis(1);

/// One namespace's bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CpuBucket {
    millicores: u64,
    /// Most guest nanoseconds the bucket holds (and most it can owe).
    capacity: i64,
    /// Guest nanoseconds left; negative: owed.
    balance: i64,
    /// Wall time of the last refill.
    last: u64,
    /// Longest a guest runs between two epoch callbacks (one tick), in nanoseconds.
    slice: u64,
    /// Wall time of the next free wake-up slot; a guest asking at or after it has no queue
    /// ahead of it.
    next_slot: u64,
}

/// `a × b / c` without overflow, saturating at `u64::MAX` (and for `c == 0`).
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let wide = u128::from(a).saturating_mul(u128::from(b));
    wide.checked_div(u128::from(c))
        .map_or(u64::MAX, |q| u64::try_from(q).unwrap_or(u64::MAX))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl CpuBucket {
    /// A full bucket for `share`, refilled from wall time `now`; guests run at most `slice`
    /// between two checks (the epoch tick).
    pub fn new(share: &CpuShare, slice: Duration, now: u64) -> CpuBucket {
        let millicores = u64::from(share.millicores.max(1));
        let burst = u64::try_from(share.burst.as_nanos()).unwrap_or(u64::MAX);
        let capacity = to_i64(mul_div(burst, millicores, 1000)).max(1);
        CpuBucket {
            millicores,
            capacity,
            balance: capacity,
            last: now,
            slice: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
            next_slot: now,
        }
    }

    /// Guest nanoseconds left (negative: owed), after refilling up to `now`.
    #[cfg(test)]
    pub fn balance(&mut self, now: u64) -> i64 {
        self.refill(now);
        self.balance
    }

    fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let earned = to_i64(mul_div(dt, self.millicores, 1000));
        self.balance = self.balance.saturating_add(earned).min(self.capacity);
    }

    /// Takes `used` nanoseconds a guest ran out of the bucket, at wall time `now`.
    pub fn charge(&mut self, used: u64, now: u64) {
        self.refill(now);
        self.balance = self
            .balance
            .saturating_sub(to_i64(used))
            .max(self.capacity.saturating_neg());
    }

    /// How long a guest of the namespace should sleep at wall time `now`: None while the bucket
    /// holds CPU and no paused guest is waiting for its slot, else until the later of the time
    /// the refill takes to pay the debt back and the next free slot (at least [`MIN_PAUSE`]).
    /// The slot after it is one slice's refill time later.
    pub fn pause(&mut self, now: u64) -> Option<Duration> {
        self.refill(now);
        if self.balance > 0 && self.next_slot <= now {
            return None;
        }
        let debt = if self.balance > 0 {
            0
        } else {
            mul_div(self.balance.unsigned_abs(), 1000, self.millicores)
        };
        let wake = now.saturating_add(debt).max(self.next_slot);
        self.next_slot = wake.saturating_add(mul_div(self.slice, 1000, self.millicores));
        let wait = Duration::from_nanos(wake - now);
        Some(wait.max(MIN_PAUSE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const TICK: Duration = Duration::from_millis(10);

    fn half_core() -> CpuShare {
        CpuShare {
            millicores: 500,
            burst: Duration::from_millis(100),
        }
    }

    #[test]
    fn a_full_bucket_holds_the_share_times_the_burst() {
        let mut b = CpuBucket::new(&half_core(), TICK, 0);
        assert_eq!(b.balance(0), 50 * MS as i64);
        assert_eq!(b.pause(0), None);
        b.charge(49 * MS, 0);
        assert_eq!(b.pause(0), None, "one millisecond left");
    }

    #[test]
    fn an_empty_bucket_pauses_until_the_debt_is_refilled() {
        let overdrawn = || {
            let mut b = CpuBucket::new(&half_core(), TICK, 0);
            b.charge(60 * MS, 0);
            b
        };
        assert_eq!(overdrawn().balance(0), -10 * MS as i64);
        // 10 ms of CPU at half a core takes 20 ms of wall time to earn back.
        assert_eq!(overdrawn().pause(0), Some(Duration::from_millis(20)));
        assert_eq!(overdrawn().pause(10 * MS), Some(Duration::from_millis(10)));
        assert_eq!(
            overdrawn().pause(20 * MS),
            Some(MIN_PAUSE),
            "exactly zero still waits"
        );
        assert_eq!(overdrawn().pause(21 * MS), None);
    }

    #[test]
    fn guests_paused_together_wake_one_slice_apart() {
        let mut b = CpuBucket::new(&half_core(), TICK, 0);
        b.charge(60 * MS, 0);
        // The debt is paid at 20 ms; a 10 ms slice takes 20 ms to earn at half a core.
        for k in 0..4u64 {
            let want = Duration::from_millis(20 + 20 * k);
            assert_eq!(b.pause(0), Some(want), "guest {k}");
        }
        assert!(b.pause(90 * MS).is_some(), "the queue is served first");
        assert_eq!(b.pause(10_000 * MS), None, "then the bucket is full again");
    }

    #[test]
    fn a_spinning_namespace_gets_its_share_and_no_more() {
        // One guest spins in 10 ms slices, sleeps whenever told to and runs a slice when it
        // wakes, for ten wall seconds.
        let mut b = CpuBucket::new(&half_core(), TICK, 0);
        let (mut now, mut cpu) = (0u64, 0u64);
        while now < 10_000 * MS {
            if let Some(d) = b.pause(now) {
                now += u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            }
            b.charge(10 * MS, now + 10 * MS);
            now += 10 * MS;
            cpu += 10 * MS;
        }
        // Half of ten seconds, plus the first full bucket, give or take one slice.
        let expected = 5_000 * MS + 50 * MS;
        assert!(
            cpu.abs_diff(expected) <= 10 * MS,
            "{} ms of CPU in 10 s",
            cpu / MS
        );
    }

    #[test]
    fn spinning_guests_of_a_throttled_namespace_run_one_at_a_time() {
        // Six guests spin in 10 ms slices (a slice ends at the next epoch callback, which
        // charges it and asks for a pause); a woken guest runs one slice first.
        const GUESTS: usize = 6;
        let mut b = CpuBucket::new(&half_core(), TICK, 0);
        // (time of the guest's next event, woke from a pause)
        let mut guests = [(0u64, false); GUESTS];
        let mut runs: Vec<(u64, u64)> = Vec::new();
        while let Some(g) = (0..GUESTS).min_by_key(|&g| guests[g].0) {
            let (t, woke) = guests[g];
            if t >= 5_000 * MS {
                break;
            }
            match if woke { None } else { b.pause(t) } {
                None => {
                    runs.push((t, t + 10 * MS));
                    b.charge(10 * MS, t + 10 * MS);
                    guests[g] = (t + 10 * MS, false);
                }
                Some(d) => {
                    let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                    guests[g] = (t.saturating_add(d), true);
                }
            }
        }
        // After the first burst (50 ms of CPU, run by all six at once), never two at a time.
        let late: Vec<_> = runs.iter().filter(|r| r.0 >= 100 * MS).collect();
        for (i, a) in late.iter().enumerate() {
            for c in &late[i + 1..] {
                assert!(a.1 <= c.0 || c.1 <= a.0, "slices {a:?} and {c:?} overlap");
            }
        }
        let cpu: u64 = late.iter().map(|r| r.1 - r.0).sum();
        let wall = 4_900 * MS;
        assert!(cpu.abs_diff(wall / 2) <= 20 * MS, "{} ms of CPU", cpu / MS);
    }

    #[test]
    fn the_refill_stops_at_a_full_bucket() {
        let mut b = CpuBucket::new(&half_core(), TICK, 0);
        b.charge(50 * MS, 0);
        assert_eq!(
            b.balance(u64::MAX),
            50 * MS as i64,
            "an hour idle is one burst"
        );
    }

    #[test]
    fn the_debt_is_capped_at_one_bucket() {
        let mut b = CpuBucket::new(&half_core(), TICK, 0);
        b.charge(u64::MAX, 0);
        assert_eq!(b.balance(0), -50 * MS as i64);
        assert_eq!(
            b.pause(0),
            Some(Duration::from_millis(100)),
            "at most one burst"
        );
    }

    #[test]
    fn time_going_backwards_earns_nothing() {
        let mut b = CpuBucket::new(&half_core(), TICK, 100 * MS);
        b.charge(60 * MS, 100 * MS);
        assert_eq!(b.balance(0), -10 * MS as i64);
        assert_eq!(b.balance(100 * MS), -10 * MS as i64);
    }

    #[test]
    fn extreme_shares_do_not_overflow() {
        let wide = CpuShare {
            millicores: u32::MAX,
            burst: Duration::MAX,
        };
        let mut b = CpuBucket::new(&wide, TICK, 0);
        b.charge(u64::MAX, u64::MAX);
        assert!(b.pause(u64::MAX).is_some());
        let thin = CpuShare {
            millicores: 0,
            burst: Duration::ZERO,
        };
        let mut b = CpuBucket::new(&thin, TICK, 0);
        b.charge(1, 0);
        assert!(b.pause(0).is_some_and(|d| d >= MIN_PAUSE));
        assert_eq!(mul_div(u64::MAX, u64::MAX, 0), u64::MAX);
    }
}
