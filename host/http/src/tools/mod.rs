//! Server-side tools, llama-server's `/tools`: the built-in tools the operator turned on with
//! `--tools` (files, search, shell — they act on the host, or in the `--tools-runtime`
//! isolate) and the tools of the MCP servers it configured (`<server>_<tool>`). `GET /tools`
//! lists them with their OpenAI function definitions, `POST /tools` runs one (`route.rs`).
//! Invariants: nothing here exists unless the operator configured it; a keyed host requires
//! the key; at shutdown every tool call in flight ends at once.

mod builtin;
pub mod config;
mod edit;
mod mcp;
mod mcp_pool;
mod route;
mod runtime;
mod search;

use std::sync::Arc;

use serde_json::{Value, json};

pub use config::ToolsConfig;
pub(crate) use route::handle;

/// The tools of a running host.
pub struct Tools {
    builtin: Vec<&'static str>,
    runtime: Option<runtime::Runtime>,
    mcp: mcp_pool::McpPool,
    /// MCP tools by their listed name: (name, index into the pool's tools).
    mcp_names: Vec<(String, usize)>,
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools")
            .field("builtin", &self.builtin)
            .field("mcp_tools", &self.mcp_names.len())
            .finish()
    }
}

impl Tools {
    /// Starts the MCP servers (warm-up) and assembles the tool list.
    pub async fn start(cfg: ToolsConfig) -> Result<Arc<Tools>, String> {
        let runtime = cfg
            .runtime
            .as_deref()
            .map(runtime::Runtime::parse)
            .transpose()
            .map_err(|e| format!("--tools-runtime: {e}"))?;
        let mcp = mcp_pool::McpPool::start(cfg.mcp).await;
        let mut names: Vec<String> = cfg.builtin.iter().map(|s| s.to_string()).collect();
        let mut mcp_names = Vec::new();
        for (i, t) in mcp.tools().iter().enumerate() {
            let name = format!("{}_{}", t.server, t.tool);
            if names.contains(&name) {
                eprintln!(
                    "memoria: warning: MCP tool {name:?} collides with another tool; skipped"
                );
                continue;
            }
            names.push(name.clone());
            mcp_names.push((name, i));
        }
        Ok(Arc::new(Tools {
            builtin: cfg.builtin,
            runtime,
            mcp,
            mcp_names,
        }))
    }

    /// `GET /tools`: every tool with its definition.
    pub fn list(&self) -> Value {
        let mut out: Vec<Value> = self.builtin.iter().map(|n| builtin::listing(n)).collect();
        for (name, i) in &self.mcp_names {
            let t = &self.mcp.tools()[*i];
            let schema = if t.schema.is_object() {
                t.schema.clone()
            } else {
                json!({"type": "object", "properties": {}})
            };
            out.push(json!({
                "display_name": name,
                "tool": name,
                "type": "mcp",
                "permissions": {"write": false},
                "uses_cwd": false,
                "definition": {"type": "function", "function": {
                    "name": name,
                    "description": t.description,
                    "parameters": schema,
                }},
            }));
        }
        Value::Array(out)
    }

    /// Ends every call in flight and stops the MCP servers.
    pub fn shutdown(&self) {
        self.mcp.shutdown();
    }
}
