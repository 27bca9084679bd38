//! Shared by the integration tests: a small synthetic vocabulary (every single byte plus
//! multi-byte JSON-ish tokens), a validator for the supported schema subset, and constrained
//! decoding driven by random logits that must finish within a bound.

#![allow(dead_code)]

pub mod real;

use std::sync::Arc;

use memoria_constrain::{Constraint, Grammar, Json, Matcher, ResponseFormat, Vocab};

/// All 256 single bytes (ids 0..=255), multi-byte tokens, an empty control token, then EOS.
pub fn synthetic_tokens(extra: &[&str]) -> (Vec<Vec<u8>>, u32) {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let multi: &[&[u8]] = &[
        b"{\"",
        b"\":",
        b"\",",
        b"\"}",
        b"\":\"",
        b", \"",
        b": ",
        b"true",
        b"false",
        b"null",
        b"},",
        b"}]",
        b"[{",
        b"[]",
        b"{}",
        b"12",
        b"0.5",
        b"-3",
        b"e+1",
        b"\"a",
        b"abc",
        b" the",
        "é".as_bytes(),
        "日本".as_bytes(),
        b"\xE6\x97",
        b"\\n",
        b"\\u00",
        b"\\ud8",
        b"\"\"",
        b"]}",
        b"}}",
        b"\":[",
        b"\":{",
        b"name",
        b"\"name\":",
        b"id",
        b"2026-12-01",
        b"T12:",
        b"00Z",
        b"-4a",
        b"\xF0\x9F",
        b"\x80\x80",
    ];
    toks.extend(multi.iter().map(|t| t.to_vec()));
    toks.extend(extra.iter().map(|t| t.as_bytes().to_vec()));
    toks.push(Vec::new());
    let eos = toks.len() as u32;
    toks.push(b"<|eos|>".to_vec());
    (toks, eos)
}

pub fn synthetic_vocab(extra: &[&str]) -> Arc<Vocab> {
    let (toks, eos) = synthetic_tokens(extra);
    Arc::new(Vocab::new(&toks, &[eos]).expect("synthetic vocabulary"))
}

pub fn schema_format(schema: &str) -> ResponseFormat {
    ResponseFormat::from_json_str(&format!(
        r#"{{"type":"json_schema","json_schema":{{"name":"t","strict":true,"schema":{schema}}}}}"#
    ))
    .expect("response_format")
}

pub fn constraint(f: &ResponseFormat, vocab: &Arc<Vocab>) -> Arc<Constraint> {
    let g = Grammar::compile(f).unwrap_or_else(|e| panic!("compile: {e}"));
    Constraint::new(Arc::new(g), vocab.clone())
}

/// Whether `text`, fed one single-byte token at a time, is a complete output.
pub fn accepts(c: &Arc<Constraint>, text: &[u8]) -> bool {
    let mut m = Matcher::new(c.clone());
    for &b in text {
        if !m.allows(u32::from(b)) {
            return false;
        }
        if m.advance(u32::from(b)).is_err() {
            panic!("mask allowed byte {b} that advance refused");
        }
    }
    m.is_accepting()
}

/// xorshift64*: the tests' deterministic randomness.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

pub struct Decoded {
    pub tokens: Vec<u32>,
    pub text: Vec<u8>,
    pub steps: usize,
}

fn bit(mask: &[u64], t: usize) -> bool {
    mask.get(t / 64).is_some_and(|w| w >> (t % 64) & 1 == 1)
}

/// Decodes with random logits for `random_steps` tokens (greedy argmax of the masked logits, or
/// sampled from their softmax), then takes the allowed token that leaves the fewest bytes to
/// finish, and EOS as soon as it is allowed. Panics on a dead end, a masked logit that was not
/// -inf, or more steps than `random_steps` plus the bytes left at the switch plus one.
pub fn decode(c: &Arc<Constraint>, rng: &mut Rng, sampled: bool, random_steps: usize) -> Decoded {
    let vocab = c.vocab().clone();
    let n = vocab.len();
    let mut m = Matcher::new(c.clone());
    let mut out = Decoded {
        tokens: Vec::new(),
        text: Vec::new(),
        steps: 0,
    };
    let mut logits = vec![0f32; n + 3];
    let mut bound: Option<usize> = None;
    loop {
        let mask = m.mask();
        assert!(
            mask.iter().any(|&w| w != 0),
            "dead end after {:?}",
            String::from_utf8_lossy(&out.text)
        );
        let tok = if out.steps < random_steps {
            for l in logits.iter_mut() {
                *l = (rng.unit() * 8.0 - 4.0) as f32;
            }
            m.apply(&mut logits);
            for (t, &l) in logits.iter().enumerate() {
                assert_eq!(
                    bit(&mask, t),
                    l.is_finite(),
                    "apply and mask disagree on {t}"
                );
            }
            if sampled {
                let mx = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let w: Vec<f64> = logits.iter().map(|&l| f64::from(l - mx).exp()).collect();
                let total: f64 = w.iter().sum();
                let mut r = rng.unit() * total;
                let mut pick = 0;
                for (t, &x) in w.iter().enumerate() {
                    if x > 0.0 {
                        pick = t;
                        if r < x {
                            break;
                        }
                        r -= x;
                    }
                }
                pick as u32
            } else {
                let mut best = 0;
                for t in 0..logits.len() {
                    if logits[t] > logits[best] {
                        best = t;
                    }
                }
                best as u32
            }
        } else {
            let left = m.remaining_bytes() as usize;
            let b = *bound.get_or_insert(out.steps + left + 1);
            assert!(out.steps <= b, "no finish within {b} steps");
            if m.is_accepting() {
                *vocab.eos_ids().first().expect("eos")
            } else {
                let mut best: Option<(u32, u32)> = None;
                for t in (0..n as u32).filter(|&t| bit(&mask, t as usize)) {
                    let mut f = m.clone();
                    f.advance(t).expect("an allowed token advances");
                    let r = f.remaining_bytes();
                    if best.is_none_or(|(_, br)| r < br) {
                        best = Some((t, r));
                    }
                }
                best.expect("an allowed token").0
            }
        };
        assert!(bit(&mask, tok as usize), "picked a masked token {tok}");
        m.advance(tok).expect("an allowed token advances");
        out.steps += 1;
        if m.is_finished() {
            return out;
        }
        out.tokens.push(tok);
        out.text.extend_from_slice(vocab.token_bytes(tok));
    }
}

/// Resolves a local `$ref`.
fn resolve<'a>(root: &'a Json, r: &str) -> &'a Json {
    let rest = r.strip_prefix('#').expect("local ref");
    let mut cur = root;
    for seg in rest.split('/').filter(|s| !s.is_empty()) {
        cur = cur.get(seg).unwrap_or_else(|| panic!("unresolved {r}"));
    }
    cur
}

/// Checks `v` against `schema` (the supported subset), and that object keys follow
/// `properties` order with no undeclared member.
pub fn validate(root: &Json, schema: &Json, v: &Json) -> Result<(), String> {
    let err = |what: &str| {
        Err(format!(
            "{what}: {} against {}",
            v.to_compact(),
            schema.to_compact()
        ))
    };
    if let Some(Json::String(r)) = schema.get("$ref") {
        return validate(root, resolve(root, r), v);
    }
    if let Some(Json::Array(subs)) = schema.get("anyOf") {
        return if subs.iter().any(|s| validate(root, s, v).is_ok()) {
            Ok(())
        } else {
            err("no anyOf branch")
        };
    }
    if schema.get("const").is_some_and(|c| c != v) {
        return err("const");
    }
    if let Some(Json::Array(e)) = schema.get("enum")
        && !e.contains(v)
    {
        return err("enum");
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts
            .iter()
            .filter_map(|t| match t {
                Json::String(t) => Some(t.as_str()),
                _ => None,
            })
            .collect(),
        _ => return Ok(()),
    };
    let ty = v.type_name();
    if !types
        .iter()
        .any(|t| *t == ty || (*t == "number" && ty == "integer"))
    {
        return err("type");
    }
    let num = |k: &str| match schema.get(k) {
        Some(Json::Number(n)) => n.as_u64(),
        _ => None,
    };
    match v {
        Json::String(s) => {
            let len = s.chars().count() as u64;
            if num("minLength").is_some_and(|m| len < m)
                || num("maxLength").is_some_and(|m| len > m)
            {
                return err("length");
            }
        }
        Json::Array(items) => {
            let len = items.len() as u64;
            if num("minItems").is_some_and(|m| len < m) || num("maxItems").is_some_and(|m| len > m)
            {
                return err("items count");
            }
            if let Some(item) = schema.get("items") {
                for x in items {
                    validate(root, item, x)?;
                }
            }
        }
        Json::Object(members) => {
            let props: &[(String, Json)] = match schema.get("properties") {
                Some(Json::Object(p)) => p,
                _ => &[],
            };
            if let Some(Json::Array(req)) = schema.get("required") {
                for r in req {
                    if let Json::String(r) = r
                        && !members.iter().any(|(k, _)| k == r)
                    {
                        return err("required");
                    }
                }
            }
            let mut last = None;
            for (k, x) in members {
                let Some(pos) = props.iter().position(|(p, _)| p == k) else {
                    return err("undeclared member");
                };
                if last.is_some_and(|l| pos <= l) {
                    return err("member order");
                }
                last = Some(pos);
                validate(root, &props[pos].1, x)?;
            }
        }
        Json::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let bound = |k: &str| match schema.get(k) {
                Some(Json::Number(b)) => b.as_f64(),
                _ => None,
            };
            if bound("minimum").is_some_and(|b| x < b)
                || bound("maximum").is_some_and(|b| x > b)
                || bound("exclusiveMinimum").is_some_and(|b| x <= b)
                || bound("exclusiveMaximum").is_some_and(|b| x >= b)
                || bound("multipleOf").is_some_and(|m| (x / m).fract() != 0.0)
            {
                return err("numeric bound");
            }
        }
        _ => {}
    }
    Ok(())
}

/// Parses decoded bytes as JSON (serde_json's strict parser and our order-keeping one).
pub fn parse(text: &[u8]) -> Json {
    let s = std::str::from_utf8(text).unwrap_or_else(|e| panic!("not UTF-8 ({e}): {text:?}"));
    serde_json::from_str::<serde_json::Value>(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"));
    Json::parse(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}
