//! The final message: extraction of the one JSON object, the rules the supervisor enforces on
//! top of `outcome.json` (confidence floor, `pr` only after an accepted `open_pr`), and the
//! escalation the supervisor writes itself when the model cannot.

use serde_json::{Value, json};

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
#[derive(Debug, Clone, Default)]
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
    /// Paths the injection detector flagged or the model reported.
    pub injection_observed: Vec<String>,
    /// Candidates from the warm start that were never read.
    pub unread_candidates: Vec<String>,
}

/// Rules beyond the schema that make a final message unacceptable (the model is asked to repair).
pub fn contract_problems(value: &Value, facts: &RunFacts) -> Vec<String> {
    let mut problems = Vec::new();
    if value.get("outcome").and_then(Value::as_str) == Some("pr") && !facts.pr_accepted {
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
pub fn apply_confidence_floor(value: &mut Value) -> Option<String> {
    let confidence = value.get("confidence").and_then(Value::as_f64)?;
    let is_pr = value.get("outcome").and_then(Value::as_str) == Some("pr");
    if is_pr && confidence < CONFIDENCE_FLOOR {
        if let Some(obj) = value.as_object_mut() {
            obj.insert("outcome".into(), json!("escalate"));
            let summary = obj
                .get("summary")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            obj.insert(
                "summary".into(),
                json!(format!(
                    "Escalated by the supervisor: confidence {confidence} is below {CONFIDENCE_FLOOR}. {summary}"
                )),
            );
        }
        return Some(format!(
            "confidence {confidence} is below {CONFIDENCE_FLOOR}"
        ));
    }
    None
}

/// The escalation the supervisor writes when the run ends without a usable final message:
/// what was established, what was ruled out, and what to read next, from the run's record.
pub fn supervisor_escalation(reason: &str, facts: &RunFacts) -> Value {
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
    json!({
        "outcome": "escalate",
        "summary": format!("Escalated by the supervisor: {reason}. {established} {ruled_out} {next}"),
        "root_cause": "not established",
        "files_changed": facts.files_written,
        "tests_added": [],
        "test_evidence": {"before": "", "after": list(&facts.test_runs, "")},
        "also_noticed": [],
        "injection_observed": facts.injection_observed,
        "confidence": 0.0,
    })
}

/// Force an accepted final message to be an escalation (a limit was reached while the model
/// was writing it), keeping its content.
pub fn force_escalate(value: &mut Value, reason: &str) {
    if let Some(obj) = value.as_object_mut() {
        obj.insert("outcome".into(), json!("escalate"));
        let summary = obj
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        obj.insert(
            "summary".into(),
            json!(format!("Escalated by the supervisor: {reason}. {summary}")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut v = json!({"outcome": "pr", "summary": "s", "confidence": 0.5});
        assert!(apply_confidence_floor(&mut v).is_some());
        assert_eq!(v["outcome"], "escalate");
        let mut w = json!({"outcome": "pr", "summary": "s", "confidence": 0.6});
        assert!(apply_confidence_floor(&mut w).is_none());
        assert_eq!(w["outcome"], "pr");
    }

    #[test]
    fn pr_without_accepted_open_pr_is_a_problem() {
        let v = json!({"outcome": "pr"});
        assert_eq!(contract_problems(&v, &RunFacts::default()).len(), 1);
        let facts = RunFacts {
            pr_accepted: true,
            ..RunFacts::default()
        };
        assert!(contract_problems(&v, &facts).is_empty());
    }
}
