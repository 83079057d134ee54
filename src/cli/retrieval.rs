//! `airlock index|search|map|eval`. Owned by the checkout/codegraph work.

use clap::{Args, Subcommand};
use std::process::ExitCode;

/// Arguments of `airlock index`.
#[derive(Debug, Args)]
pub struct IndexArgs {}
/// Arguments of `airlock search`.
#[derive(Debug, Args)]
pub struct SearchArgs {}
/// Arguments of `airlock map`.
#[derive(Debug, Args)]
pub struct MapArgs {}
/// Subcommands of `airlock eval`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {}

pub fn index(_args: IndexArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("index is not built yet")
}
pub fn search(_args: SearchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("search is not built yet")
}
pub fn map(_args: MapArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("map is not built yet")
}
pub fn eval(cmd: EvalCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
