//! One sandboxed run from a small binary: the same default world as `airlock sandbox run`
//! (system directories read-only, every layer), output streamed, the command's exit status as
//! its own. `bench/sandbox.sh` times it beside the `airlock` CLI to show what the CLI's size
//! costs at start.
//!
//!   cargo run --release -p airlock-sandbox --example run_once -- CMD [ARGS]

use airlock_sandbox::SandboxBuilder;
use std::process::ExitCode;

fn main() -> ExitCode {
    airlock_sandbox::helper::run_if_requested();
    let command: Vec<String> = std::env::args().skip(1).collect();
    if command.is_empty() {
        eprintln!("usage: run_once CMD [ARGS]");
        return ExitCode::from(2);
    }
    let result = SandboxBuilder::new()
        .system_ro()
        .build()
        .and_then(|sandbox| {
            sandbox.run_streaming(
                &command,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )
        });
    match result {
        Ok(summary) => match (summary.exit_code, summary.signal) {
            (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
            (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
            (None, None) => ExitCode::from(125),
        },
        Err(e) => {
            eprintln!("run_once: {e}");
            ExitCode::from(125)
        }
    }
}
