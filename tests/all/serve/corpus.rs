//! The malformed-request corpus: bad JSON, wrong types, out-of-range and huge values, invalid
//! UTF-8, an oversized body, unknown routes and methods, bad auth. Every case must get a 4xx
//! whose body is an OpenAI error object.

/// One bad request.
pub struct Case {
    pub name: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Declare this Content-Length and send no body (the server must refuse before reading).
    pub declared_len: Option<usize>,
    /// The status expected, when the case pins one.
    pub status: Option<u16>,
    /// The `error.param` expected, when the case pins one.
    pub param: Option<&'static str>,
}

const CHAT: &str = "/v1/chat/completions";
const COMP: &str = "/v1/completions";
const EMB: &str = "/v1/embeddings";
const MSG: &str = r#"[{"role":"user","content":"hi"}]"#;

fn case(name: &'static str, path: &'static str, body: impl Into<Vec<u8>>) -> Case {
    Case {
        name,
        method: "POST",
        path,
        headers: Vec::new(),
        body: body.into(),
        declared_len: None,
        status: Some(400),
        param: None,
    }
}

fn chat_with(name: &'static str, extra: &str) -> Case {
    case(name, CHAT, format!(r#"{{"messages":{MSG},{extra}}}"#))
}

fn pinned(mut c: Case, status: u16, param: Option<&'static str>) -> Case {
    c.status = Some(status);
    c.param = param;
    c
}

/// Every case (at least 50).
pub fn cases() -> Vec<Case> {
    let long = "word ".repeat(3000);
    let mut v = vec![
        case("empty body", CHAT, ""),
        case("unclosed object", CHAT, "{"),
        case("broken array", CHAT, r#"{"messages": [}"#),
        case("not json", CHAT, "not json"),
        pinned(
            chat_with("NaN temperature", r#""temperature": NaN"#),
            400,
            Some("temperature"),
        ),
        pinned(
            chat_with("Infinity temperature", r#""temperature": Infinity"#),
            400,
            Some("temperature"),
        ),
        case(
            "trailing characters",
            CHAT,
            format!(r#"{{"messages":{MSG}}} trailing"#),
        ),
        case("array body", CHAT, "[]"),
        case("string body", CHAT, r#""just a string""#),
        case("null body", CHAT, "null"),
        case(
            "invalid utf-8 in content",
            CHAT,
            b"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}".to_vec(),
        ),
        case("invalid utf-8 body", COMP, b"\xff\xff\xff\xff".to_vec()),
        pinned(
            case("messages is a string", CHAT, r#"{"messages": "hi"}"#),
            400,
            Some("messages"),
        ),
        case("messages missing", CHAT, "{}"),
        pinned(
            case("messages empty", CHAT, r#"{"messages": []}"#),
            400,
            Some("messages"),
        ),
        case(
            "unknown role",
            CHAT,
            r#"{"messages":[{"role":"wizard","content":"hi"}]}"#,
        ),
        case(
            "content is a number",
            CHAT,
            r#"{"messages":[{"role":"user","content":42}]}"#,
        ),
        case("content missing", CHAT, r#"{"messages":[{"role":"user"}]}"#),
        case(
            "image content part",
            CHAT,
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#,
        ),
        case(
            "message name is a number",
            CHAT,
            r#"{"messages":[{"role":"user","content":"hi","name":7}]}"#,
        ),
        pinned(
            chat_with("temperature is text", r#""temperature": "hot""#),
            400,
            Some("temperature"),
        ),
        pinned(
            chat_with("temperature too high", r#""temperature": 5"#),
            400,
            Some("temperature"),
        ),
        pinned(
            chat_with("temperature negative", r#""temperature": -1"#),
            400,
            Some("temperature"),
        ),
        pinned(
            chat_with("top_p above 1", r#""top_p": 1.5"#),
            400,
            Some("top_p"),
        ),
        pinned(
            chat_with("negative max_tokens", r#""max_tokens": -1"#),
            400,
            Some("max_tokens"),
        ),
        pinned(
            chat_with("zero max_tokens", r#""max_tokens": 0"#),
            400,
            Some("max_tokens"),
        ),
        pinned(
            chat_with("float max_tokens", r#""max_tokens": 1e30"#),
            400,
            Some("max_tokens"),
        ),
        pinned(
            chat_with("huge max_tokens", r#""max_tokens": 99999999999"#),
            400,
            Some("max_tokens"),
        ),
        pinned(
            chat_with("max_tokens is text", r#""max_tokens": "ten""#),
            400,
            Some("max_tokens"),
        ),
        pinned(chat_with("n = 129", r#""n": 129"#), 400, Some("n")),
        pinned(chat_with("n = 0", r#""n": 0"#), 400, Some("n")),
        pinned(
            chat_with("stream is text", r#""stream": "yes""#),
            400,
            Some("stream"),
        ),
        pinned(
            chat_with("five stop strings", r#""stop": ["a","b","c","d","e"]"#),
            400,
            Some("stop"),
        ),
        pinned(
            chat_with("stop is a number", r#""stop": 7"#),
            400,
            Some("stop"),
        ),
        pinned(
            chat_with("seed is text", r#""seed": "blue""#),
            400,
            Some("seed"),
        ),
        pinned(
            chat_with("top_logprobs without logprobs", r#""top_logprobs": 3"#),
            400,
            Some("top_logprobs"),
        ),
        pinned(
            chat_with(
                "top_logprobs above 20",
                r#""logprobs": true, "top_logprobs": 21"#,
            ),
            400,
            Some("top_logprobs"),
        ),
        pinned(
            chat_with(
                "stream_options without stream",
                r#""stream_options": {"include_usage": true}"#,
            ),
            400,
            Some("stream_options"),
        ),
        pinned(
            chat_with("model is a number", r#""model": 7"#),
            400,
            Some("model"),
        ),
        pinned(
            chat_with(
                "a tool of another type",
                r#""tools": [{"type":"retrieval"}]"#,
            ),
            400,
            Some("tools[0].type"),
        ),
        pinned(
            chat_with(
                "logit_bias outside the vocabulary",
                r#""logit_bias": {"999999": 5}"#,
            ),
            400,
            Some("logit_bias"),
        ),
        pinned(
            chat_with(
                "a schema keyword outside the supported subset",
                r#""response_format": {"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","patternProperties":{"^a":{"type":"string"}}}}}"#,
            ),
            400,
            Some("response_format.json_schema.schema: patternProperties"),
        ),
        pinned(
            chat_with("seed is text", r#""seed": "abc""#),
            400,
            Some("seed"),
        ),
        pinned(
            chat_with("presence_penalty out of range", r#""presence_penalty": 3"#),
            400,
            Some("presence_penalty"),
        ),
        chat_with(
            "unknown stream option",
            r#""stream_options": {"foo": true}"#,
        ),
        pinned(
            case(
                "prompt longer than the context",
                CHAT,
                format!(r#"{{"messages":[{{"role":"user","content":"{long}"}}]}}"#),
            ),
            400,
            Some("messages"),
        ),
        pinned(
            case("prompt missing", COMP, r#"{"max_tokens": 4}"#),
            400,
            Some("prompt"),
        ),
        case("prompt is a number", COMP, r#"{"prompt": 5}"#),
        pinned(
            case("empty prompt list", COMP, r#"{"prompt": []}"#),
            400,
            Some("prompt"),
        ),
        pinned(
            case(
                "token id outside the vocabulary",
                COMP,
                r#"{"prompt": [999999]}"#,
            ),
            400,
            Some("prompt"),
        ),
        pinned(
            case("echo is text", COMP, r#"{"prompt": "a", "echo": "x"}"#),
            400,
            Some("echo"),
        ),
        pinned(
            case("suffix", COMP, r#"{"prompt": "a", "suffix": "abc"}"#),
            400,
            Some("suffix"),
        ),
        pinned(
            case(
                "best_of below n",
                COMP,
                r#"{"prompt": "a", "n": 3, "best_of": 2}"#,
            ),
            400,
            Some("best_of"),
        ),
        pinned(
            case(
                "completion past the context",
                COMP,
                r#"{"prompt": "Once upon a time", "max_tokens": 600}"#,
            ),
            400,
            Some("max_tokens"),
        ),
        pinned(
            case("embedding input missing", EMB, r#"{"model": "m"}"#),
            400,
            Some("input"),
        ),
        pinned(
            case("embedding input empty string", EMB, r#"{"input": ""}"#),
            400,
            Some("input"),
        ),
        pinned(
            case("embedding input empty list", EMB, r#"{"input": []}"#),
            400,
            Some("input"),
        ),
        pinned(
            case(
                "embedding encoding hex",
                EMB,
                r#"{"input": "a", "encoding_format": "hex"}"#,
            ),
            400,
            Some("encoding_format"),
        ),
        pinned(
            case(
                "embedding dimensions",
                EMB,
                r#"{"input": "a", "dimensions": 3}"#,
            ),
            400,
            Some("dimensions"),
        ),
        pinned(
            case(
                "embedding token outside the vocabulary",
                EMB,
                r#"{"input": [[99999]]}"#,
            ),
            400,
            Some("input"),
        ),
        pinned(
            case(
                "embedding model is a number",
                EMB,
                r#"{"input": "a", "model": 5}"#,
            ),
            400,
            Some("model"),
        ),
        pinned(
            case(
                "tokenize content is a number",
                "/tokenize",
                r#"{"content": 5}"#,
            ),
            400,
            Some("content"),
        ),
        pinned(
            case(
                "detokenize negative id",
                "/detokenize",
                r#"{"tokens": [-1]}"#,
            ),
            400,
            Some("tokens[0]"),
        ),
    ];
    let mut big = case("oversized body", CHAT, "");
    big.declared_len = Some(64 << 20);
    big.status = Some(413);
    v.push(big);
    for (name, method, path, status) in [
        ("unknown route", "GET", "/v2/whatever", 404),
        ("unknown v1 route", "POST", "/v1/chat", 404),
        ("GET on a POST route", "GET", CHAT, 405),
        ("DELETE models", "DELETE", "/v1/models", 405),
        ("unknown model", "GET", "/v1/models/no-such-model", 404),
        ("admin API off", "GET", "/admin/sessions", 403),
        ("unknown namespace", "POST", "/ns/nope/v1/completions", 404),
    ] {
        let mut c = case(name, path, "{}");
        c.method = method;
        c.status = Some(status);
        v.push(c);
    }
    v
}

/// Bytes that are not an HTTP/1.1 request at all, with the status each must get.
pub fn raw_cases() -> Vec<(&'static str, Vec<u8>, u16)> {
    let tls_hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec();
    let many_headers: String = (0..200).map(|i| format!("x-h{i}: v\r\n")).collect();
    vec![
        ("TLS handshake on the plain port", tls_hello, 400),
        (
            "a stray protocol line",
            b"HELLO THERE\r\n\r\n".to_vec(),
            400,
        ),
        (
            "HTTP/2.0 request line",
            b"GET / HTTP/2.0\r\n\r\n".to_vec(),
            400,
        ),
        (
            "space in a header name",
            b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n".to_vec(),
            400,
        ),
        (
            "control byte in the target",
            b"GET /he\x01lth HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "200 headers",
            format!("GET /health HTTP/1.1\r\n{many_headers}\r\n").into_bytes(),
            431,
        ),
        (
            "a 70 KB request line",
            format!("GET /{} HTTP/1.1\r\n", "a".repeat(70 << 10)).into_bytes(),
            431,
        ),
    ]
}
