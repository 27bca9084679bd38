//! What the operator turned on for `/tools`: the built-in tools by name (`--tools`), the
//! isolate they run in (`--tools-runtime`) and the MCP servers (`--mcp-servers-config FILE`,
//! `--mcp-servers-json JSON`, Cursor's `{"mcpServers": {name: {command, args, env, cwd,
//! timeout_ms}}}`). Invariant: commands only ever come from here (operator flags), never from
//! a request; a config that does not parse stops start-up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// Default per-call timeout of an MCP server (`timeout_ms`).
const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The tools a host offers.
#[derive(Clone, Debug, Default)]
pub struct ToolsConfig {
    /// Built-in tools turned on (names of [`super::builtin::NAMES`]).
    pub builtin: Vec<&'static str>,
    /// `--tools-runtime`: where the built-in tools run instead of the host (`ssh:HOST`,
    /// `docker-container:ID`, `podman-container:ID`).
    pub runtime: Option<String>,
    /// MCP servers, in configuration order.
    pub mcp: Vec<McpServer>,
}

/// One MCP server the host starts (stdio, newline-delimited JSON-RPC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServer {
    /// Its key in `mcpServers`; its tools are listed as `<name>_<tool>`.
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Set over the host's environment.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// How long one call may take.
    pub timeout: Duration,
}

impl ToolsConfig {
    /// Reads the flags; None when nothing is turned on (`/tools` is then refused).
    pub fn from_flags(
        tools: Option<&str>,
        runtime: Option<&str>,
        mcp_file: Option<&Path>,
        mcp_json: Option<&str>,
    ) -> Result<Option<ToolsConfig>, String> {
        let builtin = match tools {
            Some(list) => builtin_names(list)?,
            None => Vec::new(),
        };
        let mut mcp = Vec::new();
        if let Some(p) = mcp_file {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("--mcp-servers-config: cannot read {}: {e}", p.display()))?;
            add_servers(&mut mcp, &text)
                .map_err(|e| format!("--mcp-servers-config {}: {e}", p.display()))?;
        }
        if let Some(j) = mcp_json {
            add_servers(&mut mcp, j).map_err(|e| format!("--mcp-servers-json: {e}"))?;
        }
        let runtime = runtime.map(str::trim).filter(|r| !r.is_empty());
        if let Some(r) = runtime {
            super::runtime::Runtime::parse(r).map_err(|e| format!("--tools-runtime: {e}"))?;
        }
        if builtin.is_empty() && mcp.is_empty() {
            if runtime.is_some() {
                return Err("--tools-runtime needs --tools".into());
            }
            return Ok(None);
        }
        Ok(Some(ToolsConfig {
            builtin,
            runtime: runtime.map(str::to_string),
            mcp,
        }))
    }
}

/// `--tools all` or a comma-separated list of built-in tool names.
fn builtin_names(list: &str) -> Result<Vec<&'static str>, String> {
    let known = super::builtin::NAMES;
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "all" {
            return Ok(known.to_vec());
        }
        match known.iter().find(|k| **k == name) {
            Some(k) if !out.contains(k) => out.push(*k),
            Some(_) => {}
            None => {
                return Err(format!(
                    "--tools: unknown tool {name:?}; available: all, {}",
                    known.join(", ")
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("--tools: give `all` or tool names, comma-separated".into());
    }
    Ok(out)
}

/// Adds the servers of one `{"mcpServers": {...}}` document (names unique across sources;
/// entries without a command are skipped with a warning, as llama-server's).
fn add_servers(out: &mut Vec<McpServer>, text: &str) -> Result<(), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Some(servers) = v.get("mcpServers") else {
        return Err("no \"mcpServers\" object".into());
    };
    let servers = servers
        .as_object()
        .ok_or("\"mcpServers\" must be an object of servers")?;
    for (name, s) in servers {
        let at = |what: &str| format!("mcpServers.{name}.{what}");
        if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
            return Err(format!("mcpServers: bad server name {name:?}"));
        }
        let s = s
            .as_object()
            .ok_or_else(|| format!("{}: not an object", at("")))?;
        let command = match s.get("command") {
            Some(Value::String(c)) if !c.is_empty() => c.clone(),
            None => {
                eprintln!("memoria: warning: MCP server {name:?} has no command, skipped");
                continue;
            }
            _ => return Err(format!("{} must be a non-empty string", at("command"))),
        };
        let args = match s.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{} must be strings", at("args")))?,
            _ => return Err(format!("{} must be an array", at("args"))),
        };
        let env = match s.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{} values must be strings", at("env")))?,
            _ => return Err(format!("{} must be an object", at("env"))),
        };
        let cwd = match s.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) if c.is_empty() => None,
            Some(Value::String(c)) => Some(PathBuf::from(c)),
            _ => return Err(format!("{} must be a string", at("cwd"))),
        };
        let timeout_ms = match s.get("timeout_ms") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
            Some(t) => t
                .as_u64()
                .filter(|t| (1..=3_600_000).contains(t))
                .ok_or_else(|| format!("{} must be 1 to 3600000", at("timeout_ms")))?,
        };
        if out.iter().any(|m| m.name == *name) {
            eprintln!("memoria: warning: MCP server {name:?} is configured twice; the first kept");
            continue;
        }
        out.push(McpServer {
            name: name.clone(),
            command,
            args,
            env,
            cwd,
            timeout: Duration::from_millis(timeout_ms),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        assert!(
            ToolsConfig::from_flags(None, None, None, None)
                .expect("none")
                .is_none()
        );
        let c = ToolsConfig::from_flags(
            Some("read_file,write_file"),
            None,
            None,
            Some(r#"{"mcpServers": {"e": {"command": "python3", "args": ["x.py"], "timeout_ms": 500}, "skip": {}}}"#),
        )
        .expect("ok")
        .expect("on");
        assert_eq!(c.builtin, ["read_file", "write_file"]);
        assert_eq!(c.mcp.len(), 1);
        assert_eq!(c.mcp[0].timeout, Duration::from_millis(500));
        assert!(ToolsConfig::from_flags(Some("all"), None, None, Some("not json")).is_err());
        assert!(ToolsConfig::from_flags(Some("nope"), None, None, None).is_err());
        let missing = Path::new("/nonexistent/mcp.json");
        assert!(ToolsConfig::from_flags(Some("all"), None, Some(missing), None).is_err());
        assert!(ToolsConfig::from_flags(Some("all"), Some("fake:x"), None, None).is_err());
    }
}
