//! One running MCP server over stdio: the child process (its own process group, killed with
//! it), newline-delimited JSON-RPC 2.0 written to its stdin, and a reader task that hands each
//! response to the call waiting on its id (notifications and stray lines are skipped), so calls
//! may overlap. Invariants: a call ends within its timeout or at shutdown, whatever the server
//! does; the reader ends at shutdown even when a grandchild keeps the pipe open.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{oneshot, watch};

use super::config::McpServer;

/// The MCP protocol version offered at `initialize`.
const PROTOCOL_VERSION: &str = "2024-11-05";
/// The longest line read from a server (a larger one ends the connection).
const MAX_LINE: usize = 16 << 20;
/// Bytes of the server's stderr kept for diagnostics.
const STDERR_TAIL: usize = 2048;

type Pending = Mutex<HashMap<u64, oneshot::Sender<Value>>>;

/// A started MCP server that has answered `initialize`.
pub struct Conn {
    name: String,
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Arc<Pending>,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    child: Mutex<Child>,
    timeout: Duration,
    stop: watch::Receiver<bool>,
    stderr_tail: Arc<Mutex<String>>,
}

impl Conn {
    /// Starts the server and runs the `initialize` handshake (bounded by `timeout`).
    pub async fn start(
        cfg: &McpServer,
        stop: watch::Receiver<bool>,
        timeout: Duration,
    ) -> Result<Arc<Conn>, String> {
        let mut cmd = Command::new(&cfg.command);
        cmd.args(&cfg.args)
            .envs(cfg.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        if let Some(d) = &cfg.cwd {
            cmd.current_dir(d);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cfg.command))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes are missing".into());
        };
        let conn = Arc::new(Conn {
            name: cfg.name.clone(),
            stdin: tokio::sync::Mutex::new(stdin),
            pending: Arc::default(),
            next_id: AtomicU64::new(1),
            alive: Arc::new(AtomicBool::new(true)),
            child: Mutex::new(child),
            timeout: cfg.timeout,
            stop: stop.clone(),
            stderr_tail: Arc::default(),
        });
        tokio::spawn(read_responses(
            stdout,
            conn.pending.clone(),
            conn.alive.clone(),
            stop.clone(),
        ));
        tokio::spawn(drain_stderr(stderr, conn.stderr_tail.clone(), stop));
        let init = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "memoria", "version": env!("CARGO_PKG_VERSION")},
        });
        if let Err(e) = conn.request_within("initialize", init, timeout).await {
            conn.kill();
            return Err(format!("initialize failed: {e}{}", conn.diagnostics()));
        }
        conn.notify("notifications/initialized").await?;
        Ok(conn)
    }

    /// Whether the server is still running (its stdout open).
    pub fn is_alive(&self) -> bool {
        self.alive.load(Relaxed)
    }

    /// The server's tools (`tools/list`) as (name, description, input schema).
    pub async fn list_tools(
        &self,
        timeout: Duration,
    ) -> Result<Vec<(String, String, Value)>, String> {
        let r = self
            .request_within("tools/list", json!({}), timeout)
            .await?;
        let tools = r
            .get("tools")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Ok(tools
            .into_iter()
            .filter_map(|t| {
                let name = t.get("name")?.as_str()?.to_string();
                let desc = t.get("description").and_then(Value::as_str).unwrap_or("");
                let schema = t.get("inputSchema").cloned().unwrap_or(Value::Null);
                (!name.is_empty()).then(|| (name, desc.to_string(), schema))
            })
            .collect())
    }

    /// Calls a tool; the result in `/tools`' shape (`plain_text_response`, or `error`).
    pub async fn call_tool(&self, tool: &str, arguments: Value) -> Value {
        let params = json!({"name": tool, "arguments": arguments});
        match self
            .request_within("tools/call", params, self.timeout)
            .await
        {
            Ok(result) => result_to_response(&result),
            Err(e) => json!({ "error": e }),
        }
    }

    /// One request, answered within `timeout` (else an error; a late answer is dropped).
    async fn request_within(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(e) = self.write(&msg).await {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            return Err(e);
        }
        let mut stop = self.stop.clone();
        let outcome = tokio::select! {
            r = rx => r.map_err(|_| format!("MCP server {:?} closed the connection{}", self.name, self.diagnostics())),
            () = tokio::time::sleep(timeout) => Err("request timed out".to_string()),
            _ = stop.wait_for(|s| *s) => Err("cancelled: the server is shutting down".to_string()),
        };
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        let reply = outcome?;
        if let Some(e) = reply.get("error") {
            let msg = e
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
                .unwrap_or("unknown error");
            return Err(msg.to_string());
        }
        reply
            .get("result")
            .cloned()
            .ok_or_else(|| "invalid response from MCP server".to_string())
    }

    async fn notify(&self, method: &str) -> Result<(), String> {
        self.write(&json!({"jsonrpc": "2.0", "method": method}))
            .await
    }

    async fn write(&self, msg: &Value) -> Result<(), String> {
        let mut line = msg.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        let w = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(self.timeout, w).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.alive.store(false, Relaxed);
                Err(format!("MCP server {:?}: writing to it: {e}", self.name))
            }
            Err(_) => Err(format!(
                "MCP server {:?} is not reading its input",
                self.name
            )),
        }
    }

    /// Kills the server and its process group.
    pub fn kill(&self) {
        self.alive.store(false, Relaxed);
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        #[cfg(unix)]
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: signals the process group this child leads (process_group(0)).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = child.start_kill();
    }

    /// The tail of the server's stderr, for error messages.
    fn diagnostics(&self) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        let t = t.trim();
        if t.is_empty() {
            String::new()
        } else {
            format!(" (stderr: {t})")
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads lines from the server until EOF or shutdown, handing responses to their callers.
async fn read_responses(
    stdout: tokio::process::ChildStdout,
    pending: Arc<Pending>,
    alive: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut lines = BufReader::new(stdout).take(0);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        lines.set_limit(MAX_LINE as u64 + 1);
        let read = tokio::select! {
            r = lines.read_until(b'\n', &mut buf) => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) if buf.len() > MAX_LINE => break,
            Ok(_) => {}
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&buf) else {
            continue;
        };
        // Responses carry an id and no method; notifications and requests from the server
        // are not answers to anything.
        if msg.get("method").is_some() {
            continue;
        }
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            continue;
        };
        let tx = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(tx) = tx {
            let _ = tx.send(msg);
        }
    }
    alive.store(false, Relaxed);
    // Waiting callers see the connection closed.
    pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Keeps the server's stderr drained (a full pipe would block it), its tail for diagnostics.
async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::select! {
            r = stderr.read(&mut buf) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
            _ = stop.wait_for(|s| *s) => break,
        };
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        t.push_str(&String::from_utf8_lossy(&buf[..n]));
        if t.len() > STDERR_TAIL {
            let mut cut = t.len() - STDERR_TAIL;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// An MCP `tools/call` result as `/tools` answers it: the text parts joined by newlines, or
/// `error` when the tool says `isError`.
fn result_to_response(result: &Value) -> Value {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let msg = if text.is_empty() {
            "MCP tool returned an error".to_string()
        } else {
            text
        };
        return json!({ "error": msg });
    }
    json!({ "plain_text_response": text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_take_the_tools_shape() {
        let ok = json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]});
        assert_eq!(
            result_to_response(&ok),
            json!({"plain_text_response": "a\nb"})
        );
        let bad = json!({"content": [], "isError": true});
        assert_eq!(
            result_to_response(&bad),
            json!({"error": "MCP tool returned an error"})
        );
    }
}
