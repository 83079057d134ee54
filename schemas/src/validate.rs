//! Schema lookup, validation and typed intake.

use std::sync::OnceLock;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::types::{JudgeVerdict, OpenPr, Outcome, ReaderDigest, Review};
use crate::{Error, Result};

/// Most words a reader's `answer` may hold. JSON Schema cannot count words, so
/// [`parse`]/[`from_value`] check it in code.
pub const READER_ANSWER_MAX_WORDS: usize = 300;

/// One of the contract files in `schemas/`, embedded in the binary at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Schema {
    /// `open_pr.json`: the gated tool's input schema, handed verbatim to models.
    OpenPr,
    /// `outcome.json`: the supervisor's final message.
    Outcome,
    /// `reader_digest.json`: a reader worker's return.
    ReaderDigest,
    /// `judge_verdict.json`: the judge's score.
    JudgeVerdict,
    /// `error.json`: the broker's error object and the error contract.
    BrokerError,
    /// `review.json`: the reviewer agent's pull request review.
    Review,
    /// `trajectory_event.json`: one line of a run's `trajectory.jsonl`. The supervisor owns
    /// the type that writes it; no crate reads a trajectory back, so there is no serde mirror.
    TrajectoryEvent,
}

struct Compiled {
    value: Value,
    validator: jsonschema::Validator,
}

impl Schema {
    /// Every schema, in a fixed order.
    pub const ALL: [Schema; 7] = [
        Schema::OpenPr,
        Schema::Outcome,
        Schema::ReaderDigest,
        Schema::JudgeVerdict,
        Schema::BrokerError,
        Schema::Review,
        Schema::TrajectoryEvent,
    ];

    /// Short name, e.g. `open_pr`.
    pub fn name(self) -> &'static str {
        match self {
            Schema::OpenPr => "open_pr",
            Schema::Outcome => "outcome",
            Schema::ReaderDigest => "reader_digest",
            Schema::JudgeVerdict => "judge_verdict",
            Schema::BrokerError => "error",
            Schema::Review => "review",
            Schema::TrajectoryEvent => "trajectory_event",
        }
    }

    /// File name inside `schemas/`, e.g. `open_pr.json`.
    pub fn file_name(self) -> &'static str {
        match self {
            Schema::OpenPr => "open_pr.json",
            Schema::Outcome => "outcome.json",
            Schema::ReaderDigest => "reader_digest.json",
            Schema::JudgeVerdict => "judge_verdict.json",
            Schema::BrokerError => "error.json",
            Schema::Review => "review.json",
            Schema::TrajectoryEvent => "trajectory_event.json",
        }
    }

    /// The file's text exactly as committed.
    pub fn source(self) -> &'static str {
        match self {
            Schema::OpenPr => include_str!("../open_pr.json"),
            Schema::Outcome => include_str!("../outcome.json"),
            Schema::ReaderDigest => include_str!("../reader_digest.json"),
            Schema::JudgeVerdict => include_str!("../judge_verdict.json"),
            Schema::BrokerError => include_str!("../error.json"),
            Schema::Review => include_str!("../review.json"),
            Schema::TrajectoryEvent => include_str!("../trajectory_event.json"),
        }
    }

    fn cell(self) -> &'static OnceLock<std::result::Result<Compiled, String>> {
        static CELLS: [OnceLock<std::result::Result<Compiled, String>>; Schema::ALL.len()] =
            [const { OnceLock::new() }; Schema::ALL.len()];
        let index = match self {
            Schema::OpenPr => 0,
            Schema::Outcome => 1,
            Schema::ReaderDigest => 2,
            Schema::JudgeVerdict => 3,
            Schema::BrokerError => 4,
            Schema::Review => 5,
            Schema::TrajectoryEvent => 6,
        };
        &CELLS[index]
    }

    fn compiled(self) -> Result<&'static Compiled> {
        let compiled = self.cell().get_or_init(|| {
            let value: Value = serde_json::from_str(self.source()).map_err(|e| e.to_string())?;
            // Draft 2020-12 explicitly: open_pr.json carries no `$schema` so that it can be
            // handed to models verbatim.
            let validator = jsonschema::draft202012::new(&value).map_err(|e| e.to_string())?;
            Ok(Compiled { value, validator })
        });
        compiled.as_ref().map_err(|message| Error::BrokenSchema {
            file: self.file_name(),
            message: message.clone(),
        })
    }

    /// The schema as JSON. For [`Schema::OpenPr`] this is the tool's `input_schema`.
    pub fn value(self) -> Result<&'static Value> {
        Ok(&self.compiled()?.value)
    }

    /// Every violation of this schema by `instance`, sorted by pointer then keyword.
    /// Empty means valid.
    pub fn violations(self, instance: &Value) -> Result<Vec<SchemaViolation>> {
        let compiled = self.compiled()?;
        let mut out: Vec<SchemaViolation> = compiled
            .validator
            .iter_errors(instance)
            .map(|e| SchemaViolation {
                pointer: e.instance_path().as_str().to_string(),
                keyword: e.kind().keyword().to_string(),
                message: e.to_string(),
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// `Ok(())` when `instance` satisfies the schema, else [`Error::Invalid`].
    pub fn validate(self, instance: &Value) -> Result<()> {
        let violations = self.violations(instance)?;
        if violations.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid {
                schema: self.name(),
                violations,
            })
        }
    }
}

/// One failed constraint: where in the instance, which keyword, and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
pub struct SchemaViolation {
    /// JSON pointer (RFC 6901) of the failing instance location; `""` is the whole document.
    pub pointer: String,
    /// The constraint that failed: a JSON Schema keyword (`pattern`, `maximum`, `required`,
    /// `additionalProperties`, ...) or one of the checks done in code (`json`, `maxWords`,
    /// `lineOrder`, `requiredWhenTestsModified`, `scopeMatchesDigest`, `type`).
    pub keyword: String,
    /// What was expected, for a person or a model to act on.
    pub message: String,
}

impl SchemaViolation {
    fn new(pointer: impl Into<String>, keyword: &str, message: impl Into<String>) -> Self {
        SchemaViolation {
            pointer: pointer.into(),
            keyword: keyword.to_string(),
            message: message.into(),
        }
    }
}

/// A type that crosses a trust boundary as JSON and has a schema file.
pub trait Contract: DeserializeOwned + Serialize {
    /// The schema the JSON must satisfy before it is turned into `Self`.
    const SCHEMA: Schema;

    /// Rules the schema cannot express, checked after the schema passed.
    fn extra_violations(&self) -> Vec<SchemaViolation> {
        Vec::new()
    }
}

impl Contract for OpenPr {
    const SCHEMA: Schema = Schema::OpenPr;

    fn extra_violations(&self) -> Vec<SchemaViolation> {
        use crate::types::{Scope, TestChangeReason};
        let mut out = Vec::new();
        if !self.diff_digest.test_files_modified.is_empty()
            && self.test_change_reason == TestChangeReason::None
        {
            out.push(SchemaViolation::new(
                "/test_change_reason",
                "requiredWhenTestsModified",
                "diff_digest.test_files_modified is non-empty, so test_change_reason must be a non-default value",
            ));
        }
        if !self.diff_digest.test_files_added.is_empty() && self.scope == Scope::SourceOnly {
            out.push(SchemaViolation::new(
                "/scope",
                "scopeMatchesDigest",
                "diff_digest.test_files_added is non-empty, so scope must be \"source-plus-new-tests\"",
            ));
        }
        out
    }
}

impl Contract for Outcome {
    const SCHEMA: Schema = Schema::Outcome;
}

impl Contract for ReaderDigest {
    const SCHEMA: Schema = Schema::ReaderDigest;

    fn extra_violations(&self) -> Vec<SchemaViolation> {
        let mut out = Vec::new();
        let words = self.answer.split_whitespace().count();
        if words > READER_ANSWER_MAX_WORDS {
            out.push(SchemaViolation::new(
                "/answer",
                "maxWords",
                format!("answer has {words} words; at most {READER_ANSWER_MAX_WORDS} are allowed"),
            ));
        }
        for (i, anchor) in self.anchors.iter().enumerate() {
            if anchor.line_end < anchor.line_start {
                out.push(SchemaViolation::new(
                    format!("/anchors/{i}/line_end"),
                    "lineOrder",
                    format!(
                        "line_end {} is before line_start {}",
                        anchor.line_end, anchor.line_start
                    ),
                ));
            }
        }
        out
    }
}

impl Contract for Review {
    const SCHEMA: Schema = Schema::Review;
}

impl Contract for JudgeVerdict {
    const SCHEMA: Schema = Schema::JudgeVerdict;
}

impl Contract for crate::BrokerError {
    const SCHEMA: Schema = Schema::BrokerError;
}

/// Parse `text` as one JSON document, validate it against `T`'s schema and the code-level
/// rules, and return the typed value. Nothing around the JSON is tolerated.
pub fn parse<T: Contract>(text: &str) -> Result<T> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::NotJson {
        schema: T::SCHEMA.name(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    from_value(&value)
}

/// Validate an already parsed JSON value against `T`'s schema and code-level rules.
pub fn from_value<T: Contract>(value: &Value) -> Result<T> {
    T::SCHEMA.validate(value)?;
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| Error::Invalid {
        schema: T::SCHEMA.name(),
        // Reached only if the types drifted from the file (the tests guard against it) or a
        // number the schema calls an integer is written as `1.0`.
        violations: vec![SchemaViolation::new("", "type", e.to_string())],
    })?;
    let mut extra = typed.extra_violations();
    if extra.is_empty() {
        Ok(typed)
    } else {
        extra.sort();
        Err(Error::Invalid {
            schema: T::SCHEMA.name(),
            violations: extra,
        })
    }
}
