//! The `memoria` CLI, built inside the test package so integration tests can spawn it.

fn main() -> std::process::ExitCode {
    memoria::main()
}
