//! The final message: extraction of the one JSON object, its parse into
//! [`airlock_schemas::Outcome`] (once; the type is kept from there on), the rules the supervisor
//! enforces on top of `outcome.json` (confidence floor, `pr` only after an accepted `open_pr`),
//! and the escalation the supervisor writes itself when the model cannot.

use airlock_schemas::{Outcome, OutcomeKind, OutcomeTestEvidence, Schema, SchemaViolation};
use serde_json::Value;

/// Below this confidence the outcome is forced to `escalate`.
pub const CONFIDENCE_FLOOR: f64 = 0.6;

/// Parse a message that must be exactly one JSON object. Surrounding whitespace and a single
/// Markdown code fence around the object are tolerated; any other prose is not.
pub fn extract_json_object(text: &str) -> Result<Value, String> {
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        t = rest
            .trim()
            .strip_suffix("```")
            .ok_or("an opened code fence is not closed")?
            .trim();
    }
    if t.is_empty() {
        return Err("the message is empty".into());
    }
    if !t.starts_with('{') {
        return Err("the message must start with `{`: no prose before the JSON object".into());
    }
    let mut stream = serde_json::Deserializer::from_str(t).into_iter::<Value>();
    let value = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(format!("not valid JSON: {e}")),
        None => return Err("the message is empty".into()),
    };
    if stream.byte_offset() != t.len() {
        return Err("text follows the JSON object: no prose after it".into());
    }
    if !value.is_object() {
        return Err("the JSON value is not an object".into());
    }
    Ok(value)
}

/// Facts the supervisor knows about the run when it judges or writes an outcome.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunFacts {
    /// An `open_pr` call was accepted by the broker.
    pub pr_accepted: bool,
    /// Paths written (sorted, deduplicated).
    pub files_written: Vec<String>,
    /// Paths read with their ranges, e.g. `calc/ops.py:1-20`.
    pub reads: Vec<String>,
    /// Searches made.
    pub searches: Vec<String>,
    /// Test runs, one line each (`selector -> green/red`).
    pub test_runs: Vec<String>,
    /// Refused writes (`path: rule`).
    pub refusals: Vec<String>,
    /// Files of the tree in which the injection detector found something new (not dismissed by
    /// the security team), in the order found; the session adds them to the outcome's
    /// `injection_observed` beside what the model reported.
    pub injection_observed: Vec<String>,
    /// Candidates from the warm start that were never read.
    pub unread_candidates: Vec<String>,
}

/// A final message that passed: the outcome, and why the floor forced it to escalate, if it did.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The outcome, floored.
    pub outcome: Outcome,
    /// The confidence floor's reason, when it turned a `pr` into an escalation.
    pub floored: Option<String>,
}

/// Judge a candidate final message: one JSON object, parsed into [`Outcome`], floored, checked
/// against `outcome.json` and the supervisor's own rules. `Err` lists the problems for a repair
/// prompt.
pub fn judge_final(text: &str, facts: &RunFacts) -> Result<Judged, Vec<String>> {
    let value = extract_json_object(text).map_err(|e| vec![e])?;
    let mut outcome: Outcome = match serde_json::from_value(value.clone()) {
        Ok(o) => o,
        // Not even the shape: the schema's violations say precisely what is wrong.
        Err(e) => {
            let violations = Schema::Outcome
                .violations(&value)
                .map_err(|e| vec![e.to_string()])?;
            return Err(if violations.is_empty() {
                vec![e.to_string()]
            } else {
                describe(&violations)
            });
        }
    };
    // The floor applies before validation: a `pr` at 0.5 is an escalation, not a repair.
    let floored = apply_confidence_floor(&mut outcome);
    let floored_value = serde_json::to_value(&outcome).map_err(|e| vec![e.to_string()])?;
    let violations = Schema::Outcome
        .violations(&floored_value)
        .map_err(|e| vec![e.to_string()])?;
    if !violations.is_empty() {
        return Err(describe(&violations));
    }
    let problems = contract_problems(&outcome, facts);
    if problems.is_empty() {
        Ok(Judged { outcome, floored })
    } else {
        Err(problems)
    }
}

/// Schema violations as repair-prompt lines: `pointer: message`.
pub fn describe(violations: &[SchemaViolation]) -> Vec<String> {
    violations
        .iter()
        .map(|v| {
            format!(
                "{}: {}",
                if v.pointer.is_empty() {
                    "/"
                } else {
                    &v.pointer
                },
                v.message
            )
        })
        .collect()
}

/// Rules beyond the schema that make a final message unacceptable (the model is asked to repair).
pub fn contract_problems(outcome: &Outcome, facts: &RunFacts) -> Vec<String> {
    let mut problems = Vec::new();
    if outcome.outcome == OutcomeKind::Pr && !facts.pr_accepted {
        problems.push(
            "/outcome: \"pr\" is only possible after open_pr was accepted; no open_pr was accepted \
             in this run, so the outcome must be \"escalate\""
                .to_string(),
        );
    }
    problems
}

/// Apply the confidence floor: a `pr` below 0.6 becomes `escalate`. Returns the reason when the
/// outcome was changed.
pub fn apply_confidence_floor(outcome: &mut Outcome) -> Option<String> {
    let confidence = outcome.confidence;
    if outcome.outcome == OutcomeKind::Pr && confidence < CONFIDENCE_FLOOR {
        outcome.outcome = OutcomeKind::Escalate;
        outcome.summary = format!(
            "Escalated by the supervisor: confidence {confidence} is below {CONFIDENCE_FLOOR}. {}",
            outcome.summary
        );
        return Some(format!(
            "confidence {confidence} is below {CONFIDENCE_FLOOR}"
        ));
    }
    None
}

/// The escalation the supervisor writes when the run ends without a usable final message:
/// what was established, what was ruled out, and what to read next, from the run's record.
pub fn supervisor_escalation(reason: &str, facts: &RunFacts) -> Outcome {
    written_from_facts(&format!("Escalated by the supervisor: {reason}."), facts)
}

/// The outcome the supervisor writes when a run whose `open_pr` was accepted ends without a
/// usable `pr` final message (a later call was refused, a budget ran out): its pull request is
/// queued, so the outcome is `pr`, stated from the accepted call (`accepted`, the arguments the
/// broker accepted) and the run's record.
pub fn supervisor_queued_pr(
    reason: &str,
    facts: &RunFacts,
    accepted: Option<&airlock_schemas::OpenPr>,
) -> Outcome {
    let mut outcome = written_from_facts(
        &format!(
            "Closed by the supervisor: {reason}. The run's accepted open_pr is queued for review."
        ),
        facts,
    );
    outcome.outcome = OutcomeKind::Pr;
    outcome.confidence = CONFIDENCE_FLOOR;
    if let Some(call) = accepted {
        outcome.summary = format!("{} Its pull request: {}", outcome.summary, call.title);
        outcome.root_cause = format!("as the queued pull request states: {}", call.body);
        outcome.files_changed = call.diff_digest.files_changed.clone();
        outcome.test_evidence.before = format!(
            "{} failed at the pinned commit ({})",
            call.test_evidence.before_failing_test, call.test_evidence.before_selector
        );
        outcome.confidence = call.confidence.max(CONFIDENCE_FLOOR);
    }
    outcome
}

/// The outcome of a parked run when the model could not write its own summary (the model's
/// budget was spent, or its closing answer was unusable): derived from the run's record. It
/// is an escalation, as the output contract makes every reached limit; the run's document says
/// it is parked and how to resume it.
pub fn supervisor_parked(reason: &str, facts: &RunFacts) -> Outcome {
    written_from_facts(
        &format!("Parked by the supervisor: {reason}; `airlock resume` can continue it."),
        facts,
    )
}

/// Mark the model's own closing summary of a parked run as such, keeping its content.
pub fn mark_parked(outcome: &mut Outcome, reason: &str) {
    outcome.outcome = OutcomeKind::Escalate;
    outcome.summary = format!("Parked by the supervisor: {reason}. {}", outcome.summary);
}

fn written_from_facts(opening: &str, facts: &RunFacts) -> Outcome {
    let list = |items: &[String], none: &str| {
        if items.is_empty() {
            none.to_string()
        } else {
            items.join(", ")
        }
    };
    let established = format!(
        "Established: searched for [{}]; read [{}]; wrote [{}]; test runs [{}].",
        list(&facts.searches, "nothing"),
        list(&facts.reads, "nothing"),
        list(&facts.files_written, "nothing"),
        list(&facts.test_runs, "none"),
    );
    let ruled_out = format!(
        "Ruled out: writes refused by policy [{}].",
        list(&facts.refusals, "none")
    );
    let next = format!(
        "Read next: [{}].",
        list(&facts.unread_candidates, "no unread candidates")
    );
    Outcome {
        outcome: OutcomeKind::Escalate,
        summary: format!("{opening} {established} {ruled_out} {next}"),
        root_cause: "not established".into(),
        files_changed: facts.files_written.clone(),
        tests_added: Vec::new(),
        test_evidence: OutcomeTestEvidence {
            before: String::new(),
            after: list(&facts.test_runs, ""),
        },
        also_noticed: Vec::new(),
        // The session adds the detector's paths when it closes the run; listing them here
        // would record them as reported by the model.
        injection_observed: Vec::new(),
        confidence: 0.0,
    }
}

/// Force an accepted final message to be an escalation (a limit was reached while the model
/// was writing it), keeping its content.
pub fn force_escalate(outcome: &mut Outcome, reason: &str) {
    outcome.outcome = OutcomeKind::Escalate;
    outcome.summary = format!("Escalated by the supervisor: {reason}. {}", outcome.summary);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(kind: &str, confidence: f64) -> Outcome {
        serde_json::from_value(json!({
            "outcome": kind, "summary": "s", "root_cause": "r", "files_changed": [],
            "tests_added": [], "test_evidence": {"before": "", "after": ""},
            "also_noticed": [], "injection_observed": [], "confidence": confidence,
        }))
        .unwrap()
    }

    #[test]
    fn extracts_one_object_and_refuses_prose() {
        assert!(extract_json_object("  {\"a\": 1}\n").is_ok());
        assert!(extract_json_object("```json\n{\"a\": 1}\n```").is_ok());
        assert!(
            extract_json_object("Here it is: {\"a\": 1}")
                .unwrap_err()
                .contains("prose")
        );
        assert!(
            extract_json_object("{\"a\": 1} done")
                .unwrap_err()
                .contains("after")
        );
        assert!(
            extract_json_object("{\"a\": ")
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert!(extract_json_object("[1]").is_err());
    }

    #[test]
    fn confidence_floor_forces_escalation() {
        let mut v = outcome("pr", 0.5);
        assert!(apply_confidence_floor(&mut v).is_some());
        assert_eq!(v.outcome, OutcomeKind::Escalate);
        let mut w = outcome("pr", 0.6);
        assert!(apply_confidence_floor(&mut w).is_none());
        assert_eq!(w.outcome, OutcomeKind::Pr);
    }

    #[test]
    fn pr_without_accepted_open_pr_is_a_problem() {
        let v = outcome("pr", 0.9);
        assert_eq!(contract_problems(&v, &RunFacts::default()).len(), 1);
        let facts = RunFacts {
            pr_accepted: true,
            ..RunFacts::default()
        };
        assert!(contract_problems(&v, &facts).is_empty());
    }

    #[test]
    fn a_floored_pr_is_judged_an_escalation_and_a_broken_one_lists_the_schema_violations() {
        let judged = judge_final(
            &serde_json::to_string(&outcome("pr", 0.5)).unwrap(),
            &RunFacts::default(),
        )
        .unwrap();
        assert_eq!(judged.outcome.outcome, OutcomeKind::Escalate);
        assert!(judged.floored.is_some());
        let problems = judge_final(r#"{"outcome": "maybe"}"#, &RunFacts::default()).unwrap_err();
        assert!(
            problems.iter().any(|p| p.starts_with("/outcome")),
            "{problems:?}"
        );
    }

    #[test]
    fn the_supervisor_escalation_satisfies_the_contract() {
        let v = serde_json::to_value(supervisor_escalation("x", &RunFacts::default())).unwrap();
        assert!(Schema::Outcome.violations(&v).unwrap().is_empty());
    }
}
