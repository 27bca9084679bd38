//! llama.cpp's GBNF grammars (the `grammar` request field), translated to one anchored regex for
//! the DFA builder: literals, character classes, `.`, groups, alternatives, rule references and
//! the repetitions `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`. Rules are inlined, so a grammar must not
//! be recursive (a DFA has no stack); a recursive rule, an unknown rule, a missing `root` or a
//! repetition count above [`MAX_GBNF_REPEAT`] is an error naming the rule.

use std::collections::HashMap;

use crate::error::ConstrainError;

/// Repetition counts (`{m,n}`) above this are refused.
pub const MAX_GBNF_REPEAT: u64 = 1000;
/// The grammar text may not exceed this many bytes.
const MAX_GRAMMAR_LEN: usize = 256 << 10;
/// The generated regex may not exceed this many bytes.
const MAX_REGEX_LEN: usize = 4 << 20;
/// Groups nested deeper than this are refused (the parser recurses on them).
const MAX_NESTING: usize = 200;
/// Rule references nested deeper than this are refused (each is inlined by recursion).
const MAX_RULE_DEPTH: usize = 200;
/// At most this many repetition operators in a row on one item (`"a"*?`).
const MAX_POSTFIX_RUN: usize = 4;

fn err(reason: impl Into<String>) -> ConstrainError {
    ConstrainError::Format {
        field: "grammar".to_owned(),
        reason: reason.into(),
    }
}

/// One parsed GBNF expression.
#[derive(Debug)]
enum Expr {
    /// Alternatives of sequences.
    Alt(Vec<Vec<Expr>>),
    Literal(String),
    /// `[...]`: ranges of code points, negated with `^`.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Any,
    Rule(String),
    Repeat {
        inner: Box<Expr>,
        min: u64,
        max: Option<u64>,
    },
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// Skips blanks and comments; newlines too when `newlines` (inside groups, after `|`).
    fn space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => {
                    self.bump();
                }
                '\r' | '\n' if newlines => {
                    self.bump();
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n' && c != '\r') {
                        self.bump();
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Result<String, ConstrainError> {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.bump();
        }
        if start == self.pos {
            return Err(self.expected("a rule name"));
        }
        Ok(self.src[start..self.pos].to_owned())
    }

    fn expected(&self, what: &str) -> ConstrainError {
        let near: String = self.rest().chars().take(20).collect();
        err(format!(
            "expected {what} at byte {} (near {near:?})",
            self.pos
        ))
    }

    fn hex(&mut self, digits: usize) -> Result<char, ConstrainError> {
        let mut v = 0u32;
        for _ in 0..digits {
            let d = self
                .bump()
                .and_then(|c| c.to_digit(16))
                .ok_or_else(|| self.expected("a hex digit"))?;
            v = v * 16 + d;
        }
        char::from_u32(v).ok_or_else(|| err(format!("U+{v:X} is not a character")))
    }

    /// One character of a literal or class, escapes decoded.
    fn char_in(&mut self) -> Result<char, ConstrainError> {
        match self.bump() {
            None => Err(self.expected("a closing quote or bracket")),
            Some('\\') => match self.bump() {
                Some('n') => Ok('\n'),
                Some('r') => Ok('\r'),
                Some('t') => Ok('\t'),
                Some('x') => self.hex(2),
                Some('u') => self.hex(4),
                Some('U') => self.hex(8),
                Some(c @ ('\\' | '"' | '[' | ']' | '-' | '^')) => Ok(c),
                _ => Err(self.expected("a known escape")),
            },
            Some(c) => Ok(c),
        }
    }

    fn alternatives(&mut self) -> Result<Expr, ConstrainError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(err(format!("groups nested deeper than {MAX_NESTING}")));
        }
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.bump();
            self.space(true);
            alts.push(self.sequence()?);
        }
        self.depth -= 1;
        Ok(Expr::Alt(alts))
    }

    fn sequence(&mut self) -> Result<Vec<Expr>, ConstrainError> {
        let nested = self.depth > 1;
        let mut seq: Vec<Expr> = Vec::new();
        let mut postfix_run = 0;
        loop {
            postfix_run = match self.peek() {
                Some('*' | '+' | '?' | '{') => postfix_run + 1,
                _ => 0,
            };
            if postfix_run > MAX_POSTFIX_RUN {
                return Err(err(format!(
                    "more than {MAX_POSTFIX_RUN} repetition operators in a row at byte {}",
                    self.pos
                )));
            }
            let atom = match self.peek() {
                Some('"') => {
                    self.bump();
                    let mut s = String::new();
                    while self.peek() != Some('"') {
                        s.push(self.char_in()?);
                    }
                    self.bump();
                    Expr::Literal(s)
                }
                Some('[') => {
                    self.bump();
                    let negated = self.peek() == Some('^');
                    if negated {
                        self.bump();
                    }
                    let mut ranges = Vec::new();
                    while self.peek() != Some(']') {
                        let lo = self.char_in()?;
                        let hi = if self.rest().starts_with('-') && !self.rest().starts_with("-]") {
                            self.bump();
                            self.char_in()?
                        } else {
                            lo
                        };
                        if hi < lo {
                            return Err(err(format!("character range {lo:?}-{hi:?} is reversed")));
                        }
                        ranges.push((lo, hi));
                    }
                    self.bump();
                    Expr::Class { negated, ranges }
                }
                Some('.') => {
                    self.bump();
                    Expr::Any
                }
                Some('(') => {
                    self.bump();
                    self.space(true);
                    let inner = self.alternatives()?;
                    if self.bump() != Some(')') {
                        return Err(self.expected("`)`"));
                    }
                    inner
                }
                Some(c) if is_name_char(c) => Expr::Rule(self.name()?),
                Some(c @ ('*' | '+' | '?' | '{')) => {
                    let Some(last) = seq.pop() else {
                        return Err(self.expected(&format!("an item before `{c}`")));
                    };
                    self.bump();
                    let (min, max) = match c {
                        '*' => (0, None),
                        '+' => (1, None),
                        '?' => (0, Some(1)),
                        _ => self.braces()?,
                    };
                    Expr::Repeat {
                        inner: Box::new(last),
                        min,
                        max,
                    }
                }
                _ => break,
            };
            seq.push(atom);
            self.space(nested);
        }
        Ok(seq)
    }

    fn number(&mut self) -> Result<u64, ConstrainError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        let digits = &self.src[start..self.pos];
        if digits.is_empty() {
            return Err(self.expected("a number"));
        }
        let n = digits.parse::<u64>().unwrap_or(u64::MAX);
        if n > MAX_GBNF_REPEAT {
            return Err(ConstrainError::TooComplex(format!(
                "grammar repetition count {digits} is above {MAX_GBNF_REPEAT}"
            )));
        }
        Ok(n)
    }

    /// After `{`: `m}`, `m,}` or `m,n}`.
    fn braces(&mut self) -> Result<(u64, Option<u64>), ConstrainError> {
        self.space(true);
        let min = self.number()?;
        self.space(true);
        let max = if self.peek() == Some(',') {
            self.bump();
            self.space(true);
            if self.peek() == Some('}') {
                None
            } else {
                Some(self.number()?)
            }
        } else {
            Some(min)
        };
        self.space(true);
        if self.bump() != Some('}') {
            return Err(self.expected("`}`"));
        }
        if max.is_some_and(|m| m < min) {
            return Err(err(format!(
                "repetition {{{min},{}}} has its maximum below its minimum",
                max.unwrap_or_default()
            )));
        }
        Ok((min, max))
    }
}

fn parse(text: &str) -> Result<(Vec<String>, HashMap<String, Expr>), ConstrainError> {
    if text.len() > MAX_GRAMMAR_LEN {
        return Err(ConstrainError::TooComplex(format!(
            "grammar of {} bytes is above {MAX_GRAMMAR_LEN}",
            text.len()
        )));
    }
    let mut p = Parser {
        src: text,
        pos: 0,
        depth: 0,
    };
    let mut order = Vec::new();
    let mut rules = HashMap::new();
    p.space(true);
    while p.peek().is_some() {
        let name = p.name()?;
        p.space(false);
        if !p.rest().starts_with("::=") {
            return Err(p.expected("`::=`"));
        }
        p.pos += 3;
        p.space(true);
        let body = p.alternatives()?;
        match p.peek() {
            None | Some('\n' | '\r') => {}
            _ => return Err(p.expected("the end of the rule")),
        }
        p.space(true);
        if rules.insert(name.clone(), body).is_some() {
            return Err(err(format!("rule `{name}` is defined twice")));
        }
        order.push(name);
    }
    Ok((order, rules))
}

fn class_char(c: char) -> String {
    format!("\\x{{{:X}}}", c as u32)
}

struct Emitter<'a> {
    rules: &'a HashMap<String, Expr>,
    done: HashMap<&'a str, String>,
    stack: Vec<&'a str>,
}

impl<'a> Emitter<'a> {
    fn rule(&mut self, name: &'a str) -> Result<String, ConstrainError> {
        if let Some(r) = self.done.get(name) {
            return Ok(r.clone());
        }
        if self.stack.len() >= MAX_RULE_DEPTH {
            return Err(ConstrainError::TooComplex(format!(
                "grammar rules reference each other deeper than {MAX_RULE_DEPTH}"
            )));
        }
        if self.stack.contains(&name) {
            return Err(ConstrainError::TooComplex(format!(
                "grammar rule `{name}` is recursive (only non-recursive grammars are supported)"
            )));
        }
        let body = self
            .rules
            .get(name)
            .ok_or_else(|| err(format!("rule `{name}` is used but not defined")))?;
        self.stack.push(name);
        let r = self.expr(body)?;
        self.stack.pop();
        self.done.insert(name, r.clone());
        Ok(r)
    }

    fn expr(&mut self, e: &'a Expr) -> Result<String, ConstrainError> {
        let out = match e {
            Expr::Alt(alts) => {
                let mut parts = Vec::with_capacity(alts.len());
                for seq in alts {
                    let mut s = String::new();
                    for item in seq {
                        s.push_str(&self.expr(item)?);
                    }
                    parts.push(s);
                }
                format!("(?:{})", parts.join("|"))
            }
            Expr::Literal(s) => format!("(?:{})", regex_syntax::escape(s)),
            Expr::Any => "(?s:.)".to_owned(),
            Expr::Class { negated, ranges } => {
                if ranges.is_empty() {
                    // `[]` matches nothing, `[^]` any character.
                    return Ok(if *negated {
                        "(?s:.)"
                    } else {
                        "[^\\x{0}-\\x{10FFFF}]"
                    }
                    .to_owned());
                }
                let mut s = String::from(if *negated { "[^" } else { "[" });
                for (lo, hi) in ranges {
                    s.push_str(&class_char(*lo));
                    if hi != lo {
                        s.push('-');
                        s.push_str(&class_char(*hi));
                    }
                }
                s.push(']');
                s
            }
            Expr::Rule(name) => self.rule(name)?,
            Expr::Repeat { inner, min, max } => {
                let inner = self.expr(inner)?;
                match max {
                    None => format!("(?:{inner}){{{min},}}"),
                    Some(max) => format!("(?:{inner}){{{min},{max}}}"),
                }
            }
        };
        if out.len() > MAX_REGEX_LEN {
            return Err(ConstrainError::TooComplex(format!(
                "grammar expands to more than {MAX_REGEX_LEN} bytes of pattern"
            )));
        }
        Ok(out)
    }
}

/// The anchored regex of the language a GBNF grammar's `root` rule generates.
pub(crate) fn to_regex(text: &str) -> Result<String, ConstrainError> {
    let (order, rules) = parse(text)?;
    if !rules.contains_key("root") {
        return Err(err("the grammar has no `root` rule"));
    }
    let mut em = Emitter {
        rules: &rules,
        done: HashMap::new(),
        stack: Vec::new(),
    };
    let root = em.rule("root")?;
    // Every rule must be well formed, used or not (as llama.cpp checks undefined references).
    for name in &order {
        em.rule(name)?;
    }
    Ok(root)
}

#[cfg(test)]
#[path = "gbnf_tests.rs"]
mod tests;
