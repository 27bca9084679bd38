//! `file_glob_search`: the entries under a folder (files, folders or both, to a depth)
//! matched by an include glob and not an exclude glob, sorted, at most `limit` shown with the
//! total counted. Junk folders (`.git`, `node_modules`, `build`, `target`, ...) are listed but
//! never entered. On the host the folder is walked; in an isolate, `find` walks it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::builtin::Call;
use super::runtime::{Runtime, quote};
use crate::error::ApiError;

/// Folders listed but never walked.
const JUNK: &[&str] = &[
    ".git",
    ".svn",
    ".hg",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "dist",
    "build",
    "target",
    ".cache",
    ".idea",
    ".vscode",
];
/// Most results shown.
const MAX_RESULTS: i64 = 100;
/// Most entries walked, and the time a walk may take.
const MAX_WALK: usize = 200_000;
const WALK_TIME: Duration = Duration::from_secs(15);

pub async fn file_glob_search(call: &Call) -> Result<Value, ApiError> {
    let path = match call.params.get("path") {
        Some(Value::String(p)) => p.clone(),
        _ => return Err(ApiError::bad_request("params.path must be a string")),
    };
    let text = |k: &str, d: &str| match call.params.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Ok(d.to_string()),
        _ => Err(ApiError::bad_request(format!(
            "params.{k} must be a string"
        ))),
    };
    let int = |k: &str, d: i64| match call.params.get(k) {
        None | Some(Value::Null) => Ok(d),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request(format!("params.{k} must be an integer"))),
    };
    let (include, exclude, kind) = (
        text("include", "**")?,
        text("exclude", "")?,
        text("type", "file")?,
    );
    let max_depth = usize::try_from(int("max_depth", 0)?.max(0)).unwrap_or(0);
    let limit = int("limit", MAX_RESULTS)?;
    if limit < 1 {
        return Ok(json!({"error": format!("invalid limit: {limit} (expected 1 or more)")}));
    }
    let (files, dirs) = match kind.as_str() {
        "file" => (true, false),
        "dir" => (false, true),
        "all" => (true, true),
        _ => {
            return Ok(json!({"error": format!(
                "invalid type: {kind} (expected \"file\", \"dir\" or \"all\")"
            )}));
        }
    };
    let base = call.resolve(&path);
    let listed = match &call.runtime {
        Runtime::Host => {
            let b = base.clone();
            tokio::task::spawn_blocking(move || walk(&b, max_depth))
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?
        }
        rt => find(rt, &base, max_depth).await,
    };
    let (entries, truncated) = match listed {
        Ok(x) => x,
        Err(e) => return Ok(json!({"error": format!("{e}: {path}")})),
    };
    let matches: Vec<_> = entries
        .into_iter()
        .filter(|(_, is_dir)| if *is_dir { dirs } else { files })
        .filter(|(rel, _)| path_match(&include, rel))
        .filter(|(rel, _)| exclude.is_empty() || !path_match(&exclude, rel))
        .collect();
    let shown = matches
        .len()
        .min(usize::try_from(limit.min(MAX_RESULTS)).unwrap_or(1));
    let mut out = String::new();
    let mut list = Vec::with_capacity(shown);
    for (rel, is_dir) in &matches[..shown] {
        out.push_str(rel);
        out.push_str(if *is_dir { "/\n" } else { "\n" });
        list.push(json!({"path": rel, "type": if *is_dir { "dir" } else { "file" }}));
    }
    out.push_str(&format!("\n---\nTotal matches: {}\n", matches.len()));
    if matches.len() > shown {
        out.push_str(&format!(
            "[{shown} results limit reached ({} total matches). Refine the glob pattern to narrow the search.]\n",
            matches.len()
        ));
    }
    if truncated {
        out.push_str("[results truncated: time budget or unreadable directory]\n");
    }
    Ok(json!({"plain_text_response": out, "entries": list, "base": base}))
}

fn is_junk(name: &str) -> bool {
    JUNK.contains(&name.to_ascii_lowercase().as_str())
}

/// Entries under `base` as (relative path, is a folder), sorted; whether the walk was cut.
fn walk(base: &str, max_depth: usize) -> Result<(Vec<(String, bool)>, bool), String> {
    if !std::path::Path::new(base).is_dir() {
        return Err("not a directory".into());
    }
    let started = Instant::now();
    let mut out = Vec::new();
    let mut truncated = false;
    let mut stack = vec![(std::path::PathBuf::from(base), String::new(), 1usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            truncated = true;
            continue;
        };
        for e in rd.flatten() {
            if out.len() >= MAX_WALK || started.elapsed() > WALK_TIME {
                truncated = true;
                break;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !is_junk(&name) && (max_depth == 0 || depth < max_depth) {
                stack.push((e.path(), r.clone(), depth + 1));
            }
            out.push((r, is_dir));
        }
    }
    out.sort();
    Ok((out, truncated))
}

/// [`walk`] in an isolate, with `find`.
async fn find(
    rt: &Runtime,
    base: &str,
    max_depth: usize,
) -> Result<(Vec<(String, bool)>, bool), String> {
    let prune = JUNK
        .iter()
        .map(|j| format!("-name {}", quote(j)))
        .collect::<Vec<_>>()
        .join(" -o ");
    let depth = if max_depth > 0 {
        format!("-maxdepth {max_depth}")
    } else {
        String::new()
    };
    let b = quote(base);
    let script = format!(
        "test -d {b} || {{ echo 'not a directory'; exit 2; }}; cd {b} && find . -mindepth 1 {depth} \\( -type d \\( {prune} \\) -print -prune \\) -o \\( -type d -print \\) -o \\( -print \\) | while IFS= read -r p; do if [ -d \"$p\" ]; then echo \"d $p\"; else echo \"f $p\"; fi; done"
    );
    let out = rt
        .run(&script, None, None, (8 << 20, WALK_TIME), |_| true)
        .await?;
    if out.exit_code == 2 {
        return Err("not a directory".into());
    }
    let mut v: Vec<(String, bool)> = out
        .text
        .lines()
        .filter_map(|l| {
            let (k, p) = l.split_once(' ')?;
            Some((p.strip_prefix("./")?.to_string(), k == "d"))
        })
        .collect();
    v.sort();
    Ok((v, out.timed_out))
}

/// A pattern without '/' matches the name at any depth; with one, the relative path
/// (`**/` prepended unless it starts with `**` or `/`).
fn path_match(pattern: &str, rel: &str) -> bool {
    if !pattern.contains('/') {
        return glob(
            pattern.as_bytes(),
            rel.rsplit('/').next().unwrap_or(rel).as_bytes(),
        );
    }
    if pattern.starts_with("**") || pattern.starts_with('/') {
        return glob(pattern.trim_start_matches('/').as_bytes(), rel.as_bytes());
    }
    glob(format!("**/{pattern}").as_bytes(), rel.as_bytes())
}

/// Glob matching: `*` within a path segment, `**` across segments (`**/` also matches none),
/// `?` one character.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') if p.get(1) == Some(&b'*') => {
            let rest = &p[2..];
            if let Some(after) = rest.strip_prefix(b"/")
                && glob(after, s)
            {
                return true;
            }
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        Some(b'*') => {
            let rest = &p[1..];
            for i in 0..=s.len() {
                if glob(rest, &s[i..]) {
                    return true;
                }
                if s.get(i) == Some(&b'/') {
                    break;
                }
            }
            false
        }
        Some(b'?') => s.first().is_some_and(|c| *c != b'/') && glob(&p[1..], &s[1..]),
        Some(c) => s.first() == Some(c) && glob(&p[1..], &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_and_paths() {
        assert!(path_match("*.txt", "a/b/c.txt"));
        assert!(path_match("**", "a/b"));
        assert!(path_match("*proj*", "project-alpha"));
        assert!(!path_match("*.txt", "a/b.cpp"));
        assert!(path_match("src/*.cpp", "x/src/main.cpp"));
        assert!(path_match("src/**/*.cpp", "src/main.cpp"));
        assert!(!path_match("src/*.cpp", "src/a/main.cpp"));
        assert!(path_match("a?c", "abc") && !path_match("a?c", "ac"));
    }
}
