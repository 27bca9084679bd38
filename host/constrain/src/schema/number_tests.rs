//! `number` bounds and `multipleOf`: every literal the grammar admits satisfies the bounds both
//! as an exact decimal and as an f64, and every literal clearly inside them is admitted.

use super::{SCALE, scaled_f64};
use crate::error::ConstrainError;
use crate::grammar::Grammar;
use crate::json::Json;

fn grammar(schema: &str) -> Grammar {
    Grammar::from_schema(&Json::parse(schema).unwrap()).unwrap_or_else(|e| panic!("{schema}: {e}"))
}

fn accepts(g: &Grammar, text: &str) -> bool {
    g.advance(g.start(), text.as_bytes())
        .is_some_and(|s| g.is_accepting(s))
}

/// A literal of at most 16 fractional digits, exactly, scaled by 10^16.
fn exact(t: &str) -> i128 {
    let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let frac = format!("{frac:0<16}");
    let v = int.parse::<i128>().unwrap() * SCALE + frac.parse::<i128>().unwrap();
    if neg { -v } else { v }
}

/// A bound: its JSON text, whether it is exclusive, whether it is a lower one.
struct Bound(&'static str, bool, bool);

impl Bound {
    fn float_ok(&self, x: f64) -> bool {
        let b: f64 = self.0.parse().unwrap();
        match (self.1, self.2) {
            (false, true) => x >= b,
            (true, true) => x > b,
            (false, false) => x <= b,
            (true, false) => x < b,
        }
    }
    fn exact_ok(&self, t: &str) -> bool {
        let (v, b) = (exact(t), exact(self.0));
        match (self.1, self.2) {
            (false, true) => v >= b,
            (true, true) => v > b,
            (false, false) => v <= b,
            (true, false) => v < b,
        }
    }
    /// Within two float steps of the bound (where an exclusive bound may refuse literals an
    /// exact reading would take).
    fn near(&self, x: f64) -> bool {
        let b: f64 = self.0.parse().unwrap();
        let step = (b.next_up() - b).abs().max(1e-300);
        (x - b).abs() <= 2.0 * step
    }
}

/// Literals around each bound and spread over the range: integers, and fractions of 1 to 16
/// digits, both signs.
fn candidates(bounds: &[Bound]) -> Vec<String> {
    let mut out: Vec<String> = [
        "0",
        "0.0",
        "1",
        "-1",
        "0.5",
        "-0.5",
        "123456.789",
        "-98765.4321",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for b in bounds {
        let v = exact(b.0);
        for d in 0..=16u32 {
            let step = 10i128.pow(d);
            for k in [-3, -1, 0, 1, 3] {
                out.push(super::literal(v + k * step));
            }
        }
        out.push(super::literal(v + 7 * SCALE));
        out.push(super::literal(v - 7 * SCALE));
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let int = (x % 2000) as i128 - 1000;
        let digits = (x >> 16) % 17;
        let frac = (x >> 24) as i128 % 10i128.pow(digits as u32);
        let v = int * SCALE + frac * 10i128.pow(16 - digits as u32);
        out.push(super::literal(v));
    }
    out
}

fn check(schema: &str, bounds: &[Bound]) {
    let g = grammar(schema);
    let mut admitted = 0;
    for t in candidates(bounds) {
        let x: f64 = t.parse().unwrap();
        let ok = accepts(&g, &t);
        let exact_in = bounds.iter().all(|b| b.exact_ok(&t));
        let float_in = bounds.iter().all(|b| b.float_ok(x));
        if ok {
            admitted += 1;
            assert!(exact_in && float_in, "{schema}: admitted {t}, outside");
        } else if exact_in && !bounds.iter().any(|b| b.1 && b.near(x)) {
            panic!("{schema}: refused {t}, inside");
        }
    }
    assert!(admitted > 10, "{schema}: only {admitted} literals admitted");
    // Never an exponent or a non-canonical spelling once bounded.
    for t in ["1e0", "01", "+1", ".5", "1.", "-0", "-0.0"] {
        assert!(!accepts(&g, t), "{schema}: {t}");
    }
}

#[test]
fn bounded_numbers_admit_exactly_the_literals_inside() {
    let cases: &[(&str, &[Bound])] = &[
        (
            r#"{"type":"number","minimum":0}"#,
            &[Bound("0", false, true)],
        ),
        (
            r#"{"type":"number","maximum":0}"#,
            &[Bound("0", false, false)],
        ),
        (
            r#"{"type":"number","minimum":1.5,"maximum":3}"#,
            &[Bound("1.5", false, true), Bound("3", false, false)],
        ),
        (
            r#"{"type":"number","exclusiveMinimum":-2.25,"exclusiveMaximum":0.1}"#,
            &[Bound("-2.25", true, true), Bound("0.1", true, false)],
        ),
        (
            r#"{"type":"number","minimum":-1000.0001,"exclusiveMaximum":-999.5}"#,
            &[
                Bound("-1000.0001", false, true),
                Bound("-999.5", true, false),
            ],
        ),
        (
            r#"{"type":"number","minimum":0.0000000000000012,"maximum":0.0000000000000034}"#,
            &[
                Bound("0.0000000000000012", false, true),
                Bound("0.0000000000000034", false, false),
            ],
        ),
        (
            // Draft 4's boolean forms.
            r#"{"type":"number","minimum":-0.75,"exclusiveMinimum":true,"maximum":12.125}"#,
            &[Bound("-0.75", true, true), Bound("12.125", false, false)],
        ),
        (
            r#"{"type":["number","null"],"exclusiveMinimum":42}"#,
            &[Bound("42", true, true)],
        ),
    ];
    for (schema, bounds) in cases {
        check(schema, bounds);
    }
    let g = grammar(r#"{"type":"number","minimum":1.5,"maximum":3}"#);
    for t in ["1.5", "1.50", "2", "2.9999999999999999", "3", "3.0000"] {
        assert!(accepts(&g, t), "{t}");
    }
    for t in ["1.4999999999999999", "3.0000000000000001", "4", "-2", "1"] {
        assert!(!accepts(&g, t), "{t}");
    }
    let g = grammar(r#"{"type":"number","exclusiveMinimum":0}"#);
    assert!(accepts(&g, "0.0000000000000001") && accepts(&g, "7"));
    assert!(!accepts(&g, "0") && !accepts(&g, "0.0") && !accepts(&g, "-1"));
}

#[test]
fn float_bounds_round_inward_and_exclusive_ones_skip_the_bounds_float() {
    // 0.1 + 0.2 is 0.30000000000000004: 17 fractional digits, rounded inward to 16.
    let lo = scaled_f64(0.1 + 0.2, true);
    assert_eq!(super::literal(lo), "0.3000000000000001");
    assert_eq!(super::literal(scaled_f64(0.1 + 0.2, false)), "0.3");
    assert_eq!(super::literal(scaled_f64(-(0.1 + 0.2), true)), "-0.3");
    // Past 2^53 a step of the literal is below a step of the float: an exclusive bound starts
    // at the next float, which no parser reads as the bound itself.
    let g = grammar(r#"{"type":"number","exclusiveMinimum":9007199254740992}"#);
    assert!(!accepts(&g, "9007199254740992.5"), "reads as the bound");
    assert!(accepts(&g, "9007199254740994"));
    // Beyond what a literal can hold: no value, or no limit.
    assert!(matches!(
        Grammar::from_schema(&Json::parse(r#"{"type":"number","minimum":1e300}"#).unwrap()),
        Err(ConstrainError::Empty { .. })
    ));
    let g = grammar(r#"{"type":"number","maximum":1e300}"#);
    assert!(accepts(&g, "9999999999999999.9999999999999999") && accepts(&g, "-3.5"));
    assert!(matches!(
        Grammar::from_schema(&Json::parse(r#"{"type":"number","minimum":2,"maximum":1}"#).unwrap()),
        Err(ConstrainError::Empty { .. })
    ));
}

#[test]
fn number_multiples_are_listed_when_a_float_validator_agrees() {
    let g = grammar(r#"{"type":"number","minimum":0,"maximum":1,"multipleOf":0.25}"#);
    for t in ["0", "0.25", "0.5", "0.75", "1"] {
        assert!(accepts(&g, t), "{t}");
    }
    for t in ["0.1", "0.250", "1.25", "-0.25", "0.3"] {
        assert!(!accepts(&g, t), "{t}");
    }
    // Multiples of 0.1 whose f64 quotient or remainder is not exact (0.3, 0.5) are left out.
    let g = grammar(r#"{"type":"number","minimum":0,"maximum":0.6,"multipleOf":0.1}"#);
    let admitted: Vec<&str> = ["0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6"]
        .into_iter()
        .filter(|t| accepts(&g, t))
        .collect();
    for t in &admitted {
        let x: f64 = t.parse().unwrap();
        assert!((x / 0.1).fract() == 0.0 && x % 0.1 == 0.0, "{t}");
    }
    assert!(
        admitted.contains(&"0.1") && admitted.contains(&"0.4"),
        "{admitted:?}"
    );
    let g = grammar(r#"{"type":"number","exclusiveMinimum":-10,"maximum":10,"multipleOf":5}"#);
    for (t, ok) in [
        ("-5", true),
        ("0", true),
        ("10", true),
        ("-10", false),
        ("5.5", false),
    ] {
        assert_eq!(accepts(&g, t), ok, "{t}");
    }
}

#[test]
fn number_multiples_without_bounds_or_too_fine_are_refused_by_name() {
    for (schema, why) in [
        (
            r#"{"type":"number","multipleOf":0.5}"#,
            "both a lower and an upper bound",
        ),
        (
            r#"{"type":"number","minimum":0,"maximum":1,"multipleOf":1e-20}"#,
            "fractional digits",
        ),
        (
            r#"{"type":"number","minimum":0,"maximum":1000,"multipleOf":0.5}"#,
            "values between the bounds",
        ),
    ] {
        match Grammar::from_schema(&Json::parse(schema).unwrap()) {
            Err(ConstrainError::Unsupported {
                keyword, reason, ..
            }) => {
                assert_eq!(keyword, "multipleOf", "{schema}");
                assert!(reason.contains(why), "{schema}: {reason}");
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
    assert!(matches!(
        Grammar::from_schema(&Json::parse(r#"{"type":"number","multipleOf":-1}"#).unwrap()),
        Err(ConstrainError::Unsupported { .. } | ConstrainError::InvalidSchema { .. })
    ));
}
