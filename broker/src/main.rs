//! `airlock-broker`: thin entry point; all logic lives in the library.

fn main() -> std::process::ExitCode {
    // The sandbox re-executes this binary as its set-up helper; that must happen before
    // anything else (argument parsing, threads) touches the process.
    airlock_sandbox::helper::run_if_requested();
    airlock_broker::cli::run()
}
