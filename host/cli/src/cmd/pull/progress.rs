//! Progress bars of `memoria pull` (indicatif, drawn on stderr only when it is a terminal; a
//! plain line instead otherwise, so logs say what happened).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A byte-count bar of `total` bytes (a spinner when `total` is 0: unknown).
pub fn bytes(total: u64, msg: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (bar, template) = if total > 0 {
        (
            ProgressBar::new(total),
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
    } else {
        (
            ProgressBar::new_spinner(),
            "{msg} {spinner} {bytes} {bytes_per_sec}",
        )
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(msg.to_string());
    bar
}
