//! The Markdown the broker writes on a pull request's draft: the body (the agent's words, then
//! the broker's evidence), and [`markdown_text`], the one escaping of a text that came from the
//! agent, a gate or the repository (the attestation's comment uses it too), so it shows as
//! written and is never read as markup.

use crate::store::QueueItem;

/// The first line of the broker's witness attestation comment: hidden on the page, it tells the
/// broker's feedback reader that the comment is its own, never a reviewer's request.
pub const ATTESTATION_COMMENT_MARKER: &str = "<!-- airlock:witness-attestation -->";

/// The first line of a comment the broker posts about a failed CI check (the base fails too,
/// or `max_ci_followups` is spent).
pub const CI_COMMENT_MARKER: &str = "<!-- airlock:ci-check -->";

/// What every comment the broker or a run's question posts begins with: a comment that begins
/// so is never read back as a person's feedback.
pub const OWN_COMMENT_PREFIX: &str = "<!-- airlock:";

/// The GitHub issue number `Closes #N` names: the one the run registered with
/// (`issue_number`, kept beside an id such as `ACME-123`), else the issue id itself when it is
/// a number (`123` or `#123`), else none.
pub fn github_issue_number(item: &QueueItem) -> Option<u64> {
    if let Some(n) = item.issue_number {
        return Some(n);
    }
    let id = item.item.issue_id.trim();
    let digits = id.strip_prefix('#').unwrap_or(id);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The draft pull request's body: the body as the agent wrote it, then the broker's evidence
/// (the fail-to-pass test, each witness step's result, the base inventory's counts, the
/// detectors' flags), `Closes #N` when the issue maps to a GitHub number, and the audit run id.
pub fn pr_body(item: &QueueItem) -> String {
    let args = serde_json::from_str::<serde_json::Value>(&item.item.args).ok();
    let field = |path: &[&str]| {
        let mut v = args.as_ref()?;
        for key in path {
            v = v.get(key)?;
        }
        v.as_str().map(str::to_owned)
    };
    let mut out = field(&["body"]).unwrap_or_default();
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push_str("\n\n---\n\n");
    out.push_str(airlock_protocol::PR_EVIDENCE_HEADING);
    out.push_str("\n\n");
    // A documentation change claims no test (and its witness ran none).
    if let Some(test) = field(&["test_evidence", "before_failing_test"]).filter(|t| !t.is_empty()) {
        out.push_str(&format!(
            "- Fail-to-pass test: `{test}` (fails on the pinned base, passes with the diff)\n"
        ));
    }
    for step in &item.item.evidence {
        let result = match &step.grade {
            airlock_policies::testrun::Grade::Ok => "ok".to_owned(),
            airlock_policies::testrun::Grade::NotOk(why) => format!("not ok: {why}"),
            airlock_policies::testrun::Grade::Invalid(why) => format!("invalid: {why}"),
        };
        out.push_str(&format!(
            "- Witness `{}` (expected {}): {result}; {} tests reported\n",
            step.step,
            step.expect,
            step.parsed.tests.len()
        ));
        if let Some(inv) = &step.inventory {
            let passed = inv
                .tests
                .values()
                .filter(|s| matches!(s, airlock_policies::testrun::TestStatus::Passed))
                .count();
            out.push_str(&format!(
                "- Base inventory: {} tests, {passed} passing{}\n",
                inv.tests.len(),
                inv.collected
                    .map(|n| format!(", {n} collected"))
                    .unwrap_or_default()
            ));
        }
        if let Some(full) = &step.full_run {
            out.push_str(&format!(
                "- Full run with the diff: {} ({} ran, {} missing, {} newly skipped, {} regressed, {} new passing, {} new not passing)\n",
                if full.green { "green" } else { "not green" },
                full.ran,
                full.missing.len(),
                full.newly_skipped.len(),
                full.regressed.len(),
                full.new_passing.len(),
                full.new_not_passing.len()
            ));
        }
    }
    if item.item.flags.is_empty() {
        out.push_str("- Detector flags: none\n");
    } else {
        out.push_str("- Detector flags:\n");
        for flag in &item.item.flags {
            out.push_str(&format!("  - {flag}\n"));
        }
    }
    for note in &item.item.gates {
        out.push_str(&format!(
            "- Gate: {}\n",
            markdown_text(&crate::view::gate_note_line(note))
        ));
    }
    if let Some(n) = github_issue_number(item) {
        out.push_str(&format!("\nCloses #{n}\n"));
    }
    out.push_str(&format!(
        "\nIssue {}; audit run id `{}`; queue item {}.\n",
        item.item.issue_id, item.run_id, item.id
    ));
    out
}

/// A gate's text in the pull request's Markdown: one line, every character Markdown or HTML
/// would read as markup backslash-escaped or written as an entity, so it shows as the gate
/// wrote it and nothing more.
pub(crate) fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            '\\' | '`' | '*' | '_' | '{' | '}' | '[' | ']' | '(' | ')' | '#' | '+' | '-' | '.'
            | '!' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}
