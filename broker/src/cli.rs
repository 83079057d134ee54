//! The `airlock-broker` command line: `serve` for supervisors, and the approver's `queue`,
//! `show`, `approve`, `deny`, `publish`, `abandon` and `expire`.
//!
//! Exit codes: 0 done; 1 the action was refused (unknown item, wrong state, bad reason);
//! 2 configuration or operational failure.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::BrokerConfig;
use crate::error::Error;
use crate::publish::GitHubForge;
use crate::rules::PolicyRules;
use crate::sandboxed::SandboxExecutor;
use crate::service::{AuditJournal, Broker, unix_now};
use crate::store::{QueueItem, SqliteStore};

/// Exit code when the requested action was refused.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code for configuration and operational failures.
pub const EXIT_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "airlock-broker",
    version,
    about = "Checks every open_pr claim, runs the witness tests and queues pull requests for a human."
)]
struct Cli {
    /// The broker configuration (default: $AIRLOCK_BROKER_CONFIG, else /etc/airlock/broker.toml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Listen on the configured Unix socket for supervisors.
    Serve,
    /// List the queue as a table.
    Queue,
    /// Show one queued pull request: diff, arguments verbatim, test evidence, flags.
    Show {
        /// Queue item id.
        id: i64,
        /// Colour the diff.
        #[arg(long, value_enum, default_value = "auto")]
        color: Color,
    },
    /// Approve a queued pull request: commit, push, and open the draft pull request.
    Approve {
        /// Queue item id.
        id: i64,
    },
    /// Deny a queued pull request; the reason goes back to the run.
    Deny {
        /// Queue item id.
        id: i64,
        /// One line saying why (required).
        #[arg(long)]
        reason: String,
    },
    /// Retry the publication (commit, push, draft pull request) of an approved item whose
    /// publication failed (`publish_failed`).
    Publish {
        /// Queue item id.
        id: i64,
    },
    /// End an item whose publication failed: final, recorded with who and why; the run is
    /// told APPROVAL_DENIED with the reason.
    Abandon {
        /// Queue item id.
        id: i64,
        /// One line saying why (required).
        #[arg(long)]
        reason: String,
    },
    /// Expire queued pull requests older than the configured queue age.
    Expire,
}

fn config_path(cli: &Cli) -> PathBuf {
    cli.config
        .clone()
        .or_else(|| std::env::var_os("AIRLOCK_BROKER_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/airlock/broker.toml"))
}

/// Build the production broker for `config`.
pub fn production_broker(config: BrokerConfig) -> crate::Result<Broker> {
    let store = SqliteStore::open(&config.state_db)?;
    let rules = PolicyRules::load(config.policy.as_deref())?;
    let journal = AuditJournal::open(&config.audit_log)?;
    let executor = SandboxExecutor::new(
        config.witness_ro.clone(),
        config
            .witness_env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    Ok(Broker::new(
        config,
        Box::new(store),
        Box::new(rules),
        Box::new(executor),
        Box::new(journal),
        Box::new(GitHubForge::default()),
    ))
}

fn reviewer() -> String {
    std::env::var("AIRLOCK_REVIEWER")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Parse the process arguments and run; returns the exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let path = config_path(&cli);
    let result = BrokerConfig::load(&path)
        .and_then(production_broker)
        .and_then(|broker| dispatch(broker, cli.command));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("airlock-broker: error: {err}");
            let refused = matches!(
                err,
                Error::UnknownQueueItem(_)
                    | Error::WrongState { .. }
                    | Error::BadReason
                    | Error::MissingForgeToken { .. }
            );
            ExitCode::from(if refused { EXIT_REFUSED } else { EXIT_ERROR })
        }
    }
}

fn dispatch(broker: Broker, command: Command) -> crate::Result<()> {
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::Io {
        context: "writing to stdout".to_owned(),
        source: e,
    };
    match command {
        Command::Serve => {
            // Neither a broken repository nor a failing publication keeps `serve` down: each is
            // reported here and fails only what depends on it.
            for (repository, problem) in broker.check_repositories() {
                eprintln!("airlock-broker: repository {repository:?}: {problem}");
            }
            let resumed = broker.resume_publications();
            if !resumed.is_empty() {
                eprintln!("airlock-broker: resumed publication of queue items {resumed:?}");
            }
            let work_dir = broker.config().witness_work_dir();
            let listener = crate::server::bind(&broker.config().socket, || {
                crate::witness::remove_stale_scratch(&work_dir).map(|_| ())
            })?;
            eprintln!(
                "airlock-broker: listening on {}",
                broker.config().socket.display()
            );
            let broker = Arc::new(broker);
            let resuming = broker.clone();
            std::thread::spawn(move || {
                if let Err(e) = resuming.resume_intakes() {
                    eprintln!("airlock-broker: resuming interrupted intakes: {e}");
                }
            });
            crate::server::serve(broker, listener)
        }
        Command::Queue => {
            let items = broker.queue()?;
            write!(out, "{}", render_queue(&items, unix_now())).map_err(w)
        }
        Command::Show { id, color } => {
            let item = broker.queue_item(id)?;
            let colored = match color {
                Color::Always => true,
                Color::Never => false,
                Color::Auto => std::io::stdout().is_terminal(),
            };
            write!(out, "{}", render_item(&item, colored)).map_err(w)?;
            let score = SqliteStore::open(&broker.config().state_db)?.judge_score(id)?;
            write!(out, "{}", render_judge_score(score.as_ref())).map_err(w)
        }
        Command::Approve { id } => {
            let item = broker.approve(id, &reviewer())?;
            write_published(&mut out, "approved", &item).map_err(w)
        }
        Command::Publish { id } => {
            let item = broker.publish(id)?;
            write_published(&mut out, "published", &item).map_err(w)
        }
        Command::Abandon { id, reason } => {
            let item = broker.abandon(id, &reviewer(), &reason)?;
            writeln!(
                out,
                "abandoned {}: {}",
                item.id,
                item.abandon_reason.unwrap_or_default()
            )
            .map_err(w)
        }
        Command::Deny { id, reason } => {
            let item = broker.deny(id, &reviewer(), &reason)?;
            writeln!(
                out,
                "denied {}: {}",
                item.id,
                item.reason.unwrap_or_default()
            )
            .map_err(w)
        }
        Command::Expire => {
            let expired = broker.expire()?;
            for item in expired {
                writeln!(out, "expired {} (run {})", item.id, item.run_id).map_err(w)?;
            }
            Ok(())
        }
    }
}

fn write_published(out: &mut impl Write, verb: &str, item: &QueueItem) -> std::io::Result<()> {
    writeln!(
        out,
        "{verb} {}: pushed {} at {}{}",
        item.id,
        item.branch.as_deref().unwrap_or("?"),
        item.commit.as_deref().unwrap_or("?"),
        item.pr_url
            .as_deref()
            .map(|u| format!("; draft pull request {u}"))
            .unwrap_or_default()
    )
}

fn age(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The queue as a table: id, status, age, repository, issue, flags, title.
pub fn render_queue(items: &[QueueItem], now: i64) -> String {
    let mut rows = vec![[
        "ID".to_owned(),
        "STATUS".to_owned(),
        "AGE".to_owned(),
        "REPOSITORY".to_owned(),
        "ISSUE".to_owned(),
        "FLAGS".to_owned(),
        "TITLE".to_owned(),
    ]];
    for i in items {
        rows.push([
            i.id.to_string(),
            i.status.as_str().to_owned(),
            age(now - i.queued_at),
            i.item.repository.clone(),
            i.item.issue_id.clone(),
            i.item.flags.len().to_string(),
            i.item.title.clone(),
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(n, (cell, w))| {
                if n == 6 {
                    cell.clone()
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn colour_diff(diff: &str) -> String {
    let mut out = String::new();
    for line in diff.lines() {
        let code =
            if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
                "\x1b[1m"
            } else if line.starts_with('+') {
                "\x1b[32m"
            } else if line.starts_with('-') {
                "\x1b[31m"
            } else if line.starts_with("@@") {
                "\x1b[36m"
            } else {
                ""
            };
        if code.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(code);
            out.push_str(line);
            out.push_str("\x1b[0m");
        }
        out.push('\n');
    }
    out
}

/// One queue item for the approver.
pub fn render_item(item: &QueueItem, colored: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "queue item {}  [{}]\n",
        item.id,
        item.status.as_str()
    ));
    out.push_str(&format!("run:        {}\n", item.run_id));
    out.push_str(&format!(
        "repository: {} at {}\n",
        item.item.repository, item.item.base_commit
    ));
    out.push_str(&format!("issue:      {}\n", item.item.issue_id));
    out.push_str(&format!("title:      {}\n", item.item.title));
    if let Some(reason) = &item.reason {
        out.push_str(&format!("reason:     {reason}\n"));
    }
    if let Some(branch) = &item.branch {
        out.push_str(&format!(
            "branch:     {branch} at {}\n",
            item.commit.as_deref().unwrap_or("?")
        ));
    }
    if let Some(url) = &item.pr_url {
        out.push_str(&format!("pr:         {url}\n"));
    }
    out.push_str("\n== flags\n");
    if item.item.flags.is_empty() {
        out.push_str("(none)\n");
    }
    for flag in &item.item.flags {
        out.push_str(&format!("- {flag}\n"));
    }
    out.push_str("\n== arguments (verbatim)\n");
    out.push_str(&item.item.args);
    out.push_str("\n\n== recomputed digest\n");
    out.push_str(&serde_json::to_string_pretty(&item.item.digest).unwrap_or_default());
    out.push_str("\n\n== test evidence\n");
    for step in &item.item.evidence {
        out.push_str(&format!(
            "--- {} (must {}): exit {:?}, {:?}\n$ {}\n",
            step.step,
            step.expect,
            step.exit_code,
            step.grade,
            step.argv.join(" ")
        ));
        if let Some(inventory) = &step.inventory {
            out.push_str(&format!("inventory: {}\n", inventory.summary()));
            let failing = inventory.failing();
            if !failing.is_empty() {
                let shown: Vec<&str> = failing.iter().take(20).copied().collect();
                let more = failing.len() - shown.len();
                out.push_str(&format!(
                    "failing at base (known failures): {}{}\n",
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ));
            }
        }
        if let Some(verdict) = &step.full_run {
            out.push_str(&format!(
                "against the base inventory: {}\n",
                verdict.summary()
            ));
        }
        out.push_str("[stdout]\n");
        out.push_str(&step.stdout);
        out.push_str("\n[stderr]\n");
        out.push_str(&step.stderr);
        out.push('\n');
    }
    out.push_str("\n== diff\n");
    if colored {
        out.push_str(&colour_diff(&item.item.diff));
    } else {
        out.push_str(&item.item.diff);
    }
    out
}

/// The judge's score section of `show`: verdict, the five scores, unsupported claims, the
/// reason and the rules the code enforced; `(not judged)` when `airlock judge` has not run.
pub fn render_judge_score(score: Option<&(serde_json::Value, i64)>) -> String {
    let mut out = String::from("\n== judge score\n");
    let Some((j, _at)) = score else {
        out.push_str("(not judged)\n");
        return out;
    };
    let status = j["status"].as_str().unwrap_or("?");
    out.push_str(&format!(
        "model:   {}\n",
        j["model"].as_str().unwrap_or("?")
    ));
    if status != "scored" {
        out.push_str(&format!(
            "status:  {status} (the judge's answer broke the contract twice)\n"
        ));
        return out;
    }
    let v = &j["verdict"];
    out.push_str(&format!(
        "verdict: {}\n",
        v["verdict"].as_str().unwrap_or("?")
    ));
    let s = &v["scores"];
    out.push_str(&format!(
        "scores:  root_cause {}  minimality {}  test_honesty {}  conventions {}  faithfulness {}\n",
        s["root_cause"], s["minimality"], s["test_honesty"], s["conventions"], s["faithfulness"]
    ));
    out.push_str(&format!(
        "reason:  {}\n",
        v["one_line_reason"].as_str().unwrap_or("")
    ));
    for claim in v["unsupported_claims"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "unsupported claim: {}\n",
            claim.as_str().unwrap_or("")
        ));
    }
    for rule in j["rules_applied"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "rule enforced: {} ({})\n",
            rule["rule"].as_str().unwrap_or(""),
            rule["change"].as_str().unwrap_or("")
        ));
    }
    out
}
