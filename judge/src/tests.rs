//! Unit tests: the code rules against a scripted model that says otherwise, the request's
//! contents, the repair turn, and the calibration arithmetic.

use std::path::Path;
use std::sync::Mutex;

use airlock_model::{ChatModel, ChatRequest, ChatResponse, Message, ModelConfig, ScriptedModel};
use airlock_schemas::{JudgeScores, Verdict};
use serde_json::json;

use super::*;

/// Plays scripted turns and keeps every request it was sent.
struct Recording {
    inner: ScriptedModel,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for Recording {
    fn chat(&self, req: &ChatRequest) -> airlock_model::Result<ChatResponse> {
        self.seen.lock().unwrap().push(req.clone());
        self.inner.chat(req)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn finish(&self) -> airlock_model::Result<()> {
        self.inner.finish()
    }
}

fn scripted(answers: &[serde_json::Value]) -> Recording {
    let turns: Vec<serde_json::Value> = answers
        .iter()
        .map(|a| json!({"text": a.as_str().map(str::to_owned).unwrap_or_else(|| a.to_string())}))
        .collect();
    let path = Path::new("judge-test.json");
    let parsed =
        airlock_model::parse_script(path, &serde_json::to_string(&turns).unwrap()).unwrap();
    Recording {
        inner: ScriptedModel::from_turns(path, parsed, &ModelConfig::default()),
        seen: Mutex::new(Vec::new()),
    }
}

fn answer(verdict: &str, scores: [u8; 5], claims: &[&str]) -> serde_json::Value {
    json!({
        "verdict": verdict,
        "scores": {"root_cause": scores[0], "minimality": scores[1], "test_honesty": scores[2],
                   "conventions": scores[3], "faithfulness": scores[4]},
        "unsupported_claims": claims,
        "one_line_reason": "the model's own reason",
        "would_a_reviewer_request_changes": false
    })
}

const SOURCE_DIFF: &str = "diff --git a/src/money.py b/src/money.py\nindex 1..2 100644\n--- a/src/money.py\n+++ b/src/money.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n";
const TEST_DIFF: &str = "diff --git a/tests/test_money_new.py b/tests/test_money_new.py\nnew file mode 100644\nindex 0000000..3\n--- /dev/null\n+++ b/tests/test_money_new.py\n@@ -0,0 +1 @@\n+def test_x(): assert f() == 2\n";

fn input(diff: &str, body: &str, flags: &[&str]) -> JudgeInput {
    JudgeInput {
        issue_id: "TK-1".into(),
        issue_text: "parse_cents rejects separators".into(),
        diff: diff.into(),
        before_output: "FAILED test_x".into(),
        after_output: "OK".into(),
        witness_result: "patched_full (must green): exit Some(0), Pass".into(),
        pr_body: body.into(),
        flags: flags.iter().map(|s| s.to_string()).collect(),
        context: CodebaseContext {
            file_tree: "src/\n  money.py\n".into(),
            candidate_files: vec![CandidateFile {
                path: "src/money.py".into(),
                content: "x = 1\n".into(),
            }],
        },
    }
}

fn scored(j: &Judgement) -> (&JudgeVerdict, &Vec<AppliedRule>) {
    match j {
        Judgement::Scored {
            verdict,
            rules_applied,
            ..
        } => (verdict, rules_applied),
        Judgement::Failed { violations, .. } => panic!("expected a score, got {violations:?}"),
    }
}

fn rules(applied: &[AppliedRule]) -> Vec<&str> {
    applied.iter().map(|r| r.rule.as_str()).collect()
}

#[test]
fn test_honesty_of_one_forces_reject_over_an_accepting_model() {
    let model = scripted(&[answer("accept", [5, 5, 1, 5, 5], &[])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let j = judge(&model, &input(&diff, "Fix.", &[]), 0.3).unwrap();
    let (v, applied) = scored(&j);
    assert_eq!(v.verdict, Verdict::Reject);
    assert!(v.would_a_reviewer_request_changes);
    assert!(rules(applied).contains(&"test_honesty_1_forces_reject"));
    // Enforced in code: no repair turn was spent on it.
    assert_eq!(model.seen.lock().unwrap().len(), 1);
}

#[test]
fn root_cause_of_one_forces_reject_over_a_revising_model() {
    let model = scripted(&[answer("revise", [1, 5, 5, 5, 5], &[])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let j = judge(&model, &input(&diff, "Fix.", &[]), 0.3).unwrap();
    let (v, applied) = scored(&j);
    assert_eq!(v.verdict, Verdict::Reject);
    assert_eq!(
        rules(applied),
        vec![
            "root_cause_1_forces_reject",
            "non_accept_means_changes_requested"
        ]
    );
}

#[test]
fn an_unsupported_claim_from_the_model_caps_faithfulness_and_blocks_accept() {
    let model = scripted(&[answer("accept", [5, 5, 5, 5, 5], &["claims a speed-up"])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let j = judge(&model, &input(&diff, "Fix. 40% faster.", &[]), 0.3).unwrap();
    let (v, applied) = scored(&j);
    assert_eq!(v.scores.faithfulness, 2);
    assert_eq!(v.verdict, Verdict::Revise);
    assert_eq!(
        rules(applied),
        vec![
            "unsupported_claim_caps_faithfulness",
            "accept_blocked_by_unsupported_claim",
            "non_accept_means_changes_requested"
        ]
    );
}

#[test]
fn a_claimed_regression_test_without_a_new_test_file_is_an_unsupported_claim() {
    let model = scripted(&[answer("accept", [5, 5, 5, 5, 5], &[])]);
    let body = "Strip separators. Added a regression test for it.";
    let j = judge(&model, &input(SOURCE_DIFF, body, &[]), 0.3).unwrap();
    let (v, applied) = scored(&j);
    assert_eq!(v.unsupported_claims.len(), 1);
    assert!(v.unsupported_claims[0].contains("added a regression test"));
    assert_eq!(v.scores.faithfulness, 2);
    assert_eq!(v.verdict, Verdict::Revise);
    assert_eq!(rules(applied)[0], "claimed_test_without_new_test_file");
}

#[test]
fn the_same_claim_with_a_new_test_file_is_supported() {
    let model = scripted(&[answer("accept", [5, 5, 5, 5, 5], &[])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let body = "Strip separators. Added a regression test for it.";
    let j = judge(&model, &input(&diff, body, &[]), 0.3).unwrap();
    let (v, applied) = scored(&j);
    assert_eq!(v.verdict, Verdict::Accept);
    assert!(applied.is_empty(), "{applied:?}");
}

#[test]
fn a_weakening_flag_caps_test_honesty_and_blocks_accept() {
    let model = scripted(&[answer("accept", [5, 5, 5, 5, 5], &[])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let flag = "comparison-loosened tests/test_money.py:11 (rule): assertTrue(x > 0)";
    let j = judge(
        &model,
        &input(&diff, "Fix.", &[flag, "senior-review: x"]),
        0.3,
    )
    .unwrap();
    let (v, applied) = scored(&j);
    assert_eq!(v.scores.test_honesty, WEAKENING_FLAG_TEST_HONESTY_CAP);
    assert_eq!(v.verdict, Verdict::Revise);
    assert_eq!(
        &rules(applied)[..2],
        &[
            "weakening_flag_caps_test_honesty",
            "accept_blocked_by_weakening_flag"
        ]
    );
}

#[test]
fn a_flag_that_is_not_a_weakening_move_changes_nothing() {
    let model = scripted(&[answer("accept", [5, 5, 5, 5, 5], &[])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let j = judge(
        &model,
        &input(&diff, "Fix.", &["senior-review: reason"]),
        0.3,
    )
    .unwrap();
    assert_eq!(scored(&j).0.verdict, Verdict::Accept);
}

#[test]
fn the_request_holds_the_artefact_and_never_the_trace() {
    let model = scripted(&[answer("revise", [4, 4, 4, 4, 4], &[])]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let mut inp = input(&diff, "BODY-MARKER", &["comparison-loosened FLAG-MARKER"]);
    inp.before_output = "BEFORE-MARKER".into();
    inp.after_output = "AFTER-MARKER".into();
    judge(&model, &inp, 0.3).unwrap();
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert!(req.tools.is_empty(), "the judge is offered no tools");
    assert_eq!(
        req.messages.len(),
        2,
        "one system rubric, one user artefact"
    );
    let text: Vec<String> = req
        .messages
        .iter()
        .map(|m| match m {
            Message::System { content } | Message::User { content } => content.clone(),
            other => panic!("unexpected message {other:?}"),
        })
        .collect();
    let all = text.join("\n");
    for needle in [
        "BODY-MARKER",
        "BEFORE-MARKER",
        "AFTER-MARKER",
        "money.py",
        "+x = 2",
        "parse_cents rejects separators",
        "patched_full",
        "x = 1\n",
    ] {
        assert!(all.contains(needle), "missing {needle}");
    }
    // Flags drive the code rules only; the trace has no way in at all.
    assert!(!all.contains("FLAG-MARKER"));
    for forbidden in [
        "tool_calls",
        "search_repo",
        "read_file",
        "reasoning",
        "trajectory",
    ] {
        assert!(
            !text[1].contains(forbidden),
            "user message mentions {forbidden}"
        );
    }
}

#[test]
fn the_rubric_states_every_rule() {
    let r = rubric(0.25);
    for needle in [
        "root_cause",
        "minimality",
        "test_honesty",
        "conventions",
        "faithfulness",
        "less flattering",
        "revise is the usual verdict",
        "25%",
        "not shown how the agent reasoned",
        "at most 2",
        "makes the verdict reject",
    ] {
        assert!(r.contains(needle), "rubric lacks {needle}");
    }
}

#[test]
fn a_malformed_answer_is_repaired_once() {
    let model = scripted(&[
        json!("Here is my verdict: accept"),
        answer("revise", [4, 3, 5, 4, 5], &[]),
    ]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let j = judge(&model, &input(&diff, "Fix.", &[]), 0.3).unwrap();
    assert!(matches!(j, Judgement::Scored { repaired: true, .. }));
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let Message::User { content } = seen[1].messages.last().unwrap() else {
        panic!("the repair request ends with a user message");
    };
    assert!(content.contains("output contract"));
}

#[test]
fn two_malformed_answers_are_a_recorded_failure() {
    let mut bad = answer("revise", [4, 3, 5, 4, 5], &[]);
    bad["scores"]["minimality"] = json!(9);
    let model = scripted(&[json!("not json"), bad]);
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    let j = judge(&model, &input(&diff, "Fix.", &[]), 0.3).unwrap();
    let Judgement::Failed { violations, .. } = j else {
        panic!("expected a failure, got {j:?}");
    };
    assert!(violations.iter().any(|v| v.pointer == "/scores/minimality"));
}

#[test]
fn an_out_of_range_faithfulness_is_not_hidden_by_the_cap() {
    let model = scripted(&[
        answer("revise", [4, 4, 4, 4, 7], &["x"]),
        answer("revise", [4, 4, 4, 4, 7], &["x"]),
    ]);
    let j = judge(&model, &input(SOURCE_DIFF, "Fix.", &[]), 0.3).unwrap();
    assert!(matches!(j, Judgement::Failed { .. }));
}

#[test]
fn new_test_files_are_read_from_the_diff() {
    let diff = format!("{SOURCE_DIFF}{TEST_DIFF}");
    assert_eq!(new_test_files(&diff), vec!["tests/test_money_new.py"]);
    assert!(new_test_files(SOURCE_DIFF).is_empty());
}

#[test]
fn cohen_kappa_matches_a_hand_computed_set() {
    use Verdict::*;
    // 10 pairs. Agreements: 4 accept/accept... computed by hand:
    // rater A: accept 3, revise 5, reject 2; rater B: accept 2, revise 6, reject 2.
    let pairs = [
        (Accept, Accept),
        (Accept, Accept),
        (Accept, Revise),
        (Revise, Revise),
        (Revise, Revise),
        (Revise, Revise),
        (Revise, Revise),
        (Revise, Reject),
        (Reject, Reject),
        (Reject, Revise),
    ];
    // p_o = 7/10; p_e = .3*.2 + .5*.6 + .2*.2 = .06 + .30 + .04 = .40; kappa = .3/.6 = .5
    let k = cohen_kappa(&pairs).unwrap();
    assert!((k - 0.5).abs() < 1e-12, "{k}");
    assert_eq!(cohen_kappa(&[]), None);
    assert_eq!(cohen_kappa(&[(Revise, Revise), (Revise, Revise)]), None);
    let perfect = [(Accept, Accept), (Revise, Revise), (Reject, Reject)];
    assert!((cohen_kappa(&perfect).unwrap() - 1.0).abs() < 1e-12);
}

#[test]
fn agreement_counts_exact_and_within_one() {
    let s = |rc| JudgeScores {
        root_cause: rc,
        minimality: 3,
        test_honesty: 3,
        conventions: 3,
        faithfulness: 3,
    };
    let pairs = [(s(5), s(5)), (s(5), s(4)), (s(5), s(3)), (s(1), s(1))];
    let a = agreement("root_cause", &pairs);
    assert_eq!(a.cases, 4);
    assert!((a.exact - 0.5).abs() < 1e-12);
    assert!((a.within_one - 0.75).abs() < 1e-12);
    let m = agreement("minimality", &pairs);
    assert!((m.exact - 1.0).abs() < 1e-12);
}

#[test]
fn accept_rate_and_its_warning() {
    use Verdict::*;
    assert!((accept_rate(&[Accept, Revise, Revise, Reject]) - 0.25).abs() < 1e-12);
    assert_eq!(accept_rate(&[]), 0.0);
    assert!(accept_rate_warning(0.25, 0.3).is_none());
    assert!(accept_rate_warning(0.5, 0.3).unwrap().contains("50%"));
}

#[test]
fn same_model_is_warned_and_the_default_differs() {
    assert!(same_model_warning("openai:gpt-4o", Some("openai:gpt-4o")).is_some());
    assert!(same_model_warning("openai:gpt-4.1", Some("openai:gpt-4o")).is_some());
    assert!(same_model_warning("anthropic:x", Some("openai:gpt-4o")).is_none());
    assert!(same_model_warning("anthropic:x", None).is_none());
    for sup in ["openai:gpt-4o", "anthropic:claude", "ollama:llama3"] {
        let def = default_judge_model(Some(sup));
        assert!(
            same_model_warning(&def, Some(sup)).is_none(),
            "{sup} -> {def}"
        );
    }
}

fn calibration_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("calibration/cases")
}

#[test]
fn the_calibration_set_is_large_enough_and_covers_every_verdict() {
    let cases = load_cases(&calibration_dir()).unwrap();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for v in [Verdict::Accept, Verdict::Revise, Verdict::Reject] {
        assert!(
            cases.iter().any(|c| c.expected.verdict == v),
            "no {v:?} case"
        );
    }
    for c in &cases {
        // Hand scores obey the same rules the code enforces.
        let (after, applied) = enforce(c.expected.clone(), &cross_check(&c.input));
        assert_eq!(after.verdict, c.expected.verdict, "{}: {applied:?}", c.name);
        assert_eq!(after.scores, c.expected.scores, "{}: {applied:?}", c.name);
    }
}

#[test]
fn a_judge_that_echoes_the_hand_scores_agrees_perfectly() {
    let cases = load_cases(&calibration_dir()).unwrap();
    let answers: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| serde_json::to_value(&c.expected).unwrap())
        .collect();
    let model = scripted(&answers);
    let judgements: Vec<Judgement> = cases
        .iter()
        .map(|c| judge(&model, &c.input, 0.3).unwrap())
        .collect();
    let r = report(&cases, &judgements, 0.3);
    assert_eq!(r.failures, 0);
    assert_eq!(r.verdict_kappa, Some(1.0));
    assert!(
        r.dimensions
            .iter()
            .all(|d| d.exact == 1.0 && d.within_one == 1.0)
    );
    assert!(r.warning.is_none(), "hand accept rate {}", r.accept_rate);
}

#[test]
fn a_generous_judge_trips_the_accept_rate_warning() {
    let cases = load_cases(&calibration_dir()).unwrap();
    let answers: Vec<serde_json::Value> = cases
        .iter()
        .map(|_| answer("accept", [5, 5, 5, 5, 5], &[]))
        .collect();
    let model = scripted(&answers);
    let judgements: Vec<Judgement> = cases
        .iter()
        .map(|c| judge(&model, &c.input, 0.3).unwrap())
        .collect();
    let r = report(&cases, &judgements, 0.3);
    // The code rules still demote the cases with a claimed-but-missing test or a weakening flag.
    assert!(
        r.accept_rate < 1.0 && r.accept_rate > 0.3,
        "{}",
        r.accept_rate
    );
    assert!(r.warning.is_some());
    let k = r.verdict_kappa.unwrap();
    assert!(k < 0.2, "{k}");
}
