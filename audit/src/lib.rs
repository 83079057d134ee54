//! airlock-audit owns the tamper-evident record of every run and the deterministic
//! prompt-injection detector.
//!
//! The log is append-only JSONL, one record per line:
//! `{"seq","ts","run_id","kind","payload","prev","hash"}`. `prev` is the SHA-256 of the previous
//! line's exact bytes (a hash chain), `hash` the SHA-256 of the line without its `hash` member.
//! The supervisor and the broker append from separate processes at the same time
//! ([`AuditLog::append`] takes an exclusive `flock` and re-reads the tail under it); records
//! that matter ([`Event::must_sync`]) are fsynced before `append` returns, and
//! [`LogOptions::sync_all`] fsyncs every record. A torn last line is reported by
//! [`AuditLog::torn_tail`] and [`verify`], and repaired by the next append with a
//! `tail_repaired` record that keeps the torn bytes in place. [`verify`] names every edited,
//! removed, inserted or reordered record (kind, seq and line), a torn tail, and records cut off
//! the end (against the `<log>.head` file). [`injections`] and [`timeline`] answer the security
//! team's and the operator's questions. [`detect()`] flags text that tries to steer an agent;
//! [`triage()`] records the security team's verdict on a finding, and [`dismissed_keys`] and
//! [`confirmed_by_run`] are what the supervisor and the broker read back of it.
//! [`make_visible`] renders a copy of a text with its invisible characters shown, for the edge
//! that hands it to a model or a person (after screening, which sees the original).
//!
//! This crate must never: rewrite or delete a record (the only change to existing bytes is the
//! newline that ends a torn write); record a credential or a prompt (events have no field for
//! either, and [`Event::ModelCall`] refuses a key-shaped model name); alter or block the text
//! it scans (the detector only reports); or talk to the network. It depends on no other
//! airlock crate, so everything may depend on it.
//!
//! Default log path when none is given: `$AIRLOCK_AUDIT_LOG`, else
//! `$AIRLOCK_HOME/audit.jsonl`, else `~/.local/share/airlock/audit.jsonl`
//! ([`default_log_path`]).

mod corpus;
pub mod detect;
mod error;
mod evaluate;
mod event;
mod log;
mod query;
mod record;
mod time;
mod triage;
mod verdict;
mod verify;

pub use corpus::{ClassCount, CorpusReport, FlaggedFile, scan_corpus};
pub use detect::{
    Borderline, Finding, HiddenKind, NearMiss, Rule, Screening, SourceKind, Visible, detect,
    make_visible, screen,
};
pub use error::{Error, Result};
pub use evaluate::{
    CorpusItem, Expect, InjectionEval, ItemSource, Miss, Tally, evaluate, load_labelled,
};
pub use event::{
    BlockedNetwork, Event, ReadBy, ReferenceRepoPin, RunOutcome, SecondVerdict, TestResult,
    TestScope,
};
pub use log::{AuditLog, LogOptions, TornTail, head_path};
pub use query::{
    BorderlineOpinion, FileReadEntry, Injection, RefusedReadEntry, Scan, SecondOpinion,
    borderline_opinions, data_dir, default_log_path, file_reads, injections, refused_reads, scan,
    timeline,
};
pub use record::{GENESIS, Record, sha256_hex};
pub use time::{Timestamp, parse_duration};
pub use triage::{
    ConfirmedFinding, DismissedKeys, ScreenContext, Screened, ScreenedFinding, TriageRequest,
    confirmed_by_run, confirmed_findings, dismissed_keys, load_dismissed_keys,
    record_screened_injections, record_screening, triage,
};
pub use verdict::{FindingKey, FindingStatus, TriageEntry, TriageStatus};
pub use verify::{Problem, ProblemKind, RepairedTail, VerifyReport, verify};

/// Run the detector over `text` and append one `injection_suspected` event per finding to
/// `log` for run `run_id`, with no knowledge of the run's tree or of past triage (every finding
/// is new, and its blob is the SHA-256 of its line); a run screens through
/// [`record_screened_injections`]. Returns the findings (the text itself is untouched and is
/// still handed to the model by the caller).
pub fn record_suspected_injections(
    log: &AuditLog,
    run_id: &str,
    text: &str,
    source: SourceKind,
    path: &str,
) -> Result<Vec<Finding>> {
    let screened =
        record_screened_injections(log, run_id, text, source, path, &ScreenContext::default())?;
    Ok(screened.into_iter().map(|s| s.finding).collect())
}
