//! `airlock judge`: score queued (or decided) pull requests with the judge, attach the score to
//! the broker's queue entry and record it in the audit log; `airlock judge calibrate` re-runs
//! the hand-scored set and reports agreement.
//!
//! Exit codes: 0 done; 1 at least one judgement failed (the model's answer broke the contract
//! twice) or the batch's accept rate is above the ceiling; 2 an operational error.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use airlock_broker::BrokerConfig;
use airlock_broker::store::{QueueItem, SqliteStore, Store};
use airlock_judge::{
    CandidateFile, CodebaseContext, DEFAULT_ACCEPT_RATE_CEILING, JudgeInput, Judgement,
};
use airlock_model::{ChatModel, ModelConfig};

/// Bytes of one candidate file shown to the judge, as the agent's bounded read allows.
const CANDIDATE_FILE_MAX_BYTES: usize = 10 * 1024;
/// Characters of the file tree shown to the judge (the supervisor's warm-start budget).
const FILE_TREE_CHARS: usize = 6000;

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
    /// The broker configuration (default: $AIRLOCK_BROKER_CONFIG, else /etc/airlock/broker.toml).
    #[arg(long)]
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
        eprintln!("airlock judge: warning: {warning}");
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
    let mut store = SqliteStore::open(&config.state_db)?;
    let items: Vec<QueueItem> = match args.id {
        Some(id) => vec![
            store
                .queue_item(id)?
                .with_context(|| format!("no queue item {id}"))?,
        ],
        None => store
            .queue()?
            .into_iter()
            .filter(|i| args.from.is_none_or(|f| i.id >= f) && args.to.is_none_or(|t| i.id <= t))
            .collect(),
    };
    let model = judge_model(&args.common)?;
    let audit = airlock_audit::AuditLog::open(&config.audit_log)
        .with_context(|| format!("opening the audit log {}", config.audit_log.display()))?;
    let mut out = std::io::stdout().lock();
    let mut verdicts = Vec::new();
    let mut failed = 0usize;
    for item in &items {
        let issue_text = issue_text(&args, &item.item.issue_id)?;
        let context = codebase_context(&config, item, &issue_text);
        let input = judge_input(item, issue_text, context);
        let judgement = airlock_judge::judge(model.as_ref(), &input, args.common.accept_ceiling)
            .with_context(|| format!("judging queue item {}", item.id))?;
        let value = serde_json::to_value(&judgement)?;
        store.attach_judge_score(item.id, &value, unix_now())?;
        audit
            .append(&item.run_id, audit_event(item.id, &judgement, &value))
            .context("recording the score in the audit log")?;
        match judgement.verdict() {
            Some(v) => verdicts.push(v.verdict),
            None => failed += 1,
        }
        if args.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"id": item.id, "judgement": value})
            )?;
        } else {
            writeln!(out, "{}", summary_line(item.id, &judgement))?;
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

fn unix_now() -> i64 {
    airlock_broker::service::unix_now()
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
                verdict.one_line_reason
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

/// The audit record of a score: the verdict, a one-line summary and the hash of the full
/// judgement stored with the queue entry (so the two can be checked against each other).
fn audit_event(
    queue_id: i64,
    judgement: &Judgement,
    value: &serde_json::Value,
) -> airlock_audit::Event {
    let judgement_sha256 = airlock_audit::sha256_hex(value.to_string().as_bytes());
    let (verdict, detail) = match judgement {
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
    };
    airlock_audit::Event::JudgeScore {
        queue_id,
        verdict,
        detail,
        judgement_sha256,
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

/// Files of the diff (`b/` side, or `a/` for deletions), sorted.
fn diff_paths(diff: &str) -> Vec<String> {
    let mut out: Vec<String> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("diff --git "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|a| a.strip_prefix("a/").unwrap_or(a).to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// How many retrieval candidates the judge is shown: the supervisor's default warm start.
const SEARCH_CANDIDATES: usize = 8;

/// The retrieval engine's top candidates for the issue text at the base commit, indexed into a
/// throw-away directory. Retrieval trouble costs the judge context, never the score.
fn search_candidates(clone: &Path, base: &str, issue: &str) -> Vec<String> {
    let index_dir =
        std::env::temp_dir().join(format!("airlock-judge-index-{}", std::process::id()));
    let found = airlock_codegraph::Engine::open(clone, &index_dir)
        .and_then(|mut engine| engine.search(base, issue, SEARCH_CANDIDATES));
    let _ = std::fs::remove_dir_all(&index_dir);
    match found {
        Ok(hits) => hits.into_iter().map(|hit| hit.path).collect(),
        Err(e) => {
            eprintln!("airlock judge: warning: no search candidates for {base}: {e}");
            Vec::new()
        }
    }
}

fn file_at(clone: &Path, commit: &str, path: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(clone)
        .args(["show", &format!("{commit}:{path}")])
        .output()
        .ok()?;
    if !out.status.success() || out.stdout.contains(&0) {
        return None;
    }
    let mut bytes = out.stdout;
    let cut = bytes.len() > CANDIDATE_FILE_MAX_BYTES;
    bytes.truncate(CANDIDATE_FILE_MAX_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        text.push_str("\n[cut at 10 KB]\n");
    }
    Some(text)
}

/// The file tree at the base commit (ranked by the issue's words, as the agent's warm start),
/// the retrieval candidates the agent started with and the files the diff touches, as they
/// were at the base commit. Missing pieces are left
/// empty with a warning: the judge still scores the artefact.
fn codebase_context(config: &BrokerConfig, item: &QueueItem, issue: &str) -> CodebaseContext {
    let Some(repo) = config.repositories.get(&item.item.repository) else {
        eprintln!(
            "airlock judge: warning: repository {} is not in the broker configuration; no codebase context",
            item.item.repository
        );
        return CodebaseContext::default();
    };
    let base = &item.item.base_commit;
    let file_tree = airlock_checkout::CommitId::parse(base)
        .map_err(|e| e.to_string())
        .and_then(|c| {
            airlock_checkout::file_tree(
                &repo.clone,
                &c,
                &airlock_checkout::FileTreeOptions {
                    char_budget: FILE_TREE_CHARS,
                    query: Some(issue),
                },
            )
            .map_err(|e| e.to_string())
        })
        .unwrap_or_else(|e| {
            eprintln!("airlock judge: warning: no file tree for {base}: {e}");
            String::new()
        });
    // The agent's warm start listed the retrieval engine's top candidates for the issue text;
    // the judge sees the same ones, then the files the diff touches, each as of the base.
    let mut paths = search_candidates(&repo.clone, base, issue);
    for path in diff_paths(&item.item.diff) {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    let candidate_files = paths
        .into_iter()
        .filter_map(|path| {
            file_at(&repo.clone, base, &path).map(|content| CandidateFile { path, content })
        })
        .collect();
    CodebaseContext {
        file_tree,
        candidate_files,
    }
}

/// What the judge sees of a queue item. Only artefacts: never the run's trace.
fn judge_input(item: &QueueItem, issue_text: String, context: CodebaseContext) -> JudgeInput {
    let args: serde_json::Value = serde_json::from_str(&item.item.args).unwrap_or_default();
    let pr_body = args["body"].as_str().unwrap_or("").to_owned();
    let mut before = String::new();
    let mut after = String::new();
    let mut witness = String::new();
    for step in &item.item.evidence {
        let block = format!(
            "$ {}\nexit {:?}\n{}\n{}",
            step.argv.join(" "),
            step.exit_code,
            step.stdout,
            step.stderr
        );
        if step.step.starts_with("pinned") {
            before.push_str(&block);
        } else {
            after.push_str(&block);
        }
        witness.push_str(&format!(
            "{} (must {}): exit {:?}, {:?}\n",
            step.step, step.expect, step.exit_code, step.grade
        ));
    }
    JudgeInput {
        issue_id: item.item.issue_id.clone(),
        issue_text,
        diff: item.item.diff.clone(),
        before_output: before,
        after_output: after,
        witness_result: witness,
        pr_body,
        flags: item.item.flags.clone(),
        context,
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
