//! What a changed file may hold: text only. The broker queues a change as a unified diff and
//! publishes it by applying that text, so a file git would show as `Binary files differ`, or
//! bytes that are not UTF-8, could not reach the published commit as they were witnessed.

use crate::paths::{WriteDecision, shown};

/// How many leading bytes git looks at for a NUL when it decides a file is binary
/// (`FIRST_FEW_BYTES` in git's `xdiff-interface.c`).
pub const BINARY_SNIFF_BYTES: usize = 8000;

/// Whether git would call `content` binary: a NUL byte among its first
/// [`BINARY_SNIFF_BYTES`] bytes.
pub fn is_binary(content: &[u8]) -> bool {
    content
        .iter()
        .take(BINARY_SNIFF_BYTES)
        .any(|byte| *byte == 0)
}

/// Whether a regular file at `path` (added or changed) may hold `content`. Refused, with the
/// rule `binary-file`, when git would call it binary or when it is not UTF-8: the queued diff
/// is UTF-8 text, so either would be lost or altered between the witness and publication.
pub fn check_content(path: &str, content: &[u8]) -> WriteDecision {
    if is_binary(content) {
        let at = content.iter().position(|b| *b == 0).unwrap_or(0);
        return WriteDecision::Refused {
            rule: "binary-file".to_string(),
            reason: format!(
                "{} is a binary file (a NUL byte at offset {at}); a change may add or edit text \
                 files only, since it is reviewed and published as a text diff",
                shown(path)
            ),
        };
    }
    if let Err(err) = std::str::from_utf8(content) {
        return WriteDecision::Refused {
            rule: "binary-file".to_string(),
            reason: format!(
                "{} is not UTF-8 text (invalid bytes at offset {}); a change may add or edit \
                 UTF-8 text files only, since it is reviewed and published as a text diff",
                shown(path),
                err.valid_up_to()
            ),
        };
    }
    WriteDecision::Allowed
}

/// Whether a change from `pinned` (the content at the pin; `None` for a new file) to `new`
/// (`None` for a deletion) can be carried as a text diff: [`check_content`] on the new
/// content, and on the pinned content too, since a diff has both sides (git shows a change to
/// a binary file as `Binary files differ`, whatever it becomes). A deletion is allowed: it
/// needs neither side's text.
pub fn check_change(path: &str, pinned: Option<&[u8]>, new: Option<&[u8]>) -> WriteDecision {
    let Some(new) = new else {
        return WriteDecision::Allowed;
    };
    let decision = check_content(path, new);
    if !decision.is_allowed() {
        return decision;
    }
    match pinned.map(|pinned| check_content(path, pinned)) {
        Some(WriteDecision::Refused { rule, reason }) => WriteDecision::Refused {
            rule,
            reason: format!("at the pin, {reason}; it can be deleted but not changed"),
        },
        _ => WriteDecision::Allowed,
    }
}
