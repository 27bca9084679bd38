//! Fuzz harness of the request framing and the first-head check: byte-edited pipelines of
//! valid requests, heads with hostile Content-Length / Transfer-Encoding values and chunk
//! sizes, and arbitrary bytes. `Framed` must never panic and must clear only a prefix of the
//! input, the same however it is split; `classify` must never panic, and every refusal it leads
//! to must be a whole HTTP/1.1 response. `MEMORIA_FUZZ_CASES` raises the case counts.

use proptest::prelude::*;

use super::props::{cleared, request};
use crate::preface::{Head, classify, refusal_bytes, refusal_for};

/// A head whose body framing is hostile: odd Content-Length values, duplicate or conflicting
/// framing headers, huge or malformed chunk sizes.
fn hostile_request() -> impl Strategy<Value = Vec<u8>> {
    let length = prop::sample::select(vec![
        "0",
        "5",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999",
        "-1",
        "+5",
        " 5",
        "5,5",
        "5, 6",
        "0x10",
        "",
    ]);
    let te = prop::sample::select(vec![
        "chunked",
        "gzip, chunked",
        "chunked, gzip",
        "identity",
        "CHUNKED",
        "",
    ]);
    let size = prop::sample::select(vec![
        "0",
        "5",
        "ffffffffffffffff",
        "10000000000000000",
        "fffffffffffffffffff",
        "-1",
        "5;x=1",
        "g",
        "",
    ]);
    (
        prop::option::of(length.clone()),
        prop::option::of(length),
        prop::option::of(te),
        size,
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(cl, cl2, te, size, tail)| {
            let mut r = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n".to_vec();
            for v in [cl, cl2].into_iter().flatten() {
                r.extend(format!("Content-Length: {v}\r\n").bytes());
            }
            if let Some(v) = te {
                r.extend(format!("Transfer-Encoding: {v}\r\n").bytes());
            }
            r.extend(b"\r\n");
            r.extend(format!("{size}\r\n").bytes());
            r.extend(tail);
            r
        })
}

/// A refusal `head` leads to is a whole HTTP/1.1 response with a 4xx status.
fn whole_refusal(head: Head) -> Result<(), TestCaseError> {
    let bytes = refusal_bytes(&refusal_for(head));
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut resp = httparse::Response::new(&mut headers);
    let status = resp.parse(&bytes);
    prop_assert!(matches!(status, Ok(httparse::Status::Complete(_))));
    prop_assert!(resp.code.is_some_and(|c| (400..500).contains(&c)));
    Ok(())
}

fn classified(buf: &[u8], max: usize) -> Result<(), TestCaseError> {
    match classify(buf, max) {
        Head::Complete(n) => {
            prop_assert!(n <= buf.len() && n <= max);
        }
        Head::Partial => {
            prop_assert!(buf.len() < max);
        }
        other => whole_refusal(other)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(memoria_fuzz::config(2000))]

    #[test]
    fn framing_fuzz_edited_pipelines_pass_a_prefix(
        reqs in prop::collection::vec(request(), 1..4),
        edits in memoria_fuzz::edits(6),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut input = reqs.concat();
        memoria_fuzz::apply(&mut input, &edits);
        let whole = cleared(&input, &[]);
        prop_assert!(input.starts_with(&whole));
        prop_assert_eq!(cleared(&input, &cuts), whole);
    }

    #[test]
    fn framing_fuzz_hostile_framing_passes_a_prefix(
        first in prop::option::of(request()),
        hostile in hostile_request(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut input = first.unwrap_or_default();
        input.extend(hostile);
        let whole = cleared(&input, &[]);
        prop_assert!(input.starts_with(&whole));
        prop_assert_eq!(cleared(&input, &cuts), whole);
    }

    #[test]
    fn preface_fuzz_any_bytes_classify_cleanly(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        max in prop::sample::select(vec![16usize, 64, 512, crate::preface::MAX_HEAD_BYTES]),
    ) {
        classified(&bytes, max)?;
    }

    #[test]
    fn preface_fuzz_edited_heads_classify_cleanly(
        req in prop_oneof![request(), hostile_request()],
        edits in memoria_fuzz::edits(6),
        max in prop::sample::select(vec![32usize, 512, crate::preface::MAX_HEAD_BYTES]),
    ) {
        let mut bytes = req;
        memoria_fuzz::apply(&mut bytes, &edits);
        classified(&bytes, max)?;
    }
}
