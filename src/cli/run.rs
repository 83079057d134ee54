//! `airlock run` (one issue to a queued pull request or an escalation) and the hidden
//! `airlock reader-worker` that the supervisor starts inside the sandbox.
//!
//! `airlock run` streams its progress on stderr: turn N of M with the tokens and cost so far,
//! each tool with its one-line result; JSON lines with `--json`.
//!
//! Exit codes of `airlock run` and `airlock resume`: 0 a pull request is queued for a human; 3
//! the run escalated (by the model, a budget that does not park, or the confidence floor); 4
//! triage found the issue not ready (needs-info or needs-triage; no model call was made); 5 a
//! budget (`max_turns`, `max_full_runs`, the model's) stopped the run and it is parked for
//! `airlock resume`; 2 an operational error (an expired parked run included).

use airlock_supervisor::RunEnd;
use airlock_supervisor::github::IssueSource;
use airlock_supervisor::park::Additions;
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
    /// GitHub or GitLab issue, defaults to the issue's repository.
    #[arg(long)]
    repo: Option<String>,
    /// Any revision; it is pinned to a 40-hex commit before anything else. For a forge issue,
    /// defaults to the head of the default branch at intake (recorded in the outcome).
    #[arg(long)]
    commit: Option<String>,
    /// The issue: a GitHub issue (https://github.com/OWNER/REPO/issues/N or
    /// github:OWNER/REPO#N, fetched with `[github]` of airlock.toml), a GitLab issue
    /// (https://HOST/GROUP/NAME/-/issues/N or gitlab:GROUP/NAME#N, with `[gitlab]`), or a JSON
    /// file or Markdown with front matter (id, title, labels); `-` for stdin.
    #[arg(long, value_parser = parse_issue_source, required_unless_present = "follow_up")]
    issue: Option<IssueSource>,
    /// Follow up queue item N, on which a reviewer requested changes (`airlock-broker
    /// request-changes`): the broker gives the issue, the feedback and the head of the branch
    /// it pushed, where the run starts; approved, its commit goes to the same branch and pull
    /// request. Needs --repo (where the branch was pushed); not --commit.
    #[arg(long, value_name = "N", conflicts_with_all = ["issue", "commit"])]
    follow_up: Option<i64>,
    /// Model spec (openai:MODEL, anthropic:MODEL, ollama:MODEL, scripted:PATH, replay:PATH, ...).
    #[arg(long)]
    model: Option<String>,
    /// The agent: a built-in one (issue-fixer, docs-writer; `airlock agents list`) or the path
    /// of a definition file; default: `[agent] definition` of airlock.toml, else issue-fixer.
    #[arg(long, value_name = "NAME|FILE")]
    agent: Option<String>,
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
    /// Run even though the issue has a queue item still waiting for a human (by default the
    /// run is refused, naming the item).
    #[arg(long)]
    again: bool,
    /// Print the outcome document as JSON instead of a summary, and stream progress on stderr
    /// as JSON lines (one object per event) instead of readable lines.
    #[arg(long)]
    json: bool,
}

/// Arguments of `airlock resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The parked run's id (printed by `airlock run`, the name of its directory under the runs
    /// root).
    run: String,
    /// More supervisor turns (for a run parked on max_turns).
    #[arg(long, default_value_t = 0)]
    add_turns: u32,
    /// More US dollars of model spend (for a run parked on the model's max_cost_usd).
    #[arg(long, default_value_t = 0.0)]
    add_usd: f64,
    /// More full test runs (for a run parked on max_full_runs).
    #[arg(long, default_value_t = 0)]
    add_full_runs: u32,
    /// More model tokens (for a run parked on the model's max_tokens).
    #[arg(long, default_value_t = 0)]
    add_tokens: u64,
    /// More model calls (for a run parked on the model's max_calls).
    #[arg(long, default_value_t = 0)]
    add_calls: u64,
    /// Model spec; default: the one the run started with.
    #[arg(long)]
    model: Option<String>,
    /// airlock.toml: where runs are kept and how long a parked run waits (`[budgets]
    /// park_max_age`); found as for `airlock run`. The run keeps the settings it started with.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Keep the worktree if the resumed run fails.
    #[arg(long)]
    keep: bool,
    /// Print the outcome document as JSON, and stream progress as JSON lines.
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
    /// A reference repository the reader may read as `@reference/SLUG/...`: SLUG=DIR, the
    /// directory of its materialised commit (read-only). Repeatable.
    #[arg(long, value_parser = parse_reference)]
    reference: Vec<(String, PathBuf)>,
}

fn parse_reference(given: &str) -> Result<(String, PathBuf), String> {
    match given.split_once('=') {
        Some((slug, dir)) if !slug.is_empty() && !dir.is_empty() => {
            Ok((slug.to_owned(), PathBuf::from(dir)))
        }
        _ => Err(format!(
            "{given:?} is not SLUG=DIR (the reference's slug, `=`, its directory)"
        )),
    }
}

fn parse_issue_source(given: &str) -> Result<IssueSource, String> {
    IssueSource::parse(given).map_err(|e| e.to_string())
}

/// `airlock run`.
/// `quiet` (the global `-q`) turns the progress stream off.
pub fn run(args: RunArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the airlock binary for reader workers")?;
    let report = runner::run_issue_with(
        &SupervisorArgs {
            repo: args.repo,
            commit: args.commit,
            issue: match (args.issue, args.follow_up) {
                (Some(issue), _) => issue,
                (None, Some(queue_id)) => IssueSource::FollowUp(queue_id),
                (None, None) => anyhow::bail!("--issue or --follow-up is needed"),
            },
            model: args.model,
            agent: args.agent,
            config: args.config,
            exe,
            fetch: args.fetch,
            keep: args.keep,
            progress: progress_mode(quiet, args.json),
        },
        Overrides::default(),
        if args.again {
            runner::OpenItems::Allow
        } else {
            runner::OpenItems::Refuse
        },
    )?;
    report_run(&report, args.json)
}

pub(crate) fn progress_mode(quiet: bool, json: bool) -> ProgressMode {
    if quiet {
        ProgressMode::Quiet
    } else if json {
        ProgressMode::Json
    } else {
        ProgressMode::Human
    }
}

/// `airlock resume`.
pub fn resume(args: ResumeArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the airlock binary for reader workers")?;
    let report = runner::resume_run(
        &runner::ResumeArgs {
            run_id: args.run,
            add: Additions {
                turns: args.add_turns,
                full_runs: args.add_full_runs,
                usd: args.add_usd,
                tokens: args.add_tokens,
                calls: args.add_calls,
            },
            model: args.model,
            config: args.config,
            exe,
            keep: args.keep,
            progress: progress_mode(quiet, args.json),
        },
        Overrides::default(),
    )?;
    report_run(&report, args.json)
}

/// Print what a run ended with (the outcome document with `json`) and return its exit code.
fn report_run(report: &runner::RunReport, json: bool) -> anyhow::Result<ExitCode> {
    if json {
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
                // The model's words: escaped for the terminal like every agent text.
                let summary = airlock_policies::terminal::escaped(&outcome.summary);
                if *pr_queued {
                    outln!("pull request queued for review: {summary}");
                } else {
                    outln!("escalated ({stop}): {summary}");
                }
            }
            RunEnd::Parked {
                outcome,
                stop,
                parked,
            } => {
                let summary = airlock_policies::terminal::escaped(&outcome.summary);
                outln!("{stop}: {summary}");
                outln!(
                    "resume: airlock resume {} {}",
                    report.run_id,
                    parked.budget.flag()
                );
            }
            RunEnd::Reviewed { queue_id, stop } => match queue_id {
                Some(id) => outln!("review queued as broker item {id}"),
                None => outln!(
                    "no review queued: {}",
                    airlock_policies::terminal::escaped(stop)
                ),
            },
        }
        outln!("run: {} at {}", report.run_id, report.base_commit);
        outln!("cost: {}", describe_cost(&report.usage));
        outln!("outcome: {}", report.outcome_path.display());
        outln!("trajectory: {}", report.trajectory_path.display());
        // Last, where the eye lands: the item and the command that shows it.
        if let Some(id) = report.queue_id {
            outln!("queue item: {id} (show it with: airlock-broker show {id})");
        }
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
    let mut tools = airlock_reader::repo_tools::CheckoutTools::open(
        &args.root,
        &args.index_dir,
        args.index_key.as_deref(),
        &args.commit,
    )
    .map_err(anyhow::Error::msg)
    .context("opening the checkout for the reader")?;
    for (slug, dir) in &args.reference {
        tools = tools
            .with_reference(slug, dir)
            .map_err(anyhow::Error::msg)
            .context("opening a reference repository for the reader")?;
    }
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
