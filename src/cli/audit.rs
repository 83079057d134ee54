//! `airlock audit verify|injections|triage|show|detect|fp-scan`. Owned by the audit work.
//!
//! Exit codes of `verify`: 0 the chain is intact, 1 tampering or corruption was found, 3 only a
//! torn tail (a crash mid-append, repaired by the next append). 2 is an operational error.
//! `detect` exits 1 when it flags something; `fp-scan` exits 1 when the source false-positive
//! rate is at or above 1 per 1,000 files.

use airlock_audit::{
    self as audit, FindingStatus, ProblemKind, SourceKind, Timestamp, TriageRequest, TriageStatus,
};
use airlock_policies::terminal::escaped_line;
use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code of `audit verify` when tampering or corruption was found.
pub const EXIT_TAMPERED: u8 = 1;
/// Exit code of `audit verify` when the only problem is a torn tail.
pub const EXIT_TORN_TAIL: u8 = 3;

/// Where the log is: `--log PATH`, else `$AIRLOCK_AUDIT_LOG`, else the `[paths] audit_log` of
/// the `airlock.toml` that `airlock run` would use (`$AIRLOCK_CONFIG`, else `./airlock.toml`),
/// else `audit.jsonl` in the data directory (where runs with no `[paths]` write it).
#[derive(Debug, Args)]
pub struct LogArg {
    /// The audit log (default: $AIRLOCK_AUDIT_LOG, else [paths] audit_log of $AIRLOCK_CONFIG or
    /// ./airlock.toml, else audit.jsonl in $AIRLOCK_HOME, $XDG_DATA_HOME/airlock or
    /// ~/.local/share/airlock).
    #[arg(long = "log", value_name = "PATH")]
    log: Option<PathBuf>,
}

impl LogArg {
    fn resolve(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = &self.log {
            return Ok(p.clone());
        }
        if std::env::var_os("AIRLOCK_AUDIT_LOG").is_some_and(|v| !v.is_empty()) {
            return Ok(audit::default_log_path()?);
        }
        if let Some(config) = airlock_supervisor::config::discover(None) {
            let loaded = airlock_supervisor::config::Config::load(&config).with_context(|| {
                format!("reading the audit log's place from {}", config.display())
            })?;
            return Ok(loaded.paths.audit_log);
        }
        Ok(audit::default_log_path()?)
    }
}

/// Kind of text given to `audit detect`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SourceArg {
    /// A repository file.
    File,
    /// A search snippet.
    SearchSnippet,
    /// An issue body (Markdown).
    IssueBody,
    /// Tool output.
    ToolOutput,
}

impl From<SourceArg> for SourceKind {
    fn from(s: SourceArg) -> Self {
        match s {
            SourceArg::File => SourceKind::File,
            SourceArg::SearchSnippet => SourceKind::SearchSnippet,
            SourceArg::IssueBody => SourceKind::IssueBody,
            SourceArg::ToolOutput => SourceKind::ToolOutput,
        }
    }
}

/// Subcommands of `airlock audit`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk the hash chain; name every edited, removed, inserted or reordered record.
    Verify {
        /// The log to verify (default as for --log).
        path: Option<PathBuf>,
        #[command(flatten)]
        log: LogArg,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The security team's queue: every injection observed or suspected, newest first, with
    /// its id and status.
    Injections {
        /// Only those recorded at or after this time (RFC 3339, a date, or an age: 24h, 7d).
        #[arg(long, value_name = "T")]
        since: Option<String>,
        /// Only these statuses: new, confirmed, dismissed, needs-review (repeat the flag or
        /// give a comma list).
        #[arg(long, value_name = "STATUS", value_delimiter = ',', value_parser = parse_finding_status)]
        status: Vec<FindingStatus>,
        /// Print JSON (an array, each entry with its id, status, triage history, key and the
        /// security model's second opinions) instead of a table.
        #[arg(long)]
        json: bool,
        /// List the security model's verdicts on borderline spans (text that nearly fired a
        /// rule; not findings) instead of the findings.
        #[arg(long, conflicts_with = "status")]
        borderline: bool,
        #[command(flatten)]
        log: LogArg,
    },
    /// Record the security team's verdict on a finding, appended to the chain.
    ///
    /// A later verdict on the same finding supersedes it (both are kept). A dismissal also
    /// holds for later runs that meet the same rule in the same version of the same text.
    Triage {
        /// The finding's id, as `airlock audit injections` prints it (`#N`).
        id: u64,
        /// confirmed, dismissed or needs-review.
        #[arg(long, value_parser = parse_triage_status)]
        status: TriageStatus,
        /// Why (required for confirmed and dismissed).
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// Who is triaging (default: $USER, else $LOGNAME).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        #[command(flatten)]
        log: LogArg,
    },
    /// One run's timeline, then the files its models read and the reads refused
    Show {
        /// The run id.
        run: String,
        /// Print the records as JSON lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        log: LogArg,
    },
    /// Run the injection detector over files and print its findings (the files are not changed).
    Detect {
        /// Files to scan.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// What kind of text the files hold.
        #[arg(long, value_enum, default_value = "file")]
        source: SourceArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure the detector's false positives over directories of ordinary source.
    FpScan {
        /// Directories (or files) to scan.
        #[arg(required = true)]
        roots: Vec<PathBuf>,
        /// List every flagged file with its findings.
        #[arg(long)]
        list: bool,
        /// Print the full report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Run one `airlock audit` subcommand.
pub fn run(cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCommand::Verify { path, log, json } => verify(path, &log, json),
        AuditCommand::Injections {
            since,
            status,
            json,
            borderline: true,
            log,
        } if status.is_empty() => borderline_opinions(since.as_deref(), json, &log),
        AuditCommand::Injections {
            since,
            status,
            json,
            log,
            ..
        } => injections(since.as_deref(), &status, json, &log),
        AuditCommand::Triage {
            id,
            status,
            note,
            by,
            log,
        } => triage(id, status, note, by, &log),
        AuditCommand::Show { run, json, log } => show(&run, json, &log),
        AuditCommand::Detect {
            files,
            source,
            json,
        } => detect(&files, source.into(), json),
        AuditCommand::FpScan { roots, list, json } => fp_scan(&roots, list, json),
    }
}

fn verify(path: Option<PathBuf>, log: &LogArg, json: bool) -> anyhow::Result<ExitCode> {
    let path = match path {
        Some(p) => p,
        None => log.resolve()?,
    };
    let report = audit::verify(&path)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!(
            "{}: {} lines, {} valid records, last seq {}",
            report.path.display(),
            report.lines,
            report.records,
            report.last_seq
        );
        if let Some(h) = &report.head_hash {
            outln!("head hash {h} (keep it elsewhere to detect a later rewrite)");
        }
        if !report.head_checked {
            outln!(
                "note: no head file next to the log; records cut off the end cannot be detected"
            );
        }
        for r in &report.repaired {
            outln!(
                "note: torn write of {} bytes at offset {} repaired by seq {} (line {})",
                r.len,
                r.offset,
                r.seq,
                r.line
            );
        }
        for p in &report.problems {
            let kind = serde_json::to_value(p.kind)?;
            let seq = p.seq.map(|s| format!(" seq {s}")).unwrap_or_default();
            outln!(
                "{} line {}{seq}: {}",
                kind.as_str().unwrap_or("problem").to_uppercase(),
                p.line,
                p.message
            );
        }
        if report.is_intact() {
            outln!("OK: the chain is intact");
        } else if report.is_tampered() {
            outln!("FAILED: {} problem(s)", report.problems.len());
        } else {
            outln!("TORN TAIL: the last write did not finish; no tampering found");
        }
    }
    let code = if report.is_tampered() {
        EXIT_TAMPERED
    } else if report
        .problems
        .iter()
        .any(|p| p.kind == ProblemKind::TornTail)
    {
        EXIT_TORN_TAIL
    } else {
        0
    };
    Ok(ExitCode::from(code))
}

fn read_scan(log: &LogArg) -> anyhow::Result<audit::Scan> {
    let path = log.resolve()?;
    let scan = audit::scan(&path).with_context(|| format!("reading {}", path.display()))?;
    if !scan.unreadable.is_empty() {
        eprintln!(
            "airlock: warning: {} line(s) of {} are not readable records (lines {:?}); run `airlock audit verify`",
            scan.unreadable.len(),
            path.display(),
            scan.unreadable
        );
    }
    Ok(scan)
}

fn parse_finding_status(s: &str) -> Result<FindingStatus, String> {
    s.parse().map_err(|e: audit::Error| e.to_string())
}

fn parse_triage_status(s: &str) -> Result<TriageStatus, String> {
    s.parse().map_err(|e: audit::Error| e.to_string())
}

/// Who triages: `--by`, else `$USER`, else the login name (`$LOGNAME`); empty when none is
/// set, which the audit crate refuses with what to pass.
fn triager(by: Option<String>) -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    by.or_else(|| var("USER"))
        .or_else(|| var("LOGNAME"))
        .unwrap_or_default()
}

fn triage(
    id: u64,
    status: TriageStatus,
    note: Option<String>,
    by: Option<String>,
    log: &LogArg,
) -> anyhow::Result<ExitCode> {
    let path = log.resolve()?;
    anyhow::ensure!(
        path.exists(),
        "no audit log at {}: pass --log PATH of the log the finding is in",
        path.display()
    );
    let log = audit::AuditLog::open(&path)?;
    let entry = audit::triage(
        &log,
        &TriageRequest {
            finding: id,
            status,
            note,
            by: triager(by),
        },
    )?;
    outln!(
        "finding #{id}: {} by {} (triage record #{})",
        entry.status,
        escaped_line(&entry.by),
        entry.seq
    );
    Ok(ExitCode::SUCCESS)
}

fn injections(
    since: Option<&str>,
    statuses: &[FindingStatus],
    json: bool,
    log: &LogArg,
) -> anyhow::Result<ExitCode> {
    let since = since
        .map(|s| Timestamp::parse_since(s, Timestamp::now()))
        .transpose()?;
    let scan = read_scan(log)?;
    let mut list = audit::injections(&scan, since);
    if !statuses.is_empty() {
        list.retain(|i| statuses.contains(&i.status));
    }
    if json {
        outln!("{}", airlock_policies::terminal::to_ascii_json(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        outln!("no injections recorded");
        return Ok(ExitCode::SUCCESS);
    }
    for i in &list {
        let short = |s: &Option<String>, n: usize| {
            s.as_deref()
                .map(|x| x.chars().take(n).collect::<String>())
                .unwrap_or_else(|| "?".into())
        };
        let place = match i.line {
            Some(l) => format!("{}:{l}", i.path),
            None => i.path.clone(),
        };
        let what = match &i.rule {
            Some(rule) => format!("suspected ({rule})"),
            None => "observed".to_string(),
        };
        // Run ids, paths, issue text and the excerpt came from a repository or a model: shown
        // with control and invisible characters escaped, one line each.
        let status = match (i.status, i.dismissed_by) {
            (FindingStatus::Dismissed, Some(by)) => format!("dismissed (#{by})"),
            (status, _) => status.to_string(),
        };
        outln!(
            "#{}  [{status}]  {}  run {}  {}@{}  issue {}  {}  {}\n    {}",
            i.seq,
            i.ts,
            escaped_line(&i.run_id),
            escaped_line(&short(&i.repository, 60)),
            escaped_line(&short(&i.commit, 12)),
            escaped_line(&short(&i.issue, 30)),
            escaped_line(&place),
            escaped_line(&what),
            escaped_line(&i.excerpt)
        );
        // The security model's verdicts sit beside the finding; its reason is untrusted text.
        for o in &i.second_opinions {
            outln!("    {}", second_opinion_line(o));
        }
    }
    let borderline = audit::borderline_opinions(&scan, since).len();
    if borderline > 0 {
        outln!(
            "{borderline} second opinion(s) on borderline spans: airlock audit injections --borderline"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One verdict of the security model, on one escaped line.
fn second_opinion_line(o: &audit::SecondOpinion) -> String {
    let reason = o
        .reason
        .as_deref()
        .map(|r| format!(": {}", escaped_line(r)))
        .unwrap_or_default();
    format!(
        "second opinion #{} {} ({}){reason}",
        o.seq,
        o.verdict,
        escaped_line(&o.model)
    )
}

/// `injections --borderline`: the security model's verdicts on spans that nearly fired a rule.
fn borderline_opinions(since: Option<&str>, json: bool, log: &LogArg) -> anyhow::Result<ExitCode> {
    let since = since
        .map(|s| Timestamp::parse_since(s, Timestamp::now()))
        .transpose()?;
    let scan = read_scan(log)?;
    let list = audit::borderline_opinions(&scan, since);
    if json {
        outln!("{}", airlock_policies::terminal::to_ascii_json(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        outln!("no second opinions on borderline spans recorded");
        return Ok(ExitCode::SUCCESS);
    }
    for b in &list {
        outln!(
            "{}  run {}  {}:{}  near {} ({})\n    {}\n    {}",
            b.opinion.ts,
            escaped_line(&b.run_id),
            escaped_line(&b.path),
            b.span.line,
            b.span.rule,
            b.span.near.as_str(),
            escaped_line(&b.span.excerpt),
            second_opinion_line(&b.opinion)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show(run: &str, json: bool, log: &LogArg) -> anyhow::Result<ExitCode> {
    let scan = read_scan(log)?;
    let records = audit::timeline(&scan, run);
    if records.is_empty() {
        anyhow::bail!("no records for run {run:?}");
    }
    for r in records {
        if json {
            outln!("{}", airlock_policies::terminal::to_ascii_json_line(r)?);
        } else {
            outln!(
                "{:>6}  {}  {:<20}  {}",
                r.seq,
                r.ts,
                escaped_line(&r.kind),
                escaped_line(&summary(&r.payload))
            );
        }
    }
    let reads = audit::file_reads(&scan, run);
    if !json && !reads.is_empty() {
        outln!();
        out!("{}", render_reads(&reads));
    }
    let refused = audit::refused_reads(&scan, run);
    if !json && !refused.is_empty() {
        outln!();
        out!("{}", render_refused_reads(&refused));
    }
    Ok(ExitCode::SUCCESS)
}

/// The reads of a run that were refused, beside the reads served: who asked for which path,
/// and the rule that refused it (`read:` and the refusal's class).
fn render_refused_reads(refused: &[audit::RefusedReadEntry]) -> String {
    let mut out = format!(
        "reads refused ({}):\n{:>6}  {:<12}  {:<28}  path\n",
        refused.len(),
        "seq",
        "by",
        "rule"
    );
    for r in refused {
        out.push_str(&format!(
            "{:>6}  {:<12}  {:<28}  {}\n",
            r.seq,
            r.reader.to_string(),
            escaped_line(&r.rule),
            escaped_line(&r.path)
        ));
    }
    out
}

/// The reads of a run as a table a reviewer checks a pull request's claims against: who read
/// which lines of which file, how many bytes of content of the file's total, and whether the
/// read cap cut the window.
fn render_reads(reads: &[audit::FileReadEntry]) -> String {
    let mut out = format!(
        "files read ({}):\n{:>6}  {:<12}  {:>11}  {:>8}  {:>8}  {:<9}  path\n",
        reads.len(),
        "seq",
        "by",
        "lines",
        "bytes",
        "total",
        "truncated"
    );
    for r in reads {
        out.push_str(&format!(
            "{:>6}  {:<12}  {:>11}  {:>8}  {:>8}  {:<9}  {}\n",
            r.seq,
            r.reader.to_string(),
            format!("{}-{}", r.line_start, r.line_end),
            r.content_bytes,
            r.total_bytes,
            if r.truncated { "yes" } else { "no" },
            escaped_line(&r.path)
        ));
    }
    out
}

/// `key=value` pairs of a payload on one line.
fn summary(payload: &serde_json::Value) -> String {
    let Some(map) = payload.as_object() else {
        return payload.to_string();
    };
    map.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s:?}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn detect(files: &[PathBuf], source: SourceKind, json: bool) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        audit::detect::rules_ready(),
        "a detector pattern failed to compile"
    );
    let mut any = false;
    let mut all = Vec::new();
    for file in files {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let shown = file.to_string_lossy();
        let findings = audit::detect(&text, source, Some(&shown));
        any |= !findings.is_empty();
        if json {
            all.push(serde_json::json!({ "path": shown, "findings": findings }));
        } else {
            for f in findings {
                outln!(
                    "{}:{}: {}: {}",
                    escaped_line(&shown),
                    f.line,
                    f.rule,
                    escaped_line(&f.excerpt)
                );
            }
        }
    }
    if json {
        outln!("{}", airlock_policies::terminal::to_ascii_json(&all)?);
    }
    Ok(if any {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn fp_scan(roots: &[PathBuf], list: bool, json: bool) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        audit::detect::rules_ready(),
        "a detector pattern failed to compile"
    );
    let report = audit::scan_corpus(roots)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for root in roots {
            outln!("root: {}", root.display());
        }
        outln!(
            "source files: {} scanned, {} flagged, {:.3} per 1,000",
            report.source.scanned,
            report.source.flagged,
            report.source.per_thousand()
        );
        outln!(
            "doc files:    {} scanned, {} flagged, {:.3} per 1,000",
            report.docs.scanned,
            report.docs.flagged,
            report.docs.per_thousand()
        );
        outln!("skipped (large, binary or unreadable): {}", report.skipped);
        let rules: Vec<String> = report
            .by_rule
            .iter()
            .map(|(r, n)| format!("{r}={n}"))
            .collect();
        outln!(
            "findings by rule: {}",
            if rules.is_empty() {
                "none".into()
            } else {
                rules.join(" ")
            }
        );
        if list {
            for f in &report.flagged {
                for x in &f.findings {
                    outln!(
                        "  {}:{}: {}: {}",
                        f.path.display(),
                        x.line,
                        x.rule,
                        x.excerpt
                    );
                }
            }
        }
    }
    Ok(if report.source.per_thousand() < 1.0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
