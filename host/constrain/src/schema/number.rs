//! Numeric schemas: `integer` and `number` with `minimum`, `maximum`, their exclusive forms and
//! `multipleOf`, compiled to regexes over the literals the output policy allows. Integers are
//! exact. A bounded `number` is written without an exponent (at most 16 digits on each side of
//! the point) and every literal the regex admits satisfies the bounds both as an exact decimal
//! and as the f64 a parser reads: bounds given as floats are taken as their shortest decimal
//! (an exclusive one as the next float past it) and rounded inward to 16 fractional digits.

use super::{MAX_MULTIPLES, alternation, invalid, pieces, unsupported};
use crate::error::ConstrainError;
use crate::json::Json;

/// Fractional digits of a bounded `number` literal.
const FRAC: usize = pieces::MAX_DIGITS;
/// One, scaled: a decimal `d` is held as the integer `d * SCALE`.
const SCALE: i128 = 10i128.pow(FRAC as u32);
/// The largest magnitude a bounded `number` literal can have, scaled (16 nines, a point, 16 nines).
const MAX_SCALED: i128 = pieces::INT_LIMIT * SCALE + (SCALE - 1);

/// A `number` literal within the schema's bounds (and among the multiples of `multipleOf`).
pub(super) fn number(s: &Json, path: &str) -> Result<Option<String>, ConstrainError> {
    let bounds = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
    let flag = |k: &str| matches!(s.get(k), Some(Json::Bool(true)));
    if !bounds
        .iter()
        .chain(["multipleOf"].iter())
        .any(|k| s.get(k).is_some())
    {
        return Ok(Some(pieces::number()));
    }
    // Scaled bounds, inclusive, clipped to what a literal can hold.
    let mut lo = -MAX_SCALED;
    let mut hi = MAX_SCALED;
    if let Some(n) = number_of(s, "minimum", path)? {
        lo = lo.max(if flag("exclusiveMinimum") {
            past(n, true)
        } else {
            scaled(n, true)
        });
    }
    if let Some(n) = number_of(s, "maximum", path)? {
        hi = hi.min(if flag("exclusiveMaximum") {
            past(n, false)
        } else {
            scaled(n, false)
        });
    }
    for (k, lower) in [("exclusiveMinimum", true), ("exclusiveMaximum", false)] {
        match s.get(k) {
            None | Some(Json::Bool(_)) => {}
            Some(Json::Number(n)) if lower => lo = lo.max(past(n, true)),
            Some(Json::Number(n)) => hi = hi.min(past(n, false)),
            Some(_) => {
                return Err(invalid(
                    path,
                    format!("`{k}` must be a number or a boolean"),
                ));
            }
        }
    }
    let (lo, hi) = (lo.max(-MAX_SCALED), hi.min(MAX_SCALED));
    if let Some(m) = number_of(s, "multipleOf", path)? {
        return multiples(s, m, (lo, hi), path);
    }
    if lo > hi {
        return Ok(None);
    }
    let mut branches = Vec::new();
    if hi >= 0 {
        branches.push(unsigned(lo.max(0), hi));
    }
    if lo < 0 {
        // `-x` for x in max(-hi, the smallest positive)..=-lo: never `-0`.
        branches.push(format!("-{}", unsigned((-hi).max(1), -lo)));
    }
    Ok(alternation(branches))
}

/// The multiples of `m` within `lo..=hi` (scaled) that a float validator also calls multiples
/// (`x / m` integral and `x % m` zero in f64, as Python's jsonschema and JavaScript's validators
/// compute them), when both bounds are given and at most [`MAX_MULTIPLES`] lie between them.
fn multiples(
    s: &Json,
    m: &serde_json::Number,
    (lo, hi): (i128, i128),
    path: &str,
) -> Result<Option<String>, ConstrainError> {
    let has = |a: &str, b: &str| {
        matches!(s.get(a), Some(Json::Number(_))) || matches!(s.get(b), Some(Json::Number(_)))
    };
    if !has("minimum", "exclusiveMinimum") || !has("maximum", "exclusiveMaximum") {
        return Err(unsupported(
            "multipleOf",
            path,
            "`multipleOf` is supported only with both a lower and an upper bound",
        ));
    }
    let mf = m.as_f64().unwrap_or(0.0);
    if mf.is_nan() || mf <= 0.0 {
        return Err(invalid(path, "`multipleOf` must be a number above 0"));
    }
    let step = scaled(m, false);
    if step <= 0 || step != scaled(m, true) {
        return Err(unsupported(
            "multipleOf",
            path,
            format!("`multipleOf` {mf} has more than {FRAC} fractional digits"),
        ));
    }
    let Some((first, last)) = multiple_range(lo, hi, step, &mf, path)? else {
        return Ok(None);
    };
    Ok(alternation(
        (first..=last)
            .map(|k| literal(k * step))
            .filter(|v| {
                let x: f64 = v.parse().unwrap_or(f64::NAN);
                (x / mf).fract() == 0.0 && x % mf == 0.0
            })
            .map(|v| regex_syntax::escape(&v))
            .collect(),
    )
    .map(|re| format!("(?:{re})")))
}

/// The first and last `k` with `k * step` in `lo..=hi` (`None`: no value between the bounds),
/// refused when more than [`MAX_MULTIPLES`] lie there (`shown`: the `multipleOf` as written).
fn multiple_range(
    lo: i128,
    hi: i128,
    step: i128,
    shown: &dyn std::fmt::Display,
    path: &str,
) -> Result<Option<(i128, i128)>, ConstrainError> {
    if lo > hi {
        return Ok(None);
    }
    let first = lo.div_euclid(step) + i128::from(lo.rem_euclid(step) != 0);
    let last = hi.div_euclid(step);
    if last - first + 1 > MAX_MULTIPLES {
        return Err(unsupported(
            "multipleOf",
            path,
            format!(
                "`multipleOf` {shown} has {} values between the bounds, above the {MAX_MULTIPLES} \
                 this compiler lists",
                last - first + 1
            ),
        ));
    }
    Ok(Some((first, last)))
}

/// The canonical literal of a scaled decimal: no exponent, no trailing fractional zeros.
fn literal(v: i128) -> String {
    let (int, frac) = (
        v.unsigned_abs() / SCALE as u128,
        v.unsigned_abs() % SCALE as u128,
    );
    let sign = if v < 0 { "-" } else { "" };
    if frac == 0 {
        return format!("{sign}{int}");
    }
    let f = format!("{frac:0FRAC$}");
    format!("{sign}{int}.{}", f.trim_end_matches('0'))
}

/// A bound as a scaled decimal: exact for integers; a float as its shortest decimal, rounded up
/// (`up`) or down to [`FRAC`] fractional digits; saturating past [`MAX_SCALED`].
fn scaled(n: &serde_json::Number, up: bool) -> i128 {
    if let Some(i) = n.as_i64() {
        return i128::from(i)
            .saturating_mul(SCALE)
            .clamp(-MAX_SCALED - 1, MAX_SCALED + 1);
    }
    if let Some(u) = n.as_u64() {
        return i128::from(u).saturating_mul(SCALE).min(MAX_SCALED + 1);
    }
    scaled_f64(n.as_f64().unwrap_or(0.0), up)
}

/// The bound just past an exclusive one: the next float beyond it, as [`scaled`] takes it.
fn past(n: &serde_json::Number, lower: bool) -> i128 {
    let f = n.as_f64().unwrap_or(0.0);
    if lower {
        scaled_f64(f.next_up(), true)
    } else {
        scaled_f64(f.next_down(), false)
    }
}

fn scaled_f64(f: f64, up: bool) -> i128 {
    if !f.is_finite() {
        return if f > 0.0 {
            MAX_SCALED + 1
        } else {
            -MAX_SCALED - 1
        };
    }
    // Rust prints a float as its shortest round-tripping decimal, never with an exponent.
    let text = format!("{}", f.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let int = int.trim_start_matches('0');
    if int.len() > pieces::MAX_DIGITS {
        return if f > 0.0 {
            MAX_SCALED + 1
        } else {
            -MAX_SCALED - 1
        };
    }
    let digits = |s: &str| s.bytes().fold(0i128, |a, d| a * 10 + i128::from(d - b'0'));
    let (kept, dropped) = frac.split_at(frac.len().min(FRAC));
    let mut magnitude = digits(int) * SCALE + digits(kept) * 10i128.pow((FRAC - kept.len()) as u32);
    let inexact = dropped.bytes().any(|d| d != b'0');
    // Rounding the magnitude away from zero rounds a positive value up and a negative one down.
    if inexact && (up == (f > 0.0)) {
        magnitude += 1;
    }
    if f < 0.0 { -magnitude } else { magnitude }
}

/// Literals without a sign of the values `a..=b` (scaled, `0 <= a <= b <= MAX_SCALED`).
fn unsigned(a: i128, b: i128) -> String {
    let (ia, fa) = (a / SCALE, a % SCALE);
    let (ib, fb) = (b / SCALE, b % SCALE);
    let int = |i: i128| i.to_string();
    if ia == ib {
        return format!("{}{}", int(ia), fraction(fa, fb));
    }
    let mut parts = vec![format!("{}{}", int(ia), fraction(fa, SCALE - 1))];
    if ia + 1 < ib {
        let middle = pieces::unsigned_range((ia + 1) as u128, (ib - 1) as u128);
        parts.push(format!("{middle}{}", fraction(0, SCALE - 1)));
    }
    parts.push(format!("{}{}", int(ib), fraction(0, fb)));
    format!("(?:{})", parts.join("|"))
}

/// The optional fraction (`.` and 1 to [`FRAC`] digits) of the values `f..=g`, both scaled
/// fractions (`0 <= f <= g < SCALE`); a literal's fraction is read padded with zeros.
fn fraction(f: i128, g: i128) -> String {
    let (f, g) = (format!("{f:0FRAC$}"), format!("{g:0FRAC$}"));
    let (end, branches) = digits(f.as_bytes(), g.as_bytes(), 0, true, true);
    let body = match branches.len() {
        0 => return String::new(),
        1 => format!("\\.{}", branches[0]),
        _ => format!("\\.(?:{})", branches.join("|")),
    };
    if end { format!("(?:{body})?") } else { body }
}

/// The digit strings from position `i` on, under the bounds `f` (while `low`: the digits so far
/// equal `f`'s) and `g` (while `high`): whether the string may end here, and the branches that
/// take one more digit.
fn digits(f: &[u8], g: &[u8], i: usize, low: bool, high: bool) -> (bool, Vec<String>) {
    // A bound whose rest is all zeros (below) or all nines (above) no longer constrains.
    let low = low && f[i..].iter().any(|&d| d != b'0');
    let high = high && g[i..].iter().any(|&d| d != b'9');
    // Ending pads with zeros: below `f` unless the rest of `f` is zeros; never above `g`.
    let end = !low;
    if i == FRAC {
        return (end, Vec::new());
    }
    if !low && !high {
        return (true, vec![format!("[0-9]{{1,{}}}", FRAC - i)]);
    }
    let next = |low: bool, high: bool| {
        let (end, branches) = digits(f, g, i + 1, low, high);
        match (end, branches.len()) {
            (_, 0) => String::new(),
            (true, _) => format!("(?:{})?", branches.join("|")),
            (false, 1) => branches[0].clone(),
            (false, _) => format!("(?:{})", branches.join("|")),
        }
    };
    let (a, b) = (
        if low { f[i] } else { b'0' },
        if high { g[i] } else { b'9' },
    );
    let mut branches = Vec::new();
    if low && high && a == b {
        branches.push(format!("{}{}", a as char, next(true, true)));
        return (end, branches);
    }
    let mut from = a;
    if low {
        branches.push(format!("{}{}", a as char, next(true, false)));
        from += 1;
    }
    let mut to = b;
    if high {
        to -= 1;
    }
    if from <= to {
        let class = if from == to {
            (from as char).to_string()
        } else {
            format!("[{}-{}]", from as char, to as char)
        };
        branches.push(format!("{class}{}", next(false, false)));
    }
    if high {
        branches.push(format!("{}{}", b as char, next(false, true)));
    }
    (end, branches)
}

/// The value of a numeric keyword.
pub(super) fn number_of<'j>(
    s: &'j Json,
    keyword: &str,
    path: &str,
) -> Result<Option<&'j serde_json::Number>, ConstrainError> {
    match s.get(keyword) {
        None => Ok(None),
        Some(Json::Number(n)) => Ok(Some(n)),
        Some(_) => Err(invalid(path, format!("`{keyword}` must be a number"))),
    }
}

/// `floor(n)` (`ceil` when `up`), saturating far outside the emitted range.
fn round(n: &serde_json::Number, up: bool) -> i128 {
    if let Some(i) = n.as_i64() {
        return i128::from(i);
    }
    if let Some(u) = n.as_u64() {
        return i128::from(u);
    }
    let f = n.as_f64().unwrap_or(0.0);
    (if up { f.ceil() } else { f.floor() }) as i128
}

/// An integer within `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` (fractional
/// bounds rounded inward; draft 4's boolean `exclusive*` honoured), optionally restricted to the
/// multiples of `multipleOf` when both bounds hold at most [`MAX_MULTIPLES`] of them.
pub(super) fn integer(s: &Json, path: &str) -> Result<Option<String>, ConstrainError> {
    let flag = |k: &str| matches!(s.get(k), Some(Json::Bool(true)));
    let mut lo: Option<i128> = None;
    let mut hi: Option<i128> = None;
    let tighten = |slot: &mut Option<i128>, v: i128, lower: bool| {
        *slot = Some(match *slot {
            Some(x) if lower => x.max(v),
            Some(x) => x.min(v),
            None => v,
        });
    };
    if let Some(n) = number_of(s, "minimum", path)? {
        let v = round(n, true);
        // Draft 4: `exclusiveMinimum: true` makes `minimum` exclusive.
        let v = if flag("exclusiveMinimum") {
            round(n, false).saturating_add(1)
        } else {
            v
        };
        tighten(&mut lo, v, true);
    }
    if let Some(n) = number_of(s, "maximum", path)? {
        let v = round(n, false);
        let v = if flag("exclusiveMaximum") {
            round(n, true).saturating_sub(1)
        } else {
            v
        };
        tighten(&mut hi, v, false);
    }
    for (k, lower) in [("exclusiveMinimum", true), ("exclusiveMaximum", false)] {
        match s.get(k) {
            None | Some(Json::Bool(_)) => {}
            Some(Json::Number(n)) => {
                let v = if lower {
                    round(n, false).saturating_add(1)
                } else {
                    round(n, true).saturating_sub(1)
                };
                if lower {
                    tighten(&mut lo, v, true);
                } else {
                    tighten(&mut hi, v, false);
                }
            }
            Some(_) => {
                return Err(invalid(
                    path,
                    format!("`{k}` must be a number or a boolean"),
                ));
            }
        }
    }
    if lo.is_none() && hi.is_none() && s.get("multipleOf").is_none() {
        return Ok(Some(pieces::integer()));
    }
    let (lo, hi) = (
        lo.unwrap_or(-pieces::INT_LIMIT).max(-pieces::INT_LIMIT),
        hi.unwrap_or(pieces::INT_LIMIT).min(pieces::INT_LIMIT),
    );
    let Some(m) = number_of(s, "multipleOf", path)? else {
        return Ok(pieces::integer_range(lo, hi));
    };
    let m = match (m.as_u64(), m.as_f64()) {
        (Some(m), _) if m > 0 => i128::from(m),
        // An integral float (`5.0`), up to the emitted range.
        (None, Some(f)) if f >= 1.0 && f.fract() == 0.0 && f <= pieces::INT_LIMIT as f64 => {
            f as i128
        }
        (None, Some(f)) if f > 0.0 => {
            return Err(unsupported(
                "multipleOf",
                path,
                format!("`multipleOf` {f} on an integer is supported for positive integers only"),
            ));
        }
        _ => return Err(invalid(path, "`multipleOf` must be a number above 0")),
    };
    if m == 1 {
        return Ok(pieces::integer_range(lo, hi));
    }
    let has = |a: &str, b: &str| {
        matches!(s.get(a), Some(Json::Number(_))) || matches!(s.get(b), Some(Json::Number(_)))
    };
    if !has("minimum", "exclusiveMinimum") || !has("maximum", "exclusiveMaximum") {
        return Err(unsupported(
            "multipleOf",
            path,
            "`multipleOf` (other than 1) is supported only with both a lower and an upper bound",
        ));
    }
    let Some((first, last)) = multiple_range(lo, hi, m, &m, path)? else {
        return Ok(None);
    };
    Ok(alternation(
        (first..=last)
            .map(|k| (k * m).to_string())
            .map(|v| regex_syntax::escape(&v))
            .collect(),
    )
    .map(|re| format!("(?:{re})")))
}

#[cfg(test)]
#[path = "number_tests.rs"]
mod tests;
