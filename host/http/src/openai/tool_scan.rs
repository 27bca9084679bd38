//! Reads a tool answer (`{"tool_calls": [{"name", "arguments"}, ...]}` or `{"response": "..."}`,
//! the generic form `tools` constrains generation to) while it is still being written: what is
//! known so far of each call (its name once complete, the raw text of its arguments as far as
//! written) or of the direct response (its decoded text so far). Streaming sends the growth of
//! these between chunks; the finished answer uses the same raw arguments text, so the streamed
//! pieces assemble to exactly the non-streamed `arguments`. [`scan_as`] reads an answer in any
//! tool syntax: the generic form here, a template's own syntax in `native_scan` (harmony's in
//! `harmony_scan`).

use super::tool_syntax::ToolSyntax;

/// What a possibly unfinished answer says so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan<'a> {
    /// Not yet known which form (the first key is not complete).
    Undecided,
    /// A direct answer: the string's decoded text so far, and whether its closing quote came.
    Response { text: String, closed: bool },
    /// Tool calls, as far as written; `closed` once the whole object is.
    Calls {
        calls: Vec<CallScan<'a>>,
        closed: bool,
    },
    /// Neither form (an unconstrained or damaged answer).
    Other,
}

/// One call as far as written.
#[derive(Debug, PartialEq, Eq)]
pub struct CallScan<'a> {
    /// The function's name, once its string is complete.
    pub name: Option<String>,
    /// The raw JSON text of `arguments` written so far (no leading whitespace).
    pub arguments: &'a str,
    /// Whether the arguments value is complete.
    pub arguments_done: bool,
}

/// Why a scan stopped early.
pub(super) enum Stop {
    /// The text ends here: more may come.
    End,
    /// The text is not of the form.
    Bad,
}

pub(super) type Step<T> = Result<T, Stop>;

pub(super) struct Cursor<'a> {
    pub(super) s: &'a str,
    pub(super) at: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn ws(&mut self) {
        let rest = &self.s[self.at..];
        self.at += rest.len() - rest.trim_start_matches([' ', '\t', '\n', '\r']).len();
    }

    /// Skips whitespace, then expects `c`.
    pub(super) fn eat(&mut self, c: u8) -> Step<()> {
        self.ws();
        match self.s.as_bytes().get(self.at) {
            None => Err(Stop::End),
            Some(&b) if b == c => {
                self.at += 1;
                Ok(())
            }
            Some(_) => Err(Stop::Bad),
        }
    }

    /// The raw body of a JSON string starting here (after whitespace), if it is complete.
    fn string(&mut self) -> Step<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let end = string_end(&self.s[start..]).ok_or(Stop::End)?;
        self.at = start + end + 1;
        Ok(&self.s[start..start + end])
    }

    /// A complete string, decoded.
    pub(super) fn decoded(&mut self) -> Step<String> {
        let raw = self.string()?;
        serde_json::from_str(&format!("\"{raw}\"")).map_err(|_| Stop::Bad)
    }

    /// `"key":` with this key.
    pub(super) fn key(&mut self, key: &str) -> Step<()> {
        let got = self.string()?;
        if got != key {
            return Err(Stop::Bad);
        }
        self.eat(b':')
    }

    /// A JSON value's raw text from here (after whitespace) and whether it is complete.
    pub(super) fn value(&mut self) -> (&'a str, bool) {
        self.ws();
        let start = self.at;
        let (len, done) = value_extent(&self.s[start..]);
        self.at = start + len;
        (&self.s[start..start + len], done)
    }
}

/// The byte offset of the quote closing a string whose body starts `body`, if present.
fn string_end(body: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, b) in body.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// How many bytes of `s` one JSON value covers, and whether it is complete. Containers are
/// matched by depth outside strings; a scalar ends at the first `,`, `}`, `]` or whitespace.
fn value_extent(s: &str) -> (usize, bool) {
    let bytes = s.as_bytes();
    match bytes.first() {
        None => (0, false),
        Some(b'"') => match string_end(&s[1..]) {
            Some(e) => (e + 2, true),
            None => (s.len(), false),
        },
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut in_string = false;
            let mut escaped = false;
            for (i, &b) in bytes.iter().enumerate() {
                if in_string {
                    match b {
                        _ if escaped => escaped = false,
                        b'\\' => escaped = true,
                        b'"' => in_string = false,
                        _ => {}
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return (i + 1, true);
                        }
                    }
                    _ => {}
                }
            }
            (s.len(), false)
        }
        Some(_) => match s.find([',', '}', ']', ' ', '\t', '\n', '\r']) {
            Some(e) => (e, true),
            None => (s.len(), false),
        },
    }
}

/// Reads `text`, an answer in `syntax`, as far as it goes.
pub fn scan_as(syntax: ToolSyntax, text: &str) -> Scan<'_> {
    match syntax.wrapping() {
        None if syntax == ToolSyntax::Harmony => super::harmony_scan::scan(text),
        None => scan(text),
        Some(w) => super::native_scan::scan(w, text),
    }
}

/// Reads `text`, an answer in the generic form, as far as it goes.
pub fn scan(text: &str) -> Scan<'_> {
    let mut c = Cursor { s: text, at: 0 };
    let first = c.eat(b'{').and_then(|()| c.string());
    match first {
        Err(Stop::End) => Scan::Undecided,
        Err(Stop::Bad) => Scan::Other,
        Ok("response") => response(&mut c),
        Ok("tool_calls") => {
            let mut calls = Vec::new();
            let read = tool_calls(&mut c, &mut calls);
            calls_scan(read, calls)
        }
        Ok(_) => Scan::Other,
    }
}

/// The scan of a list of calls read so far: whole (`Ok`), cut short by the text's end (more
/// may come), or not of the form.
pub(super) fn calls_scan(read: Step<()>, calls: Vec<CallScan<'_>>) -> Scan<'_> {
    match read {
        Ok(()) => Scan::Calls {
            calls,
            closed: true,
        },
        Err(Stop::End) => Scan::Calls {
            calls,
            closed: false,
        },
        Err(Stop::Bad) => Scan::Other,
    }
}

/// After the key `"response"`: the string's text so far.
fn response(c: &mut Cursor<'_>) -> Scan<'static> {
    let opened = c.eat(b':').and_then(|()| c.eat(b'"'));
    match opened {
        Err(Stop::End) => {
            return Scan::Response {
                text: String::new(),
                closed: false,
            };
        }
        Err(Stop::Bad) => return Scan::Other,
        Ok(()) => {}
    }
    let body = &c.s[c.at..];
    let (raw, closed) = match string_end(body) {
        Some(e) => (&body[..e], true),
        None => (body, false),
    };
    // An escape cut in half (`\`, `\u00`, a surrogate pair's first half) is dropped until whole.
    let mut raw = raw;
    for _ in 0..3 {
        if let Ok(text) = serde_json::from_str::<String>(&format!("\"{raw}\"")) {
            return Scan::Response { text, closed };
        }
        match raw.rfind('\\') {
            Some(backslash) if !closed && raw.len() - backslash <= 6 => raw = &raw[..backslash],
            _ => break,
        }
    }
    Scan::Other
}

/// After the key `"tool_calls"`: the calls, each `{"name": ..., "arguments": ...}`.
fn tool_calls<'a>(c: &mut Cursor<'a>, calls: &mut Vec<CallScan<'a>>) -> Step<()> {
    c.eat(b':')?;
    c.eat(b'[')?;
    loop {
        c.eat(b'{')?;
        c.key("name")?;
        let name = c.decoded()?;
        calls.push(CallScan {
            name: Some(name),
            arguments: "",
            arguments_done: false,
        });
        c.eat(b',')?;
        c.key("arguments")?;
        let (arguments, done) = c.value();
        if let Some(last) = calls.last_mut() {
            last.arguments = arguments;
            last.arguments_done = done;
        }
        if !done {
            return Err(Stop::End);
        }
        c.eat(b'}')?;
        c.ws();
        match c.s.as_bytes().get(c.at) {
            None => return Err(Stop::End),
            Some(b',') => c.at += 1,
            Some(b']') => {
                c.at += 1;
                return c.eat(b'}');
            }
            Some(_) => return Err(Stop::Bad),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLS: &str = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo \"N\"", "days": [1, {"x": "}"}]}}, {"name":"get_time","arguments":{}}]}"#;

    #[test]
    fn a_finished_answer_reads_whole() {
        match scan(CALLS) {
            Scan::Calls { calls, closed } => {
                assert!(closed);
                assert_eq!(calls.len(), 2);
                assert_eq!(calls[0].name.as_deref(), Some("get_weather"));
                assert_eq!(
                    calls[0].arguments,
                    r#"{"city": "Oslo \"N\"", "days": [1, {"x": "}"}]}"#
                );
                assert_eq!(calls[1].arguments, "{}");
                assert!(calls.iter().all(|c| c.arguments_done));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            scan(r#" { "response" : "a\"b" } "#),
            Scan::Response {
                text: "a\"b".into(),
                closed: true
            }
        );
        assert_eq!(scan("hello"), Scan::Other);
        assert_eq!(scan(r#"{"other": 1}"#), Scan::Other);
        assert_eq!(scan(""), Scan::Undecided);
        assert_eq!(scan(r#"{"tool_"#), Scan::Undecided);
    }

    #[test]
    fn every_prefix_only_grows_what_it_shows() {
        // Names appear once whole; arguments text and response text only ever grow.
        for text in [
            CALLS,
            r#"{"response": "caf\u00e9 \ud83d\ude00 \"q\" \\ done"}"#,
        ] {
            let mut names: Vec<String> = Vec::new();
            let mut args: Vec<String> = Vec::new();
            let mut shown = String::new();
            for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
                match scan(&text[..end]) {
                    Scan::Undecided => assert!(names.is_empty() && shown.is_empty()),
                    Scan::Response { text, .. } => {
                        assert!(text.starts_with(&shown), "{text:?} after {shown:?}");
                        shown = text;
                    }
                    Scan::Calls { calls, .. } => {
                        assert!(calls.len() >= names.len());
                        for (k, c) in calls.iter().enumerate() {
                            let name = c.name.clone().unwrap();
                            if k < names.len() {
                                assert_eq!(names[k], name);
                                assert!(c.arguments.starts_with(args[k].as_str()));
                                args[k] = c.arguments.to_string();
                            } else {
                                names.push(name);
                                args.push(c.arguments.to_string());
                            }
                        }
                    }
                    Scan::Other => panic!("prefix {:?} read as neither form", &text[..end]),
                }
            }
            if text == CALLS {
                assert_eq!(names, ["get_weather", "get_time"]);
            } else {
                assert_eq!(shown, "café 😀 \"q\" \\ done");
            }
        }
    }
}
