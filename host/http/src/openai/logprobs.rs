//! Log-probabilities in OpenAI's two JSON shapes: chat's `logprobs.content[]` entries
//! (`token`, `logprob`, `bytes`, `top_logprobs`) and the legacy completions object (`tokens`,
//! `token_logprobs`, `top_logprobs`, `text_offset`), the latter also for an echoed prompt
//! (`echo` with `logprobs`: the prompt's tokens first, the first one without a log-prob, as
//! OpenAI answers; a leading BOS, which the echoed text does not show, left out). Token strings are the token's bytes as UTF-8
//! (lossy for a token that ends inside a character; `bytes` keeps the exact bytes). A log-prob
//! of -inf (a token the model rules out) is written as -9999.0, as OpenAI does, since JSON has
//! no infinity.

use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::{TokenLogprob, TokenLogprobs};
use serde_json::{Map, Value, json};

/// A log-prob JSON can carry.
fn finite(lp: f32) -> f64 {
    if lp.is_finite() {
        f64::from(lp)
    } else {
        -9999.0
    }
}

/// The token's text and bytes.
fn piece(tok: &Tokenizer, id: u32) -> (String, Vec<u8>) {
    let bytes = tok.token_to_piece(id, true);
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

fn chat_entry(tok: &Tokenizer, t: &TokenLogprob) -> Value {
    let (token, bytes) = piece(tok, t.id);
    json!({"token": token, "logprob": finite(t.logprob), "bytes": bytes})
}

/// Chat's `logprobs.content` entries of `tokens`, with `k` alternatives each.
pub fn chat_content(tok: &Tokenizer, tokens: &[TokenLogprobs], k: usize) -> Vec<Value> {
    tokens
        .iter()
        .map(|t| {
            let mut v = chat_entry(tok, &t.sampled);
            let top: Vec<Value> = t.top().iter().take(k).map(|a| chat_entry(tok, a)).collect();
            v["top_logprobs"] = Value::Array(top);
            v
        })
        .collect()
}

/// Builds legacy completions `logprobs` objects, tracking `text_offset` (characters of the
/// choice's text before each token) across the chunks of one choice.
#[derive(Debug, Default)]
pub struct Legacy {
    offset: usize,
}

impl Legacy {
    /// Offsets start after `prefix` (the echoed prompt).
    pub fn after(prefix: &str) -> Legacy {
        Legacy {
            offset: prefix.chars().count(),
        }
    }

    /// The object for `tokens`, each with its `k` best alternatives plus the sampled token
    /// (OpenAI: "up to logprobs+1 elements").
    pub fn block(&mut self, tok: &Tokenizer, tokens: &[TokenLogprobs], k: usize) -> Value {
        let mut texts = Vec::with_capacity(tokens.len());
        let mut lps = Vec::with_capacity(tokens.len());
        let mut tops = Vec::with_capacity(tokens.len());
        let mut offsets = Vec::with_capacity(tokens.len());
        for t in tokens {
            let (text, _) = piece(tok, t.sampled.id);
            offsets.push(self.offset);
            self.offset += text.chars().count();
            let mut top = Map::new();
            for a in t.top().iter().take(k) {
                top.insert(piece(tok, a.id).0, json!(finite(a.logprob)));
            }
            top.entry(text.clone())
                .or_insert_with(|| json!(finite(t.sampled.logprob)));
            texts.push(Value::String(text));
            lps.push(json!(finite(t.sampled.logprob)));
            tops.push(Value::Object(top));
        }
        json!({
            "tokens": texts,
            "token_logprobs": lps,
            "top_logprobs": tops,
            "text_offset": offsets,
        })
    }
}

/// The legacy object of an echoed prompt `ids` whose tokens after the first have log-probs
/// `lps` (`lps[j]` is `ids[j + 1]`'s), offsets from 0.
pub fn echoed_prompt(tok: &Tokenizer, ids: &[u32], lps: &[TokenLogprobs], k: usize) -> Value {
    let mut legacy = Legacy::default();
    let rest = legacy.block(tok, lps, k);
    let Some(&first) = ids.first().filter(|&&id| tok.bos() != Some(id)) else {
        return rest;
    };
    let (text, _) = piece(tok, first);
    let head = json!({
        "tokens": [text],
        "token_logprobs": [null],
        "top_logprobs": [null],
        "text_offset": [0],
    });
    // The rest's offsets follow the first token's text.
    let shift = text.chars().count();
    let mut rest = rest;
    if let Some(offsets) = rest["text_offset"].as_array_mut() {
        for o in offsets {
            *o = json!(o.as_u64().unwrap_or(0) + shift as u64);
        }
    }
    joined(head, rest)
}

/// Two legacy objects as one (the second's tokens after the first's).
pub fn joined(mut a: Value, b: Value) -> Value {
    for field in ["tokens", "token_logprobs", "top_logprobs", "text_offset"] {
        if let (Some(x), Some(y)) = (a[field].as_array_mut(), b[field].as_array()) {
            x.extend(y.iter().cloned());
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minus_infinity_is_written_as_openai_does() {
        assert_eq!(finite(f32::NEG_INFINITY), -9999.0);
        assert_eq!(finite(-0.5), -0.5);
    }
}
