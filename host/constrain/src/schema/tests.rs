//! Numeric bounds, `multipleOf` and `pattern`, checked through the crate's own automaton.

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

fn refused_keyword(schema: &str) -> (String, String) {
    match Grammar::from_schema(&Json::parse(schema).unwrap()) {
        Err(ConstrainError::Unsupported {
            keyword, reason, ..
        }) => (keyword, reason),
        Err(e) => panic!("{schema}: not Unsupported: {e}"),
        Ok(_) => panic!("{schema} compiled"),
    }
}

/// Every integer of a window around the bounds is accepted exactly when `inside` says so, and
/// non-canonical spellings never are.
fn window(schema: &str, from: i64, to: i64, inside: impl Fn(i64) -> bool) {
    let g = grammar(schema);
    for n in from..=to {
        assert_eq!(accepts(&g, &n.to_string()), inside(n), "{schema} and {n}");
        if n > 0 {
            assert!(!accepts(&g, &format!("0{n}")), "{schema} and 0{n}");
        }
    }
    assert!(!accepts(&g, "-0"), "{schema} and -0");
    assert!(!accepts(&g, "1.0"), "{schema} and 1.0");
}

#[test]
fn integer_ranges_are_exact() {
    let mut cases: Vec<(i64, i64)> = vec![
        (0, 0),
        (0, 9),
        (0, 10),
        (1, 99),
        (5, 123),
        (-5, 5),
        (-123, -7),
        (-1000, -1000),
        (-99, 0),
        (17, 1003),
        (-1001, 999),
        (100, 199),
        (101, 1099),
        (-1, -1),
        (19, 91),
        (990, 1010),
    ];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = (x % 2401) as i64 - 1200;
        let b = ((x >> 20) % 2401) as i64 - 1200;
        cases.push((a.min(b), a.max(b)));
    }
    for (lo, hi) in cases {
        let schema = format!(r#"{{"type":"integer","minimum":{lo},"maximum":{hi}}}"#);
        window(&schema, -1300, 1300, |n| (lo..=hi).contains(&n));
    }
}

#[test]
fn one_sided_exclusive_and_fractional_bounds() {
    type Inside = fn(i64) -> bool;
    let cases: [(&str, Inside); 9] = [
        (r#"{"type":"integer","minimum":0}"#, |n| n >= 0),
        (r#"{"type":"integer","minimum":-5}"#, |n| n >= -5),
        (r#"{"type":"integer","maximum":-3}"#, |n| n <= -3),
        (r#"{"type":"integer","exclusiveMinimum":2.5}"#, |n| n >= 3),
        (r#"{"type":"integer","exclusiveMinimum":-2}"#, |n| n >= -1),
        (r#"{"type":"integer","minimum":2.5,"maximum":7.9}"#, |n| {
            (3..=7).contains(&n)
        }),
        (
            r#"{"type":"integer","minimum":-7.5,"exclusiveMaximum":7}"#,
            |n| (-7..=6).contains(&n),
        ),
        (
            r#"{"type":"integer","exclusiveMinimum":-7.5,"exclusiveMaximum":7.2}"#,
            |n| (-7..=7).contains(&n),
        ),
        // Draft 4: boolean `exclusive*` qualify `minimum`/`maximum`.
        (
            r#"{"type":"integer","minimum":1,"exclusiveMinimum":true,"maximum":9,"exclusiveMaximum":true}"#,
            |n| (2..=8).contains(&n),
        ),
    ];
    for (schema, inside) in cases {
        window(schema, -300, 300, inside);
    }
    // The unbounded side stops at the output policy's 16 digits.
    let g = grammar(r#"{"type":"integer","minimum":-5}"#);
    assert!(accepts(&g, "9999999999999999"));
    assert!(!accepts(&g, "10000000000000000"));
    let g = grammar(r#"{"type":"integer","maximum":-5}"#);
    assert!(accepts(&g, "-9999999999999999"));
    assert!(!accepts(&g, "-10000000000000000"));
    // Big bounds are kept exact.
    let g = grammar(r#"{"type":"integer","minimum":1234567890123,"maximum":1234567890200}"#);
    assert!(accepts(&g, "1234567890123"));
    assert!(accepts(&g, "1234567890200"));
    assert!(!accepts(&g, "1234567890122"));
    assert!(!accepts(&g, "1234567890201"));
    // Nothing in range: no instance.
    assert!(matches!(
        Grammar::from_schema(
            &Json::parse(r#"{"type":"integer","minimum":3,"maximum":2}"#).unwrap()
        ),
        Err(ConstrainError::Empty { .. })
    ));
    assert!(matches!(
        Grammar::from_schema(
            &Json::parse(r#"{"type":"integer","exclusiveMinimum":2,"exclusiveMaximum":3}"#)
                .unwrap()
        ),
        Err(ConstrainError::Empty { .. })
    ));
    // A bounded integer beside null keeps both.
    let g = grammar(r#"{"type":["integer","null"],"minimum":1,"maximum":3}"#);
    assert!(accepts(&g, "null") && accepts(&g, "2") && !accepts(&g, "4"));
}

#[test]
fn multiple_of_lists_the_multiples_between_bounds() {
    window(
        r#"{"type":"integer","minimum":-20,"maximum":50,"multipleOf":7}"#,
        -300,
        300,
        |n| (-20..=50).contains(&n) && n % 7 == 0,
    );
    window(
        r#"{"type":"integer","exclusiveMinimum":0,"maximum":1000,"multipleOf":5}"#,
        -1300,
        1300,
        |n| (1..=1000).contains(&n) && n % 5 == 0,
    );
    window(
        r#"{"type":"integer","minimum":-3,"multipleOf":1}"#,
        -50,
        50,
        |n| n >= -3,
    );
    window(
        r#"{"type":"integer","minimum":-10,"maximum":10,"multipleOf":5.0}"#,
        -50,
        50,
        |n| (-10..=10).contains(&n) && n % 5 == 0,
    );
    // Bounds far outside the emitted range saturate instead of wrapping.
    for schema in [
        r#"{"type":"integer","exclusiveMinimum":1e300}"#,
        r#"{"type":"integer","exclusiveMaximum":-1e300}"#,
    ] {
        assert!(matches!(
            Grammar::from_schema(&Json::parse(schema).unwrap()),
            Err(ConstrainError::Empty { .. })
        ));
    }
    window(
        r#"{"type":"integer","exclusiveMaximum":1e300}"#,
        -50,
        50,
        |_| true,
    );
    for (schema, why) in [
        (r#"{"type":"integer","multipleOf":3}"#, "both"),
        (r#"{"type":"integer","minimum":0,"multipleOf":3}"#, "both"),
        (
            r#"{"type":"integer","minimum":0,"maximum":10000,"multipleOf":3}"#,
            "3334 values",
        ),
        (
            r#"{"type":"integer","minimum":0,"maximum":10,"multipleOf":0.5}"#,
            "positive integers",
        ),
    ] {
        let (kw, reason) = refused_keyword(schema);
        assert_eq!(kw, "multipleOf", "{schema}");
        assert!(reason.contains(why), "{schema}: {reason}");
    }
}

#[test]
fn numeric_keywords_without_a_type_are_refused() {
    // Several types take them: they imply no type.
    assert_eq!(refused_keyword(r#"{"minimum":1}"#).0, "minimum");
}

/// `pattern` checked on JSON string literals (the texts are JSON, quotes included).
fn pattern(p: &str, yes: &[&str], no: &[&str]) {
    let schema = Json::Object(vec![
        ("type".to_owned(), Json::String("string".to_owned())),
        ("pattern".to_owned(), Json::String(p.to_owned())),
    ]);
    let g = Grammar::from_schema(&schema).unwrap_or_else(|e| panic!("{p}: {e}"));
    for t in yes {
        assert!(accepts(&g, t), "{p} should accept {t}");
    }
    for t in no {
        assert!(!accepts(&g, t), "{p} should refuse {t}");
    }
}

#[test]
fn patterns_match_the_decoded_string() {
    pattern(
        "^[a-z]+$",
        &[r#""abc""#, r#""z""#],
        &[r#""""#, r#""ab1""#, r#""Abc""#, "abc"],
    );
    // Unanchored: anywhere in the string.
    pattern(
        r"\d{3}",
        &[r#""123""#, r#""x1234y""#, r#""a\"123""#],
        &[r#""12""#, r#""1a2b3""#, "\"\u{663}\u{662}\u{661}\""],
    );
    pattern("^ab", &[r#""abc""#, r#""ab""#], &[r#""cab""#]);
    pattern("c$", &[r#""abc""#, r#""c""#], &[r#""cab""#]);
    pattern("", &[r#""""#, r#""anything\n""#], &[]);
    // Characters JSON escapes are matched in their escaped form.
    pattern(r#"^a"b$"#, &[r#""a\"b""#], &[r#""a"b""#, r#""ab""#]);
    pattern(r"^\\$", &[r#""\\""#], &[r#""\""#]);
    pattern(r"^\n\t$", &[r#""\n\t""#], &["\"\n\t\""]);
    pattern(
        "^[^a]$",
        &[r#""\"""#, r#""\\""#, r#""\t""#, r#""b""#, "\"\u{e9}\""],
        &[r#""a""#, "\"\t\"", r#""bb""#],
    );
    // ECMA meanings: `.` is not a line terminator, `\w` and `\d` are ASCII, `\s` ECMA's.
    pattern("^.$", &[r#""x""#, "\"\u{e9}\""], &[r#""\n""#, r#""\r""#]);
    pattern(r"^\w+$", &[r#""a_Z9""#], &["\"\u{e9}\"", r#""a-b""#]);
    pattern(
        r"^\s$",
        &[r#"" ""#, r#""\t""#, "\"\u{a0}\"", "\"\u{feff}\""],
        &[r#""x""#, "\"\u{85}\""],
    );
    pattern(r"^[\d.-]+$", &[r#""1.5-2""#], &[r#""1,5""#]);
    pattern(
        "^(ab|cd){2}$",
        &[r#""abcd""#, r#""cdcd""#],
        &[r#""abc""#, r#""ab""#, r#""abcdab""#],
    );
    pattern(
        "^(?<area>[0-9]{3})-(?:[0-9]{4})?x?$",
        &[r#""555-1234""#, r#""555-x""#, r#""555-""#],
        &[r#""55-1234""#],
    );
    pattern(r"^\u00e9\/[[]$", &["\"\u{e9}/[\""], &[r#""e/[""#]);
    pattern(
        "^[a-c]{1,3}?$",
        &[r#""a""#, r#""abc""#],
        &[r#""""#, r#""abca""#],
    );
}

#[test]
fn unsupported_patterns_are_refused_with_the_reason() {
    for (p, why) in [
        ("(?=a)b", "look-around"),
        (r"(a)\1", "back-references"),
        (r"\bfoo", "word boundaries"),
        ("a^b", "anchors"),
        ("^a|b$", "anchors"),
        ("[]", "empty classes"),
        ("a{", "cannot parse"),
        (r"\cJ", "control escapes"),
    ] {
        let schema = Json::Object(vec![
            ("type".to_owned(), Json::String("string".to_owned())),
            ("pattern".to_owned(), Json::String(p.to_owned())),
        ]);
        match Grammar::from_schema(&schema) {
            Err(ConstrainError::Unsupported {
                keyword, reason, ..
            }) => {
                assert_eq!(keyword, "pattern");
                assert!(reason.contains(why), "{p}: {reason}");
            }
            Err(e) => panic!("{p}: {e}"),
            Ok(_) => panic!("{p} compiled"),
        }
    }
    for other in [r#""minLength":1"#, r#""maxLength":3"#, r#""format":"date""#] {
        let schema = format!(r#"{{"type":"string","pattern":"a",{other}}}"#);
        let (kw, reason) = refused_keyword(&schema);
        assert_eq!(kw, "pattern");
        assert!(reason.contains("cannot be combined"), "{reason}");
    }
    // Size: the automaton's limits still hold.
    let schema = r#"{"type":"string","pattern":"^(?:[a-z]{1000}){1000}x$"}"#;
    assert!(matches!(
        Grammar::from_schema(&Json::parse(schema).unwrap()),
        Err(ConstrainError::TooComplex(_))
    ));
}
