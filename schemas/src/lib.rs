//! airlock-schemas owns the contracts that cross a trust boundary: the `open_pr` tool
//! arguments a model emits and the broker checks, the supervisor's final `Outcome`, a reader's
//! `ReaderDigest`, the judge's `JudgeVerdict`, the reviewer agent's `Review`, the broker's error contract (`BrokerError`),
//! and the shape of one line of a run's trajectory (`Schema::TrajectoryEvent`).
//!
//! The JSON Schema 2020-12 files in `schemas/` are the source of truth; they are embedded with
//! `include_str!` so binaries need no files at run time, and the serde types here mirror them
//! (the tests fail when the two drift). Validation uses `jsonschema` without network or file
//! resolution. This crate must never perform I/O, hold policy (which paths may be written lives
//! in `airlock-policies`), or restate a schema anywhere else: other crates take it from here.
//!
//! Typical intake, in the broker or the supervisor:
//!
//! ```
//! use airlock_schemas::{parse, BrokerError, OpenPr};
//! let text = r#"{"issue_id": "ABC-1"}"#;
//! match parse::<OpenPr>(text) {
//!     Ok(call) => println!("{}", call.title),
//!     Err(err) => {
//!         // Schema failures become the one retryable error code.
//!         let refusal = BrokerError::schema_invalid(&err.violations());
//!         assert!(refusal.retryable);
//!     }
//! }
//! ```

mod error_contract;
mod types;
mod validate;

pub use error_contract::{BrokerError, ErrorCode};
pub use types::{
    Anchor, DiffDigest, DiffSide, JudgeScores, JudgeVerdict, OpenPr, Outcome, OutcomeKind,
    OutcomeTestEvidence, ReaderDigest, Review, ReviewComment, ReviewVerdict, RunResult, Scope,
    TestChangeReason, TestEvidence, Verdict,
};
pub use validate::{Contract, READER_ANSWER_MAX_WORDS, Schema, SchemaViolation, from_value, parse};

use serde_json::{Value, json};

/// Name of the gated tool.
pub const OPEN_PR_TOOL_NAME: &str = "open_pr";

/// The tool description models see beside the `open_pr` input schema.
pub const OPEN_PR_TOOL_DESCRIPTION: &str = "Submit the sandbox working tree as a pull request. GATED: this call suspends the run and is queued for human approval. The approver sees the full unified diff, these arguments verbatim, and the attached test output. Executes in the PR broker outside the sandbox; you never see the credential and you cannot influence how the diff is applied. At most one accepted call per run. Do not call this until a no-selector test run is green.";

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not a single JSON document.
    #[error("{schema}: input is not valid JSON at line {line}, column {column}: {message}")]
    NotJson {
        /// Schema the input was meant for.
        schema: &'static str,
        /// 1-based line of the parse failure.
        line: usize,
        /// 1-based column of the parse failure.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The input is JSON but breaks the contract.
    #[error("{schema}: {} violation(s); first at {:?}: {}", violations.len(), violations.first().map(|v| v.pointer.as_str()).unwrap_or(""), violations.first().map(|v| v.message.as_str()).unwrap_or(""))]
    Invalid {
        /// Schema that was violated.
        schema: &'static str,
        /// Every violation, sorted by pointer.
        violations: Vec<SchemaViolation>,
    },
    /// An embedded schema file does not parse or compile (a build defect, caught by tests).
    #[error("embedded schema {file} is broken: {message}")]
    BrokenSchema {
        /// The file inside `schemas/`.
        file: &'static str,
        /// Why it failed.
        message: String,
    },
}

impl Error {
    /// The violations to return to a model under `SCHEMA_INVALID`. A parse failure is reported
    /// at pointer `""` with keyword `json`; a broken embedded schema yields an empty list (it is
    /// the broker's fault, not the model's, and must not be presented as retryable).
    pub fn violations(&self) -> Vec<SchemaViolation> {
        match self {
            Error::NotJson { message, .. } => vec![SchemaViolation {
                pointer: String::new(),
                keyword: "json".to_string(),
                message: message.clone(),
            }],
            Error::Invalid { violations, .. } => violations.clone(),
            Error::BrokenSchema { .. } => Vec::new(),
        }
    }
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// The full `open_pr` tool definition handed to a model: `name`, `description`,
/// `input_schema` (exactly `schemas/open_pr.json`) and `x_error_contract`.
pub fn open_pr_tool() -> Result<Value> {
    let input_schema = Schema::OpenPr.value()?.clone();
    Ok(json!({
        "name": OPEN_PR_TOOL_NAME,
        "description": OPEN_PR_TOOL_DESCRIPTION,
        "input_schema": input_schema,
        "x_error_contract": error_contract()?,
    }))
}

/// The `x_error_contract` array of `schemas/error.json`: one entry per code with
/// `retryable`, what it `returns` and a `note` for the model.
pub fn error_contract() -> Result<Value> {
    Ok(Schema::BrokerError
        .value()?
        .get("x_error_contract")
        .cloned()
        .unwrap_or(Value::Array(Vec::new())))
}
