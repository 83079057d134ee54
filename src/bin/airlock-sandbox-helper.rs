//! The sandbox's dedicated set-up helper: a small binary that sandboxed runs start instead of
//! re-executing their (much larger) caller, because it starts and forks faster.

fn main() -> std::process::ExitCode {
    airlock_sandbox::helper::run_if_requested();
    eprintln!(
        "{}: this is airlock's sandbox set-up helper; airlock starts it for each sandboxed run. \
         Run `airlock sandbox run -- CMD` instead.",
        airlock_sandbox::helper::HELPER_BIN
    );
    std::process::ExitCode::from(2)
}
