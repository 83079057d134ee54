//! `airlock webhook`, `airlock watch` and `airlock batch`: work that starts from GitHub or from
//! a list, not from one `airlock run`. Parsing and rendering only; the work is
//! `airlock_supervisor::triggers`.
//!
//! Exit codes of `airlock batch`: the worst outcome of its issues, worst first: 2 an error
//! (the batch's own, or one run's), 3 an escalation, 5 a run parked by a budget, 4 an issue
//! skipped (not ready, or claimed by another worker), 0 every issue queued a pull request.

use airlock_policies::terminal::escaped;
use airlock_supervisor::progress::ProgressMode;
use airlock_supervisor::triggers::batch::{BatchIssues, BatchOptions, BatchReport, run_batch};
use airlock_supervisor::triggers::claims::worker_id;
use airlock_supervisor::triggers::shared_queue::{QueueLine, QueueWorkerOptions, drain};
use airlock_supervisor::triggers::watch::{WatchLine, WatchOptions, watch};
use airlock_supervisor::triggers::webhook::{WebhookLine, WebhookOptions, serve};
use airlock_supervisor::triggers::worker::{RunResult, WorkOutcome, Worker, check_lease};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What every triggered run shares.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The airlock.toml of the runs (tests, budgets, model, `[broker]`, `[github]`); default:
    /// $AIRLOCK_CONFIG, else ./airlock.toml.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Model spec of the runs; `[model] spec` when absent.
    #[arg(long)]
    model: Option<String>,
    /// How long a claim holds without renewal (renewed every third of it while a run goes
    /// on; a worker that dies loses its issues after this).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    lease: Duration,
}

/// Arguments of `airlock webhook`.
#[derive(Debug, Args)]
pub struct WebhookArgs {
    /// Where to listen, e.g. 127.0.0.1:8643 (behind the operator's TLS proxy); port 0 picks one.
    #[arg(long)]
    listen: std::net::SocketAddr,
    /// The environment variable holding the webhook's secret (as configured on GitHub, and as
    /// GitLab's secret token unless --gitlab-secret-env names another).
    #[arg(long)]
    secret_env: String,
    /// The environment variable holding GitLab's secret token, when it is not --secret-env's
    /// (GitLab sends it as it is in every delivery: a separate one is never GitHub's key).
    #[arg(long, value_name = "VAR")]
    gitlab_secret_env: Option<String>,
    /// The label that starts the default agent (`[agent] definition`, else issue-fixer); each
    /// agent of `[agent] triggered` is started by its own trigger.
    #[arg(long, default_value = "airlock")]
    label: String,
    /// Where the delivery log and the work queue are kept; default: the data directory's
    /// `webhook/`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// How many issue runs go on at once.
    #[arg(long, default_value_t = 1)]
    parallel: usize,
    /// Review pull requests: a `pull_request` event opened or synchronize (of a pull request
    /// airlock did not open) starts `airlock review` on it; its review is queued with the
    /// broker for an approver.
    #[arg(long)]
    review_pull_requests: bool,
    /// The repository to clone for the runs (a URL or a path); the issue's own repository on
    /// its forge when absent.
    #[arg(long)]
    clone: Option<String>,
    #[command(flatten)]
    worker: WorkerArgs,
}

/// Arguments of `airlock watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The repository: OWNER/REPO on GitHub, or gitlab:GROUP/NAME for a GitLab project (read
    /// with `[gitlab]` of airlock.toml).
    #[arg(long)]
    repo: String,
    /// The label that starts the default agent (`[agent] definition`, else issue-fixer);
    /// default: that agent's own trigger label. Each agent of `[agent] triggered` that a label
    /// starts is polled for its label too.
    #[arg(long)]
    label: Option<String>,
    /// The pause between two polls.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    interval: Duration,
    /// Poll once, work on what was found, and exit.
    #[arg(long)]
    once: bool,
    /// Put the ready issues on the broker's shared work queue for `airlock worker` (on any
    /// host) instead of running them here; only the default agent's label is polled.
    #[arg(long)]
    enqueue: bool,
    /// Poll the checks of airlock's open pull requests too: a failed check starts a follow-up
    /// when the broker takes it (for deployments no webhook reaches).
    #[arg(long)]
    ci_checks: bool,
    /// The repository to clone for the runs (a URL or a path); the issue's own repository on
    /// its forge when absent.
    #[arg(long)]
    clone: Option<String>,
    #[command(flatten)]
    worker: WorkerArgs,
}

/// Arguments of `airlock worker`.
#[derive(Debug, Args)]
pub struct QueueWorkerArgs {
    /// The broker to take issues from and submit to: `tls://HOST:PORT` (a broker on another
    /// host; the certificates are `[broker] tls_ca`, `tls_cert` and `tls_key`) or its Unix
    /// socket (`unix:PATH`, or a path); replaces where `[broker]` says the broker is.
    #[arg(long, value_name = "URL")]
    broker: Option<String>,
    /// The forge repository the queued issues are read from: OWNER/REPO on GitHub, or
    /// gitlab:GROUP/NAME for a GitLab project (the broker's repository name is
    /// `[broker] repository`, else OWNER/REPO or the project's path).
    #[arg(long)]
    repo: String,
    /// The repository to clone for the runs (a URL or a path); the issue's own repository on
    /// its forge when absent.
    #[arg(long)]
    clone: Option<String>,
    /// The pause before asking again when nothing is ready.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    interval: Duration,
    /// Stop when the queue has nothing ready instead of waiting for more.
    #[arg(long)]
    once: bool,
    #[command(flatten)]
    worker: WorkerArgs,
}

/// Arguments of `airlock batch`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["issues", "label"])))]
pub struct BatchArgs {
    /// The repository (a URL or a path): mirrored, pinned and indexed once for the batch.
    #[arg(long)]
    repo: String,
    /// The revision every run pins; the repository's HEAD when absent.
    #[arg(long)]
    commit: Option<String>,
    /// A list of issues, one per line: an issue file (relative to the list) or a GitHub issue.
    #[arg(long)]
    issues: Option<PathBuf>,
    /// The open GitHub issues with this label (--repo must then be a GitHub URL).
    #[arg(long)]
    label: Option<String>,
    /// How many runs go on at once.
    #[arg(long, default_value_t = 1)]
    parallel: usize,
    /// Fetch the repository into its mirror before pinning.
    #[arg(long)]
    fetch: bool,
    /// The agent of every run (a built-in name or a definition file); default: the agent of
    /// `[agent] triggered` that --label starts, else `[agent] definition`, else issue-fixer.
    #[arg(long)]
    agent: Option<String>,
    /// Print the batch report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    worker: WorkerArgs,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    airlock_audit::parse_duration(text)
}

fn worker(args: &WorkerArgs, kind: &str, clone: Option<String>) -> anyhow::Result<Worker> {
    Ok(Worker {
        config: args.config.clone(),
        model: args.model.clone(),
        exe: std::env::current_exe().context("locating the airlock binary for reader workers")?,
        clone,
        // Many runs share one terminal: each run's outcome line is what is shown.
        progress: ProgressMode::Quiet,
        holder: worker_id(kind),
        lease: check_lease(args.lease)?,
        broker: None,
    })
}

/// One line for an issue's outcome; every text from GitHub or a model shown escaped.
fn outcome_line(issue: &str, outcome: &WorkOutcome) -> String {
    let issue = escaped(issue);
    match outcome {
        WorkOutcome::Skipped { triage } => format!(
            "{issue} skipped: {} ({})",
            triage.state.label(),
            escaped(&triage.reason)
        ),
        WorkOutcome::ClaimedElsewhere { holder, state } => format!(
            "{issue} claimed elsewhere: {} by {}",
            serde_json::to_value(state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            escaped(holder)
        ),
        WorkOutcome::Ran {
            run_id,
            result,
            summary,
            claim_lost,
            ..
        } => {
            let what = match result {
                RunResult::PrQueued => "pull request queued",
                RunResult::Escalated => "escalated",
                RunResult::NotReady => "not ready",
                RunResult::Parked => "parked (airlock resume continues it)",
                RunResult::ReviewQueued => "review queued",
            };
            let lost = claim_lost
                .as_deref()
                .map(|l| format!(" (warning: {})", escaped(l)))
                .unwrap_or_default();
            format!(
                "{issue} {what}: {} [run {}]{lost}",
                escaped(summary),
                escaped(run_id)
            )
        }
        WorkOutcome::Failed { error } => format!("{issue} failed: {}", escaped(error)),
        WorkOutcome::Ignored { reason } => format!("{issue} ignored: {}", escaped(reason)),
    }
}

/// `airlock webhook`.
pub fn webhook(args: WebhookArgs) -> anyhow::Result<ExitCode> {
    let secret = std::env::var(&args.secret_env)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(
            || airlock_supervisor::triggers::TriggerError::SecretMissing {
                var: args.secret_env.clone(),
            },
        )?;
    let gitlab_secret = match &args.gitlab_secret_env {
        None => None,
        Some(var) => Some(
            std::env::var(var)
                .ok()
                .filter(|s| !s.is_empty())
                .ok_or_else(
                    || airlock_supervisor::triggers::TriggerError::SecretMissing {
                        var: var.clone(),
                    },
                )?
                .into_bytes(),
        ),
    };
    let state_dir = match args.state_dir {
        Some(d) => d,
        None => airlock_audit::data_dir()
            .context("finding the data directory (or pass --state-dir)")?
            .join("webhook"),
    };
    let worker = worker(&args.worker, "webhook", args.clone)?;
    let report: airlock_supervisor::triggers::webhook::Report =
        std::sync::Arc::new(|line: WebhookLine| match line {
            WebhookLine::Listening(addr) => eprintln!("airlock webhook: listening on {addr}"),
            WebhookLine::Delivery {
                delivery,
                status,
                reason,
            } => outln!(
                "delivery {}: {status} {}",
                escaped(&delivery),
                escaped(&reason)
            ),
            WebhookLine::Queued { path } => outln!("queued: {}", path.display()),
            WebhookLine::Worked { issue, outcome } => outln!("{}", outcome_line(&issue, &outcome)),
        });
    serve(
        WebhookOptions {
            listen: args.listen,
            secret: secret.into_bytes(),
            gitlab_secret,
            label: args.label,
            state_dir,
            parallel: args.parallel,
            review_pull_requests: args.review_pull_requests,
        },
        worker,
        report,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `airlock watch`.
pub fn watch_command(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let worker = worker(&args.worker, "watch", args.clone)?;
    let options = WatchOptions {
        repository: args.repo,
        label: args.label,
        interval: args.interval,
        once: args.once,
        enqueue: args.enqueue,
        ci_checks: args.ci_checks,
    };
    let mut report = |line: WatchLine| match line {
        WatchLine::Enqueued { issues, added } => outln!(
            "queued for the workers: {} ({added} new)",
            issues
                .iter()
                .map(|i| escaped(i).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        WatchLine::Polled { numbers } => eprintln!(
            "airlock watch: {} labelled open issue(s): {}",
            numbers.len(),
            numbers
                .iter()
                .map(|n| format!("#{n}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        WatchLine::PollFailed(e) => eprintln!("airlock watch: poll failed: {}", escaped(&e)),
        WatchLine::Worked { issue, outcome } => outln!("{}", outcome_line(&issue, &outcome)),
    };
    watch(&options, &worker, &mut report)?;
    Ok(ExitCode::SUCCESS)
}

/// `airlock worker`.
pub fn queue_worker(args: QueueWorkerArgs) -> anyhow::Result<ExitCode> {
    let mut worker = worker(&args.worker, "worker", args.clone)?;
    worker.broker = args.broker;
    let options = QueueWorkerOptions {
        forge_repo: args.repo,
        interval: args.interval,
        once: args.once,
    };
    let mut report = |line: QueueLine| match line {
        QueueLine::Idle => eprintln!("airlock worker: no ready issue in the queue"),
        QueueLine::BrokerFailed(e) => {
            eprintln!("airlock worker: asking the broker failed: {}", escaped(&e))
        }
        QueueLine::Worked { issue, outcome } => outln!("{}", outcome_line(&issue, &outcome)),
    };
    drain(&options, &worker, &mut report)?;
    Ok(ExitCode::SUCCESS)
}

/// `airlock batch`.
pub fn batch(args: BatchArgs) -> anyhow::Result<ExitCode> {
    let issues = match (args.issues, args.label) {
        (Some(file), None) => BatchIssues::File(file),
        (None, Some(label)) => BatchIssues::Label(label),
        _ => anyhow::bail!("give exactly one of --issues FILE and --label NAME"),
    };
    let worker = worker(&args.worker, "batch", None)?;
    let report = run_batch(
        &BatchOptions {
            repo: args.repo,
            commit: args.commit,
            issues,
            parallel: args.parallel,
            fetch: args.fetch,
            agent: args.agent,
        },
        &worker,
    )?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("encoding the batch report")?
        );
    } else {
        print_table(&report);
    }
    Ok(ExitCode::from(report.exit_code))
}

fn print_table(report: &BatchReport) {
    let mut table = comfy_table::Table::new();
    table
        .load_style(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
        .set_header(["ISSUE", "TRIAGE", "OUTCOME", "DETAIL", "RUN", "COST"]);
    for entry in &report.issues {
        let issue = entry.issue_id.as_deref().unwrap_or(&entry.source);
        let triage = entry
            .triage
            .as_ref()
            .map(|t| t.state.label().to_owned())
            .unwrap_or_else(|| "-".to_owned());
        let (outcome, detail, run, cost) = match &entry.outcome {
            WorkOutcome::Skipped { triage } => (
                "skipped",
                triage.reason.clone(),
                "-".to_owned(),
                String::new(),
            ),
            WorkOutcome::ClaimedElsewhere { holder, .. } => (
                "claimed elsewhere",
                format!("by {holder}"),
                "-".to_owned(),
                String::new(),
            ),
            WorkOutcome::Ran {
                run_id,
                result,
                summary,
                cost_usd,
                ..
            } => (
                match result {
                    RunResult::PrQueued => "pr queued",
                    RunResult::Escalated => "escalated",
                    RunResult::NotReady => "not ready",
                    RunResult::Parked => "parked",
                    RunResult::ReviewQueued => "review queued",
                },
                summary.clone(),
                run_id.clone(),
                cost_usd.map(|c| format!("${c:.4}")).unwrap_or_default(),
            ),
            WorkOutcome::Failed { error } => {
                ("failed", error.clone(), "-".to_owned(), String::new())
            }
            WorkOutcome::Ignored { reason } => {
                ("ignored", reason.clone(), "-".to_owned(), String::new())
            }
        };
        let mut detail = escaped(&detail).into_owned();
        if detail.chars().count() > 80 {
            detail = detail.chars().take(79).collect::<String>() + "…";
        }
        table.add_row([
            escaped(issue).into_owned(),
            triage,
            outcome.to_owned(),
            detail,
            escaped(&run).into_owned(),
            cost,
        ]);
    }
    outln!("{table}");
    outln!(
        "{} issue(s) on {} at {}; exit {}",
        report.issues.len(),
        escaped(&report.repo),
        report.base_commit,
        report.exit_code
    );
}
