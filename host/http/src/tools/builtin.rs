//! llama-server's built-in tools, by its names and argument shapes: `read_file`,
//! `write_file`, `edit_file` (exact, unique, non-overlapping replacements), `file_glob_search`
//! (`search.rs`), `exec_shell_command` (streamed or whole) and `get_info`. Paths resolve
//! against the request's working directory (`x-tool-cwd`, never the model's own `cwd`); every
//! tool acts where the runtime says (`runtime.rs`). Results are `/tools`' JSON: a tool's own
//! failure is `{"error": ...}` with 200, a malformed call a 400.

use std::time::Duration;

use serde_json::{Value, json};

use super::runtime::{Runtime, quote};
use crate::error::ApiError;

/// Every built-in tool, in listing order.
pub const NAMES: &[&str] = &[
    "read_file",
    "file_glob_search",
    "exec_shell_command",
    "write_file",
    "edit_file",
    "get_info",
];

/// Largest file `read_file` returns without a line range, and the most it returns at all.
const READ_MAX: usize = 16 * 1024;
/// Largest file the file tools read at all.
const FILE_MAX: usize = 32 << 20;
/// `exec_shell_command`'s output cap and longest timeout.
const EXEC_MAX_OUTPUT: usize = 16 * 1024;
const EXEC_MAX_TIMEOUT_S: u64 = 60;
/// How long a file operation in an isolate may take.
const ISOLATE_TIMEOUT: Duration = Duration::from_secs(15);

/// One call's context: its arguments, working directory and runtime.
pub struct Call {
    pub params: Value,
    pub cwd: Option<String>,
    pub runtime: Runtime,
}

impl Call {
    fn str_param(&self, key: &str) -> Result<String, ApiError> {
        match self.params.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(ApiError::bad_request(format!(
                "params.{key} must be a string"
            ))),
            None => Err(ApiError::bad_request(format!("params.{key} is required"))),
        }
    }

    fn int_param(&self, key: &str, default: i64) -> Result<i64, ApiError> {
        match self.params.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_i64()
                .ok_or_else(|| ApiError::bad_request(format!("params.{key} must be an integer"))),
        }
    }

    /// `path` resolved against the working directory (`~/` is the host's home on the host).
    pub fn resolve(&self, path: &str) -> String {
        let path = match (self.runtime == Runtime::Host, path.strip_prefix('~')) {
            (true, Some(rest)) if rest.is_empty() || rest.starts_with('/') => {
                match std::env::var("HOME") {
                    Ok(h) if !h.is_empty() => format!("{h}{rest}"),
                    _ => path.to_string(),
                }
            }
            _ => path.to_string(),
        };
        if path.starts_with('/') {
            return path;
        }
        match &self.cwd {
            Some(c) => format!("{}/{path}", c.trim_end_matches('/')),
            None if self.runtime == Runtime::Host => std::env::current_dir()
                .map(|d| d.join(&path).to_string_lossy().into_owned())
                .unwrap_or(path),
            None => path,
        }
    }

    /// The whole file at (resolved) `path`.
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        if self.runtime == Runtime::Host {
            let p = path.to_string();
            return tokio::task::spawn_blocking(move || {
                let len = std::fs::metadata(&p)
                    .map_err(|e| format!("cannot stat file: {p}: {e}"))?
                    .len();
                if len > FILE_MAX as u64 {
                    return Err(format!("file too large ({len} bytes, max {FILE_MAX})"));
                }
                std::fs::read(&p).map_err(|e| format!("failed to open file: {p}: {e}"))
            })
            .await
            .map_err(|e| e.to_string())?;
        }
        let script = format!("cat -- {}", quote(path));
        let out = self
            .runtime
            .run(&script, None, None, (FILE_MAX, ISOLATE_TIMEOUT), |_| true)
            .await?;
        if out.exit_code != 0 {
            return Err(format!("failed to open file: {path}: {}", out.text.trim()));
        }
        Ok(out.bytes)
    }

    /// Writes `content` to (resolved) `path`, creating its folders.
    pub async fn write(&self, path: &str, content: Vec<u8>) -> Result<(), String> {
        if self.runtime == Runtime::Host {
            let p = std::path::PathBuf::from(path);
            return tokio::task::spawn_blocking(move || {
                if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(d)?;
                }
                std::fs::write(&p, content)
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("failed to write file: {path}: {e}"));
        }
        let q = quote(path);
        let script = format!("mkdir -p -- \"$(dirname -- {q})\" && cat > {q}");
        let out = self
            .runtime
            .run(
                &script,
                None,
                Some(content),
                (EXEC_MAX_OUTPUT, ISOLATE_TIMEOUT),
                |_| true,
            )
            .await?;
        if out.exit_code != 0 {
            return Err(format!("failed to write file: {path}: {}", out.text.trim()));
        }
        Ok(())
    }
}

/// The OpenAI function definition of a built-in tool.
pub fn definition(name: &str) -> Value {
    let (desc, props, required): (&str, Value, &[&str]) = match name {
        "read_file" => (
            "Read the contents of a file. Optionally specify a 1-based line range. If append_loc is true, each line is prefixed with its line number (e.g. \"1\u{2192}...\").",
            json!({
                "path": {"type": "string", "description": "Path to the file"},
                "start_line": {"type": "integer", "description": "First line to read, 1-based (default: 1)"},
                "end_line": {"type": "integer", "description": "Last line to read, 1-based inclusive (default: end of file)"},
                "append_loc": {"type": "boolean", "description": "Prefix each line with its line number"},
            }),
            &["path"],
        ),
        "file_glob_search" => (
            "Recursively search for files matching a glob pattern under a directory, skipping common junk directories (.git, node_modules, build, dist, etc.). A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth; a pattern containing '/' matches the relative path (prefixed with \"**/\" unless anchored). Use type=\"dir\" or \"all\" to also list directories; directory entries end with '/' in the output.",
            json!({
                "path": {"type": "string", "description": "Base directory to search in"},
                "include": {"type": "string", "description": "Glob pattern for files to include (e.g. \"*.cpp\" or \"src/**/*.cpp\"). Default: **"},
                "exclude": {"type": "string", "description": "Glob pattern for files to exclude"},
                "type": {"type": "string", "description": "Entry type to return: \"file\" (default), \"dir\" or \"all\""},
                "max_depth": {"type": "integer", "description": "Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only)"},
                "limit": {"type": "integer", "description": "Maximum number of results to return, capped at 100 (default 100)"},
            }),
            &["path"],
        ),
        "exec_shell_command" => (
            "Execute a shell command and return its output (stdout and stderr combined).",
            json!({
                "command": {"type": "string", "description": "Shell command to execute"},
                "timeout": {"type": "integer", "description": "Timeout in seconds (default 10, max 60)"},
                "max_output_size": {"type": "integer", "description": "Maximum output size in bytes (default 16384)"},
            }),
            &["command"],
        ),
        "write_file" => (
            "Write content to a file, creating it (including parent directories) if it does not exist. May use with edit_file for more complex edits.",
            json!({
                "path": {"type": "string", "description": "Path of the file to write"},
                "content": {"type": "string", "description": "Content to write"},
            }),
            &["path", "content"],
        ),
        "edit_file" => (
            "Edit a file using exact text replacement. Each edits[].old_text must be unique in the file and is matched against the original content, not incrementally. Merge nearby changes into one edit instead of overlapping edits. Use write_file to replace the whole file.",
            json!({
                "path": {"type": "string", "description": "Path to the file to edit"},
                "edits": {"type": "array", "description": "One or more exact text replacements to apply", "items": {
                    "type": "object",
                    "properties": {
                        "old_text": {"type": "string", "description": "Exact text to find; must be unique in the file and must not overlap with other edits"},
                        "new_text": {"type": "string", "description": "Text to replace old_text with"},
                    },
                    "required": ["old_text", "new_text"],
                }},
            }),
            &["path", "edits"],
        ),
        _ => (
            "Returns runtime info: the OS name/version and the current working directory",
            json!({}),
            &[],
        ),
    };
    let mut params = json!({"type": "object", "properties": props});
    if !required.is_empty() {
        params["required"] = json!(required);
    }
    json!({"type": "function", "function": {"name": name, "description": desc, "parameters": params}})
}

/// How `GET /tools` describes a built-in tool.
pub fn listing(name: &str) -> Value {
    let display = match name {
        "read_file" => "Read file",
        "file_glob_search" => "File search",
        "exec_shell_command" => "Execute shell command",
        "write_file" => "Write file",
        "edit_file" => "Edit file",
        _ => "Get Runtime Info",
    };
    let write = matches!(name, "exec_shell_command" | "write_file" | "edit_file");
    json!({
        "display_name": display,
        "tool": name,
        "type": "server",
        "permissions": {"write": write},
        "uses_cwd": true,
        "definition": definition(name),
    })
}

/// Whether a built-in tool can stream its output.
pub fn streams(name: &str) -> bool {
    name == "exec_shell_command"
}

/// Runs built-in tool `name`; `on_chunk` receives streamed output (exec_shell_command).
pub async fn invoke(
    name: &str,
    call: &Call,
    on_chunk: impl FnMut(&str) -> bool,
) -> Result<Value, ApiError> {
    match name {
        "read_file" => read_file(call).await,
        "write_file" => {
            let path = call.str_param("path")?;
            let content = call.str_param("content")?;
            let n = content.len();
            Ok(
                match call.write(&call.resolve(&path), content.into_bytes()).await {
                    Ok(()) => {
                        json!({"result": "file written successfully", "path": path, "bytes": n})
                    }
                    Err(e) => json!({ "error": e }),
                },
            )
        }
        "edit_file" => super::edit::edit_file(call).await,
        "file_glob_search" => super::search::file_glob_search(call).await,
        "exec_shell_command" => exec(call, on_chunk).await,
        _ => get_info(call).await,
    }
}

async fn read_file(call: &Call) -> Result<Value, ApiError> {
    let path = call.str_param("path")?;
    let start = call.int_param("start_line", 1)?;
    let end = call.int_param("end_line", -1)?;
    let append_loc = call
        .params
        .get("append_loc")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let bytes = match call.read(&call.resolve(&path)).await {
        Ok(b) => b,
        Err(e) => return Ok(json!({ "error": e })),
    };
    if bytes.len() > READ_MAX && end == -1 {
        return Ok(json!({"error": format!(
            "file too large ({} bytes, max {READ_MAX}). Use start_line/end_line to read a portion.",
            bytes.len()
        )}));
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut out = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let n = i64::try_from(i).unwrap_or(i64::MAX).saturating_add(1);
        if n < start {
            continue;
        }
        if end != -1 && n > end {
            break;
        }
        let line = line.strip_suffix('\n').unwrap_or(line);
        let piece = if append_loc {
            format!("{n}\u{2192}{line}\n")
        } else {
            format!("{line}\n")
        };
        if out.len() + piece.len() > READ_MAX {
            out.push_str("[output truncated]");
            break;
        }
        out.push_str(&piece);
    }
    Ok(json!({ "plain_text_response": out }))
}

async fn exec(call: &Call, on_chunk: impl FnMut(&str) -> bool) -> Result<Value, ApiError> {
    let command = call.str_param("command")?;
    let timeout = call
        .int_param("timeout", 10)?
        .clamp(1, EXEC_MAX_TIMEOUT_S as i64);
    let max = call.int_param("max_output_size", EXEC_MAX_OUTPUT as i64)?;
    let max = usize::try_from(max).unwrap_or(0).min(EXEC_MAX_OUTPUT);
    let limits = (max, Duration::from_secs(timeout.unsigned_abs()));
    let out = call
        .runtime
        .run(&command, call.cwd.as_deref(), None, limits, on_chunk)
        .await;
    Ok(match out {
        Ok(o) => {
            let mut tail = format!("\n[exit code: {}]", o.exit_code);
            if o.timed_out {
                tail.push_str(" [exit due to timed out]");
            }
            json!({ "plain_text_response": o.text, "tail": tail })
        }
        Err(e) => json!({ "error": e }),
    })
}

async fn get_info(call: &Call) -> Result<Value, ApiError> {
    let limits = (4096, Duration::from_secs(5));
    let os = match call
        .runtime
        .run("uname -a", None, None, limits, |_| true)
        .await
    {
        Ok(o) if o.exit_code == 0 && !o.timed_out => o.text.trim().to_string(),
        _ => "unknown".into(),
    };
    let cwd = match (&call.cwd, &call.runtime) {
        (Some(c), _) => c.clone(),
        (None, Runtime::Host) => std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default(),
        (None, rt) => match rt.run("pwd", None, None, limits, |_| true).await {
            Ok(o) if o.exit_code == 0 => o.text.trim().to_string(),
            _ => "unknown".into(),
        },
    };
    Ok(json!({"os": os, "cwd": cwd}))
}
