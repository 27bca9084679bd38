//! Reads gpt-oss's harmony tool calls while they are written, into the [`Scan`] every tool
//! syntax gives: a `commentary` message to `functions.NAME` whose body is the call's JSON
//! arguments, in either header order the model uses (`<|channel|>commentary to=functions.NAME
//! <|constrain|>json<|message|>{...}`, or `to=functions.NAME<|channel|>commentary
//! json<|message|>{...}`), several calls joined by `<|call|>`/`<|end|>` and
//! `<|start|>assistant`. The text read is an answer's content after its analysis messages
//! (`reasoning`); a `final` message there already became plain text, which reads as
//! `Response`. A header cut short is `Undecided`, a call of another shape `Other`.

use super::tool_scan::{CallScan, Cursor, Scan, Step, Stop, calls_scan};

const COMMENTARY: &str = "<|channel|>commentary";
const RECIPIENT: &str = "to=functions.";
const MESSAGE: &str = "<|message|>";
const START: &str = "<|start|>assistant";
/// The most header text (`<|constrain|>json` and the like) skipped before the body.
const MAX_HEADER: usize = 64;

/// Reads `text` as far as it goes.
pub fn scan(text: &str) -> Scan<'_> {
    let lead = text.trim_start();
    let calls_start = lead.starts_with(COMMENTARY)
        || lead.starts_with(RECIPIENT)
        || COMMENTARY.starts_with(lead)
        || RECIPIENT.starts_with(lead);
    if !calls_start {
        return Scan::Response {
            text: text.to_owned(),
            closed: false,
        };
    }
    let mut c = Cursor { s: text, at: 0 };
    let mut calls = Vec::new();
    match read_calls(&mut c, &mut calls) {
        Err(Stop::End) if calls.is_empty() => Scan::Undecided,
        read => calls_scan(read, calls),
    }
}

/// Expects `lit` here (after whitespace); a text ending inside it is `End`.
fn literal(c: &mut Cursor<'_>, lit: &str) -> Step<()> {
    c.ws();
    let rest = &c.s[c.at..];
    if rest.starts_with(lit) {
        c.at += lit.len();
        Ok(())
    } else if lit.starts_with(rest) {
        Err(Stop::End)
    } else {
        Err(Stop::Bad)
    }
}

/// A function name: up to whitespace or `<`, complete only once something follows it.
fn name(c: &mut Cursor<'_>) -> Step<String> {
    let rest = &c.s[c.at..];
    let len = rest
        .find(|ch: char| ch.is_whitespace() || ch == '<')
        .ok_or(Stop::End)?;
    let name = &rest[..len];
    if name.is_empty()
        || !name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
    {
        return Err(Stop::Bad);
    }
    c.at += len;
    Ok(name.to_owned())
}

/// One call's header, through `<|message|>`: its function's name.
fn header(c: &mut Cursor<'_>) -> Step<String> {
    c.ws();
    let name = if c.s[c.at..].starts_with(RECIPIENT) || RECIPIENT.starts_with(&c.s[c.at..]) {
        literal(c, RECIPIENT)?;
        let name = name(c)?;
        literal(c, COMMENTARY)?;
        name
    } else {
        literal(c, COMMENTARY)?;
        literal(c, RECIPIENT)?;
        name(c)?
    };
    // What stands between the header and the body (` <|constrain|>json`, ` json`).
    let rest = &c.s[c.at..];
    match rest.find(MESSAGE) {
        Some(at) if at <= MAX_HEADER => c.at += at + MESSAGE.len(),
        Some(_) => return Err(Stop::Bad),
        None if rest.len() > MAX_HEADER + MESSAGE.len() => return Err(Stop::Bad),
        None => return Err(Stop::End),
    }
    Ok(name)
}

fn read_calls<'a>(c: &mut Cursor<'a>, calls: &mut Vec<CallScan<'a>>) -> Step<()> {
    loop {
        let name = header(c)?;
        calls.push(CallScan {
            name: Some(name),
            arguments: "",
            arguments_done: false,
        });
        let (arguments, done) = c.value();
        if let Some(last) = calls.last_mut() {
            last.arguments = arguments;
            last.arguments_done = done;
        }
        if !done {
            return Err(Stop::End);
        }
        c.ws();
        for end in ["<|call|>", "<|end|>"] {
            let rest = &c.s[c.at..];
            if rest.starts_with(end) {
                c.at += end.len();
                break;
            }
            if !rest.is_empty() && end.starts_with(rest) {
                return Err(Stop::End);
            }
        }
        c.ws();
        if c.at == c.s.len() {
            return Ok(());
        }
        literal(c, START)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|><|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}";

    fn calls(s: Scan<'_>) -> (Vec<(String, String)>, bool) {
        match s {
            Scan::Calls { calls, closed } => (
                calls
                    .into_iter()
                    .map(|c| (c.name.unwrap_or_default(), c.arguments.to_owned()))
                    .collect(),
                closed,
            ),
            other => panic!("calls expected, got {other:?}"),
        }
    }

    #[test]
    fn calls_read_whole_in_both_header_orders() {
        let (got, closed) = calls(scan(TWO));
        assert!(closed);
        assert_eq!(
            got,
            [
                ("get_weather".to_owned(), r#"{"city": "Oslo"}"#.to_owned()),
                ("get_time".to_owned(), "{}".to_owned())
            ]
        );
        assert_eq!(
            scan("Hello there"),
            Scan::Response {
                text: "Hello there".into(),
                closed: false
            }
        );
        assert_eq!(scan(""), Scan::Undecided);
        assert_eq!(scan("<|channel|>comm"), Scan::Undecided);
    }

    #[test]
    fn every_prefix_only_grows_what_it_shows() {
        let mut shown: Vec<(String, String)> = Vec::new();
        for end in 0..=TWO.len() {
            match scan(&TWO[..end]) {
                Scan::Undecided => assert!(shown.is_empty()),
                Scan::Calls { calls, closed } => {
                    // A text ending right after a call's arguments reads as closed (gpt-oss
                    // ends its last call there: `<|call|>` is a stop token); never before.
                    if end == TWO.len() {
                        assert!(closed, "at the end");
                    }
                    if closed {
                        assert!(calls.last().is_some_and(|c| c.arguments_done), "at {end}");
                    }
                    for (k, c) in calls.iter().enumerate() {
                        let name = c.name.clone().unwrap();
                        match shown.get_mut(k) {
                            Some((n, a)) => {
                                assert_eq!(*n, name);
                                assert!(c.arguments.starts_with(a.as_str()));
                                *a = c.arguments.to_owned();
                            }
                            None => shown.push((name, c.arguments.to_owned())),
                        }
                    }
                }
                other => panic!("prefix {end}: {other:?}"),
            }
        }
        assert_eq!(shown.len(), 2);
    }

    #[test]
    fn malformed_calls_are_other_never_a_panic() {
        for bad in [
            "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{} trailing",
            "<|channel|>commentary to=functions.f!x<|message|>{}",
            "<|channel|>commentary to=browser.search<|message|>{}",
            "to=functions.f<|channel|>analysis<|message|>{}",
        ] {
            assert_eq!(scan(bad), Scan::Other, "{bad:?}");
        }
        let long = format!(
            "<|channel|>commentary to=functions.f {}<|message|>{{}}",
            "x".repeat(100)
        );
        assert_eq!(scan(&long), Scan::Other);
        for end in (0..=TWO.len()).filter(|&e| TWO.is_char_boundary(e)) {
            let _ = scan(&format!("{}é\\u", &TWO[..end]));
        }
    }
}
