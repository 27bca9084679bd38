//! Case counts: each harness has a default sized for `cargo test` in a debug build; the
//! `MEMORIA_FUZZ_CASES` environment variable replaces it for long runs.

use proptest::test_runner::{Config, FileFailurePersistence};

/// The environment variable that sets every harness's case count.
pub const CASES_VAR: &str = "MEMORIA_FUZZ_CASES";

/// The case count: `MEMORIA_FUZZ_CASES` when it is a positive number, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var(CASES_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// A proptest configuration running [`cases`]`(default)` cases; failures are kept next to the
/// harness's source file (`<file>.proptest-regressions`) and replayed first.
pub fn config(default: u32) -> Config {
    Config {
        cases: cases(default),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_holds_without_the_variable_and_the_variable_wins_when_set() {
        // The test process may run with the variable set; the expectation follows it.
        let expected = std::env::var(CASES_VAR)
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(123);
        assert_eq!(cases(123), expected);
        assert_eq!(config(123).cases, expected);
    }
}
