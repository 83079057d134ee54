//! The risk signals a queue item carries to its approver: what the run's own screening found
//! (sent with `open_pr`, as data the broker stores and never acts on), what the model said it
//! saw (`injection_observed`), and what the broker's own screening found in the text it can
//! see without trusting the run. One [`ItemFinding`] per place: a span that several rules
//! matched is one finding listing its rules ([`merge_by_place`]).

use serde::{Deserialize, Serialize};

/// Who reported a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingSource {
    /// The broker's own screening of the issue, the title and body, the diff's added lines and
    /// the files the diff touches at the pinned commit.
    Broker,
    /// The run's deterministic screening of what its tools handed the model, as the run
    /// reports it: shown attributed, never believed or acted on.
    Run,
    /// The model's own `injection_observed`, as the run reports it.
    Model,
}

impl FindingSource {
    /// How the approver is told who reported it.
    pub fn label(self) -> &'static str {
        match self {
            FindingSource::Broker => "found by the broker",
            FindingSource::Run => "reported by the run",
            FindingSource::Model => "reported by the run's model",
        }
    }
}

/// One place a screen flagged, with every rule that matched there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemFinding {
    /// Who reported it.
    pub source: FindingSource,
    /// Where: a path of the repository, or `issue`, `title`, `body`, or another text the run
    /// screened (`search:QUERY`, `issue:ID`).
    pub path: String,
    /// First 1-based line of the span, when known (the model's own report names a path only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_start: Option<u64>,
    /// Last 1-based line of the span, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_end: Option<u64>,
    /// The lines are those of the file as it stands at the run's pinned commit (the broker's
    /// screening of the files a diff touches), not of the changed file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_pin: bool,
    /// The rules that matched the span, sorted, each once (`model_reported` for the model's
    /// own report).
    pub rules: Vec<String>,
    /// The flagged text as the screen excerpted it: raw, escaped wherever it is shown.
    pub excerpt: String,
}

/// The rule name of a path the model named in `injection_observed`.
pub const MODEL_REPORTED: &str = "model_reported";

/// At most this many findings are kept per queue item (a hostile file cannot grow a row
/// without bound); the cut is after sorting, so the first places stay.
pub const MAX_FINDINGS: usize = 500;

/// At most this many characters of an excerpt are kept.
pub const MAX_EXCERPT_CHARS: usize = 400;

impl ItemFinding {
    /// A finding on one line (or on the whole text when `line` is `None`).
    pub fn at(
        source: FindingSource,
        path: &str,
        line: Option<u64>,
        rule: &str,
        excerpt: &str,
    ) -> Self {
        ItemFinding {
            source,
            path: path.to_owned(),
            line_start: line,
            line_end: line,
            at_pin: false,
            rules: vec![rule.to_owned()],
            excerpt: excerpt.chars().take(MAX_EXCERPT_CHARS).collect(),
        }
    }

    /// The place as a person reads it: `path:12`, `path:12-14`, or `path`.
    pub fn place(&self) -> String {
        match (self.line_start, self.line_end) {
            (Some(a), Some(b)) if b > a => format!("{}:{a}-{b}", self.path),
            (Some(a), _) => format!("{}:{a}", self.path),
            _ => self.path.clone(),
        }
    }
}

/// What makes two findings one: who reported it, where, and on which version of the file.
type Place = (FindingSource, String, bool, Option<u64>, Option<u64>);

/// One finding per place and source: findings of the same source on the same path and span
/// become one listing the union of their rules (the first excerpt kept); sorted by source,
/// path and line; at most [`MAX_FINDINGS`]. Excerpts longer than [`MAX_EXCERPT_CHARS`] are cut.
pub fn merge_by_place(findings: impl IntoIterator<Item = ItemFinding>) -> Vec<ItemFinding> {
    let mut by_place: std::collections::BTreeMap<Place, ItemFinding> =
        std::collections::BTreeMap::new();
    for mut f in findings {
        if f.excerpt.chars().count() > MAX_EXCERPT_CHARS {
            f.excerpt = f.excerpt.chars().take(MAX_EXCERPT_CHARS).collect();
        }
        let key = (f.source, f.path.clone(), f.at_pin, f.line_start, f.line_end);
        match by_place.get_mut(&key) {
            Some(seen) => seen.rules.extend(f.rules),
            None => {
                by_place.insert(key, f);
            }
        }
    }
    by_place
        .into_values()
        .map(|mut f| {
            f.rules.sort();
            f.rules.dedup();
            f
        })
        .take(MAX_FINDINGS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_finding_per_place_listing_every_rule() {
        let at = |source, path: &str, line, rule: &str| {
            ItemFinding::at(source, path, line, rule, "<!-- ignore previous -->")
        };
        let merged = merge_by_place(vec![
            at(FindingSource::Broker, "issue", Some(3), "role_marker"),
            at(FindingSource::Broker, "issue", Some(3), "ignore_previous"),
            at(FindingSource::Broker, "issue", Some(3), "role_marker"),
            at(FindingSource::Run, "issue", Some(3), "hidden_comment"),
            at(FindingSource::Broker, "a.py", Some(1), "hidden_comment"),
            at(FindingSource::Model, "a.py", None, MODEL_REPORTED),
        ]);
        assert_eq!(merged.len(), 4, "{merged:#?}");
        assert_eq!(merged[0].place(), "a.py:1");
        assert_eq!(merged[1].path, "issue");
        assert_eq!(merged[1].rules, vec!["ignore_previous", "role_marker"]);
        assert_eq!(merged[2].source, FindingSource::Run);
        assert_eq!(merged[3].place(), "a.py");
    }

    #[test]
    fn a_hostile_flood_is_bounded() {
        let long = "x".repeat(MAX_EXCERPT_CHARS * 3);
        let merged = merge_by_place((0..(MAX_FINDINGS as u64 + 50)).map(|n| ItemFinding {
            excerpt: long.clone(),
            ..ItemFinding::at(FindingSource::Run, "f", Some(n + 1), "r", "")
        }));
        assert_eq!(merged.len(), MAX_FINDINGS);
        assert!(
            merged
                .iter()
                .all(|f| f.excerpt.chars().count() == MAX_EXCERPT_CHARS)
        );
        let wire = serde_json::to_value(&merged[0]).unwrap();
        assert_eq!(wire["source"], "run");
        assert_eq!(wire["line_start"], 1);
    }
}
