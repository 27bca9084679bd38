//! How many tokens a session drafts: from its recent acceptance, so drafting costs nothing where
//! nothing is predicted. A step that verifies `k` draft tokens carries `k + 1` rows through the
//! model; when few are accepted the session backs off to no draft at all, and probes again
//! after a while.

/// A session's draft length, adapted to its acceptance.
#[derive(Clone, Debug)]
pub struct DraftLength {
    max: u8,
    /// Exponential average of the accepted fraction, in 1/256ths.
    rate: u16,
    /// Steps left without drafting after a back-off.
    cooldown: u16,
    /// The back-off after the next failure (doubles up to 64 steps).
    backoff: u16,
}

/// Below this average acceptance (in 1/256ths, ~30%) the session stops drafting for a while.
const FLOOR: u16 = 77;

impl DraftLength {
    /// A controller drafting at most `max` tokens (0 turns drafting off).
    pub fn new(max: usize) -> DraftLength {
        DraftLength {
            max: max.min(u8::MAX as usize) as u8,
            rate: 160,
            cooldown: 0,
            backoff: 4,
        }
    }

    /// The draft length for the next step (0: decode without a draft). A step without a draft
    /// counts down a back-off.
    pub fn for_next_step(&mut self) -> usize {
        if self.max == 0 {
            return 0;
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return 0;
        }
        // From one token at low acceptance up to `max` when nearly everything is accepted.
        let k = 1 + ((usize::from(self.max) - 1) * usize::from(self.rate) + 128) / 256;
        k.min(usize::from(self.max))
    }

    /// Records a verification: `accepted` of `drafted` draft tokens matched.
    pub fn observe(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        let frac = (accepted.min(drafted) * 256 / drafted) as u16;
        self.rate = ((u32::from(self.rate) * 3 + u32::from(frac)) / 4) as u16;
        if self.rate < FLOOR {
            self.cooldown = self.backoff;
            self.backoff = (self.backoff * 2).min(64);
            self.rate = FLOOR + 32;
        } else if accepted > 0 {
            self.backoff = 4;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_acceptance_grows_to_the_max_and_none_backs_off() {
        let mut d = DraftLength::new(8);
        for _ in 0..20 {
            let k = d.for_next_step();
            d.observe(k, k);
        }
        assert_eq!(d.for_next_step(), 8);
        // Nothing accepted: soon no drafting at all, for longer each time.
        let mut off = 0;
        for _ in 0..200 {
            let k = d.for_next_step();
            if k == 0 {
                off += 1;
            }
            d.observe(k, 0);
        }
        assert!(off > 150, "{off} of 200 steps without a draft");
        assert_eq!(DraftLength::new(0).for_next_step(), 0);
    }
}
