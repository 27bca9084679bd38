//! `json_object`: a small pushdown recognizer for any JSON object, with the same output policy as
//! schemas (compact, at most one space after `:` and `,`, bounded numbers, valid UTF-8, no
//! surrogate escapes) and nesting at most [`MAX_DEPTH`] deep. The whole state is a small `Copy`
//! value (the stack is one bit per level: object or array), so it keys the mask cache directly.

/// Deepest nesting of objects and arrays (the root object counts as 1).
pub const MAX_DEPTH: u8 = 32;
const DIGITS: u8 = crate::schema::MAX_DIGITS as u8;
const EXP_DIGITS: u8 = 2;
const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// Where the recognizer is inside a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Str {
    Char,
    /// After `\`.
    Esc,
    /// After `\u` and this many hex digits (0..=3).
    Hex(u8),
    /// After `\uD`/`\ud`: the next digit is 0-7 (no surrogates).
    HexD,
    /// Inside a UTF-8 sequence: the next byte lies in `lo..=hi`, then `rest` continuation bytes.
    Utf8 {
        lo: u8,
        hi: u8,
        rest: u8,
    },
}

/// Where the recognizer is inside a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Num {
    Minus,
    Zero,
    Int(u8),
    Dot,
    Frac(u8),
    E,
    ESign,
    Exp(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lex {
    /// Before the root `{`.
    Start,
    /// After `{`: a key or `}`.
    ObjOpen,
    /// After `,` in an object: a key (or first one space).
    KeyNext {
        space_ok: bool,
    },
    Str {
        key: bool,
        at: Str,
    },
    /// After a key: `:`.
    AfterKey,
    /// A value starts (or one space first; or `]` right after `[`).
    Value {
        space_ok: bool,
        close_ok: bool,
    },
    Lit {
        which: u8,
        pos: u8,
    },
    Num(Num),
    /// After a value: `,` or the container's closer.
    AfterValue,
    /// The root object is closed.
    Done,
}

/// The recognizer's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct JState {
    /// Bit `i`: level `i` (0 = root) is an object (1) or an array (0); bits ≥ `depth` are 0.
    stack: u64,
    depth: u8,
    lex: Lex,
}

pub(crate) const START: JState = JState {
    stack: 0,
    depth: 0,
    lex: Lex::Start,
};

impl JState {
    fn with(self, lex: Lex) -> Option<JState> {
        Some(JState { lex, ..self })
    }

    fn top_is_object(self) -> bool {
        self.depth > 0 && (self.stack >> (self.depth - 1)) & 1 == 1
    }

    fn push(self, object: bool, lex: Lex) -> Option<JState> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        Some(JState {
            stack: self.stack | (u64::from(object) << self.depth),
            depth: self.depth + 1,
            lex,
        })
    }

    fn pop(self) -> Option<JState> {
        let depth = self.depth.checked_sub(1)?;
        Some(JState {
            stack: self.stack & ((1u64 << depth) - 1),
            depth,
            lex: if depth == 0 {
                Lex::Done
            } else {
                Lex::AfterValue
            },
        })
    }

    /// The state after one more byte, `None` when refused.
    #[inline]
    pub(crate) fn next(self, b: u8) -> Option<JState> {
        // Fast path: a plain ASCII character inside a string leaves the state as it is (most of
        // a mask walk runs here).
        if let Lex::Str { at: Str::Char, .. } = self.lex
            && (0x20..0x80).contains(&b)
            && b != b'"'
            && b != b'\\'
        {
            return Some(self);
        }
        self.next_slow(b)
    }

    fn next_slow(self, b: u8) -> Option<JState> {
        match self.lex {
            Lex::Start => (b == b'{').then(|| self.push(true, Lex::ObjOpen))?,
            Lex::ObjOpen => match b {
                b'"' => self.with(Lex::Str {
                    key: true,
                    at: Str::Char,
                }),
                b'}' => self.pop(),
                _ => None,
            },
            Lex::KeyNext { space_ok } => match b {
                b' ' if space_ok => self.with(Lex::KeyNext { space_ok: false }),
                b'"' => self.with(Lex::Str {
                    key: true,
                    at: Str::Char,
                }),
                _ => None,
            },
            Lex::Str { key, at } => self.string(key, at, b),
            Lex::AfterKey => (b == b':').then(|| {
                self.with(Lex::Value {
                    space_ok: true,
                    close_ok: false,
                })
            })?,
            Lex::Value { space_ok, close_ok } => match b {
                b' ' if space_ok => self.with(Lex::Value {
                    space_ok: false,
                    close_ok,
                }),
                b']' if close_ok => self.pop(),
                _ => self.value_start(b),
            },
            Lex::Lit { which, pos } => {
                let lit = LITERALS[usize::from(which)];
                if lit.get(usize::from(pos)) != Some(&b) {
                    return None;
                }
                if usize::from(pos) + 1 == lit.len() {
                    self.with(Lex::AfterValue)
                } else {
                    self.with(Lex::Lit {
                        which,
                        pos: pos + 1,
                    })
                }
            }
            Lex::Num(n) => self.number(n, b),
            Lex::AfterValue => self.after_value(b),
            Lex::Done => None,
        }
    }

    fn value_start(self, b: u8) -> Option<JState> {
        match b {
            b'"' => self.with(Lex::Str {
                key: false,
                at: Str::Char,
            }),
            b'-' => self.with(Lex::Num(Num::Minus)),
            b'0' => self.with(Lex::Num(Num::Zero)),
            b'1'..=b'9' => self.with(Lex::Num(Num::Int(1))),
            b't' => self.with(Lex::Lit { which: 0, pos: 1 }),
            b'f' => self.with(Lex::Lit { which: 1, pos: 1 }),
            b'n' => self.with(Lex::Lit { which: 2, pos: 1 }),
            b'{' => self.push(true, Lex::ObjOpen),
            b'[' => self.push(
                false,
                Lex::Value {
                    space_ok: false,
                    close_ok: true,
                },
            ),
            _ => None,
        }
    }

    fn after_value(self, b: u8) -> Option<JState> {
        let obj = self.top_is_object();
        match b {
            b',' if obj => self.with(Lex::KeyNext { space_ok: true }),
            b',' => self.with(Lex::Value {
                space_ok: true,
                close_ok: false,
            }),
            b'}' if obj => self.pop(),
            b']' if !obj => self.pop(),
            _ => None,
        }
    }

    fn string(self, key: bool, at: Str, b: u8) -> Option<JState> {
        let s = |at| self.with(Lex::Str { key, at });
        let hex = b.is_ascii_hexdigit();
        match at {
            Str::Char => match b {
                b'"' if key => self.with(Lex::AfterKey),
                b'"' => self.with(Lex::AfterValue),
                b'\\' => s(Str::Esc),
                0x00..=0x1F => None,
                0x20..=0x7F => s(Str::Char),
                0xC2..=0xDF => s(Str::Utf8 {
                    lo: 0x80,
                    hi: 0xBF,
                    rest: 0,
                }),
                0xE0 => s(Str::Utf8 {
                    lo: 0xA0,
                    hi: 0xBF,
                    rest: 1,
                }),
                0xED => s(Str::Utf8 {
                    lo: 0x80,
                    hi: 0x9F,
                    rest: 1,
                }),
                0xE1..=0xEF => s(Str::Utf8 {
                    lo: 0x80,
                    hi: 0xBF,
                    rest: 1,
                }),
                0xF0 => s(Str::Utf8 {
                    lo: 0x90,
                    hi: 0xBF,
                    rest: 2,
                }),
                0xF1..=0xF3 => s(Str::Utf8 {
                    lo: 0x80,
                    hi: 0xBF,
                    rest: 2,
                }),
                0xF4 => s(Str::Utf8 {
                    lo: 0x80,
                    hi: 0x8F,
                    rest: 2,
                }),
                _ => None,
            },
            Str::Esc => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => s(Str::Char),
                b'u' => s(Str::Hex(0)),
                _ => None,
            },
            Str::Hex(0) if b == b'd' || b == b'D' => s(Str::HexD),
            Str::Hex(3) if hex => s(Str::Char),
            Str::Hex(n) if hex => s(Str::Hex(n + 1)),
            Str::HexD if (b'0'..=b'7').contains(&b) => s(Str::Hex(2)),
            Str::Utf8 { lo, hi, rest } if (lo..=hi).contains(&b) => match rest {
                0 => s(Str::Char),
                r => s(Str::Utf8 {
                    lo: 0x80,
                    hi: 0xBF,
                    rest: r - 1,
                }),
            },
            Str::Hex(_) | Str::HexD | Str::Utf8 { .. } => None,
        }
    }

    fn number(self, n: Num, b: u8) -> Option<JState> {
        let num = |n| self.with(Lex::Num(n));
        let digit = b.is_ascii_digit();
        match (n, b) {
            (Num::Minus, b'0') => num(Num::Zero),
            (Num::Minus, b'1'..=b'9') => num(Num::Int(1)),
            (Num::Minus, _) => None,
            (Num::Int(k), _) if digit && k < DIGITS => num(Num::Int(k + 1)),
            (Num::Zero | Num::Int(_), b'.') => num(Num::Dot),
            (Num::Zero | Num::Int(_) | Num::Frac(_), b'e' | b'E') => num(Num::E),
            (Num::Dot, _) if digit => num(Num::Frac(1)),
            (Num::Dot, _) => None,
            (Num::Frac(k), _) if digit && k < DIGITS => num(Num::Frac(k + 1)),
            (Num::E, b'+' | b'-') => num(Num::ESign),
            (Num::E | Num::ESign, _) if digit => num(Num::Exp(1)),
            (Num::E | Num::ESign, _) => None,
            (Num::Exp(k), _) if digit && k < EXP_DIGITS => num(Num::Exp(k + 1)),
            // The number ends; the byte belongs to what follows it.
            (Num::Zero | Num::Int(_) | Num::Frac(_) | Num::Exp(_), _) if !digit => {
                self.with(Lex::AfterValue)?.after_value(b)
            }
            _ => None,
        }
    }

    pub(crate) fn is_accepting(self) -> bool {
        self.lex == Lex::Done
    }

    /// Fewest bytes that complete the root object from here.
    pub(crate) fn distance(self) -> u32 {
        let close = u32::from(self.depth);
        let str_rest = |at: Str| match at {
            Str::Char => 0,
            Str::Esc => 1,
            Str::Hex(n) => 4 - u32::from(n),
            Str::HexD => 3,
            Str::Utf8 { rest, .. } => 1 + u32::from(rest),
        };
        match self.lex {
            Lex::Start => 2,
            Lex::Done => 0,
            Lex::ObjOpen | Lex::AfterValue => close,
            // `"":0`
            Lex::KeyNext { .. } => 4 + close,
            // `:0`
            Lex::AfterKey => 2 + close,
            Lex::Value { close_ok: true, .. } => close,
            Lex::Value {
                close_ok: false, ..
            } => 1 + close,
            Lex::Str { key: false, at } => str_rest(at) + 1 + close,
            Lex::Str { key: true, at } => str_rest(at) + 3 + close,
            Lex::Num(Num::Minus | Num::Dot | Num::E | Num::ESign) => 1 + close,
            Lex::Num(_) => close,
            Lex::Lit { which, pos } => {
                (LITERALS[usize::from(which)].len() as u32).saturating_sub(u32::from(pos)) + close
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &[u8]) -> Option<JState> {
        text.iter().try_fold(START, |s, &b| s.next(b))
    }

    fn accepts(text: &str) -> bool {
        run(text.as_bytes()).is_some_and(JState::is_accepting)
    }

    #[test]
    fn accepts_objects_under_the_policy() {
        for t in [
            "{}",
            r#"{"a":1}"#,
            r#"{"a": 1, "b":[true, false,null,{"c":"d\"\u00e9\n"}],"e":-0.5e+10}"#,
            r#"{"k":[[],[[]],{}]}"#,
            "{\"é\":\"日本語 𝄞\"}",
            r#"{"n":[0,12,3.25,1E5,-7e-2]}"#,
        ] {
            assert!(accepts(t), "{t}");
        }
    }

    #[test]
    fn refuses_what_the_policy_excludes() {
        for t in [
            "[]",
            "1",
            r#"{"a":01}"#,
            r#"{"a":1,}"#,
            r#"{ "a":1}"#,
            r#"{"a":  1}"#,
            "{\"a\":\n1}",
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e100}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":tru}"#,
            r#"{"a":1}}"#,
            r#"{"a":[1}"#,
        ] {
            assert!(!accepts(t), "{t:?}");
        }
        // Overlong and surrogate UTF-8 encodings are refused byte-wise.
        for bad in [
            &b"{\"a\":\"\xC0\x80\"}"[..],
            b"{\"a\":\"\xED\xA0\x80\"}",
            b"{\"a\":\"\xF5\"",
        ] {
            assert!(run(bad).is_none_or(|s| !s.is_accepting()), "{bad:?}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = |n: usize| format!("{}{{}}{}", r#"{"a":"#.repeat(n - 1), "}".repeat(n - 1));
        assert!(accepts(&deep(usize::from(MAX_DEPTH))));
        assert!(run(deep(usize::from(MAX_DEPTH) + 1).as_bytes()).is_none());
    }

    #[test]
    fn distance_is_exact_along_a_shortest_completion() {
        // From every prefix of a text, following the byte that lowers the distance by one must
        // reach acceptance in exactly `distance` bytes.
        let text = r#"{"ab":[1.5,"x\u00e9\ud7ff",{"c": tr"#;
        let mut s = START;
        for &b in text.as_bytes() {
            s = s.next(b).unwrap();
            let mut t = s;
            let mut steps = 0;
            while !t.is_accepting() {
                let d = t.distance();
                t = (0..=255u8)
                    .filter_map(|c| t.next(c))
                    .find(|n| n.distance() + 1 == d)
                    .unwrap_or_else(|| panic!("no byte lowers {t:?}"));
                steps += 1;
            }
            assert_eq!(steps, s.distance(), "{s:?}");
        }
    }
}
