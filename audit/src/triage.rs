//! The security team's triage of injection findings: recording a verdict (an
//! `injection_triaged` record; the verdict and key types are `verdict`'s), and the typed
//! queries over them that the CLI, the supervisor's screening and the broker's view read.
//!
//! A detector finding's key is (repository, path, blob id, rule): dismissing one finding
//! dismisses every later finding of an unchanged line (same blob), while a changed file (a new
//! blob) is raised again. The latest triage of a key decides: a dismissal superseded by
//! `confirmed` or `needs-review` no longer suppresses anything.

use crate::detect::{Borderline, Finding, SourceKind, screen};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::log::AuditLog;
use crate::query::{Scan, finding_key, repositories, scan, triage_records};
use crate::record::sha256_hex;
use crate::verdict::{FindingKey, FindingStatus, TriageEntry, TriageStatus};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

// Parsing a verdict's name is here, not beside the type in `verdict`, because it fails with the
// crate's `Error`, which itself names `TriageStatus` (`BlankNote`, `MissingNote`).
impl FromStr for TriageStatus {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        TriageStatus::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| Error::BadStatus {
                input: s.to_string(),
                expected: "confirmed, dismissed or needs-review",
            })
    }
}

impl FromStr for FindingStatus {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        [
            FindingStatus::New,
            FindingStatus::Confirmed,
            FindingStatus::Dismissed,
            FindingStatus::NeedsReview,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
        .ok_or_else(|| Error::BadStatus {
            input: s.to_string(),
            expected: "new, confirmed, dismissed or needs-review",
        })
    }
}

/// A verdict to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriageRequest {
    /// Seq of the finding (the id `airlock audit injections` prints).
    pub finding: u64,
    /// The verdict.
    pub status: TriageStatus,
    /// Why; required (non-blank) for `confirmed` and `dismissed`, never blank when given.
    pub note: Option<String>,
    /// Who.
    pub by: String,
}

/// Check `request` against the log and append its `injection_triaged` record under the
/// finding's run. Refuses an unknown id, a record that is not an injection finding, a blank
/// note (or none where one is required) and a blank name; nothing is written then.
pub fn triage(log: &AuditLog, request: &TriageRequest) -> Result<TriageEntry> {
    let note = match request.note.as_deref().map(str::trim) {
        Some("") => {
            return Err(Error::BlankNote {
                status: request.status,
            });
        }
        Some(n) => Some(n.to_string()),
        None if request.status.needs_note() => {
            return Err(Error::MissingNote {
                status: request.status,
            });
        }
        None => None,
    };
    let by = request.by.trim();
    if by.is_empty() {
        return Err(Error::NoReviewer);
    }
    let scan = scan(log.path())?;
    let Some(record) = scan
        .records
        .iter()
        .map(|(_, r)| r)
        .find(|r| r.seq == request.finding)
    else {
        return Err(Error::UnknownFinding {
            seq: request.finding,
            path: log.path().to_path_buf(),
            last_seq: scan.records.last().map_or(0, |(_, r)| r.seq),
        });
    };
    if record.kind != "injection_suspected" && record.kind != "injection_observed" {
        return Err(Error::NotAFinding {
            seq: record.seq,
            kind: record.kind.clone(),
        });
    }
    let key = finding_key(record, &repositories(&scan));
    let appended = log.append(
        &record.run_id,
        Event::InjectionTriaged {
            finding: record.seq,
            status: request.status,
            note: note.clone(),
            by: by.to_string(),
            key,
        },
    )?;
    Ok(TriageEntry {
        seq: appended.seq,
        ts: appended.ts,
        status: request.status,
        by: by.to_string(),
        note,
    })
}

/// The keys whose latest triage is a dismissal, each with the seq of that triage record: what
/// the supervisor loads at run start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DismissedKeys {
    keys: BTreeMap<FindingKey, u64>,
}

impl DismissedKeys {
    /// The seq of the triage record that dismissed `key`, if it is dismissed.
    pub fn dismissed_by(&self, key: &FindingKey) -> Option<u64> {
        self.keys.get(key).copied()
    }

    /// How many keys are dismissed.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No key is dismissed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The dismissed keys of a scanned log.
pub fn dismissed_keys(scan: &Scan) -> DismissedKeys {
    let mut latest: BTreeMap<FindingKey, (TriageStatus, u64)> = BTreeMap::new();
    for (_, key, entry) in triage_records(scan) {
        if let Some(key) = key {
            latest.insert(key, (entry.status, entry.seq));
        }
    }
    DismissedKeys {
        keys: latest
            .into_iter()
            .filter(|(_, (status, _))| *status == TriageStatus::Dismissed)
            .map(|(key, (_, seq))| (key, seq))
            .collect(),
    }
}

/// The dismissed keys of the log at `path`; a log that does not exist yet has none.
pub fn load_dismissed_keys(path: impl AsRef<Path>) -> Result<DismissedKeys> {
    let path = path.as_ref();
    if !path.exists() {
        return Ok(DismissedKeys::default());
    }
    Ok(dismissed_keys(&scan(path)?))
}

/// A confirmed finding of a run, as the broker's view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfirmedFinding {
    /// Seq of the finding.
    pub finding: u64,
    /// Where the text was.
    pub path: String,
    /// Line, when known.
    pub line: Option<u64>,
    /// Detector rule (`None` for a finding the model reported).
    pub rule: Option<String>,
    /// The excerpt, raw.
    pub excerpt: String,
    /// Who confirmed it.
    pub by: String,
    /// Their note.
    pub note: Option<String>,
    /// Seq of the confirming triage record.
    pub triage: u64,
}

/// The confirmed findings of every run, by run id (sorted by finding seq within a run).
pub fn confirmed_by_run(scan: &Scan) -> BTreeMap<String, Vec<ConfirmedFinding>> {
    let mut out: BTreeMap<String, Vec<ConfirmedFinding>> = BTreeMap::new();
    for i in crate::query::injections(scan, None) {
        if i.status != FindingStatus::Confirmed {
            continue;
        }
        let Some(last) = i.triage.last() else {
            continue;
        };
        out.entry(i.run_id.clone())
            .or_default()
            .push(ConfirmedFinding {
                finding: i.seq,
                path: i.path.clone(),
                line: i.line,
                rule: i.rule.clone(),
                excerpt: i.excerpt.clone(),
                by: last.by.clone(),
                note: last.note.clone(),
                triage: last.seq,
            });
    }
    for list in out.values_mut() {
        list.sort_by_key(|c| c.finding);
    }
    out
}

/// The confirmed findings of run `run_id`.
pub fn confirmed_findings(scan: &Scan, run_id: &str) -> Vec<ConfirmedFinding> {
    confirmed_by_run(scan).remove(run_id).unwrap_or_default()
}

/// What screening needs to know about the run beyond the text: its repository, the blob id of
/// each tracked path at the pinned commit, and the keys already dismissed (loaded at run start).
#[derive(Debug, Clone, Default)]
pub struct ScreenContext {
    /// The repository as the run's `run_started` record names it.
    pub repository: String,
    /// Tracked path → git blob id (40 hex) at the pinned commit.
    pub blobs: BTreeMap<String, String>,
    /// Keys dismissed before the run started.
    pub dismissed: DismissedKeys,
}

impl ScreenContext {
    /// The `blob` of a finding in text from `path`: the tree's blob id for a tracked file,
    /// else `sha256:` and the SHA-256 of the excerpt's line.
    pub fn blob_of(&self, source: SourceKind, path: &str, finding: &Finding) -> String {
        match self.blobs.get(path) {
            Some(blob) if source == SourceKind::File => blob.clone(),
            _ => format!("sha256:{}", sha256_hex(finding.excerpt.as_bytes())),
        }
    }
}

/// One recorded finding of [`record_screened_injections`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenedFinding {
    /// What the detector found.
    pub finding: Finding,
    /// Seq of its `injection_suspected` record.
    pub seq: u64,
    /// The triage record that had already dismissed its key; `None` for a new finding.
    pub dismissed_by: Option<u64>,
}

impl ScreenedFinding {
    /// Not dismissed before: a finding the run must report.
    pub fn is_new(&self) -> bool {
        self.dismissed_by.is_none()
    }
}

/// What screening one text recorded: its findings and the borderline spans the same scan
/// found (recorded nowhere yet: a second opinion may ask about them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Screened {
    /// The recorded findings.
    pub findings: Vec<ScreenedFinding>,
    /// Spans that nearly fired a rule (see [`crate::detect::NearMiss`]).
    pub borderline: Vec<Borderline>,
}

/// Run the detector over `text` and append one `injection_suspected` record per finding, each
/// with its blob id and, when its key was dismissed, the dismissing triage record (the finding
/// is recorded all the same). The text is not changed; the caller hands it on.
pub fn record_screened_injections(
    log: &AuditLog,
    run_id: &str,
    text: &str,
    source: SourceKind,
    path: &str,
    context: &ScreenContext,
) -> Result<Vec<ScreenedFinding>> {
    Ok(record_screening(log, run_id, text, source, path, context)?.findings)
}

/// [`record_screened_injections`], also returning the borderline spans of the scan.
pub fn record_screening(
    log: &AuditLog,
    run_id: &str,
    text: &str,
    source: SourceKind,
    path: &str,
    context: &ScreenContext,
) -> Result<Screened> {
    let screening = screen(text, source, Some(path));
    let mut findings = Vec::new();
    for f in screening.findings {
        let blob = context.blob_of(source, path, &f);
        let dismissed_by = context.dismissed.dismissed_by(&FindingKey {
            repository: context.repository.clone(),
            path: path.to_string(),
            blob: blob.clone(),
            rule: f.rule.as_str().to_string(),
        });
        let record = log.append(
            run_id,
            Event::InjectionSuspected {
                path: path.to_string(),
                line: f.line,
                rule: f.rule.as_str().to_string(),
                excerpt: f.excerpt.clone(),
                source,
                blob: Some(blob),
                dismissed_by,
            },
        )?;
        findings.push(ScreenedFinding {
            finding: f,
            seq: record.seq,
            dismissed_by,
        });
    }
    Ok(Screened {
        findings,
        borderline: screening.borderline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_from_their_names_and_refuse_anything_else() {
        for t in TriageStatus::ALL {
            assert_eq!(t.as_str().parse::<TriageStatus>().unwrap(), t);
        }
        assert_eq!(
            "needs-review".parse::<FindingStatus>().unwrap(),
            FindingStatus::NeedsReview
        );
        let err = "new".parse::<TriageStatus>().unwrap_err().to_string();
        assert!(
            err.contains("confirmed, dismissed or needs-review"),
            "{err}"
        );
        assert!("Dismissed".parse::<FindingStatus>().is_err());
    }
}
