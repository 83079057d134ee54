//! `airlock demo`: its arguments, and its result as the exit code. The demo itself is
//! [`crate::demo`].
//!
//! Exit codes: 0 every scenario behaved as expected; 1 at least one did not; 2 the demo could
//! not run (a missing binary, git or python3).

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::demo::{DemoOptions, DemoResult};

/// Exit code when a scenario did not behave as expected.
const EXIT_UNEXPECTED: u8 = 1;

/// Arguments of `airlock demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to build the example repositories, the broker's state and the run records
    /// (created if missing; must be empty). Kept afterwards. Default: a fresh temporary
    /// directory, removed at the end unless --keep.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Keep the temporary work directory (the broker's queue, the audit logs, the runs).
    #[arg(long)]
    keep: bool,
}

/// `airlock demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let options = DemoOptions {
        workdir: args.workdir,
        keep: args.keep,
    };
    Ok(match crate::demo::run(&options)? {
        DemoResult::AllAsExpected => ExitCode::SUCCESS,
        DemoResult::SomeUnexpected => ExitCode::from(EXIT_UNEXPECTED),
    })
}
