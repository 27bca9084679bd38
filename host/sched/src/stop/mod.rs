//! Stop strings over streamed text: [`StopMatcher`] is fed decoded text piece by piece and says
//! what may be sent to the client now. Invariants: text that could still become the start of a
//! stop string is held back until disambiguated; a stop string is never emitted; the output is
//! independent of how the input is split: emits + `finish` equal the input when no stop string
//! occurs, else the input up to the first completed stop string (the one that ends first; of
//! those ending at the same byte, the one that starts first). Text is only ever cut at char
//! boundaries.

#[cfg(test)]
mod tests;

/// What one [`StopMatcher::push`] releases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopOutput {
    /// Text safe to send to the client now.
    pub emit: String,
    /// A stop string matched: `emit` ends right before it and generation should stop.
    pub stopped: bool,
}

/// Bytes of room the streaming buffers start with: more than any one token's text.
pub const TEXT_ROOM: usize = 256;

/// Finds stop strings in streamed text, holding back possible partial matches.
#[derive(Debug, Clone)]
pub struct StopMatcher {
    stops: Vec<String>,
    /// Text received but not yet emitted: always a (possibly empty) proper prefix of some stop.
    pending: String,
    stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops`; empty strings are ignored (and duplicates collapsed).
    pub fn new(stops: Vec<String>) -> StopMatcher {
        let mut stops: Vec<String> = stops.into_iter().filter(|s| !s.is_empty()).collect();
        stops.sort();
        stops.dedup();
        // Room for the longest held-back text plus a long token, so streaming never grows it.
        let longest = stops.iter().map(String::len).max().unwrap_or(0);
        StopMatcher {
            stops,
            pending: String::with_capacity(longest + TEXT_ROOM),
            stopped: false,
        }
    }

    /// The stop strings in effect.
    pub fn stops(&self) -> &[String] {
        &self.stops
    }

    /// Whether a stop string has matched; later pushes emit nothing.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Feeds newly decoded text.
    pub fn push(&mut self, text: &str) -> StopOutput {
        let mut emit = String::new();
        let stopped = self.push_into(text, &mut emit);
        StopOutput { emit, stopped }
    }

    /// [`StopMatcher::push`] appending the text safe to send to `out`; returns whether a stop
    /// string matched. Allocates nothing once the buffers have room.
    pub fn push_into(&mut self, text: &str, out: &mut String) -> bool {
        if self.stopped {
            return true;
        }
        self.pending.push_str(text);
        if let Some(start) = self.first_match() {
            self.stopped = true;
            out.push_str(&self.pending[..start]);
            self.pending.clear();
            return true;
        }
        let keep = self.partial_suffix_len();
        let split = self.pending.len() - keep;
        out.push_str(&self.pending[..split]);
        self.pending.drain(..split);
        false
    }

    /// Ends the stream: returns the held-back text (nothing once stopped).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// Start of the first completed stop string in `pending`: the one ending first, then the
    /// one starting first.
    fn first_match(&self) -> Option<usize> {
        self.stops
            .iter()
            .filter_map(|stop| {
                self.pending
                    .find(stop.as_str())
                    .map(|start| (start + stop.len(), start))
            })
            .min()
            .map(|(_, start)| start)
    }

    /// Length of the longest suffix of `pending` that is a proper prefix of a stop string. Such a
    /// suffix starts on a char boundary: a stop string's first byte never continues a char.
    fn partial_suffix_len(&self) -> usize {
        let text = self.pending.as_bytes();
        self.stops
            .iter()
            .map(|stop| {
                let stop = stop.as_bytes();
                let longest = (stop.len() - 1).min(text.len());
                (1..=longest)
                    .rev()
                    .find(|&k| text.ends_with(&stop[..k]))
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }
}
