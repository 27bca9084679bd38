//! The configured MCP servers: each started at start-up to learn its tools (warm-up, all at
//! once, each bounded), then kept running; a call finds its server's connection, starting a
//! fresh one when the last has died (a crash), with a short cool-down after a failed start.
//! Invariants: one server failing never hides another's tools nor stops the host; after
//! [`McpPool::shutdown`] every call returns at once and every server is killed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use super::config::McpServer;
use super::mcp::Conn;

/// How long warm-up gives one server to start and list its tools.
const WARMUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server that failed to start is not retried.
const COOLDOWN: Duration = Duration::from_secs(2);

/// One tool an MCP server offers.
#[derive(Clone, Debug)]
pub struct McpTool {
    pub server: String,
    pub tool: String,
    pub description: String,
    pub schema: Value,
}

struct Slot {
    cfg: McpServer,
    conn: tokio::sync::Mutex<(Option<Arc<Conn>>, Option<Instant>)>,
}

/// The MCP servers and the tools they listed at warm-up.
pub struct McpPool {
    slots: Vec<Slot>,
    tools: Vec<McpTool>,
    stop_tx: watch::Sender<bool>,
    stop: watch::Receiver<bool>,
}

impl McpPool {
    /// Starts every server and lists its tools; failures are logged, not fatal.
    pub async fn start(servers: Vec<McpServer>) -> McpPool {
        let (stop_tx, stop) = watch::channel(false);
        let warm: Vec<_> = servers
            .iter()
            .map(|cfg| {
                let (cfg, stop) = (cfg.clone(), stop.clone());
                tokio::spawn(async move { warm_up(&cfg, stop).await })
            })
            .collect();
        let mut slots = Vec::new();
        let mut tools = Vec::new();
        for (cfg, task) in servers.into_iter().zip(warm) {
            let (conn, found) = match task.await {
                Ok(Ok((conn, found))) => {
                    eprintln!("memoria: MCP server {:?}: {} tools", cfg.name, found.len());
                    (Some(conn), found)
                }
                Ok(Err(e)) => {
                    eprintln!(
                        "memoria: warning: MCP server {:?} failed at start-up: {e}",
                        cfg.name
                    );
                    (None, Vec::new())
                }
                Err(e) => {
                    eprintln!("memoria: warning: MCP server {:?}: {e}", cfg.name);
                    (None, Vec::new())
                }
            };
            for (tool, description, schema) in found {
                tools.push(McpTool {
                    server: cfg.name.clone(),
                    tool,
                    description,
                    schema,
                });
            }
            slots.push(Slot {
                cfg,
                conn: tokio::sync::Mutex::new((conn, None)),
            });
        }
        McpPool {
            slots,
            tools,
            stop_tx,
            stop,
        }
    }

    /// The tools found at warm-up.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// Calls `tool` of server `server`; the answer in `/tools`' shape (`error` on failure).
    pub async fn call(&self, server: &str, tool: &str, arguments: Value) -> Value {
        let Some(slot) = self.slots.iter().find(|s| s.cfg.name == server) else {
            return json!({"error": format!("unknown MCP server {server:?}")});
        };
        match self.connection(slot).await {
            Ok(conn) => conn.call_tool(tool, arguments).await,
            Err(e) => json!({"error": format!("MCP server unavailable: {server}: {e}")}),
        }
    }

    /// The live connection of `slot`, started anew if it died.
    async fn connection(&self, slot: &Slot) -> Result<Arc<Conn>, String> {
        if *self.stop.borrow() {
            return Err("the server is shutting down".into());
        }
        let mut guard = slot.conn.lock().await;
        if let Some(c) = &guard.0 {
            if c.is_alive() {
                return Ok(c.clone());
            }
            eprintln!(
                "memoria: MCP server {:?} exited; starting it again",
                slot.cfg.name
            );
            guard.0 = None;
        }
        if guard.1.is_some_and(|until| Instant::now() < until) {
            return Err("it failed to start moments ago".into());
        }
        let mut stop = self.stop.clone();
        let started = tokio::select! {
            r = Conn::start(&slot.cfg, self.stop.clone(), WARMUP_TIMEOUT.max(slot.cfg.timeout)) => r,
            _ = stop.wait_for(|s| *s) => Err("the server is shutting down".into()),
        };
        match started {
            Ok(c) => {
                *guard = (Some(c.clone()), None);
                Ok(c)
            }
            Err(e) => {
                guard.1 = Some(Instant::now() + COOLDOWN);
                eprintln!("memoria: warning: MCP server {:?}: {e}", slot.cfg.name);
                Err(e)
            }
        }
    }

    /// Ends every call in flight and kills every server.
    pub fn shutdown(&self) {
        let _ = self.stop_tx.send(true);
        for s in &self.slots {
            if let Ok(g) = s.conn.try_lock()
                && let Some(c) = &g.0
            {
                c.kill();
            }
        }
    }
}

impl Drop for McpPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn warm_up(
    cfg: &McpServer,
    stop: watch::Receiver<bool>,
) -> Result<(Arc<Conn>, Vec<(String, String, Value)>), String> {
    let work = async {
        let conn = Conn::start(cfg, stop, WARMUP_TIMEOUT).await?;
        let tools = conn.list_tools(WARMUP_TIMEOUT).await?;
        Ok((conn, tools))
    };
    tokio::time::timeout(WARMUP_TIMEOUT, work)
        .await
        .map_err(|_| format!("no answer within {}s", WARMUP_TIMEOUT.as_secs()))?
}
