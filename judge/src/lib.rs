//! airlock-judge owns the score of a queued diff: the rubric the judge's model reads, the
//! request built from the artefact (issue, diff, before/after test output, witness result, PR
//! body, and the codebase context the agent started from), one repair turn when the answer breaks
//! `judge_verdict.json`, the rules enforced in code whatever the model says (a `test_honesty` or
//! `root_cause` of 1 forces reject; an unsupported claim caps `faithfulness` at 2; a detector's
//! weakening flag caps `test_honesty`; accept only when nothing blocks it), and calibration
//! against hand-scored cases (per-dimension agreement, Cohen's kappa on the verdict, the accept
//! rate against a ceiling).
//!
//! It must never send the agent's trace or reasoning to its model ([`JudgeInput`] has no field
//! for either), never decide whether a diff merges (it only scores), never write to a
//! repository or the broker's queue itself (the caller attaches the [`Judgement`]), and never
//! restate a schema (the verdict contract lives in `airlock-schemas`).

mod calibrate;
mod context;
mod error;
mod rubric;
mod rules;

pub use calibrate::{
    CalibrationCase, CalibrationReport, CaseResult, DIMENSIONS, DimensionAgreement, accept_rate,
    accept_rate_warning, agreement, cohen_kappa, load_cases, report,
};
pub use context::{
    CANDIDATE_FILE_MAX_BYTES, Evidence, FILE_TREE_CHARS, SEARCH_CANDIDATES, Submission,
    base_paths_touched, codebase_context, judge_input,
};
pub use error::{Error, Result};
pub use rubric::{render_artefact, request, rubric};
pub use rules::{
    AppliedRule, CrossChecks, TEST_CLAIM_PHRASES, UNSUPPORTED_CLAIM_FAITHFULNESS_CAP,
    WEAKENING_FLAG_TEST_HONESTY_CAP, cross_check, enforce, new_test_files,
};

use airlock_model::{ChatModel, Message};
use airlock_schemas::{JudgeVerdict, Schema, SchemaViolation};
use serde::{Deserialize, Serialize};

/// Accept-rate ceiling used when none is configured: above it the judge is being generous.
pub const DEFAULT_ACCEPT_RATE_CEILING: f64 = 0.3;

/// One file of the codebase context, as of the base commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateFile {
    /// Repository-relative path.
    pub path: String,
    /// Content (bounded by whoever built the context).
    pub content: String,
}

/// The codebase context the agent started with: a file tree and the candidate files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodebaseContext {
    /// The rendered file tree at the base commit.
    pub file_tree: String,
    /// Candidate files, sorted by path.
    pub candidate_files: Vec<CandidateFile>,
}

/// Everything the judge looks at. Deliberately no field for the agent's trace or reasoning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeInput {
    /// The issue identifier.
    pub issue_id: String,
    /// The issue text.
    pub issue_text: String,
    /// The unified diff the broker computed.
    pub diff: String,
    /// Test output at the base commit (the failing selector).
    pub before_output: String,
    /// Test output after the change (the full run).
    pub after_output: String,
    /// The witness run's result, one line per step.
    pub witness_result: String,
    /// The pull-request body, verbatim.
    pub pr_body: String,
    /// The detectors' flags (used by the code rules; not sent to the model).
    pub flags: Vec<String>,
    /// File tree and candidate files at the base commit.
    pub context: CodebaseContext,
}

/// How scoring ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Judgement {
    /// A valid verdict, after the code rules.
    Scored {
        /// The final verdict (schema-valid, rules applied).
        verdict: JudgeVerdict,
        /// What the model answered, before the rules.
        model_verdict: JudgeVerdict,
        /// The rules that changed something.
        rules_applied: Vec<AppliedRule>,
        /// Whether the answer needed the repair turn.
        repaired: bool,
        /// The judge model's name.
        model: String,
    },
    /// The model's answer broke the contract twice: a recorded failure, not a score.
    Failed {
        /// The violations of the last answer.
        violations: Vec<SchemaViolation>,
        /// The judge model's name.
        model: String,
    },
}

impl Judgement {
    /// The final verdict, when there is one.
    pub fn verdict(&self) -> Option<&JudgeVerdict> {
        match self {
            Judgement::Scored { verdict, .. } => Some(verdict),
            Judgement::Failed { .. } => None,
        }
    }
}

fn ask(model: &dyn ChatModel, req: &airlock_model::ChatRequest) -> Result<String> {
    model
        .chat(req)
        .map(|r| r.message.text)
        .map_err(|source| Error::Model {
            model: model.name().to_owned(),
            source,
        })
}

fn violation(pointer: &str, keyword: &str, message: impl Into<String>) -> SchemaViolation {
    SchemaViolation {
        pointer: pointer.to_owned(),
        keyword: keyword.to_owned(),
        message: message.into(),
    }
}

/// Whether a violation is one of the schema's two conditional rules (`test_honesty` 1 means
/// reject; an unsupported claim caps `faithfulness`). Those are not the model's to repair:
/// [`enforce`] applies them in code.
fn is_enforced_rule(v: &SchemaViolation) -> bool {
    (v.pointer == "/verdict" && v.keyword == "const")
        || (v.pointer == "/scores/faithfulness" && v.keyword == "maximum")
}

/// Read the model's answer: it must be one JSON object of the verdict's shape with every score
/// an integer from 1 to 5. The schema's conditional rules are left to [`enforce`].
fn interpret(text: &str) -> std::result::Result<JudgeVerdict, Vec<SchemaViolation>> {
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| vec![violation("", "json", e.to_string())])?;
    let mut problems: Vec<SchemaViolation> = Schema::JudgeVerdict
        .violations(&value)
        .map_err(|e| vec![violation("", "schema", e.to_string())])?
        .into_iter()
        .filter(|v| !is_enforced_rule(v))
        .collect();
    for dim in DIMENSIONS {
        if let Some(n) = value["scores"][dim].as_i64()
            && !(1..=5).contains(&n)
        {
            problems.push(violation(
                &format!("/scores/{dim}"),
                "range",
                format!("{dim} is {n}; scores are integers from 1 to 5"),
            ));
        }
    }
    if !problems.is_empty() {
        problems.sort();
        problems.dedup();
        return Err(problems);
    }
    serde_json::from_value(value).map_err(|e| vec![violation("", "type", e.to_string())])
}

/// Score `input` with `model`: one request, one repair turn if the answer is not a verdict of
/// the right shape, then the code rules, then the final check against `judge_verdict.json`. A
/// model error is an `Err`; a twice-invalid answer is [`Judgement::Failed`].
pub fn judge(
    model: &dyn ChatModel,
    input: &JudgeInput,
    accept_rate_ceiling: f64,
) -> Result<Judgement> {
    let mut req = request(input, accept_rate_ceiling);
    let first = ask(model, &req)?;
    let (parsed, repaired) = match interpret(&first) {
        Ok(v) => (Ok(v), false),
        Err(violations) => {
            let listing: Vec<String> = violations
                .iter()
                .map(|v| format!("{} ({}): {}", v.pointer, v.keyword, v.message))
                .collect();
            req.messages
                .push(Message::Assistant(airlock_model::AssistantMessage {
                    text: first,
                    tool_calls: Vec::new(),
                }));
            req.messages.push(Message::user(format!(
                "That answer does not satisfy the output contract:\n{}\nReply again with only the JSON object.",
                listing.join("\n")
            )));
            (interpret(&ask(model, &req)?), true)
        }
    };
    let name = model.name().to_owned();
    let model_verdict = match parsed {
        Ok(v) => v,
        Err(violations) => {
            return Ok(Judgement::Failed {
                violations,
                model: name,
            });
        }
    };
    let (verdict, rules_applied) = enforce(model_verdict.clone(), &cross_check(input));
    // The rules make the verdict satisfy the whole schema; checked, not assumed.
    let checked = serde_json::to_value(&verdict)
        .map_err(|e| vec![violation("", "json", e.to_string())])
        .and_then(|v| airlock_schemas::from_value::<JudgeVerdict>(&v).map_err(|e| e.violations()));
    Ok(match checked {
        Ok(verdict) => Judgement::Scored {
            verdict,
            model_verdict,
            rules_applied,
            repaired,
            model: name,
        },
        Err(violations) => Judgement::Failed {
            violations,
            model: name,
        },
    })
}

fn provider(spec: &str) -> &str {
    spec.split_once(':').map(|(p, _)| p).unwrap_or(spec)
}

/// The judge's default model given the supervisor's spec: a different family from it.
pub fn default_judge_model(supervisor_model: Option<&str>) -> String {
    match supervisor_model.map(provider) {
        Some("anthropic") => "openai:gpt-4.1".to_owned(),
        _ => "anthropic:claude-sonnet-4-5".to_owned(),
    }
}

/// A warning when the judge and the supervisor share a model (same spec) or a provider family;
/// same-model judges prefer their own work.
pub fn same_model_warning(judge_model: &str, supervisor_model: Option<&str>) -> Option<String> {
    let sup = supervisor_model?;
    if sup == judge_model {
        Some(format!(
            "the judge uses the supervisor's model ({judge_model}); same-model judges favour their own work"
        ))
    } else if provider(sup) == provider(judge_model)
        && !matches!(provider(sup), "scripted" | "replay")
    {
        Some(format!(
            "the judge ({judge_model}) and the supervisor ({sup}) share a provider family; prefer a different one"
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
