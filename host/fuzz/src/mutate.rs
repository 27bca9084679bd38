//! Byte-level mutations of a valid encoding: bit flips, byte overwrites, truncation, insertion
//! and removal, at positions drawn relative to the input's length so they always land.

use proptest::prelude::*;
use proptest::sample::Index;

/// One edit of a byte string.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Flip bit `bit % 8` of one byte.
    Flip { at: Index, bit: u8 },
    /// Overwrite one byte.
    Set { at: Index, byte: u8 },
    /// Keep only a prefix.
    Truncate { at: Index },
    /// Insert bytes before a position (or at the end).
    Insert { at: Index, bytes: Vec<u8> },
    /// Remove up to `len` bytes from a position.
    Remove { at: Index, len: u8 },
}

/// One to `max` edits, flips and overwrites the most likely.
pub fn edits(max: usize) -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        4 => (any::<Index>(), any::<u8>()).prop_map(|(at, bit)| Edit::Flip { at, bit }),
        4 => (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Edit::Set { at, byte }),
        1 => any::<Index>().prop_map(|at| Edit::Truncate { at }),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(at, len)| Edit::Remove { at, len }),
    ];
    prop::collection::vec(edit, 1..=max.max(1))
}

/// Applies `edits` in order.
pub fn apply(bytes: &mut Vec<u8>, edits: &[Edit]) {
    for e in edits {
        let n = bytes.len();
        match e {
            Edit::Flip { at, bit } if n > 0 => bytes[at.index(n)] ^= 1 << (bit % 8),
            Edit::Set { at, byte } if n > 0 => bytes[at.index(n)] = *byte,
            Edit::Truncate { at } => bytes.truncate(at.index(n + 1)),
            Edit::Insert { at, bytes: ins } => {
                let i = at.index(n + 1);
                bytes.splice(i..i, ins.iter().copied());
            }
            Edit::Remove { at, len } if n > 0 => {
                let i = at.index(n);
                bytes.drain(i..(i + usize::from(*len)).min(n));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #[test]
        fn edits_apply_to_any_input_without_panicking(
            input in prop::collection::vec(any::<u8>(), 0..64),
            es in edits(8),
        ) {
            let mut b = input.clone();
            apply(&mut b, &es);
            let grown: usize = es
                .iter()
                .map(|e| if let Edit::Insert { bytes, .. } = e { bytes.len() } else { 0 })
                .sum();
            prop_assert!(b.len() <= input.len() + grown);
        }
    }

    proptest! {
        #[test]
        fn a_flip_changes_exactly_one_bit(
            input in prop::collection::vec(any::<u8>(), 1..64),
            at in any::<Index>(),
            bit in any::<u8>(),
        ) {
            let mut b = input.clone();
            apply(&mut b, &[Edit::Flip { at, bit }]);
            let changed: u32 = b.iter().zip(&input).map(|(x, y)| (x ^ y).count_ones()).sum();
            prop_assert_eq!(changed, 1);
        }
    }
}
