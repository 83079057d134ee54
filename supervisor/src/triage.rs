//! Triage before the first token is spent: is the issue ready for the agent?
//!
//! Labels decide when one of the three state labels is present. Otherwise a deterministic text
//! heuristic looks for something concrete to act on: a traceback, code identifiers, a stated
//! expected-versus-actual, a concrete symptom. The reason names the signals found, so an operator
//! can see why an issue was skipped.

use crate::issue::Issue;
use serde::Serialize;

/// The triage state of an issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriageState {
    /// Concrete enough for the agent.
    ReadyForAgent,
    /// Reports a problem but lacks what is needed to act on it.
    NeedsInfo,
    /// Not (yet) a concrete problem: a question, a wish, something vague.
    NeedsTriage,
}

impl TriageState {
    /// The label spelling (`ready-for-agent`, `needs-info`, `needs-triage`).
    pub fn label(self) -> &'static str {
        match self {
            TriageState::ReadyForAgent => "ready-for-agent",
            TriageState::NeedsInfo => "needs-info",
            TriageState::NeedsTriage => "needs-triage",
        }
    }
}

/// A triage decision and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Triage {
    /// The classification.
    pub state: TriageState,
    /// One line naming the label or the signals that decided it.
    pub reason: String,
    /// `label` when a state label decided, `text` when the heuristic did.
    pub source: &'static str,
}

/// Classify an issue: a closed forge issue is never ready; then state labels, then the text
/// heuristic.
pub fn classify(issue: &Issue) -> Triage {
    if let Some(state) = issue
        .state
        .as_deref()
        .filter(|s| !s.eq_ignore_ascii_case("open"))
    {
        return Triage {
            state: TriageState::NeedsTriage,
            reason: format!("the issue is {} on its forge", state.escape_debug()),
            source: "state",
        };
    }
    for state in [
        TriageState::NeedsInfo,
        TriageState::NeedsTriage,
        TriageState::ReadyForAgent,
    ] {
        if issue
            .labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(state.label()))
        {
            return Triage {
                state,
                reason: format!("labelled `{}`", state.label()),
                source: "label",
            };
        }
    }
    classify_text(&issue.title, &issue.body)
}

/// The signals the text heuristic found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Signals {
    /// A stack trace or an exception line.
    pub traceback: bool,
    /// Code identifiers: `backticked`, `call()`, `snake_case`, `CamelCase`, `file.py`.
    pub identifiers: Vec<String>,
    /// Expected behaviour set against actual behaviour.
    pub expected_vs_actual: bool,
    /// A concrete symptom word (raises, returns, crash, wrong, ...).
    pub symptom: bool,
    /// A reproduction: a fenced code block or "steps to reproduce".
    pub reproduction: bool,
}

/// Find the triage signals in an issue's text.
pub fn signals(title: &str, body: &str) -> Signals {
    let text = format!("{title}\n{body}");
    let lower = text.to_lowercase();
    let traceback = lower.contains("traceback (most recent call last)")
        || lower.contains("panicked at")
        || text.lines().any(|l| {
            let t = l.trim_start();
            (t.starts_with("File \"") && t.contains(", line "))
                || t.starts_with("at ") && t.contains('(') && t.contains(':')
                || is_exception_line(t)
        });
    let has = |words: &[&str]| words.iter().any(|w| contains_word(&lower, w));
    let expected_vs_actual = has(&["expected", "expect", "should"])
        && has(&[
            "actual", "actually", "got", "instead", "but", "returns", "returned", "gives",
        ]);
    let symptom = has(&[
        "raises",
        "raise",
        "returns",
        "returned",
        "crash",
        "crashes",
        "error",
        "exception",
        "fails",
        "failed",
        "failing",
        "wrong",
        "incorrect",
        "broken",
        "hangs",
        "leaks",
        "bug",
        "regression",
        "typeerror",
        "valueerror",
        "keyerror",
    ]);
    let reproduction = text.contains("```") || lower.contains("steps to reproduce");
    let mut identifiers: Vec<String> = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || ",;\"'".contains(c)) {
        let token = raw.trim_matches(|c: char| "()[]{}:.!?<>".contains(c) && c != '(');
        if let Some(id) = identifier_in(raw, token)
            && !identifiers.contains(&id)
        {
            identifiers.push(id);
        }
    }
    identifiers.sort();
    Signals {
        traceback,
        identifiers,
        expected_vs_actual,
        symptom,
        reproduction,
    }
}

/// Classify from the title and body alone.
pub fn classify_text(title: &str, body: &str) -> Triage {
    let s = signals(title, body);
    let mut found = Vec::new();
    if s.traceback {
        found.push("a traceback".to_string());
    }
    if !s.identifiers.is_empty() {
        let shown: Vec<&str> = s.identifiers.iter().take(3).map(String::as_str).collect();
        found.push(format!("code identifiers ({})", shown.join(", ")));
    }
    if s.expected_vs_actual {
        found.push("expected vs actual".into());
    }
    if s.symptom {
        found.push("a concrete symptom".into());
    }
    if s.reproduction {
        found.push("a reproduction".into());
    }
    let concrete = !s.identifiers.is_empty() || s.reproduction;
    let problem = s.symptom || s.expected_vs_actual;
    let (state, reason) = if s.traceback || (concrete && problem) {
        (
            TriageState::ReadyForAgent,
            format!("text has {}", found.join(", ")),
        )
    } else if problem {
        (
            TriageState::NeedsInfo,
            format!(
                "text reports {} but names no code and gives no traceback or reproduction",
                found.join(", ")
            ),
        )
    } else if concrete {
        (
            TriageState::NeedsTriage,
            format!("text has {} but states no problem to fix", found.join(", ")),
        )
    } else {
        (
            TriageState::NeedsTriage,
            "text is vague: no symptom, no code identifiers, no traceback".to_string(),
        )
    };
    Triage {
        state,
        reason,
        source: "text",
    }
}

fn contains_word(haystack: &str, word: &str) -> bool {
    haystack
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| w == word)
}

fn is_exception_line(line: &str) -> bool {
    let Some((head, _)) = line.split_once(':') else {
        return false;
    };
    let name = head.rsplit('.').next().unwrap_or(head);
    (name.ends_with("Error") || name.ends_with("Exception"))
        && name.len() > 5
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && name.starts_with(|c: char| c.is_ascii_uppercase())
}

fn identifier_in(raw: &str, token: &str) -> Option<String> {
    if raw.len() > 2 && raw.starts_with('`') {
        let inner = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '.');
        if !inner.is_empty() {
            return Some(inner.to_string());
        }
    }
    let word = token.trim_end_matches('(').trim_end_matches(')');
    let word = word.trim_end_matches('(');
    if word.len() < 3 || !word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return None;
    }
    let valid = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '/');
    if !valid {
        return None;
    }
    let call = token.contains("()") || raw.contains("()") || raw.contains('(') && raw.contains(')');
    let snake = word.contains('_') && word.chars().any(|c| c.is_ascii_lowercase());
    let camel = word.chars().skip(1).any(|c| c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_lowercase())
        && !word.contains('/');
    let file = [
        ".py", ".rs", ".js", ".ts", ".go", ".java", ".c", ".h", ".rb", ".toml", ".cfg",
    ]
    .iter()
    .any(|ext| word.ends_with(ext));
    (call || snake || camel || file).then(|| word.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(title: &str, body: &str, labels: &[&str]) -> Issue {
        Issue {
            id: "X-1".into(),
            title: title.into(),
            body: body.into(),
            labels: labels.iter().map(|s| s.to_string()).collect(),
            ..Issue::default()
        }
    }

    #[test]
    fn a_closed_issue_is_not_ready_whatever_its_labels() {
        let mut closed = issue("add() raises TypeError", "", &["ready-for-agent"]);
        closed.state = Some("closed".into());
        let t = classify(&closed);
        assert_eq!(t.state, TriageState::NeedsTriage);
        assert!(t.reason.contains("closed"), "{}", t.reason);
        closed.state = Some("open".into());
        assert_eq!(classify(&closed).state, TriageState::ReadyForAgent);
    }

    #[test]
    fn labels_decide_first() {
        let t = classify(&issue("vague", "", &["ready-for-agent"]));
        assert_eq!(t.state, TriageState::ReadyForAgent);
        assert_eq!(t.source, "label");
        let t = classify(&issue("add() raises TypeError", "", &["needs-info"]));
        assert_eq!(t.state, TriageState::NeedsInfo);
    }

    #[test]
    fn concrete_bug_without_labels_is_ready() {
        let t = classify(&issue(
            "add() returns the wrong sign",
            "Calling `calc.add(-2, 3)` returns -5; expected 1.",
            &["bug"],
        ));
        assert_eq!(t.state, TriageState::ReadyForAgent, "{}", t.reason);
        assert!(t.reason.contains("expected vs actual"), "{}", t.reason);
    }

    #[test]
    fn traceback_is_ready() {
        let t = classify(&issue(
            "Crash on start",
            "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'x'",
            &[],
        ));
        assert_eq!(t.state, TriageState::ReadyForAgent);
    }

    #[test]
    fn symptom_without_code_needs_info() {
        let t = classify(&issue(
            "It crashes",
            "The app crashes sometimes, please fix.",
            &[],
        ));
        assert_eq!(t.state, TriageState::NeedsInfo, "{}", t.reason);
    }

    #[test]
    fn vague_text_needs_triage() {
        let t = classify(&issue(
            "Improve things",
            "Could the project be nicer to use?",
            &[],
        ));
        assert_eq!(t.state, TriageState::NeedsTriage, "{}", t.reason);
        assert!(t.reason.contains("vague"));
    }
}
