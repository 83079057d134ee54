//! Reading the log for people: the security team's injection queue and one run's timeline.
//!
//! Queries read records leniently (a damaged line is skipped and counted, never fatal) because
//! someone triaging an incident still needs the rest; `verify` is where damage is judged.

use crate::detect::{Borderline, SourceKind};
use crate::error::{Result, io};
use crate::event::{Event, SecondVerdict};
use crate::record::{self, Record};
use crate::time::Timestamp;
use crate::verdict::{FindingKey, FindingStatus, TriageEntry, TriageStatus};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Every readable record of a log, in file order.
#[derive(Debug, Clone)]
pub struct Scan {
    /// `(line number, record)` for every line that decoded (self-hash mismatches included:
    /// they are still worth reading, and `verify` reports them).
    pub records: Vec<(u64, Record)>,
    /// Line numbers that could not be read as records.
    pub unreadable: Vec<u64>,
}

/// Read every record of the log at `path`.
pub fn scan(path: impl AsRef<Path>) -> Result<Scan> {
    let path = path.as_ref();
    let data = std::fs::read(path).map_err(io(path, "read"))?;
    let mut records = Vec::new();
    let mut unreadable = Vec::new();
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match record::decode(line) {
            Ok(r) => records.push((i as u64 + 1, r)),
            Err(record::LineFault::HashMismatch(r)) => records.push((i as u64 + 1, *r)),
            Err(record::LineFault::Malformed(_)) => unreadable.push(i as u64 + 1),
        }
    }
    Ok(Scan {
        records,
        unreadable,
    })
}

/// One entry of the security team's queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Injection {
    /// Seq of the record.
    pub seq: u64,
    /// When it was recorded.
    pub ts: String,
    /// The run.
    pub run_id: String,
    /// Repository of the run, from its `run_started` record.
    pub repository: Option<String>,
    /// Pinned commit of the run.
    pub commit: Option<String>,
    /// Issue of the run.
    pub issue: Option<String>,
    /// `injection_observed` (a model reported it) or `injection_suspected` (the detector did).
    pub kind: String,
    /// Where the text was.
    pub path: String,
    /// Line, when known.
    pub line: Option<u64>,
    /// Detector rule (suspected only).
    pub rule: Option<String>,
    /// Kind of text (suspected only).
    pub source: Option<SourceKind>,
    /// The excerpt.
    pub excerpt: String,
    /// The detector's blob id of the text (suspected only; absent in older records).
    pub blob: Option<String>,
    /// What a dismissal of this finding applies to (detector findings with a blob id).
    pub key: Option<FindingKey>,
    /// Where it stands: its latest triage; else `dismissed` when its key's latest triage is a
    /// dismissal; else `new`.
    pub status: FindingStatus,
    /// The triage record whose dismissal applies to it (its own, its key's, or the one the run
    /// found when it recorded the finding), while it is dismissed.
    pub dismissed_by: Option<u64>,
    /// Its own triage history, oldest first (the last one is in force).
    pub triage: Vec<TriageEntry>,
    /// What the operator's security model said about it, oldest first (never a status: the
    /// finding stands whatever the model says).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub second_opinions: Vec<SecondOpinion>,
}

/// One security-model verdict, as the queue shows it beside a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecondOpinion {
    /// Seq of the `injection_second_opinion` record.
    pub seq: u64,
    /// When it was recorded.
    pub ts: String,
    /// The security model.
    pub model: String,
    /// Its verdict.
    pub verdict: SecondVerdict,
    /// Its reason (untrusted text: render it escaped).
    pub reason: Option<String>,
}

/// A security-model verdict on a borderline span: no finding, a lead for the security team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BorderlineOpinion {
    /// The run.
    pub run_id: String,
    /// Where the text was.
    pub path: String,
    /// The span: line, the rule it nearly fired, how it fell short, its excerpt.
    pub span: Borderline,
    /// The verdict.
    pub opinion: SecondOpinion,
}

/// The `injection_second_opinion` records of a scan, decoded, in log order.
fn second_opinion_records(scan: &Scan) -> Vec<(&Record, Event)> {
    scan.records
        .iter()
        .filter(|(_, r)| r.kind == "injection_second_opinion")
        .filter_map(|(_, r)| Some((r, r.event().ok()?)))
        .collect()
}

/// Verdicts on borderline spans across all runs, newest first, optionally only those recorded
/// at or after `since`.
pub fn borderline_opinions(scan: &Scan, since: Option<Timestamp>) -> Vec<BorderlineOpinion> {
    let mut out = Vec::new();
    for (r, event) in second_opinion_records(scan) {
        if !recorded_since(r, since) {
            continue;
        }
        if let Event::InjectionSecondOpinion {
            finding: None,
            path,
            borderline: Some(span),
            model,
            verdict,
            reason,
            ..
        } = event
        {
            out.push(BorderlineOpinion {
                run_id: r.run_id.clone(),
                path,
                span,
                opinion: SecondOpinion {
                    seq: r.seq,
                    ts: r.ts.clone(),
                    model,
                    verdict,
                    reason,
                },
            });
        }
    }
    out.sort_by_key(|b| std::cmp::Reverse(b.opinion.seq));
    out
}

fn recorded_since(r: &Record, since: Option<Timestamp>) -> bool {
    match since {
        None => true,
        Some(since) => Timestamp::parse_rfc3339(&r.ts).is_ok_and(|t| t >= since),
    }
}

/// Injections across all runs, newest first, optionally only those recorded at or after `since`.
pub fn injections(scan: &Scan, since: Option<Timestamp>) -> Vec<Injection> {
    let mut runs: HashMap<&str, (String, String, String)> = HashMap::new();
    for (_, r) in &scan.records {
        if r.kind == "run_started" {
            let field = |k: &str| {
                r.payload
                    .get(k)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            runs.insert(
                &r.run_id,
                (field("repository"), field("commit"), field("issue")),
            );
        }
    }
    let repositories = repositories(scan);
    let mut history: BTreeMap<u64, Vec<TriageEntry>> = BTreeMap::new();
    let mut by_key: BTreeMap<FindingKey, (TriageStatus, u64)> = BTreeMap::new();
    for (finding, key, entry) in triage_records(scan) {
        if let Some(key) = key {
            by_key.insert(key, (entry.status, entry.seq));
        }
        history.entry(finding).or_default().push(entry);
    }
    let mut opinions: BTreeMap<u64, Vec<SecondOpinion>> = BTreeMap::new();
    for (r, event) in second_opinion_records(scan) {
        if let Event::InjectionSecondOpinion {
            finding: Some(finding),
            also,
            model,
            verdict,
            reason,
            ..
        } = event
        {
            let opinion = SecondOpinion {
                seq: r.seq,
                ts: r.ts.clone(),
                model,
                verdict,
                reason,
            };
            for seq in std::iter::once(finding).chain(also) {
                opinions.entry(seq).or_default().push(opinion.clone());
            }
        }
    }
    let mut out = Vec::new();
    for (_, r) in &scan.records {
        if r.kind != "injection_observed" && r.kind != "injection_suspected" {
            continue;
        }
        if !recorded_since(r, since) {
            continue;
        }
        let text = |k: &str| {
            r.payload
                .get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        let run = runs.get(r.run_id.as_str());
        let key = finding_key(r, &repositories);
        let own = history.remove(&r.seq).unwrap_or_default();
        let recorded_dismissal = r
            .payload
            .get("dismissed_by")
            .and_then(serde_json::Value::as_u64);
        let (status, dismissed_by) = match (own.last(), key.as_ref().and_then(|k| by_key.get(k))) {
            (Some(last), _) => (
                FindingStatus::from(last.status),
                (last.status == TriageStatus::Dismissed).then_some(last.seq),
            ),
            (None, Some((TriageStatus::Dismissed, seq))) => (FindingStatus::Dismissed, Some(*seq)),
            // The key's dismissal was superseded by a later verdict: the finding is new again.
            (None, Some(_)) => (FindingStatus::New, None),
            (None, None) => match recorded_dismissal {
                Some(seq) => (FindingStatus::Dismissed, Some(seq)),
                None => (FindingStatus::New, None),
            },
        };
        out.push(Injection {
            seq: r.seq,
            ts: r.ts.clone(),
            run_id: r.run_id.clone(),
            repository: run.map(|x| x.0.clone()),
            commit: run.map(|x| x.1.clone()),
            issue: run.map(|x| x.2.clone()),
            kind: r.kind.clone(),
            path: text("path").unwrap_or_default(),
            line: r.payload.get("line").and_then(serde_json::Value::as_u64),
            rule: text("rule"),
            source: r
                .payload
                .get("source")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
            excerpt: text("excerpt").unwrap_or_default(),
            blob: text("blob"),
            key,
            status,
            dismissed_by,
            triage: own,
            second_opinions: opinions.remove(&r.seq).unwrap_or_default(),
        });
    }
    out.sort_by_key(|i| std::cmp::Reverse(i.seq));
    out
}

/// The records of one run, in log order.
pub fn timeline<'a>(scan: &'a Scan, run_id: &str) -> Vec<&'a Record> {
    scan.records
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.run_id == run_id)
        .collect()
}

/// The one directory airlock keeps its records in when `airlock.toml` names no other: runs,
/// the audit log, the mirror cache, the index and prepared test environments. `$AIRLOCK_HOME`,
/// else `$XDG_DATA_HOME/airlock`, else `$HOME/.local/share/airlock`.
pub fn data_dir() -> Result<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(h) = var("AIRLOCK_HOME") {
        return Ok(PathBuf::from(h));
    }
    if let Some(d) = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
    {
        return Ok(d.join("airlock"));
    }
    if let Some(h) = var("HOME") {
        return Ok(PathBuf::from(h).join(".local/share/airlock"));
    }
    Err(crate::error::Error::NoDefaultPath)
}

/// Where the audit log lives when no path is given: `$AIRLOCK_AUDIT_LOG`, else
/// `audit.jsonl` in the [`data_dir`].
pub fn default_log_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("AIRLOCK_AUDIT_LOG").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(data_dir()?.join("audit.jsonl"))
}

/// One read of a run as `airlock audit show` lists it: a `file_read` record, typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReadEntry {
    /// Seq of the record.
    pub seq: u64,
    /// The repository-relative path read.
    pub path: String,
    /// Who read it.
    pub reader: crate::event::ReadBy,
    /// First line returned.
    pub line_start: u32,
    /// Last line returned.
    pub line_end: u32,
    /// Bytes of file content returned.
    pub content_bytes: u64,
    /// Bytes in the whole file.
    pub total_bytes: u64,
    /// Whether the read cap cut the window short.
    pub truncated: bool,
}

/// The file reads of one run, in log order (records that do not decode are left out, as the
/// other queries do; `verify` reports them).
pub fn file_reads(scan: &Scan, run_id: &str) -> Vec<FileReadEntry> {
    timeline(scan, run_id)
        .into_iter()
        .filter(|r| r.kind == "file_read")
        .filter_map(|r| match r.event().ok()? {
            crate::event::Event::FileRead {
                path,
                reader,
                line_start,
                line_end,
                content_bytes,
                total_bytes,
                truncated,
            } => Some(FileReadEntry {
                seq: r.seq,
                path,
                reader,
                line_start,
                line_end,
                content_bytes,
                total_bytes,
                truncated,
            }),
            _ => None,
        })
        .collect()
}

/// One refused read of a run: a `policy_refusal` record that names who asked for the read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedReadEntry {
    /// Seq of the record.
    pub seq: u64,
    /// The path as asked for.
    pub path: String,
    /// Who asked for it.
    pub reader: crate::event::ReadBy,
    /// The rule that refused it (`read:` and the refusal's class).
    pub rule: String,
}

/// The refused reads of one run, in log order: its `policy_refusal` records that name a reader
/// (refusals of anything else, and records written before reads named their reader, are not
/// reads of this list).
pub fn refused_reads(scan: &Scan, run_id: &str) -> Vec<RefusedReadEntry> {
    timeline(scan, run_id)
        .into_iter()
        .filter(|r| r.kind == "policy_refusal")
        .filter_map(|r| match r.event().ok()? {
            crate::event::Event::PolicyRefusal {
                path,
                rule,
                reader: Some(reader),
            } => Some(RefusedReadEntry {
                seq: r.seq,
                path,
                reader,
                rule,
            }),
            _ => None,
        })
        .collect()
}

/// The repository of each run, from its `run_started` record.
pub(crate) fn repositories(scan: &Scan) -> BTreeMap<&str, &str> {
    scan.records
        .iter()
        .filter(|(_, r)| r.kind == "run_started")
        .filter_map(|(_, r)| {
            let repo = r.payload.get("repository")?.as_str()?;
            Some((r.run_id.as_str(), repo))
        })
        .collect()
}

/// The key of a detector finding that records a blob id in a run whose repository is known.
pub(crate) fn finding_key(
    record: &Record,
    repositories: &BTreeMap<&str, &str>,
) -> Option<FindingKey> {
    if record.kind != "injection_suspected" {
        return None;
    }
    let text = |k: &str| record.payload.get(k)?.as_str().map(str::to_string);
    Some(FindingKey {
        repository: repositories.get(record.run_id.as_str())?.to_string(),
        path: text("path")?,
        blob: text("blob")?,
        rule: text("rule")?,
    })
}

/// Every `injection_triaged` record of a scan as (finding seq, key, entry), in log order.
pub(crate) fn triage_records(scan: &Scan) -> Vec<(u64, Option<FindingKey>, TriageEntry)> {
    scan.records
        .iter()
        .filter(|(_, r)| r.kind == "injection_triaged")
        .filter_map(|(_, r)| match r.event().ok()? {
            Event::InjectionTriaged {
                finding,
                status,
                note,
                by,
                key,
            } => Some((
                finding,
                key,
                TriageEntry {
                    seq: r.seq,
                    ts: r.ts.clone(),
                    status,
                    by,
                    note,
                },
            )),
            _ => None,
        })
        .collect()
}
