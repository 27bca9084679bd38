//! A regex turned into our own compact byte automaton: regex-automata determinizes (anchored,
//! all-matches semantics), we copy the reachable states into a dense table over its byte classes,
//! then trim every state that cannot reach acceptance, so a live state always has a way to finish.

use std::collections::HashMap;

use regex_automata::dfa::{Automaton, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};

use crate::error::ConstrainError;

/// No state: the byte is refused.
pub(crate) const DEAD: u32 = u32::MAX;
/// Limit on each of regex-automata's NFA, determinizer and DFA sizes.
const BUILD_LIMIT: usize = 64 << 20;
/// At most this many states in our table.
const MAX_STATES: usize = 1 << 18;

/// A trimmed deterministic automaton over bytes.
#[derive(Debug)]
pub(crate) struct Table {
    /// Byte → class column.
    classes: [u8; 256],
    stride: usize,
    /// `trans[state * stride + class]`, [`DEAD`] for refused bytes.
    trans: Vec<u32>,
    accept: Vec<bool>,
    /// Fewest bytes from each state to an accepting state.
    dist: Vec<u32>,
    pub(crate) start: u32,
}

fn too_complex(e: impl std::fmt::Display) -> ConstrainError {
    ConstrainError::TooComplex(e.to_string())
}

impl Table {
    /// Builds the table for `regex`, matched against the whole output.
    pub(crate) fn build(regex: &str) -> Result<Table, ConstrainError> {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(regex_automata::dfa::StartKind::Anchored)
                    .byte_classes(true)
                    .dfa_size_limit(Some(BUILD_LIMIT))
                    .determinize_size_limit(Some(BUILD_LIMIT)),
            )
            .syntax(
                syntax::Config::new()
                    .utf8(true)
                    .unicode(true)
                    .nest_limit(1000),
            )
            .thompson(
                thompson::Config::new()
                    .nfa_size_limit(Some(BUILD_LIMIT))
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build(regex)
            .map_err(too_complex)?;
        let start_id = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(too_complex)?;

        let bc = dfa.byte_classes();
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            let c = bc.get(b);
            classes[usize::from(b)] = c;
            if usize::from(c) == reps.len() {
                reps.push(b);
            }
        }
        let stride = reps.len();

        // Breadth-first copy of the reachable states.
        let mut index: HashMap<regex_automata::util::primitives::StateID, u32> = HashMap::new();
        let mut order = Vec::new();
        let live = |id| !(dfa.is_dead_state(id) || dfa.is_quit_state(id));
        if !live(start_id) {
            return Err(empty());
        }
        index.insert(start_id, 0);
        order.push(start_id);
        let mut trans: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let id = order[i];
            for &b in &reps {
                let next = dfa.next_state(id, b);
                let t = if live(next) {
                    let n = order.len() as u32;
                    *index.entry(next).or_insert_with(|| {
                        order.push(next);
                        n
                    })
                } else {
                    DEAD
                };
                trans.push(t);
            }
            if order.len() > MAX_STATES {
                return Err(ConstrainError::TooComplex(format!(
                    "the automaton passes {MAX_STATES} states"
                )));
            }
            i += 1;
        }
        let accept: Vec<bool> = order
            .iter()
            .map(|&id| dfa.is_match_state(dfa.next_eoi_state(id)))
            .collect();

        let mut t = Table {
            classes,
            stride,
            trans,
            dist: Vec::new(),
            accept,
            start: 0,
        };
        t.trim()?;
        Ok(t)
    }

    /// Distances to acceptance by a reverse breadth-first search; states that cannot accept are
    /// cut off (their incoming transitions become [`DEAD`]).
    fn trim(&mut self) -> Result<(), ConstrainError> {
        let n = self.accept.len();
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
        for s in 0..n {
            for &t in &self.trans[s * self.stride..(s + 1) * self.stride] {
                if t != DEAD {
                    rev[t as usize].push(s as u32);
                }
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue: Vec<u32> = (0..n as u32).filter(|&s| self.accept[s as usize]).collect();
        for &s in &queue {
            dist[s as usize] = 0;
        }
        let mut head = 0;
        while head < queue.len() {
            let s = queue[head];
            head += 1;
            for &p in &rev[s as usize] {
                if dist[p as usize] == u32::MAX {
                    dist[p as usize] = dist[s as usize] + 1;
                    queue.push(p);
                }
            }
        }
        if dist[self.start as usize] == u32::MAX {
            return Err(empty());
        }
        for t in &mut self.trans {
            if *t != DEAD && dist[*t as usize] == u32::MAX {
                *t = DEAD;
            }
        }
        self.dist = dist;
        Ok(())
    }

    #[inline]
    pub(crate) fn next(&self, s: u32, b: u8) -> u32 {
        self.trans[s as usize * self.stride + usize::from(self.classes[usize::from(b)])]
    }

    pub(crate) fn is_accepting(&self, s: u32) -> bool {
        self.accept[s as usize]
    }

    pub(crate) fn distance(&self, s: u32) -> u32 {
        self.dist[s as usize]
    }

    /// Number of states kept (reachable ones, including any trimmed off).
    pub(crate) fn states(&self) -> usize {
        self.accept.len()
    }
}

fn empty() -> ConstrainError {
    ConstrainError::Empty {
        path: "#".to_owned(),
        reason: "the automaton accepts nothing".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &Table, text: &[u8]) -> Option<u32> {
        text.iter().try_fold(t.start, |s, &b| {
            let n = t.next(s, b);
            (n != DEAD).then_some(n)
        })
    }

    #[test]
    fn all_matches_semantics_keep_longer_alternatives() {
        let t = Table::build("a|ab|abc").unwrap();
        for w in ["a", "ab", "abc"] {
            let s = run(&t, w.as_bytes()).unwrap();
            assert!(t.is_accepting(s), "{w}");
        }
        assert!(run(&t, b"abcd").is_none());
        assert!(run(&t, b"b").is_none());
        assert_eq!(t.distance(t.start), 1);
    }

    #[test]
    fn trims_states_that_cannot_finish() {
        // After "x" nothing can complete (an empty class); the byte must be refused outright.
        let t = Table::build("ab|x[^\\s\\S]").unwrap();
        assert!(run(&t, b"x").is_none());
        assert_eq!(t.distance(run(&t, b"a").unwrap()), 1);
    }
}
