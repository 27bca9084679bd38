//! Where a built-in tool acts: on the host (the default), or in an isolate named by
//! `--tools-runtime` or a request's `x-tool-runtime` header — `docker-container:ID`,
//! `podman-container:ID` (a running container) or `ssh:[USER@]HOST` (key-based, batch mode).
//! Also runs a command there: `sh -c`, stdout and stderr together (one pipe), a byte cap, a timeout that
//! kills the whole process group, and chunks handed out as they arrive. Invariants: an unknown
//! runtime is an error, never the host; a target that could be read as an option is refused.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Where tools run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Runtime {
    Host,
    /// `docker` or `podman`, and a running container's id or name.
    Container {
        bin: &'static str,
        id: String,
    },
    Ssh {
        target: String,
    },
}

/// A finished command.
#[derive(Debug, Default)]
pub struct Output {
    pub text: String,
    /// Raw stdout bytes (capped), for file contents.
    pub bytes: Vec<u8>,
    pub exit_code: i32,
    pub timed_out: bool,
}

impl Runtime {
    /// Reads a runtime spec (`docker-container:ID`, `podman-container:ID`, `ssh:TARGET`).
    pub fn parse(spec: &str) -> Result<Runtime, String> {
        for bin in ["docker", "podman"] {
            if let Some(id) = spec.strip_prefix(&format!("{bin}-container:")) {
                let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
                if !ok {
                    return Err(format!("invalid container id: {id}"));
                }
                return Ok(Runtime::Container {
                    bin,
                    id: id.to_string(),
                });
            }
            if spec.starts_with(&format!("{bin}:")) {
                return Err(format!(
                    "tool runtime must name a running container ({bin}-container:ID): {spec}"
                ));
            }
        }
        if let Some(target) = spec.strip_prefix("ssh:") {
            let ok = !target.is_empty()
                && !target.starts_with('-')
                && target
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
            if !ok {
                return Err(format!("invalid ssh target: {target}"));
            }
            return Ok(Runtime::Ssh {
                target: target.to_string(),
            });
        }
        Err(format!("unknown tool runtime: {spec}"))
    }

    /// The program and arguments that run `script` with `sh -c` here, in `cwd` when given.
    fn argv(&self, script: &str, cwd: Option<&str>, stdin: bool) -> Vec<String> {
        let script = match cwd {
            Some(d) if *self != Runtime::Host => format!("cd {} || exit 1\n{script}", quote(d)),
            _ => script.to_string(),
        };
        match self {
            Runtime::Host => vec!["sh".into(), "-c".into(), script],
            Runtime::Container { bin, id } => {
                let mut v = vec![bin.to_string(), "exec".into()];
                if stdin {
                    v.push("-i".into());
                }
                v.extend([id.clone(), "sh".into(), "-c".into(), script]);
                v
            }
            Runtime::Ssh { target } => {
                let mut v: Vec<String> = [
                    "ssh",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "PasswordAuthentication=no",
                    "-o",
                    "KbdInteractiveAuthentication=no",
                    "-o",
                    "StrictHostKeyChecking=yes",
                ]
                .map(String::from)
                .into();
                if !stdin {
                    v.push("-n".into());
                }
                // The remote shell parses the command line again: one quoted word.
                v.extend([target.clone(), format!("sh -c {}", quote(&script))]);
                v
            }
        }
    }

    /// Runs `script` (stdout and stderr together), at most `max_output` bytes kept, killed
    /// after `timeout`; `on_chunk` sees the output as it comes and may stop the command by
    /// returning false.
    pub async fn run(
        &self,
        script: &str,
        cwd: Option<&str>,
        stdin: Option<Vec<u8>>,
        (max_output, timeout): (usize, Duration),
        mut on_chunk: impl FnMut(&str) -> bool,
    ) -> Result<Output, String> {
        let argv = self.argv(script, cwd, stdin.is_some());
        // stdout and stderr share one pipe, so the output keeps its order.
        let (reader, writer) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
        let writer2 = writer.try_clone().map_err(|e| format!("pipe: {e}"))?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(if stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(writer)
            .stderr(writer2)
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        if let (Runtime::Host, Some(d)) = (self, cwd) {
            cmd.current_dir(d);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        // The command's copies of the pipe's write end close here: EOF once the child is done.
        drop(cmd);
        let pid = child.id();
        if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
            tokio::spawn(async move {
                let _ = w.write_all(&data).await;
            });
        }
        let mut out =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))
                .map_err(|e| format!("pipe: {e}"))?;
        let mut res = Output::default();
        let mut buf = vec![0u8; 8192];
        let deadline = tokio::time::Instant::now() + timeout;
        let mut stopped = false;
        loop {
            let n = tokio::select! {
                r = out.read(&mut buf) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
                () = tokio::time::sleep_until(deadline) => { res.timed_out = true; break; }
            };
            let chunk = &buf[..n];
            let room = max_output.saturating_sub(res.bytes.len());
            res.bytes.extend_from_slice(&chunk[..n.min(room)]);
            if !on_chunk(&String::from_utf8_lossy(chunk)) {
                stopped = true;
                break;
            }
        }
        if res.timed_out || stopped {
            kill_group(pid);
            let _ = child.start_kill();
        }
        let status = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        res.exit_code = match status {
            Ok(Ok(s)) => s.code().unwrap_or(-1),
            _ => {
                kill_group(pid);
                -1
            }
        };
        res.text = String::from_utf8_lossy(&res.bytes).into_owned();
        if res.bytes.len() >= max_output && max_output > 0 {
            res.text.push_str("\n[output truncated]");
        }
        Ok(res)
    }
}

/// Kills the process group a child leads (it was started with `process_group(0)`).
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: signals the process group led by our own child.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// `s` as one single-quoted shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_injection_is_refused() {
        assert_eq!(
            Runtime::parse("docker-container:abc_1.2"),
            Ok(Runtime::Container {
                bin: "docker",
                id: "abc_1.2".into()
            })
        );
        assert!(
            Runtime::parse("podman-container:--privileged")
                .unwrap_err()
                .contains("invalid container id")
        );
        assert!(
            Runtime::parse("ssh:-oProxyCommand=touch /tmp/pwned")
                .unwrap_err()
                .contains("invalid ssh target")
        );
        assert!(
            Runtime::parse("fake:x")
                .unwrap_err()
                .contains("unknown tool runtime")
        );
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }
}
