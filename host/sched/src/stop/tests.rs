//! Unit tests of stop-string matching: splits, several stops, overlapping prefixes, UTF-8, and a
//! proptest that the result does not depend on how the input is split.

use proptest::prelude::*;

use super::{StopMatcher, StopOutput};

fn matcher(stops: &[&str]) -> StopMatcher {
    StopMatcher::new(stops.iter().map(|s| s.to_string()).collect())
}

/// Feeds `pieces`; returns everything emitted (plus `finish`) and whether it stopped.
fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
    let mut m = matcher(stops);
    let mut out = String::new();
    for piece in pieces {
        let StopOutput { emit, stopped } = m.push(piece);
        out.push_str(&emit);
        if stopped {
            assert_eq!(m.finish(), "");
            return (out, true);
        }
    }
    out.push_str(&m.finish());
    (out, false)
}

#[test]
fn no_stops_passes_text_through_immediately() {
    let mut m = matcher(&["", ""]);
    assert!(m.stops().is_empty());
    assert_eq!(
        m.push("hello"),
        StopOutput {
            emit: "hello".into(),
            stopped: false
        }
    );
    assert_eq!(m.finish(), "");
}

#[test]
fn a_stop_in_one_piece_cuts_before_it() {
    let mut m = matcher(&["</s>"]);
    assert_eq!(
        m.push("Hi</s>tail"),
        StopOutput {
            emit: "Hi".into(),
            stopped: true
        }
    );
    assert!(m.is_stopped());
    assert_eq!(
        m.push("more"),
        StopOutput {
            emit: String::new(),
            stopped: true
        }
    );
    assert_eq!(m.finish(), "");
}

#[test]
fn a_stop_split_across_many_pushes_is_held_then_dropped() {
    let mut m = matcher(&["<|im_end|>"]);
    assert_eq!(m.push("Hello <").emit, "Hello ");
    assert_eq!(m.push("|im").emit, "");
    assert_eq!(m.push("_e").emit, "");
    assert_eq!(m.push("nd|").emit, "");
    assert_eq!(
        m.push(">!"),
        StopOutput {
            emit: String::new(),
            stopped: true
        }
    );
}

#[test]
fn held_text_is_released_when_the_match_fails() {
    let mut m = matcher(&["STOP"]);
    assert_eq!(m.push("a ST").emit, "a ");
    assert_eq!(m.push("O").emit, "");
    assert_eq!(m.push("P!").emit, "");
    let mut m = matcher(&["STOP"]);
    assert_eq!(m.push("a STO").emit, "a ");
    assert_eq!(m.push("ne").emit, "STOne");
    assert_eq!(m.push(" ST").emit, " ");
    assert_eq!(m.finish(), "ST");
}

#[test]
fn multiple_stop_strings_the_first_completed_wins() {
    assert_eq!(
        run(&["\n\n", "User:"], &["a\nb\n", "\nUser:"]),
        ("a\nb".into(), true)
    );
    assert_eq!(
        run(&["\n\n", "User:"], &["a\nb", "\nUser:"]),
        ("a\nb\n".into(), true)
    );
    assert_eq!(
        run(&["\n\n", "User:"], &["aUser", ":\n\n"]),
        ("a".into(), true)
    );
    // "bc" completes before "abcd" could: it wins even though "abcd" would start earlier.
    assert_eq!(run(&["abcd", "bc"], &["xab", "cd"]), ("xa".into(), true));
    // Both end at the same byte: the one starting first wins.
    assert_eq!(run(&["cd", "abcd"], &["xab", "cd"]), ("x".into(), true));
}

#[test]
fn overlapping_prefixes() {
    // "aab" inside "aaab": the first 'a' is released once it cannot start the stop.
    let mut m = matcher(&["aab"]);
    assert_eq!(m.push("a").emit, "");
    assert_eq!(m.push("a").emit, "");
    assert_eq!(m.push("a").emit, "a");
    assert_eq!(
        m.push("b"),
        StopOutput {
            emit: String::new(),
            stopped: true
        }
    );
    // Two stops sharing a prefix.
    assert_eq!(
        run(&["abc", "abd"], &["x", "a", "b", "d"]),
        ("x".into(), true)
    );
    assert_eq!(
        run(&["abc", "abd"], &["x", "a", "b", "e"]),
        ("xabe".into(), false)
    );
    // A stop that is a prefix of another.
    assert_eq!(run(&["ab", "abc"], &["x", "a", "bc"]), ("x".into(), true));
}

#[test]
fn utf8_multibyte_boundaries_are_never_split() {
    // Stop "é!" shares its first byte (0xC3) with "ç" and "é"; only whole chars are emitted.
    let mut m = matcher(&["é!"]);
    assert_eq!(m.push("çé").emit, "ç");
    assert_eq!(m.push("é").emit, "é");
    assert_eq!(
        m.push("!"),
        StopOutput {
            emit: String::new(),
            stopped: true
        }
    );
    assert_eq!(
        run(&["😀😀"], &["a😀", "b😀", "😀c"]),
        ("a😀b".into(), true)
    );
    assert_eq!(run(&["日本"], &["日", "日", "本"]), ("日".into(), true));
    assert_eq!(run(&["日本"], &["日", "曜"]), ("日曜".into(), false));
}

/// What the whole stream should yield: the input up to the first completed stop string.
fn expected(input: &str, stops: &[String]) -> (String, bool) {
    let first = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| input.find(s.as_str()).map(|start| (start + s.len(), start)))
        .min();
    match first {
        Some((_, start)) => (input[..start].to_owned(), true),
        None => (input.to_owned(), false),
    }
}

fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', '€', 'é', '\n', '😀']),
        0..max,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #[test]
    fn output_does_not_depend_on_how_the_input_is_split(
        input in text(40),
        stops in prop::collection::vec(text(4), 0..4),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let boundaries: Vec<usize> = input.char_indices().map(|(i, _)| i).chain([input.len()]).collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| boundaries[c.index(boundaries.len())]).collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut last = 0;
        for cut in cuts.into_iter().chain([input.len()]) {
            pieces.push(&input[last..cut]);
            last = cut;
        }
        let stop_refs: Vec<&str> = stops.iter().map(String::as_str).collect();
        prop_assert_eq!(run(&stop_refs, &pieces), expected(&input, &stops));
    }
}
