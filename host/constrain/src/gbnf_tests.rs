use super::to_regex;

fn matches(grammar: &str, text: &str) -> bool {
    let t = crate::dfa::Table::build(&to_regex(grammar).unwrap()).unwrap();
    let mut s = t.start;
    for &b in text.as_bytes() {
        s = t.next(s, b);
        if s == crate::dfa::DEAD {
            return false;
        }
    }
    t.is_accepting(s)
}

#[test]
fn braces_bound_repetition() {
    let g = r#"root ::= "a"{5,5}"#;
    assert!(matches(g, "aaaaa"));
    assert!(!matches(g, "aaaa"));
    assert!(!matches(g, "aaaaaa"));
    assert!(matches(r#"root ::= "ab"{2}"#, "abab"));
    assert!(matches(r#"root ::= [0-9]{2,}"#, "12345"));
    assert!(!matches(r#"root ::= [0-9]{2,}"#, "1"));
    assert!(matches(r#"root ::= ("x" | "y"){1,3} "."?"#, "xyx."));
    assert!(!matches(r#"root ::= ("x" | "y"){1,3}"#, "xyxy"));
}

#[test]
fn rules_classes_comments() {
    let g = "# a comment\nroot ::= greet \" \" name\ngreet ::= \"hi\" | \"yo\"\nname ::= [^ \\n]+ # trailing\n";
    assert!(matches(g, "hi bob"));
    assert!(!matches(g, "hey bob"));
    let multi = "root ::= (\n  \"a\"\n  | \"b\"\n)\n";
    assert!(matches(multi, "b"));
}

#[test]
fn bad_grammars_are_errors() {
    for g in [
        "root ::= this is (not valid GBNF",
        "root ::= \"a\"{3,1}",
        "root ::= \"a\"{1001}",
        "root ::= \"a\"{99999999999999999999999}",
        "rot ::= \"a\"",
        "root ::= x\nx ::= \"(\" x \")\" | \"\"",
        "root ::= \"unterminated",
        "root ::= *",
        "root ::= \"a\"*****",
    ] {
        assert!(to_regex(g).is_err(), "{g}");
    }
    // Deep chains of rules or groups are refused, not a stack overflow.
    let chain: String = (0..5000)
        .map(|i| format!("r{i} ::= r{}\n", i + 1))
        .collect();
    let deep = format!("root ::= r0\n{chain}r5000 ::= \"x\"\n");
    let groups = format!("root ::= {}\"x\"{}", "(".repeat(5000), ")".repeat(5000));
    for g in [deep, groups] {
        assert!(to_regex(&g).is_err(), "{g}");
    }
}
