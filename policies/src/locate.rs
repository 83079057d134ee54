//! Where in a policy file a rule stands, for load errors that name the line.

use crate::Error;

/// 1-based (line, column) of a byte offset in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Best-effort line of the first occurrence of `needle` (e.g. a rule id) in `text`.
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle).map_or(0, |at| line_col(text, at).0)
}

/// A rule error located at the line where the rule's id first appears.
pub(crate) fn rule_error(text: &str, file: &str, rule: &str, message: String) -> Error {
    let quoted = format!("\"{rule}\"");
    Error::Rule {
        file: file.to_string(),
        line: line_of(text, &quoted),
        rule: rule.to_string(),
        message,
    }
}
