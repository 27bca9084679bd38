//! Framing properties over generated streams: a valid pipelined stream passes whole however
//! it is split; any bytes never panic, pass only a prefix of themselves, and pass the same
//! prefix however they are split.

use proptest::prelude::*;

use super::*;

/// What `Framed` clears for hyper when `input` arrives in pieces cut at `cuts`.
pub(super) fn cleared(input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut f = Framed::new(
        tokio::io::empty(),
        Limits {
            max_head_bytes: 4096,
            body_timeout: Duration::from_secs(1),
            min_body_rate: 1,
        },
    );
    let mut out = Vec::new();
    let mut at = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    ends.push(input.len());
    ends.sort_unstable();
    for end in ends {
        f.buf.extend_from_slice(&input[at..end.max(at)]);
        at = end.max(at);
        f.advance();
        out.extend_from_slice(&f.buf.split_to(f.cleared));
        f.cleared = 0;
    }
    out
}

/// One valid request: a head, then no body, a Content-Length body or a chunked one.
pub(super) fn request() -> impl Strategy<Value = Vec<u8>> {
    let body = prop::collection::vec(any::<u8>(), 0..300);
    let chunks = prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 0..5);
    prop_oneof![
        Just(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        body.prop_map(|b| {
            let mut r = format!(
                "POST /v1/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                b.len()
            )
            .into_bytes();
            r.extend(b);
            r
        }),
        (chunks, any::<bool>()).prop_map(|(cs, trailer)| {
            let mut r = b"POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for c in cs {
                r.extend(format!("{:x};ext=1\r\n", c.len()).bytes());
                r.extend(c);
                r.extend(b"\r\n");
            }
            r.extend(b"0\r\n");
            if trailer {
                r.extend(b"X-Trailer: yes\r\n");
            }
            r.extend(b"\r\n");
            r
        }),
    ]
}

proptest! {
    #![proptest_config(memoria_fuzz::config(2000))]

    #[test]
    fn valid_pipelined_streams_pass_whole(
        reqs in prop::collection::vec(request(), 1..6),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let stream: Vec<u8> = reqs.concat();
        prop_assert_eq!(cleared(&stream, &cuts), stream);
    }

    #[test]
    fn any_bytes_pass_a_prefix_whatever_the_split(
        prefix in request(),
        noise in prop::collection::vec(any::<u8>(), 0..400),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut input = prefix;
        input.extend(noise);
        let whole = cleared(&input, &[]);
        prop_assert!(input.starts_with(&whole));
        prop_assert_eq!(cleared(&input, &cuts), whole);
    }
}
