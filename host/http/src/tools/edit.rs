//! `edit_file`: exact text replacements, each matched once against the original content —
//! every `old_text` must occur exactly once, no two may overlap, and an edit that changes
//! nothing is refused — then the file is written whole.

use serde_json::{Value, json};

use super::builtin::Call;
use crate::error::ApiError;

pub async fn edit_file(call: &Call) -> Result<Value, ApiError> {
    let path = match call.params.get("path") {
        Some(Value::String(p)) => p.clone(),
        _ => return Err(ApiError::bad_request("params.path must be a string")),
    };
    let edits = match call.params.get("edits") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Ok(json!({"error": "\"edits\" must be a non-empty array"})),
    };
    let mut pairs = Vec::with_capacity(edits.len());
    for (i, e) in edits.iter().enumerate() {
        let (Some(old), Some(new)) = (
            e.get("old_text").and_then(Value::as_str),
            e.get("new_text").and_then(Value::as_str),
        ) else {
            return Err(ApiError::bad_request(format!(
                "params.edits[{i}] needs old_text and new_text strings"
            )));
        };
        if old.is_empty() {
            return Ok(json!({"error": format!("edits[{i}].old_text must not be empty")}));
        }
        pairs.push((old.to_string(), new.to_string()));
    }
    let full = call.resolve(&path);
    let original = match call.read(&full).await {
        Ok(b) => match String::from_utf8(b) {
            Ok(s) => s,
            Err(_) => return Ok(json!({"error": format!("{path} is not UTF-8 text")})),
        },
        Err(e) => return Ok(json!({ "error": e })),
    };
    match apply(&original, &pairs, &path) {
        Ok(content) => Ok(match call.write(&full, content.into_bytes()).await {
            Ok(()) => {
                json!({"result": "file edited successfully", "path": path, "edits_applied": pairs.len()})
            }
            Err(e) => json!({ "error": e }),
        }),
        Err(e) => Ok(json!({ "error": e })),
    }
}

/// The content with every edit applied, or why not.
fn apply(original: &str, edits: &[(String, String)], path: &str) -> Result<String, String> {
    let mut spans = Vec::with_capacity(edits.len());
    for (i, (old, new)) in edits.iter().enumerate() {
        let n = original.matches(old.as_str()).count();
        match n {
            0 => {
                return Err(format!(
                    "could not find edits[{i}].old_text in {path}, it must match the file's current content exactly"
                ));
            }
            1 => {}
            n => {
                return Err(format!(
                    "found {n} occurrences of edits[{i}].old_text in {path}, it must be unique"
                ));
            }
        }
        let at = original.find(old.as_str()).unwrap_or(0);
        spans.push((at, old.len(), i, new.as_str()));
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(format!(
                "edits[{}] and edits[{}] overlap in {path}; merge them into one edit or target disjoint regions",
                w[0].2, w[1].2
            ));
        }
    }
    let mut out = String::with_capacity(original.len());
    let mut pos = 0;
    for (at, len, _, new) in &spans {
        out.push_str(&original[pos..*at]);
        out.push_str(new);
        pos = at + len;
    }
    out.push_str(&original[pos..]);
    if out == original {
        return Err("no changes made: the replacement(s) produced identical content".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(a: &str, b: &str) -> (String, String) {
        (a.into(), b.into())
    }

    #[test]
    fn edits_are_unique_disjoint_and_applied_together() {
        let t = "line1\nline2\nline3\n";
        assert_eq!(
            apply(
                t,
                &[e("line2", "line2-edited"), e("line3\n", "line3\nline4\n")],
                "f"
            )
            .expect("ok"),
            "line1\nline2-edited\nline3\nline4\n"
        );
        assert!(
            apply("dup\ndup\n", &[e("dup", "x")], "f")
                .unwrap_err()
                .contains("unique")
        );
        assert!(
            apply(
                "line1\nline2\n",
                &[e("line1\nline2", "a"), e("line2", "b")],
                "f"
            )
            .unwrap_err()
            .contains("overlap")
        );
        assert!(
            apply("a", &[e("a", "a")], "f")
                .unwrap_err()
                .contains("no changes")
        );
        assert!(
            apply("a", &[e("b", "c")], "f")
                .unwrap_err()
                .contains("could not find")
        );
    }
}
