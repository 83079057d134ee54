//! The `airlock` operator CLI. Thin: all logic lives in the library crates.

fn main() -> std::process::ExitCode {
    // The sandbox may re-execute this binary as its set-up helper (when the dedicated
    // airlock-sandbox-helper is not beside it); that path must run before anything else
    // (argument parsing, threads) touches the process.
    airlock_sandbox::helper::run_if_requested();
    airlock::cli::run()
}
