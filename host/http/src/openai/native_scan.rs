//! Reads an answer in a chat template's own tool syntax (`tool_syntax::Wrapping`) while it is
//! written, into the same [`Scan`] the generic form gives: an answer that starts (after
//! whitespace) with the syntax's trigger is calls, each `open {"name": ..., "<arguments key>":
//! {...}} close`; one that cannot start so is prose (`Response`, its raw text); one that may
//! still become the trigger is `Undecided`. Whitespace around the wrappers' texts is lenient;
//! anything else after the calls, or a call that is not of the form, is `Other` (the caller
//! then answers the raw text as content). Calls are recognized only at the answer's start,
//! where the constraint puts them. A list syntax (Granite's) has one opening text and then the
//! calls as a JSON list.

use super::tool_scan::{CallScan, Cursor, Scan, Step, Stop, calls_scan};
use super::tool_syntax::Wrapping;

/// Reads `text` as far as it goes.
pub fn scan<'a>(w: &Wrapping, text: &'a str) -> Scan<'a> {
    let lead = text.trim_start();
    if lead.len() < w.trigger.len() && w.trigger.starts_with(lead) {
        return Scan::Undecided;
    }
    if !lead.starts_with(w.trigger) {
        return Scan::Response {
            text: text.to_owned(),
            closed: false,
        };
    }
    let mut c = Cursor { s: text, at: 0 };
    let mut calls = Vec::new();
    let read = if w.list {
        read_list(w, &mut c, &mut calls)
    } else {
        read_calls(w, &mut c, &mut calls)
    };
    calls_scan(read, calls)
}

/// One `{"name": ..., "<arguments key>": ...}` object.
fn read_call<'a>(w: &Wrapping, c: &mut Cursor<'a>, calls: &mut Vec<CallScan<'a>>) -> Step<()> {
    c.eat(b'{')?;
    c.key("name")?;
    let name = c.decoded()?;
    calls.push(CallScan {
        name: Some(name),
        arguments: "",
        arguments_done: false,
    });
    c.eat(b',')?;
    c.key(w.arguments_key)?;
    let (arguments, done) = c.value();
    if let Some(last) = calls.last_mut() {
        last.arguments = arguments;
        last.arguments_done = done;
    }
    if !done {
        return Err(Stop::End);
    }
    c.eat(b'}')
}

/// The opening text, then the calls as one JSON list, to the end of the text.
fn read_list<'a>(w: &Wrapping, c: &mut Cursor<'a>, calls: &mut Vec<CallScan<'a>>) -> Step<()> {
    literal(c, w.open.trim())?;
    c.eat(b'[')?;
    loop {
        read_call(w, c, calls)?;
        c.ws();
        match c.s.as_bytes().get(c.at) {
            None => return Err(Stop::End),
            Some(b',') => c.at += 1,
            Some(b']') => {
                c.at += 1;
                c.ws();
                return if c.at == c.s.len() {
                    Ok(())
                } else {
                    Err(Stop::Bad)
                };
            }
            Some(_) => return Err(Stop::Bad),
        }
    }
}

/// Expects the literal `lit` (after whitespace); a text ending inside it is `End`.
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

/// The calls, one after another, to the end of the text.
fn read_calls<'a>(w: &Wrapping, c: &mut Cursor<'a>, calls: &mut Vec<CallScan<'a>>) -> Step<()> {
    let open = w.open.trim();
    let close = w.close.trim();
    loop {
        literal(c, open)?;
        read_call(w, c, calls)?;
        literal(c, close)?;
        c.ws();
        let rest = &c.s[c.at..];
        if rest.is_empty() {
            return Ok(());
        }
        // Another call follows only where the syntax has an opening text to start it.
        if open.is_empty() || !(rest.starts_with(open) || open.starts_with(rest)) {
            return Err(Stop::Bad);
        }
        if open.starts_with(rest) && rest.len() < open.len() {
            return Err(Stop::End);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::tool_syntax::ToolSyntax;

    fn hermes() -> &'static Wrapping {
        ToolSyntax::Hermes.wrapping().unwrap()
    }

    fn llama() -> &'static Wrapping {
        ToolSyntax::Llama3.wrapping().unwrap()
    }

    const HERMES_TWO: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo \\\"N\\\"\", \"d\": [1, {\"x\": \"}\"}]}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>";

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
    fn hermes_calls_read_whole() {
        let (got, closed) = calls(scan(hermes(), HERMES_TWO));
        assert!(closed);
        assert_eq!(
            got,
            [
                (
                    "get_weather".to_owned(),
                    r#"{"city": "Oslo \"N\"", "d": [1, {"x": "}"}]}"#.to_owned()
                ),
                ("get_time".to_owned(), "{}".to_owned())
            ]
        );
        // Whitespace around the wrappers is lenient.
        let (got, closed) = calls(scan(
            hermes(),
            "  <tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}</tool_call>\n",
        ));
        assert!(closed);
        assert_eq!(got, [("f".to_owned(), r#"{"a":1}"#.to_owned())]);
    }

    #[test]
    fn llama_calls_read_whole() {
        let (got, closed) = calls(scan(
            llama(),
            r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#,
        ));
        assert!(closed);
        assert_eq!(
            got,
            [("get_weather".to_owned(), r#"{"city": "Oslo"}"#.to_owned())]
        );
    }

    fn granite() -> &'static Wrapping {
        ToolSyntax::Granite.wrapping().unwrap()
    }

    const GRANITE_TWO: &str = "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"get_time\", \"arguments\": {}}]";

    #[test]
    fn granite_lists_read_whole_and_grow_at_every_byte() {
        let (got, closed) = calls(scan(granite(), GRANITE_TWO));
        assert!(closed);
        assert_eq!(
            got,
            [
                ("get_weather".to_owned(), r#"{"city": "Oslo"}"#.to_owned()),
                ("get_time".to_owned(), "{}".to_owned())
            ]
        );
        let mut shown: Vec<(String, String)> = Vec::new();
        for end in 0..=GRANITE_TWO.len() {
            match scan(granite(), &GRANITE_TWO[..end]) {
                Scan::Undecided => assert!(shown.is_empty()),
                Scan::Calls { calls, closed } => {
                    assert_eq!(closed, end == GRANITE_TWO.len(), "at {end}");
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
        assert!(matches!(scan(granite(), "Hi there"), Scan::Response { .. }));
        for bad in [
            "<|tool_call|>{\"name\": \"f\", \"arguments\": {}}",
            "<|tool_call|>[{\"name\": \"f\", \"arguments\": {}}] and more",
            "<|tool_call|>[{\"name\": \"f\"}]",
        ] {
            assert_eq!(scan(granite(), bad), Scan::Other, "{bad:?}");
        }
    }

    #[test]
    fn prose_and_undecided_prefixes() {
        assert_eq!(scan(hermes(), ""), Scan::Undecided);
        assert_eq!(scan(hermes(), " \n<tool_ca"), Scan::Undecided);
        assert_eq!(
            scan(hermes(), "It is sunny."),
            Scan::Response {
                text: "It is sunny.".into(),
                closed: false
            }
        );
        // A call later in prose stays prose (calls start the answer, as the constraint allows).
        assert!(matches!(
            scan(
                hermes(),
                "Sure. <tool_call>\n{\"name\":\"f\",\"arguments\":{}}\n</tool_call>"
            ),
            Scan::Response { .. }
        ));
        assert_eq!(scan(llama(), "  "), Scan::Undecided);
        assert!(matches!(scan(llama(), "Hello"), Scan::Response { .. }));
    }

    #[test]
    fn malformed_answers_are_other_never_a_panic() {
        for bad in [
            "<tool_call>\nnot json\n</tool_call>",
            "<tool_call>\n{\"arguments\": {}, \"name\": \"f\"}\n</tool_call>",
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_xyz>",
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call> trailing",
            "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"\\x\", \"arguments\": {}}",
        ] {
            assert_eq!(scan(hermes(), bad), Scan::Other, "{bad:?}");
        }
        for bad in [
            r#"{"parameters": {}, "name": "f"}"#,
            r#"{"name": "f", "parameters": {}} {"name": "g", "parameters": {}}"#,
            r#"{"name": "f", "arguments": {}}"#,
            r#"{"x": 1}"#,
        ] {
            assert_eq!(scan(llama(), bad), Scan::Other, "{bad:?}");
        }
        // Every prefix of a call, whole or with a broken escape, reads without a panic.
        for text in [
            HERMES_TWO,
            "<tool_call>\n{\"name\": \"é\\u00e9\", \"arguments\": \"x",
        ] {
            for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
                let _ = scan(hermes(), &text[..end]);
                let _ = scan(llama(), &text[..end]);
            }
        }
    }

    #[test]
    fn every_prefix_only_grows_what_it_shows() {
        let mut names: Vec<String> = Vec::new();
        let mut args: Vec<String> = Vec::new();
        for end in (0..=HERMES_TWO.len()).filter(|&e| HERMES_TWO.is_char_boundary(e)) {
            match scan(hermes(), &HERMES_TWO[..end]) {
                Scan::Undecided => assert!(names.is_empty()),
                Scan::Calls { calls, closed } => {
                    // Closed exactly when a whole call's closing text ends the prefix.
                    let ends_closed = HERMES_TWO[..end].trim_end().ends_with("</tool_call>");
                    assert_eq!(closed, ends_closed, "at {end}");
                    for (k, c) in calls.iter().enumerate() {
                        let name = c.name.clone().unwrap();
                        if k < names.len() {
                            assert_eq!(names[k], name);
                            assert!(c.arguments.starts_with(args[k].as_str()));
                            args[k] = c.arguments.to_owned();
                        } else {
                            names.push(name);
                            args.push(c.arguments.to_owned());
                        }
                    }
                }
                other => panic!("prefix {end}: {other:?}"),
            }
        }
        assert_eq!(names, ["get_weather", "get_time"]);
    }
}
