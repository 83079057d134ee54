//! `airlock judge`: score queued (or decided) pull requests with the judge and hand the score to
//! the broker (`judge_score`), which attaches it to the queue entry and records it in its audit
//! log; `airlock judge calibrate` re-runs
//! the hand-scored set and reports agreement.
//!
//! Exit codes: 0 done; 1 at least one judgement failed (the model's answer broke the contract
//! twice) or the batch's accept rate is above the ceiling; 2 an operational error.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use airlock_broker::{BrokerClient, BrokerConfig};
use airlock_judge::{
    CodebaseContext, DEFAULT_ACCEPT_RATE_CEILING, Evidence, Judgement, Submission,
};
use airlock_model::{ChatModel, ModelConfig};
use airlock_protocol::{
    JudgeScoreReply, JudgeScoreSubmission, JudgeSelection, JudgeSubject, JudgeSubjectsReply,
    Request,
};

/// Arguments of `airlock judge`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct JudgeArgs {
    #[command(subcommand)]
    command: Option<JudgeCommand>,
    /// The queue item to judge (queued or decided).
    id: Option<i64>,
    /// Judge every queue item (optionally between --from and --to, inclusive).
    #[arg(long)]
    batch: bool,
    /// First queue id of the batch.
    #[arg(long, requires = "batch")]
    from: Option<i64>,
    /// Last queue id of the batch.
    #[arg(long, requires = "batch")]
    to: Option<i64>,
    #[command(flatten)]
    common: CommonArgs,
    /// The broker configuration, broker.toml (default: $AIRLOCK_BROKER_CONFIG, else
    /// /etc/airlock/broker.toml). `--broker-config` is the same option's older name.
    #[arg(long = "config", alias = "broker-config", value_name = "BROKER_TOML")]
    broker_config: Option<PathBuf>,
    /// Issue text for a single item (Markdown or JSON file).
    #[arg(long, conflicts_with = "issues_dir")]
    issue: Option<PathBuf>,
    /// Directory holding one issue file per issue id (`ID.md`, `ID.json` or `ID.txt`).
    #[arg(long)]
    issues_dir: Option<PathBuf>,
    /// Print each judgement as JSON.
    #[arg(long)]
    json: bool,
}

/// Options shared by judging and calibration.
#[derive(Debug, Args)]
struct CommonArgs {
    /// The judge's model spec (default: $AIRLOCK_JUDGE_MODEL, else a different provider family
    /// from the supervisor's).
    #[arg(long)]
    model: Option<String>,
    /// The supervisor's model spec, to keep the judge different (default: $AIRLOCK_SUPERVISOR_MODEL).
    #[arg(long)]
    supervisor_model: Option<String>,
    /// Warn when more than this fraction of a batch is accepted.
    #[arg(long, default_value_t = DEFAULT_ACCEPT_RATE_CEILING)]
    accept_ceiling: f64,
}

#[derive(Debug, Subcommand)]
enum JudgeCommand {
    /// Re-run the hand-scored calibration set and report agreement.
    Calibrate {
        #[command(flatten)]
        common: CommonArgs,
        /// The calibration cases (default: judge/calibration/cases in the source tree).
        #[arg(long)]
        cases: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn judge_model(common: &CommonArgs) -> anyhow::Result<Box<dyn ChatModel>> {
    let supervisor = common
        .supervisor_model
        .clone()
        .or_else(|| std::env::var("AIRLOCK_SUPERVISOR_MODEL").ok());
    let spec = common
        .model
        .clone()
        .or_else(|| std::env::var("AIRLOCK_JUDGE_MODEL").ok())
        .unwrap_or_else(|| airlock_judge::default_judge_model(supervisor.as_deref()));
    if let Some(warning) = airlock_judge::same_model_warning(&spec, supervisor.as_deref()) {
        eprintln!(
            "airlock judge: warning: {}",
            airlock_policies::terminal::escaped_line(&warning)
        );
    }
    airlock_model::from_spec(&spec, &ModelConfig::default())
        .with_context(|| format!("building the judge model {spec}"))
}

/// `airlock judge`.
pub fn run(args: JudgeArgs) -> anyhow::Result<ExitCode> {
    if let Some(JudgeCommand::Calibrate {
        common,
        cases,
        json,
    }) = &args.command
    {
        return calibrate(common, cases.as_deref(), *json);
    }
    if args.batch == args.id.is_some() {
        bail!("give either a queue id or --batch");
    }
    let config_path = args
        .broker_config
        .clone()
        .or_else(|| std::env::var_os("AIRLOCK_BROKER_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/airlock/broker.toml"));
    let config = BrokerConfig::load(&config_path)
        .with_context(|| format!("loading {}", config_path.display()))?;
    // The broker stores the scores and audits them: the judge reaches the queue only through
    // the broker's protocol, never its database or its log.
    let mut broker = BrokerClient::connect(&config.socket).with_context(|| {
        format!(
            "the judge talks to the broker: is `airlock-broker --config {} serve` running?",
            config_path.display()
        )
    })?;
    let select = JudgeSelection {
        id: args.id,
        from: args.from,
        to: args.to,
    };
    let items = match broker.call(&Request::JudgeSubjects(select))? {
        JudgeSubjectsReply::Subjects { subjects } => subjects,
        JudgeSubjectsReply::Failed { message } => bail!("the broker: {message}"),
    };
    let model = judge_model(&args.common)?;
    let mut out = std::io::stdout().lock();
    let mut verdicts = Vec::new();
    let mut failed = 0usize;
    for item in &items {
        let issue_text = issue_text(&args, &item.issue_id)?;
        let context = codebase_context(&config, item, &issue_text);
        let input = airlock_judge::judge_input(&submission(item), issue_text, context);
        let judgement = airlock_judge::judge(model.as_ref(), &input, args.common.accept_ceiling)
            .with_context(|| format!("judging queue item {}", item.queue_id))?;
        let value = serde_json::to_value(&judgement)?;
        let (verdict, detail) = audit_summary(&judgement);
        let score = JudgeScoreSubmission {
            queue_id: item.queue_id,
            judgement: value.clone(),
            verdict,
            detail,
        };
        match broker.call(&Request::JudgeScore(Box::new(score)))? {
            JudgeScoreReply::ScoreRecorded { .. } => {}
            JudgeScoreReply::Failed { message } => {
                bail!(
                    "the broker did not record the score of item {}: {message}",
                    item.queue_id
                )
            }
        }
        match judgement.verdict() {
            Some(v) => verdicts.push(v.verdict),
            None => failed += 1,
        }
        if args.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"id": item.queue_id, "judgement": value})
            )?;
        } else {
            writeln!(out, "{}", summary_line(item.queue_id, &judgement))?;
        }
    }
    model.finish().context("finishing the judge model")?;
    let rate = airlock_judge::accept_rate(&verdicts);
    let warning = airlock_judge::accept_rate_warning(rate, args.common.accept_ceiling);
    if args.batch {
        writeln!(
            out,
            "judged {} item(s): accept rate {:.0}% over {} scored, {failed} failed",
            items.len(),
            rate * 100.0,
            verdicts.len()
        )?;
    }
    if let Some(w) = &warning {
        eprintln!("airlock judge: warning: {w}");
    }
    Ok(if failed > 0 || (args.batch && warning.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn summary_line(id: i64, judgement: &Judgement) -> String {
    match judgement {
        Judgement::Scored {
            verdict,
            rules_applied,
            ..
        } => {
            let s = verdict.scores;
            let rules: Vec<&str> = rules_applied.iter().map(|r| r.rule.as_str()).collect();
            format!(
                "{id}: {} (root_cause {} minimality {} test_honesty {} conventions {} faithfulness {}){}: {}",
                verdict_name(verdict.verdict),
                s.root_cause,
                s.minimality,
                s.test_honesty,
                s.conventions,
                s.faithfulness,
                if rules.is_empty() {
                    String::new()
                } else {
                    format!(" [rules: {}]", rules.join(", "))
                },
                // The judge model's words: shown escaped, like every such text.
                airlock_policies::terminal::escaped_line(&verdict.one_line_reason)
            )
        }
        Judgement::Failed { violations, .. } => format!(
            "{id}: failed: the judge's answer broke judge_verdict.json twice ({} violation(s))",
            violations.len()
        ),
    }
}

fn verdict_name(v: airlock_schemas::Verdict) -> &'static str {
    match v {
        airlock_schemas::Verdict::Accept => "accept",
        airlock_schemas::Verdict::Revise => "revise",
        airlock_schemas::Verdict::Reject => "reject",
    }
}

/// What the broker's audit record of a score says: the verdict and a one-line summary (the
/// broker adds the digest of the full judgement it stores).
fn audit_summary(judgement: &Judgement) -> (String, String) {
    match judgement {
        Judgement::Scored { verdict, model, .. } => {
            let s = verdict.scores;
            (
                verdict_name(verdict.verdict).to_owned(),
                format!(
                    "root_cause={} minimality={} test_honesty={} conventions={} faithfulness={} unsupported_claims={} model={model}",
                    s.root_cause,
                    s.minimality,
                    s.test_honesty,
                    s.conventions,
                    s.faithfulness,
                    verdict.unsupported_claims.len()
                ),
            )
        }
        Judgement::Failed { model, violations } => (
            "failed".to_owned(),
            format!(
                "answer broke judge_verdict.json twice ({} violation(s)) model={model}",
                violations.len()
            ),
        ),
    }
}

fn issue_text(args: &JudgeArgs, issue_id: &str) -> anyhow::Result<String> {
    if let Some(path) = &args.issue {
        return std::fs::read_to_string(path)
            .with_context(|| format!("reading the issue {}", path.display()));
    }
    if let Some(dir) = &args.issues_dir {
        for ext in ["md", "json", "txt"] {
            let path = dir.join(format!("{issue_id}.{ext}"));
            if path.is_file() {
                return std::fs::read_to_string(&path)
                    .with_context(|| format!("reading the issue {}", path.display()));
            }
        }
    }
    eprintln!(
        "airlock judge: warning: no issue text for {issue_id} (pass --issue or --issues-dir); judging with the issue id only"
    );
    Ok(format!("(issue {issue_id}: text not available)"))
}

/// The codebase context of a queue item, read (git objects only) from the clone the broker
/// configuration names; each piece that could not be built is a warning on stderr.
fn codebase_context(config: &BrokerConfig, item: &JudgeSubject, issue: &str) -> CodebaseContext {
    let Some(repo) = config.repositories.get(&item.repository) else {
        eprintln!(
            "airlock judge: warning: repository {} is not in the broker configuration; no codebase context",
            airlock_policies::terminal::escaped_line(&item.repository)
        );
        return CodebaseContext::default();
    };
    let (context, warnings) =
        airlock_judge::codebase_context(&repo.clone, &item.base_commit, &item.diff, issue);
    for warning in warnings {
        eprintln!(
            "airlock judge: warning: {}",
            airlock_policies::terminal::escaped_line(&warning)
        );
    }
    context
}

/// What the judge may see of a queue item: its artefacts.
fn submission(item: &JudgeSubject) -> Submission<'_> {
    Submission {
        issue_id: &item.issue_id,
        diff: &item.diff,
        open_pr_args: &item.args,
        evidence: item
            .evidence
            .iter()
            .map(|step| Evidence {
                step: &step.step,
                expect: &step.expect,
                argv: &step.argv,
                exit_code: step.exit_code,
                stdout: &step.stdout,
                stderr: &step.stderr,
                grade: &step.grade,
            })
            .collect(),
        flags: &item.flags,
    }
}

fn default_cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("judge/calibration/cases")
}

fn calibrate(common: &CommonArgs, cases: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let dir = cases
        .map(Path::to_path_buf)
        .unwrap_or_else(default_cases_dir);
    let cases = airlock_judge::load_cases(&dir)?;
    if cases.is_empty() {
        bail!("no calibration cases under {}", dir.display());
    }
    let model = judge_model(common)?;
    let mut judgements = Vec::new();
    for case in &cases {
        judgements.push(
            airlock_judge::judge(model.as_ref(), &case.input, common.accept_ceiling)
                .with_context(|| format!("judging calibration case {}", case.name))?,
        );
    }
    model.finish().context("finishing the judge model")?;
    let report = airlock_judge::report(&cases, &judgements, common.accept_ceiling);
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        writeln!(
            out,
            "calibration: {} case(s), {} failed",
            report.cases, report.failures
        )?;
        writeln!(out, "{:<14}{:>8}{:>12}", "DIMENSION", "EXACT", "WITHIN-ONE")?;
        for d in &report.dimensions {
            writeln!(
                out,
                "{:<14}{:>7.0}%{:>11.0}%",
                d.dimension,
                d.exact * 100.0,
                d.within_one * 100.0
            )?;
        }
        writeln!(
            out,
            "verdict: agreement {:.0}%, Cohen's kappa {}",
            report.verdict_agreement * 100.0,
            report
                .verdict_kappa
                .map(|k| format!("{k:.3}"))
                .unwrap_or_else(|| "undefined".to_owned())
        )?;
        writeln!(
            out,
            "accept rate {:.0}% (ceiling {:.0}%)",
            report.accept_rate * 100.0,
            report.accept_rate_ceiling * 100.0
        )?;
    }
    if let Some(w) = &report.warning {
        eprintln!("airlock judge: warning: {w}");
    }
    Ok(if report.failures > 0 || report.warning.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
