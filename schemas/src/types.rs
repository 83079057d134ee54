//! The serde types mirroring the schema files. The files are the source of truth; the
//! integration tests fail when a field, a required key or an enum member drifts apart.

use serde::{Deserialize, Serialize};

/// The arguments of the gated `open_pr` tool call (`schemas/open_pr.json`).
///
/// Integers are `u64` and counts unbounded here on purpose: the broker uses the same type for
/// the digest it recomputes, which may exceed what the schema lets a model claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenPr {
    /// Tracker id such as `ABC-123` (`^[A-Z]{2,6}-[0-9]{1,6}$`).
    pub issue_id: String,
    /// The full 40-hex base commit the agent read; never a branch, tag or `HEAD`.
    pub base_commit: String,
    /// `fix|test|refactor|docs|perf: ...`, 16 to 72 characters.
    pub title: String,
    /// Markdown body, at most 4000 characters.
    pub body: String,
    /// What the diff touches; there is no member for changing existing tests.
    pub scope: Scope,
    /// Why existing tests changed; defaults to [`TestChangeReason::None`].
    #[serde(default)]
    pub test_change_reason: TestChangeReason,
    /// The agent's claim about its diff, recomputed by the broker.
    pub diff_digest: DiffDigest,
    /// The failing-then-passing evidence.
    pub test_evidence: TestEvidence,
    /// Probability that a senior reviewer merges the diff unchanged, 0.6 to 1.
    pub confidence: f64,
}

/// `open_pr.scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// Only source files change.
    #[serde(rename = "source-only")]
    SourceOnly,
    /// Source files change and new tests are added.
    #[serde(rename = "source-plus-new-tests")]
    SourcePlusNewTests,
}

/// `open_pr.test_change_reason`. Either non-default value routes review to a senior approver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TestChangeReason {
    /// No existing test changed (the default).
    #[default]
    #[serde(rename = "none")]
    None,
    /// An existing test asserts the behaviour the issue calls a bug.
    #[serde(rename = "existing-test-asserts-the-buggy-behaviour")]
    ExistingTestAssertsTheBuggyBehaviour,
    /// An existing test is unrelated and already fails at the base commit.
    #[serde(rename = "existing-test-is-unrelated-and-already-failing-at-base")]
    ExistingTestIsUnrelatedAndAlreadyFailingAtBase,
}

/// `open_pr.diff_digest`: every field is recomputed by the broker from the actual tree.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffDigest {
    /// Every path the diff touches, sorted (schema: at most 12).
    pub files_changed: Vec<String>,
    /// Added lines (schema: 1 to 400).
    pub insertions: u64,
    /// Removed lines (schema: 0 to 400).
    pub deletions: u64,
    /// Test files that did not exist at the base commit.
    pub test_files_added: Vec<String>,
    /// Existing test files whose existing lines changed or that were deleted.
    pub test_files_modified: Vec<String>,
    /// Assertions removed from tests (schema: exactly 0).
    pub assertions_removed: u64,
    /// Skip, xfail or ignore markers added to tests (schema: exactly 0).
    pub skip_markers_added: u64,
}

impl DiffDigest {
    /// Names of the fields where `self` and `other` differ, in schema order. Path lists are
    /// compared as sets so that ordering alone never counts as a mismatch.
    pub fn mismatched_fields(&self, other: &DiffDigest) -> Vec<&'static str> {
        fn sorted(list: &[String]) -> Vec<&str> {
            let mut v: Vec<&str> = list.iter().map(String::as_str).collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        let mut out = Vec::new();
        if sorted(&self.files_changed) != sorted(&other.files_changed) {
            out.push("files_changed");
        }
        if self.insertions != other.insertions {
            out.push("insertions");
        }
        if self.deletions != other.deletions {
            out.push("deletions");
        }
        if sorted(&self.test_files_added) != sorted(&other.test_files_added) {
            out.push("test_files_added");
        }
        if sorted(&self.test_files_modified) != sorted(&other.test_files_modified) {
            out.push("test_files_modified");
        }
        if self.assertions_removed != other.assertions_removed {
            out.push("assertions_removed");
        }
        if self.skip_markers_added != other.skip_markers_added {
            out.push("skip_markers_added");
        }
        out
    }
}

/// `open_pr.test_evidence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestEvidence {
    /// The narrow selector that showed the failure at base.
    pub before_selector: String,
    /// Fully qualified name of the test that failed at base and passes now.
    pub before_failing_test: String,
    /// Result of the no-selector run after the change: only `green` is expressible.
    pub after_full_run: RunResult,
    /// Patched source against the pinned read-only test tree: only `green` is expressible.
    pub witness_run: RunResult,
}

/// A test run result a model may claim. One member by design: a partial pass cannot be narrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RunResult {
    /// Every test passed.
    #[serde(rename = "green")]
    Green,
}

/// The supervisor's final message (`schemas/outcome.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// `pr` or `escalate`.
    pub outcome: OutcomeKind,
    /// What was done, in a few sentences.
    pub summary: String,
    /// The established root cause (or what is known of it when escalating).
    pub root_cause: String,
    /// Paths the diff touches.
    pub files_changed: Vec<String>,
    /// Fully qualified names of the tests added.
    pub tests_added: Vec<String>,
    /// Test output before and after the change.
    pub test_evidence: OutcomeTestEvidence,
    /// Defects seen but deliberately left out of the diff.
    pub also_noticed: Vec<String>,
    /// Paths whose text tried to instruct the agent; non-empty means a security event.
    pub injection_observed: Vec<String>,
    /// Probability that a senior reviewer merges unchanged, 0 to 1; below 0.6 must escalate.
    pub confidence: f64,
}

/// `outcome.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeKind {
    /// A pull request was opened.
    Pr,
    /// The issue is handed back with a reason.
    Escalate,
}

/// `outcome.test_evidence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeTestEvidence {
    /// Evidence of the failure before the change.
    pub before: String,
    /// Evidence of the pass after the change.
    pub after: String,
}

/// What a reader worker returns (`schemas/reader_digest.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReaderDigest {
    /// The answer to the one question, at most [`crate::READER_ANSWER_MAX_WORDS`] words.
    pub answer: String,
    /// Path and line range evidence, one claim each.
    pub anchors: Vec<Anchor>,
    /// Hypotheses eliminated with evidence.
    pub ruled_out: Vec<String>,
    /// Out-of-scope observations, one line each.
    pub also_noticed: Vec<String>,
    /// Paths whose text tried to instruct the reader.
    pub injection_observed: Vec<String>,
    /// False when the budget ran out before the question was answered.
    pub complete: bool,
    /// File reads spent.
    pub reads_used: u64,
}

/// One piece of evidence in a [`ReaderDigest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// Repository-relative path.
    pub path: String,
    /// First line, 1-based.
    pub line_start: u64,
    /// Last line, 1-based, not before `line_start` (checked in code).
    pub line_end: u64,
    /// One sentence about those lines.
    pub claim: String,
}

/// The judge's score of a patch (`schemas/judge_verdict.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeVerdict {
    /// `accept`, `revise` or `reject`.
    pub verdict: Verdict,
    /// Five integer scores, 1 to 5.
    pub scores: JudgeScores,
    /// Every claim in the PR body the diff and test output do not support.
    pub unsupported_claims: Vec<String>,
    /// One line, no newline.
    pub one_line_reason: String,
    /// Whether a human reviewer would ask for changes.
    pub would_a_reviewer_request_changes: bool,
}

/// `judge_verdict.verdict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Would merge unchanged.
    Accept,
    /// The common verdict.
    Revise,
    /// Forced by a test_honesty or root_cause of 1, or a diff solving another problem.
    Reject,
}

/// `judge_verdict.scores`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeScores {
    /// Fixes the cause at the owning layer (5) or suppresses a symptom (1).
    pub root_cause: u8,
    /// Every changed line needed (5) or unrelated churn (1).
    pub minimality: u8,
    /// A veto: 1 forces `reject`.
    pub test_honesty: u8,
    /// Indistinguishable from the surrounding code (5).
    pub conventions: u8,
    /// Capped at 2 when any claim is unsupported.
    pub faithfulness: u8,
}

/// A pull request review by the reviewer agent (`schemas/review.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    /// What the change does and what the reviewer found, for the pull request's author.
    pub summary: String,
    /// The review's event on GitHub.
    pub verdict: ReviewVerdict,
    /// Inline comments, each on one line of the diff.
    pub comments: Vec<ReviewComment>,
}

/// `review.verdict`: GitHub's review events `APPROVE`, `COMMENT`, `REQUEST_CHANGES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// The change can merge as it is.
    Approve,
    /// Remarks without a decision.
    Comment,
    /// The change needs work before it merges.
    RequestChanges,
}

impl ReviewVerdict {
    /// The `event` GitHub's create-review endpoint takes.
    pub const fn github_event(self) -> &'static str {
        match self {
            ReviewVerdict::Approve => "APPROVE",
            ReviewVerdict::Comment => "COMMENT",
            ReviewVerdict::RequestChanges => "REQUEST_CHANGES",
        }
    }
}

/// One inline comment of a [`Review`], anchored to one line of the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewComment {
    /// Repository-relative path of a file the diff touches.
    pub path: String,
    /// 1-based line number in the version `side` names.
    pub line: u64,
    /// Which version `line` counts in.
    pub side: DiffSide,
    /// The comment.
    pub body: String,
}

/// `review.comments[].side`, as GitHub spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DiffSide {
    /// The base version (removed or context lines).
    #[serde(rename = "LEFT")]
    Left,
    /// The head version (added or context lines).
    #[serde(rename = "RIGHT")]
    Right,
}
