//! `airlock audit verify|injections|show`. Owned by the audit work.

use clap::Subcommand;
use std::process::ExitCode;

/// Subcommands of `airlock audit`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {}

pub fn run(cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
