//! Hugging Face files: `owner/repo/path/file.gguf`, `hf://owner/repo/file.gguf`,
//! `owner/repo:file.gguf` (or `--hf-repo owner/repo --hf-file file.gguf`, as llama.cpp's `-hf`)
//! resolved to `{endpoint}/{owner}/{repo}/resolve/main/{file}`, where the endpoint is
//! `$HF_ENDPOINT` (as huggingface_hub reads it) or `https://huggingface.co`; `$HF_TOKEN`, when
//! set, is the bearer token of the request.

use anyhow::{Context, bail};

/// The default Hugging Face endpoint.
const HUB: &str = "https://huggingface.co";

/// A file of a Hugging Face repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HfFile {
    /// `owner/name`.
    pub repo: String,
    /// Path inside the repository (may have folders).
    pub file: String,
}

impl HfFile {
    /// The file's last path segment: its name in the models folder.
    pub fn file_name(&self) -> &str {
        self.file.rsplit('/').next().unwrap_or(&self.file)
    }

    /// `{endpoint}/{repo}/resolve/main/{file}`, each segment of the file percent-encoded.
    pub fn url(&self, endpoint: &str) -> String {
        let file: Vec<String> = self.file.split('/').map(encode_segment).collect();
        format!(
            "{}/{}/resolve/main/{}",
            endpoint.trim_end_matches('/'),
            self.repo,
            file.join("/")
        )
    }
}

/// Whether `target` has the shape of a Hugging Face reference (rather than a catalogue name).
pub fn looks_like(target: &str) -> bool {
    target.starts_with("hf://") || target.contains('/') || target.contains(':')
}

/// Parses a Hugging Face reference (see the module documentation).
pub fn parse(target: &str) -> anyhow::Result<HfFile> {
    let t = target.strip_prefix("hf://").unwrap_or(target);
    let (repo, file) = match t.split_once(':') {
        Some((repo, file)) => (repo.to_string(), file.to_string()),
        None => {
            let mut parts = t.splitn(3, '/');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(owner), Some(name), Some(file)) => (format!("{owner}/{name}"), file.into()),
                _ => bail!(
                    "{target:?}: a Hugging Face file is owner/repo/FILE.gguf, hf://owner/repo/FILE.gguf or owner/repo:FILE.gguf"
                ),
            }
        }
    };
    from_parts(&repo, &file).with_context(|| format!("{target:?}"))
}

/// `--hf-repo REPO [--hf-file FILE]`: the file from `--hf-file` or after `:` in the repo.
pub fn from_flags(repo: &str, file: Option<&str>) -> anyhow::Result<HfFile> {
    match (repo.split_once(':'), file) {
        (Some(_), Some(_)) => bail!("--hf-repo {repo:?} names a file after ':' and --hf-file another"),
        (Some((r, f)), None) => from_parts(r, f),
        (None, Some(f)) => from_parts(repo, f),
        (None, None) => bail!(
            "--hf-repo {repo}: give the file with --hf-file FILE.gguf (or --hf-repo {repo}:FILE.gguf)"
        ),
    }
    .with_context(|| format!("--hf-repo {repo:?}"))
}

/// Checks a repository id and a file path.
fn from_parts(repo: &str, file: &str) -> anyhow::Result<HfFile> {
    let id_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let segments: Vec<&str> = repo.split('/').collect();
    let good_repo = segments.len() == 2
        && segments
            .iter()
            .all(|s| !s.is_empty() && !s.starts_with('.') && s.chars().all(id_char));
    if !good_repo {
        bail!("{repo:?} is not a Hugging Face repository id (owner/name)");
    }
    if !file.to_ascii_lowercase().ends_with(".gguf") {
        bail!(
            "{file:?} is not a .gguf file: name the file (llama.cpp's repo:QUANT tags are chosen through the Hugging Face API, which memoria does not call)"
        );
    }
    let good_file = file
        .split('/')
        .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains(['\\', '\0', '?', '#']));
    if !good_file {
        bail!("{file:?} is not a file path inside a repository");
    }
    Ok(HfFile {
        repo: repo.to_string(),
        file: file.to_string(),
    })
}

/// Percent-encodes a path segment (RFC 3986: unreserved characters kept).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `$HF_ENDPOINT` (an http(s) URL), else the hub.
pub fn endpoint() -> anyhow::Result<String> {
    match std::env::var("HF_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => {
            let e = e.trim();
            let lower = e.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                bail!("HF_ENDPOINT {e:?} is not an http(s):// URL");
            }
            Ok(e.trim_end_matches('/').to_string())
        }
        _ => Ok(HUB.to_string()),
    }
}

/// `$HF_TOKEN`, when set and not empty.
pub fn token() -> Option<String> {
    std::env::var("HF_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// What to tell the user about a refused Hugging Face request.
pub fn status_hint(status: u16, f: &HfFile, has_token: bool) -> Option<String> {
    match status {
        401 | 403 if has_token => Some(format!(
            "{} is gated or private and HF_TOKEN does not give access to it",
            f.repo
        )),
        401 | 403 => Some(format!(
            "{} may be gated or private: set HF_TOKEN to a token with access",
            f.repo
        )),
        404 => Some(format!(
            "no file {:?} in {} (check the names on its Files page)",
            f.file, f.repo
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hf(repo: &str, file: &str) -> HfFile {
        HfFile {
            repo: repo.into(),
            file: file.into(),
        }
    }

    #[test]
    fn every_form_names_the_same_file() {
        let want = hf("Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q4_K_M.gguf");
        for t in [
            "Qwen/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q4_K_M.gguf",
            "hf://Qwen/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q4_K_M.gguf",
            "Qwen/Qwen3-1.7B-GGUF:Qwen3-1.7B-Q4_K_M.gguf",
        ] {
            assert_eq!(parse(t).unwrap(), want, "{t}");
        }
        assert_eq!(
            from_flags("Qwen/Qwen3-1.7B-GGUF", Some("Qwen3-1.7B-Q4_K_M.gguf")).unwrap(),
            want
        );
        assert_eq!(
            from_flags("Qwen/Qwen3-1.7B-GGUF:Qwen3-1.7B-Q4_K_M.gguf", None).unwrap(),
            want
        );
        assert_eq!(
            want.url(HUB),
            "https://huggingface.co/Qwen/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q4_K_M.gguf"
        );
        let nested = parse("a/b/q4/m x+y.gguf").unwrap();
        assert_eq!(
            (nested.file.as_str(), nested.file_name()),
            ("q4/m x+y.gguf", "m x+y.gguf")
        );
        assert_eq!(
            nested.url("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/a/b/resolve/main/q4/m%20x%2By.gguf"
        );
    }

    #[test]
    fn malformed_references_are_refused() {
        for t in [
            "Qwen/Qwen3-1.7B-GGUF",
            "Qwen/Qwen3-1.7B-GGUF:Q4_K_M",
            "Qwen/Qwen3-1.7B-GGUF/README.md",
            "a//b/m.gguf",
            "../b/m.gguf",
            "a/b/../m.gguf",
            "a b/c/m.gguf",
            "a/b/c/d:m.gguf",
        ] {
            assert!(parse(t).is_err(), "{t}");
        }
        assert!(from_flags("a/b", None).is_err());
        assert!(from_flags("a/b:x.gguf", Some("y.gguf")).is_err());
        assert!(looks_like("a/b/c.gguf") && looks_like("a/b:c.gguf") && !looks_like("gemma3-270m"));
    }

    #[test]
    fn hints_name_the_cause() {
        let f = hf("o/r", "m.gguf");
        assert!(status_hint(401, &f, false).unwrap().contains("HF_TOKEN"));
        assert!(
            status_hint(403, &f, true)
                .unwrap()
                .contains("does not give access")
        );
        assert!(status_hint(404, &f, false).unwrap().contains("no file"));
        assert_eq!(status_hint(500, &f, false), None);
    }
}
