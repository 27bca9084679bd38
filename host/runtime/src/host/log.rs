//! `memoria:llm/log`: guest log lines go to the host's stderr, tagged with the namespace (the
//! guest cannot choose the tag).

use crate::TenantState;
use crate::bindings::memoria::llm::log::{Host, Level};

impl Host for TenantState {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let line: String = message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        eprintln!("[ns {}] {level}: {line}", self.ns.ns.name);
        Ok(())
    }
}
