//! `airlock review`: review one pull request with the reviewer agent; its review is queued
//! with the broker for an approver, who posts it on GitHub or denies it.

use airlock_supervisor::RunEnd;
use airlock_supervisor::review::{self, ReviewArgs as SupervisorArgs};
use airlock_supervisor::runner::Overrides;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `airlock review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The pull request: https://github.com/OWNER/REPO/pull/N or github:OWNER/REPO#N, read
    /// through the REST API of `[github]` in airlock.toml (api_url, token_env).
    #[arg(long)]
    pr: String,
    /// The repository to fetch its commits from (a path or a URL); default: the pull request's
    /// own repository on its forge.
    #[arg(long)]
    repo: Option<String>,
    /// Model spec (openai:MODEL, anthropic:MODEL, ollama:MODEL, scripted:PATH, replay:PATH, ...).
    #[arg(long)]
    model: Option<String>,
    /// The reviewing agent: pr-reviewer (the default) or the path of a definition file that
    /// ends with submit_review.
    #[arg(long)]
    agent: Option<String>,
    /// airlock.toml (model, broker, github, paths); found as for `airlock run`.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the outcome document as JSON, and stream progress as JSON lines.
    #[arg(long)]
    json: bool,
}

/// `airlock review`.
pub fn review(args: ReviewArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the airlock binary for reader workers")?;
    let report = review::review_pull_request(
        &SupervisorArgs {
            pr: args.pr,
            repo: args.repo,
            model: args.model,
            agent: args.agent,
            config: args.config,
            exe,
            progress: super::run::progress_mode(quiet, args.json),
        },
        Overrides::default(),
    )?;
    if args.json {
        let text = std::fs::read_to_string(&report.outcome_path)
            .with_context(|| format!("reading {}", report.outcome_path.display()))?;
        out!("{text}");
    } else {
        match &report.end {
            RunEnd::Reviewed {
                queue_id: Some(id), ..
            } => outln!(
                "review of {} queued as broker item {id}: `airlock-broker show {id}`, then \
                 approve (posts it on GitHub) or deny",
                report.pull
            ),
            RunEnd::Reviewed { stop, .. } => outln!(
                "no review queued: {}",
                airlock_policies::terminal::escaped(stop)
            ),
            _ => outln!("the review run ended without a review"),
        }
        outln!("run: {}", report.run_id);
        outln!("outcome: {}", report.outcome_path.display());
        outln!("trajectory: {}", report.trajectory_path.display());
    }
    if let Some(problem) = &report.model_finish_problem {
        eprintln!("airlock: warning: {problem}");
    }
    Ok(ExitCode::from(report.end.exit_code()))
}
