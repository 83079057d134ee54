//! `airlock sandbox run` and `airlock doctor`. Owned by the sandbox work.

use clap::{Args, Subcommand};
use std::process::ExitCode;

/// Arguments of `airlock doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// Subcommands of `airlock sandbox`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {}

pub fn doctor(_args: DoctorArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("doctor is not built yet")
}

pub fn run(cmd: SandboxCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
