//! The `memoria` binary: everything lives in the library so tests can run the same code.

fn main() -> std::process::ExitCode {
    memoria::main()
}
