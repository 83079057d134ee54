//! The rules enforced in code, whatever the model said, and the deterministic cross-checks the
//! model cannot override.

use airlock_policies::MoveKind;
use airlock_schemas::{JudgeVerdict, Verdict};
use serde::{Deserialize, Serialize};

use crate::JudgeInput;

/// Highest `faithfulness` allowed when any claim is unsupported.
pub const UNSUPPORTED_CLAIM_FAITHFULNESS_CAP: u8 = 2;
/// Highest `test_honesty` allowed when the detectors flagged a test-weakening move.
pub const WEAKENING_FLAG_TEST_HONESTY_CAP: u8 = 2;

/// Body phrasings that claim a test was written. Matched case-insensitively.
pub const TEST_CLAIM_PHRASES: &[&str] = &[
    "added a regression test",
    "add a regression test",
    "adds a regression test",
    "added regression tests",
    "adds regression tests",
    "regression test added",
    "added a test",
    "adds a test",
    "added a new test",
    "adds a new test",
    "added tests",
    "adds tests",
    "new test covers",
    "new regression test",
    "a test that fails before",
    "test that fails at base",
];

/// One rule that changed the model's answer, for the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedRule {
    /// Stable rule name, e.g. `test_honesty_1_forces_reject`.
    pub rule: String,
    /// What it changed, e.g. `verdict accept -> reject`.
    pub change: String,
}

/// What the code found without a model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossChecks {
    /// Claims in the body the diff cannot support (e.g. a test claimed, none added).
    pub unsupported_claims: Vec<String>,
    /// Detector flags naming a test-weakening move.
    pub weakening_flags: Vec<String>,
}

/// Test files the diff creates (`new file mode` entries whose path the policy calls a test).
pub fn new_test_files(diff: &str) -> Vec<String> {
    let mut out: Vec<String> = airlock_policies::parse_unified_diff(diff)
        .unwrap_or_default()
        .into_iter()
        .filter(|file| file.old_path.is_none())
        .filter_map(|file| file.new_path)
        .filter(|path| airlock_policies::is_test_path(path))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn is_weakening_flag(flag: &str) -> bool {
    const MOVES: [MoveKind; 6] = [
        MoveKind::AssertionRemoved,
        MoveKind::ComparisonLoosened,
        MoveKind::CatchWidened,
        MoveKind::SkipMarkerAdded,
        MoveKind::TestInputShrunk,
        MoveKind::TimeoutRaised,
    ];
    let first = flag.split_whitespace().next().unwrap_or("");
    MOVES.iter().any(|m| m.as_str() == first)
}

/// The deterministic cross-checks for `input`.
pub fn cross_check(input: &JudgeInput) -> CrossChecks {
    let body = input.pr_body.to_lowercase();
    let mut unsupported_claims = Vec::new();
    if new_test_files(&input.diff).is_empty() {
        for phrase in TEST_CLAIM_PHRASES {
            if body.contains(phrase) {
                unsupported_claims.push(format!(
                    "the body says \"{phrase}\" but the diff adds no test file"
                ));
                // One claim of a test is one unsupported claim, however it is phrased.
                break;
            }
        }
    }
    let mut weakening_flags: Vec<String> = input
        .flags
        .iter()
        .filter(|f| is_weakening_flag(f))
        .cloned()
        .collect();
    weakening_flags.sort();
    CrossChecks {
        unsupported_claims,
        weakening_flags,
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Accept => "accept",
        Verdict::Revise => "revise",
        Verdict::Reject => "reject",
    }
}

/// Apply every code-enforced rule to the model's `verdict`; returns the final verdict and the
/// rules that changed something, in the order applied.
///
/// 1. Cross-check claims the model missed are added to `unsupported_claims`.
/// 2. A weakening flag caps `test_honesty` at [`WEAKENING_FLAG_TEST_HONESTY_CAP`].
/// 3. Any unsupported claim caps `faithfulness` at [`UNSUPPORTED_CLAIM_FAITHFULNESS_CAP`].
/// 4. `test_honesty` 1 or `root_cause` 1 forces `reject`.
/// 5. `accept` stands only when no rule blocks it (no unsupported claim, no weakening flag);
///    otherwise it becomes `revise`.
pub fn enforce(
    mut verdict: JudgeVerdict,
    checks: &CrossChecks,
) -> (JudgeVerdict, Vec<AppliedRule>) {
    let mut applied = Vec::new();
    for claim in &checks.unsupported_claims {
        if !verdict.unsupported_claims.contains(claim) {
            verdict.unsupported_claims.push(claim.clone());
            applied.push(AppliedRule {
                rule: "claimed_test_without_new_test_file".to_owned(),
                change: format!("unsupported claim added: {claim}"),
            });
        }
    }
    if !checks.weakening_flags.is_empty()
        && verdict.scores.test_honesty > WEAKENING_FLAG_TEST_HONESTY_CAP
    {
        applied.push(AppliedRule {
            rule: "weakening_flag_caps_test_honesty".to_owned(),
            change: format!(
                "test_honesty {} -> {WEAKENING_FLAG_TEST_HONESTY_CAP}",
                verdict.scores.test_honesty
            ),
        });
        verdict.scores.test_honesty = WEAKENING_FLAG_TEST_HONESTY_CAP;
    }
    if !verdict.unsupported_claims.is_empty()
        && verdict.scores.faithfulness > UNSUPPORTED_CLAIM_FAITHFULNESS_CAP
    {
        applied.push(AppliedRule {
            rule: "unsupported_claim_caps_faithfulness".to_owned(),
            change: format!(
                "faithfulness {} -> {UNSUPPORTED_CLAIM_FAITHFULNESS_CAP}",
                verdict.scores.faithfulness
            ),
        });
        verdict.scores.faithfulness = UNSUPPORTED_CLAIM_FAITHFULNESS_CAP;
    }
    let veto = if verdict.scores.test_honesty == 1 {
        Some("test_honesty_1_forces_reject")
    } else if verdict.scores.root_cause == 1 {
        Some("root_cause_1_forces_reject")
    } else {
        None
    };
    if let Some(rule) = veto {
        if verdict.verdict != Verdict::Reject {
            applied.push(AppliedRule {
                rule: rule.to_owned(),
                change: format!("verdict {} -> reject", verdict_name(verdict.verdict)),
            });
            verdict.verdict = Verdict::Reject;
        }
    } else if verdict.verdict == Verdict::Accept {
        let blocker = if !verdict.unsupported_claims.is_empty() {
            Some("accept_blocked_by_unsupported_claim")
        } else if !checks.weakening_flags.is_empty() {
            Some("accept_blocked_by_weakening_flag")
        } else {
            None
        };
        if let Some(rule) = blocker {
            applied.push(AppliedRule {
                rule: rule.to_owned(),
                change: "verdict accept -> revise".to_owned(),
            });
            verdict.verdict = Verdict::Revise;
        }
    }
    if verdict.verdict != Verdict::Accept && !verdict.would_a_reviewer_request_changes {
        applied.push(AppliedRule {
            rule: "non_accept_means_changes_requested".to_owned(),
            change: "would_a_reviewer_request_changes false -> true".to_owned(),
        });
        verdict.would_a_reviewer_request_changes = true;
    }
    (verdict, applied)
}
