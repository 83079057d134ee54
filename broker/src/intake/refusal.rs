//! Why an intake stage stopped a submission, kept typed until the reply is built: a
//! [`Refusal`] names the code, the offending field or path, the rule and the details, and
//! [`Refusal::into_broker_error`] is the one place it becomes the error contract's
//! [`BrokerError`], the text the model reads. A stage that cannot finish for an operational
//! reason (a store, a clone, the sandbox) halts with [`Halt::Failed`]: the request stays
//! unanswered and can be retried.
//!
//! This module imports no stage: every stage imports it.

use airlock_policies::{Finding, TestCodeFinding};
use airlock_schemas::{BrokerError, DiffDigest, SchemaViolation};

use crate::error::Error;
use crate::rules::finding_flags;
use crate::witness::WitnessOutput;

/// What a stage answers: its typed output, or why the intake stops.
pub type Stage<T> = std::result::Result<T, Halt>;

/// Why an intake stops before the queue.
#[derive(Debug)]
pub enum Halt {
    /// A verdict on the submission, recorded and returned to the run.
    Refused(Refusal),
    /// The broker could not finish (nothing is recorded as the reply).
    Failed(Error),
}

impl From<Error> for Halt {
    fn from(error: Error) -> Self {
        Halt::Failed(error)
    }
}

impl From<Refusal> for Halt {
    fn from(refusal: Refusal) -> Self {
        Halt::Refused(refusal)
    }
}

/// What a schema refusal was about: the message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// The open_pr arguments.
    OpenPr,
    /// A reviewer agent's review.
    Review,
}

/// A refusal under the error contract, before it is rendered.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// POLICY_VIOLATION: the offending field or path (or check), the rule, and why.
    Policy {
        /// The field, path or check that failed.
        offending: String,
        /// The rule.
        rule: String,
        /// Why, for the model.
        reason: String,
    },
    /// POLICY_VIOLATION by a refusing test-code rule, naming the file, the line and the rule.
    TestCode(Box<TestCodeFinding>),
    /// POLICY_VIOLATION `witness_green`: the first unmet requirement, the diff's changes to
    /// pinned tests the witness set aside with the detectors' findings in them, and every
    /// step's output.
    WitnessNotGreen {
        /// The witness's first unmet requirement.
        failure: String,
        /// Pinned test files the diff changed (they ran as pinned).
        set_aside: Vec<String>,
        /// The detectors' findings in those files.
        set_aside_findings: Vec<Finding>,
        /// Every step that ran.
        outputs: Vec<WitnessOutput>,
    },
    /// SCHEMA_INVALID, with the weakenings behind a bounded digest field when the broker could
    /// find them.
    Schema {
        /// What failed the schema.
        subject: Subject,
        /// Every violation.
        violations: Vec<SchemaViolation>,
        /// The detectors' findings of the kinds the violated fields count.
        weakenings: Vec<Finding>,
    },
    /// DIGEST_MISMATCH, with the weakenings behind the counted fields.
    DigestMismatch {
        /// The run's claim.
        claimed: Box<DiffDigest>,
        /// The broker's recomputation.
        computed: Box<DiffDigest>,
        /// The detectors' `assertion-removed` and `skip-marker-added` findings.
        weakenings: Vec<Finding>,
    },
    /// POLICY_VIOLATION by one of the organisation's gates.
    GateDenied {
        /// The gate's name.
        gate: String,
        /// The sha256 of the component that decided.
        digest: String,
        /// The gate's words, or why it failed.
        reason: String,
    },
}

impl Refusal {
    /// A POLICY_VIOLATION.
    pub fn policy(offending: &str, rule: &str, reason: &str) -> Self {
        Refusal::Policy {
            offending: offending.to_owned(),
            rule: rule.to_owned(),
            reason: reason.to_owned(),
        }
    }

    /// The refusal as the error contract's error, its text rendered here.
    pub fn into_broker_error(self) -> BrokerError {
        match self {
            Refusal::Policy {
                offending,
                rule,
                reason,
            } => BrokerError::policy_violation(&offending, &rule, &reason),
            Refusal::TestCode(f) => {
                let mut err = BrokerError::policy_violation(
                    &f.file,
                    &f.rule,
                    &format!("line {}: `{}`: {}", f.line, f.excerpt, f.reason),
                );
                if let Some(details) = err.details.as_object_mut() {
                    details.insert("line".to_owned(), serde_json::json!(f.line));
                }
                err
            }
            Refusal::WitnessNotGreen {
                failure,
                set_aside,
                set_aside_findings,
                outputs,
            } => {
                let mut err = BrokerError::policy_violation(
                    "witness_run",
                    "witness_green",
                    &format!(
                        "witness not green: {failure}{}",
                        set_aside_note(&set_aside, &set_aside_findings)
                    ),
                );
                if let Some(details) = err.details.as_object_mut() {
                    details.insert(
                        "outputs".to_owned(),
                        serde_json::to_value(&outputs).unwrap_or_default(),
                    );
                }
                err
            }
            Refusal::Schema {
                subject,
                violations,
                weakenings,
            } => {
                let mut err = BrokerError::schema_invalid(&violations);
                if subject == Subject::Review {
                    err.message =
                        err.message
                            .replacen("open_pr arguments fail", "the review fails", 1);
                }
                let findings = finding_flags(&weakenings);
                if !findings.is_empty() {
                    err.message = format!(
                        "{}; the weakening in the diff: {}",
                        err.message,
                        findings.join("; ")
                    );
                    if let Some(details) = err.details.as_object_mut() {
                        details.insert("findings".to_owned(), serde_json::json!(findings));
                    }
                }
                err
            }
            Refusal::DigestMismatch {
                claimed,
                computed,
                weakenings,
            } => {
                let mut err = BrokerError::digest_mismatch(&claimed, &computed);
                let findings = finding_flags(&weakenings);
                if !findings.is_empty() {
                    err.message
                        .push_str(&format!("; the detectors found: {}", findings.join("; ")));
                    if let Some(details) = err.details.as_object_mut() {
                        details.insert("findings".to_owned(), serde_json::json!(findings));
                    }
                }
                err
            }
            Refusal::GateDenied {
                gate,
                digest,
                reason,
            } => BrokerError::gate_denied(&gate, &digest, &reason),
        }
    }
}

/// For a witness that is not green: the diff's changes to pinned test files, which the witness
/// set aside (they ran as pinned), and the detectors' findings in them, so the refusal names
/// the weakening as well as the pinned test that failed. Empty when the diff changed none.
fn set_aside_note(set_aside: &[String], findings: &[Finding]) -> String {
    if set_aside.is_empty() {
        return String::new();
    }
    let mut note = format!(
        "; the diff's changes to pinned tests were set aside (they ran as pinned): {}",
        set_aside.join(", ")
    );
    let findings = finding_flags(findings);
    if !findings.is_empty() {
        note.push_str(&format!(
            "; the detectors found there: {}",
            findings.join("; ")
        ));
    }
    note
}
