//! The request framing over streams: pipelined requests pass unchanged; a bad or oversized later
//! head, or bad chunk framing, ends the stream where it starts; a slow body times out.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

fn limits(body_timeout: Duration) -> Limits {
    Limits {
        max_head_bytes: 1024,
        body_timeout,
        min_body_rate: 1024,
    }
}

/// Everything hyper would read from `sent` (the client then closes its side).
async fn passed(sent: &[u8]) -> Vec<u8> {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    client.write_all(sent).await.expect("write");
    client.shutdown().await.expect("close");
    let mut f = Framed::new(server, limits(Duration::from_secs(5)));
    let mut got = Vec::new();
    f.read_to_end(&mut got).await.expect("read");
    got
}

#[tokio::test]
async fn pipelined_requests_pass_unchanged() {
    let sent: &[u8] = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\nPOST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\nGET /d HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(passed(sent).await, sent);
}

#[tokio::test]
async fn a_bad_later_head_ends_the_stream_at_its_start() {
    let good: &[u8] = b"GET /a HTTP/1.1\r\n\r\n";
    for bad in [
        &b"GET /b HTTP/1.1\r\nBad Header: x\r\n\r\n"[..],
        b"POST /b HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST /b HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /b HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST /b HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST /b HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
        b"POST /b HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
        b"POST /b HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        client.write_all(good).await.expect("write");
        client.write_all(bad).await.expect("write");
        let mut f = Framed::new(server, limits(Duration::from_secs(5)));
        let got = answered_then_ended(&mut f, good.len()).await;
        assert_eq!(got, good, "{}", String::from_utf8_lossy(bad));
        f.shutdown().await.expect("shutdown");
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("answer");
        let answer = String::from_utf8_lossy(&answer);
        let refusal = answer.strip_prefix(OK).expect("the first answer first");
        assert!(refusal.starts_with("HTTP/1.1 400 "), "{answer}");
        let body = refusal.split("\r\n\r\n").nth(1).expect("body");
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    }
}

/// The answer a server gives the request before a refused head.
const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

/// Reads the `n` bytes of the requests before a refused head; checks that the end of the
/// stream waits for their answer, writes it ([`OK`]) and reads to the end.
async fn answered_then_ended<S>(f: &mut Framed<S>, n: usize) -> Vec<u8>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut got = vec![0u8; n];
    f.read_exact(&mut got).await.expect("read");
    let mut probe = [0u8; 16];
    let early = tokio::time::timeout(Duration::from_millis(50), f.read(&mut probe)).await;
    assert!(early.is_err(), "the end of the stream waits for the answer");
    f.write_all(OK.as_bytes()).await.expect("answer");
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).await.expect("read");
    assert!(rest.is_empty(), "nothing past the refused head");
    got
}

#[tokio::test]
async fn an_oversized_later_head_gets_431() {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let big = format!("GET /b HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(2048));
    client
        .write_all(b"GET /a HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    client.write_all(big.as_bytes()).await.expect("write");
    let mut f = Framed::new(server, limits(Duration::from_secs(5)));
    let got = answered_then_ended(&mut f, 19).await;
    assert_eq!(got, b"GET /a HTTP/1.1\r\n\r\n");
    f.shutdown().await.expect("shutdown");
    let mut answer = vec![0u8; OK.len() + 12];
    client.read_exact(&mut answer).await.expect("answer");
    assert_eq!(&answer[OK.len()..], b"HTTP/1.1 431");
}

#[tokio::test]
async fn bad_chunk_framing_ends_the_stream_at_the_fault() {
    let sent: &[u8] =
        b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /x HTTP/1.1\r\n\r\n";
    let got = passed(sent).await;
    let head_len = sent.len() - b"zz\r\nGET /x HTTP/1.1\r\n\r\n".len();
    assert_eq!(
        got,
        &sent[..head_len + 1],
        "up to and including the faulty byte"
    );
    let huge: &[u8] =
        b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n";
    let got = passed(huge).await;
    assert!(got.len() < huge.len(), "a 17-digit chunk size is refused");
}

#[tokio::test]
async fn a_slow_body_times_out() {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    client
        .write_all(b"POST /a HTTP/1.1\r\nContent-Length: 1000\r\n\r\nab")
        .await
        .expect("write");
    let mut f = Framed::new(server, limits(Duration::from_millis(300)));
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let err = f.read_to_end(&mut got).await.expect_err("times out");
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(got.ends_with(b"ab"), "the bytes that came were passed on");
    drop(client);
}
