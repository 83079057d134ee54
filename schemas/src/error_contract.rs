//! The broker's error contract (`schemas/error.json`): what a refused `open_pr` call returns.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::types::DiffDigest;
use crate::validate::SchemaViolation;

/// The five error codes. Only [`ErrorCode::SchemaInvalid`] is retryable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The arguments failed the schema; returns the failing JSON pointer and the constraint.
    SchemaInvalid,
    /// The claimed digest differs from the recomputed one; returns both side by side.
    DigestMismatch,
    /// Allowlist breach, an organisation gate's deny, witness run not green, or a second `open_pr`;
    /// returns what offended.
    PolicyViolation,
    /// A reviewer refused the diff; returns their one-line reason.
    ApprovalDenied,
    /// Nobody approved in time; returns the queue age.
    ApprovalTimeout,
}

impl ErrorCode {
    /// Every code, in contract order.
    pub const ALL: [ErrorCode; 5] = [
        ErrorCode::SchemaInvalid,
        ErrorCode::DigestMismatch,
        ErrorCode::PolicyViolation,
        ErrorCode::ApprovalDenied,
        ErrorCode::ApprovalTimeout,
    ];

    /// The wire string, e.g. `"SCHEMA_INVALID"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::SchemaInvalid => "SCHEMA_INVALID",
            ErrorCode::DigestMismatch => "DIGEST_MISMATCH",
            ErrorCode::PolicyViolation => "POLICY_VIOLATION",
            ErrorCode::ApprovalDenied => "APPROVAL_DENIED",
            ErrorCode::ApprovalTimeout => "APPROVAL_TIMEOUT",
        }
    }

    /// Whether the model may fix its call and try again. True for `SCHEMA_INVALID` alone:
    /// iterating against any other check is a search for a shape that slips through.
    pub fn retryable(self) -> bool {
        matches!(self, ErrorCode::SchemaInvalid)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused `open_pr` call as returned to the supervisor (and shown to the model).
///
/// Build it with the constructors so that `retryable` and `details` always match the contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerError {
    /// Which contract clause refused the call.
    pub code: ErrorCode,
    /// True only for `SCHEMA_INVALID`.
    pub retryable: bool,
    /// One human-readable sentence.
    pub message: String,
    /// Code-specific payload; its shape is fixed by `schemas/error.json`.
    pub details: Value,
}

impl BrokerError {
    /// `SCHEMA_INVALID` with every violation (`details.violations`: pointer, keyword, message).
    pub fn schema_invalid(violations: &[SchemaViolation]) -> BrokerError {
        let message = match violations.first() {
            Some(v) => format!(
                "open_pr arguments fail the schema at {:?} ({}): {}{}",
                v.pointer,
                v.keyword,
                v.message,
                if violations.len() > 1 {
                    format!(" (and {} more)", violations.len() - 1)
                } else {
                    String::new()
                }
            ),
            None => "open_pr arguments fail the schema".to_string(),
        };
        BrokerError {
            code: ErrorCode::SchemaInvalid,
            retryable: true,
            message,
            details: json!({ "violations": violations }),
        }
    }

    /// `DIGEST_MISMATCH`: the broker's digest beside the claimed one and the differing fields.
    pub fn digest_mismatch(claimed: &DiffDigest, computed: &DiffDigest) -> BrokerError {
        let fields = claimed.mismatched_fields(computed);
        BrokerError {
            code: ErrorCode::DigestMismatch,
            retryable: false,
            message: format!(
                "the claimed diff_digest differs from the recomputed one in: {}",
                fields.join(", ")
            ),
            details: json!({ "claimed": claimed, "computed": computed, "fields": fields }),
        }
    }

    /// `POLICY_VIOLATION`: `offending` is the path or the check that failed (e.g. a refused
    /// path, `witness_run`, `second_open_pr`), `rule` the policy rule and `reason` why.
    pub fn policy_violation(offending: &str, rule: &str, reason: &str) -> BrokerError {
        BrokerError {
            code: ErrorCode::PolicyViolation,
            retryable: false,
            message: format!("policy violation: {offending}: {reason} (rule {rule})"),
            details: json!({ "offending": offending, "rule": rule, "reason": reason }),
        }
    }

    /// `POLICY_VIOLATION` from one of the organisation's gates: the gate's name, the digest of
    /// the component that decided, and its reason (the gate's own words, or why it failed).
    pub fn gate_denied(gate: &str, gate_digest: &str, reason: &str) -> BrokerError {
        let rule = format!("gate:{gate}");
        BrokerError {
            code: ErrorCode::PolicyViolation,
            retryable: false,
            message: format!(
                "policy violation: the gate {gate:?} denied this diff: {reason} (rule {rule})"
            ),
            details: json!({
                "offending": format!("gate {gate}"),
                "rule": rule,
                "reason": reason,
                "gate": gate,
                "gate_digest": gate_digest,
            }),
        }
    }

    /// `APPROVAL_DENIED` with the reviewer's one-line reason.
    pub fn approval_denied(reason: &str) -> BrokerError {
        BrokerError {
            code: ErrorCode::ApprovalDenied,
            retryable: false,
            message: format!("the reviewer denied the pull request: {reason}"),
            details: json!({ "reason": reason }),
        }
    }

    /// `APPROVAL_TIMEOUT` with the age of the queued request in seconds.
    pub fn approval_timeout(queue_age_seconds: u64) -> BrokerError {
        BrokerError {
            code: ErrorCode::ApprovalTimeout,
            retryable: false,
            message: format!(
                "no approval after {queue_age_seconds} s in the queue; the diff is retained for a human"
            ),
            details: json!({ "queue_age_seconds": queue_age_seconds }),
        }
    }

    /// The error as the JSON object of `schemas/error.json`.
    pub fn to_json(&self) -> Value {
        // Serialising plain strings, bools and a Value cannot fail; Null keeps us panic-free.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl std::fmt::Display for BrokerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for BrokerError {}
