//! Errors of the audit crate.

use std::path::PathBuf;

/// Everything that can go wrong while writing, reading or verifying an audit log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log (or its lock, or its head file) could not be opened, read or written.
    #[error("audit log {path}: {action}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What was being done when the I/O error happened.
        action: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The end of the log is not a valid record and is not a torn write either, so appending
    /// would extend a chain whose state cannot be established.
    #[error(
        "audit log {path}: line {line} (byte {offset}) is not a valid record: {reason}; \
         refusing to append. Run `airlock audit verify {path}` and have an operator inspect the file"
    )]
    CorruptTail {
        /// The log.
        path: PathBuf,
        /// 1-based line number of the offending line.
        line: u64,
        /// Byte offset where the offending line starts.
        offset: u64,
        /// Why the line is not accepted.
        reason: String,
    },
    /// A run id that cannot be recorded (empty, too long or containing control characters).
    #[error("invalid run id {run_id:?}: {reason}")]
    InvalidRunId {
        /// The rejected run id.
        run_id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An event field that must never be recorded (for example something that looks like a key
    /// where a model name belongs).
    #[error("refusing to record event {kind}: field {field} {reason}")]
    RejectedField {
        /// The event kind.
        kind: &'static str,
        /// The field name.
        field: &'static str,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A record's payload does not have the shape its kind requires.
    #[error("record seq {seq}: payload of kind {kind} does not match its schema: {source}")]
    Payload {
        /// Sequence number of the record.
        seq: u64,
        /// The record's kind.
        kind: String,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// A timestamp or duration given by a person could not be understood.
    #[error(
        "cannot read time {input:?}: expected RFC 3339 (2026-11-29T18:00:00Z), a date (2026-11-29) \
         or an age such as 30m, 24h, 7d"
    )]
    BadTime {
        /// What was given.
        input: String,
    },
    /// No audit log path was given and none could be derived from the environment.
    #[error(
        "no data directory: pass --log PATH, or set AIRLOCK_AUDIT_LOG, AIRLOCK_HOME, XDG_DATA_HOME or HOME"
    )]
    NoDefaultPath,
    /// A labelled corpus file could not be used.
    #[error("corpus {path}: {reason}")]
    Corpus {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, with where when known.
        reason: String,
    },
    /// Serialising a record failed (should not happen for the typed events).
    #[error("cannot serialise event {kind}: {source}")]
    Serialize {
        /// The event kind.
        kind: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A triage or finding status that does not exist.
    #[error("unknown status {input:?}: expected {expected}")]
    BadStatus {
        /// What was given.
        input: String,
        /// The statuses that exist.
        expected: &'static str,
    },
    /// A triage note that is empty or only whitespace.
    #[error("the note is empty: say in --note why the finding is {status}")]
    BlankNote {
        /// The verdict it was given with.
        status: crate::verdict::TriageStatus,
    },
    /// A verdict that must say why was given without a note.
    #[error("a {status} verdict needs a reason: pass --note TEXT saying why")]
    MissingNote {
        /// The verdict.
        status: crate::verdict::TriageStatus,
    },
    /// No one to record as the triager.
    #[error("no name to record as the triager: pass --by NAME, or set $USER or $LOGNAME")]
    NoReviewer,
    /// A triage id that is no record of the log.
    #[error(
        "no record with id {seq} in {path} (its records are 1 to {last_seq}); \
         use an id from `airlock audit injections`"
    )]
    UnknownFinding {
        /// The id given.
        seq: u64,
        /// The log.
        path: PathBuf,
        /// The last seq of the log.
        last_seq: u64,
    },
    /// A triage id that names a record other than an injection finding.
    #[error(
        "record {seq} is a {kind} record, not an injection finding; \
         use an id from `airlock audit injections` (an injection_suspected or injection_observed record)"
    )]
    NotAFinding {
        /// The id given.
        seq: u64,
        /// The kind of the record it names.
        kind: String,
    },
}

/// Result type of the audit crate.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io(
    path: &std::path::Path,
    action: &'static str,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        path,
        action,
        source,
    }
}
