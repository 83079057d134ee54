//! `airlock run` (one issue to a queued pull request or an escalation) and the hidden
//! `airlock reader-worker` that the supervisor starts inside the sandbox.
//!
//! `airlock run` streams its progress on stderr: turn N of M with the tokens and cost so far,
//! each tool with its one-line result; JSON lines with `--json`.
//!
//! Exit codes of `airlock run`: 0 a pull request is queued for a human; 3 the run escalated
//! (by the model, a budget, or the confidence floor); 4 triage found the issue not ready
//! (needs-info or needs-triage; no model call was made); 2 an operational error.

use airlock_supervisor::RunEnd;
use airlock_supervisor::github::IssueSource;
use airlock_supervisor::progress::ProgressMode;
use airlock_supervisor::runner::{self, Overrides, RunArgs as SupervisorArgs};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `airlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The repository: a local path or a URL (mirrored once into the checkout cache). For a
    /// GitHub issue, defaults to the issue's repository.
    #[arg(long)]
    repo: Option<String>,
    /// Any revision; it is pinned to a 40-hex commit before anything else. For a GitHub issue,
    /// defaults to the head of the default branch at intake (recorded in the outcome).
    #[arg(long)]
    commit: Option<String>,
    /// The issue: a GitHub issue (https://github.com/OWNER/REPO/issues/N or
    /// github:OWNER/REPO#N, fetched with `[github]` of airlock.toml), or a JSON file or
    /// Markdown with front matter (id, title, labels); `-` for stdin.
    #[arg(long, value_parser = parse_issue_source)]
    issue: IssueSource,
    /// Model spec (openai:MODEL, anthropic:MODEL, ollama:MODEL, scripted:PATH, replay:PATH, ...).
    #[arg(long)]
    model: Option<String>,
    /// The repository's airlock.toml (tests, allowlist, budgets, model, broker, paths);
    /// default: $AIRLOCK_CONFIG, else ./airlock.toml when it exists, else built-in defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Fetch the repository into airlock's mirror of it before pinning (the mirror is reused
    /// as it is otherwise, so a local repository's new commits are not seen without it).
    #[arg(long)]
    fetch: bool,
    /// Keep the worktree of a run that fails (by default it is removed; its records stay).
    #[arg(long)]
    keep: bool,
    /// Print the outcome document as JSON instead of a summary, and stream progress on stderr
    /// as JSON lines (one object per event) instead of readable lines.
    #[arg(long)]
    json: bool,
}

/// Arguments of the hidden `airlock reader-worker`.
#[derive(Debug, Args)]
pub struct ReaderWorkerArgs {
    /// The read-only checkout.
    #[arg(long)]
    root: PathBuf,
    /// The codegraph index directory (read-only).
    #[arg(long)]
    index_dir: PathBuf,
    /// The index's name in the index directory (the supervisor passes its mirror's); the
    /// checkout's own when absent.
    #[arg(long)]
    index_key: Option<String>,
    /// The pinned commit.
    #[arg(long)]
    commit: String,
    /// Where the supervisor's messages arrive (a FIFO); stdin when absent.
    #[arg(long)]
    input: Option<PathBuf>,
}

fn parse_issue_source(given: &str) -> Result<IssueSource, String> {
    IssueSource::parse(given).map_err(|e| e.to_string())
}

/// `airlock run`.
/// `quiet` (the global `-q`) turns the progress stream off.
pub fn run(args: RunArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the airlock binary for reader workers")?;
    let report = runner::run_issue(
        &SupervisorArgs {
            repo: args.repo,
            commit: args.commit,
            issue: args.issue,
            model: args.model,
            config: args.config,
            exe,
            fetch: args.fetch,
            keep: args.keep,
            progress: if quiet {
                ProgressMode::Quiet
            } else if args.json {
                ProgressMode::Json
            } else {
                ProgressMode::Human
            },
        },
        Overrides::default(),
    )?;
    if args.json {
        let text = std::fs::read_to_string(&report.outcome_path)
            .with_context(|| format!("reading {}", report.outcome_path.display()))?;
        out!("{text}");
    } else {
        match &report.end {
            RunEnd::NotReady(triage) => {
                outln!("not ready: {} ({})", triage.state.label(), triage.reason);
            }
            RunEnd::Finished {
                outcome,
                pr_queued,
                stop,
            } => {
                let summary = &outcome.summary;
                if *pr_queued {
                    outln!("pull request queued for review: {summary}");
                } else {
                    outln!("escalated ({stop}): {summary}");
                }
            }
        }
        outln!("run: {} at {}", report.run_id, report.base_commit);
        outln!("cost: {}", describe_cost(&report.usage));
        outln!("outcome: {}", report.outcome_path.display());
        outln!("trajectory: {}", report.trajectory_path.display());
    }
    if let Some(problem) = &report.model_finish_problem {
        eprintln!("airlock: warning: {problem}");
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// What the run's model calls cost, for the operator: calls, tokens (those read from the
/// prompt cache named) and dollars.
fn describe_cost(u: &airlock_supervisor::runner::ModelUsage) -> String {
    let priced = match (u.unpriced_calls, u.calls) {
        (0, _) => format!("${:.4}", u.cost_usd),
        (n, all) if n == all => "no price configured for the model".to_string(),
        (n, _) => format!("${:.4} ({n} calls unpriced)", u.cost_usd),
    };
    format!(
        "{} model calls, {} tokens in ({} read from the cache, {} written to it), {} out, {priced}",
        u.calls, u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens
    )
}

/// `airlock reader-worker`: serve one reader over stdout and the input FIFO (or stdin).
pub fn reader_worker(args: ReaderWorkerArgs) -> anyhow::Result<ExitCode> {
    let tools = airlock_reader::repo_tools::CheckoutTools::open(
        &args.root,
        &args.index_dir,
        args.index_key.as_deref(),
        &args.commit,
    )
    .map_err(anyhow::Error::msg)
    .context("opening the checkout for the reader")?;
    let stdout = std::io::stdout().lock();
    match &args.input {
        Some(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("opening reader input {}", path.display()))?;
            airlock_reader::run_worker(std::io::BufReader::new(file), stdout, &tools)?;
        }
        None => {
            airlock_reader::run_worker(std::io::stdin().lock(), stdout, &tools)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
