//! `memoria serve`'s server-side tool flags (llama-server's): `--tools`, `--tools-runtime`,
//! `--mcp-servers-config`, `--mcp-servers-json`. They turn `/tools` on; with them on and no
//! CORS setting, browser pages are only allowed from this machine.

use std::path::PathBuf;

use clap::Args;
use memoria_http::tools::ToolsConfig;

/// Server-side tools (`/tools`): off unless one of these is given.
#[derive(Clone, Debug, Default, Args)]
pub struct ToolsArgs {
    /// Built-in tools that act on this host (files, search, shell): `all` or names,
    /// comma-separated (read_file, file_glob_search, exec_shell_command, write_file,
    /// edit_file, get_info).
    #[arg(long = "tools", value_name = "LIST")]
    pub tools: Option<String>,
    /// Run the built-in tools in an isolate instead of the host: docker-container:ID,
    /// podman-container:ID or ssh:[USER@]HOST.
    #[arg(long = "tools-runtime", value_name = "SPEC")]
    pub tools_runtime: Option<String>,
    /// MCP servers to start, from a JSON file (`{"mcpServers": {name: {"command", "args",
    /// "env", "cwd", "timeout_ms"}}}`); their tools are listed as `<name>_<tool>`.
    #[arg(long = "mcp-servers-config", value_name = "FILE")]
    pub mcp_servers_config: Option<PathBuf>,
    /// MCP servers as inline JSON (as --mcp-servers-config).
    #[arg(long = "mcp-servers-json", value_name = "JSON")]
    pub mcp_servers_json: Option<String>,
}

impl ToolsArgs {
    /// The tools configuration (None: `/tools` off); a bad value stops start-up.
    pub fn config(&self) -> anyhow::Result<Option<ToolsConfig>> {
        ToolsConfig::from_flags(
            self.tools.as_deref(),
            self.tools_runtime.as_deref(),
            self.mcp_servers_config.as_deref(),
            self.mcp_servers_json.as_deref(),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))
    }
}
