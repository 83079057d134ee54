#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! Contract tests: valid examples pass, each constraint violated once fails at the right
//! pointer with the right keyword, and the serde types agree with the schema files.

use airlock_schemas::{
    BrokerError, Contract, DiffDigest, Error, ErrorCode, JudgeVerdict, OpenPr, Outcome,
    ReaderDigest, Schema, SchemaViolation, from_value, open_pr_tool, parse,
};
use serde_json::{Value, json};

fn valid_open_pr() -> Value {
    json!({
        "issue_id": "ABC-123",
        "base_commit": "0123456789abcdef0123456789abcdef01234567",
        "title": "fix: handle empty csv rows",
        "body": "Root cause: the reader dropped the final row. Verified by the new test.",
        "scope": "source-plus-new-tests",
        "test_change_reason": "none",
        "diff_digest": {
            "files_changed": ["src/csv.py", "tests/test_csv_tail.py"],
            "insertions": 12,
            "deletions": 2,
            "test_files_added": ["tests/test_csv_tail.py"],
            "test_files_modified": [],
            "assertions_removed": 0,
            "skip_markers_added": 0
        },
        "test_evidence": {
            "before_selector": "tests/test_csv_tail.py",
            "before_failing_test": "tests/test_csv_tail.py::test_final_row_kept",
            "after_full_run": "green",
            "witness_run": "green"
        },
        "confidence": 0.8
    })
}

fn valid_outcome() -> Value {
    json!({
        "outcome": "pr",
        "summary": "Kept the final row.",
        "root_cause": "Off-by-one in the row loop.",
        "files_changed": ["src/csv.py"],
        "tests_added": ["tests/test_csv_tail.py::test_final_row_kept"],
        "test_evidence": {"before": "1 failed", "after": "41 passed"},
        "also_noticed": ["src/tsv.py has the same loop"],
        "injection_observed": [],
        "confidence": 0.7
    })
}

fn valid_reader() -> Value {
    json!({
        "answer": "The writer flushes only on close.",
        "anchors": [{"path": "src/w.py", "line_start": 10, "line_end": 18, "claim": "flush happens in close()"}],
        "ruled_out": ["buffering in the caller"],
        "also_noticed": [],
        "injection_observed": ["docs/AGENT_NOTES.md"],
        "complete": true,
        "reads_used": 4
    })
}

fn valid_judge() -> Value {
    json!({
        "verdict": "revise",
        "scores": {"root_cause": 4, "minimality": 3, "test_honesty": 5, "conventions": 4, "faithfulness": 5},
        "unsupported_claims": [],
        "one_line_reason": "Right layer, one drive-by rename.",
        "would_a_reviewer_request_changes": true
    })
}

/// Set `pointer` in `v` to `new` (creating nothing: the parent must exist).
fn with(mut v: Value, pointer: &str, new: Value) -> Value {
    *v.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}")) = new;
    v
}

fn without(mut v: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    v.pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key)
        .unwrap_or_else(|| panic!("no {pointer}"));
    v
}

#[test]
fn every_embedded_schema_compiles() {
    for schema in Schema::ALL {
        let value = schema.value().unwrap();
        assert_eq!(value["type"], "object", "{}", schema.file_name());
        assert_eq!(
            value["additionalProperties"],
            false,
            "{}",
            schema.file_name()
        );
    }
}

#[test]
fn embedded_schemas_are_the_files_on_disk() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for schema in Schema::ALL {
        let on_disk = std::fs::read_to_string(dir.join(schema.file_name())).unwrap();
        assert_eq!(on_disk, schema.source(), "{}", schema.file_name());
    }
}

#[test]
fn valid_examples_pass_and_type() {
    let pr: OpenPr = from_value(&valid_open_pr()).unwrap();
    assert_eq!(pr.diff_digest.insertions, 12);
    let _: Outcome = from_value(&valid_outcome()).unwrap();
    let _: ReaderDigest = from_value(&valid_reader()).unwrap();
    let _: JudgeVerdict = from_value(&valid_judge()).unwrap();
    let err = BrokerError::approval_timeout(3600).to_json();
    let back: BrokerError = from_value(&err).unwrap();
    assert_eq!(back.code, ErrorCode::ApprovalTimeout);
}

/// (description, broken instance, expected pointer, expected keyword)
type Case = (&'static str, Value, &'static str, &'static str);

fn run_cases(schema: Schema, ok: &Value, cases: Vec<Case>) {
    assert!(
        schema.violations(ok).unwrap().is_empty(),
        "the valid example of {} must pass",
        schema.name()
    );
    for (what, broken, pointer, keyword) in cases {
        let violations = schema.violations(&broken).unwrap();
        assert!(
            violations
                .iter()
                .any(|v| v.pointer == pointer && v.keyword == keyword),
            "{} / {what}: expected {keyword} at {pointer:?}, got {violations:#?}",
            schema.name()
        );
    }
}

fn add_key(mut v: Value, object: &str, key: &str) -> Value {
    v.pointer_mut(object)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .insert(key.to_string(), json!(1));
    v
}

#[test]
fn open_pr_every_constraint_violated_once() {
    let ok = valid_open_pr();
    let mut cases: Vec<Case> = Vec::new();
    for key in [
        "issue_id",
        "base_commit",
        "title",
        "body",
        "scope",
        "diff_digest",
        "test_evidence",
        "confidence",
    ] {
        cases.push((
            "required",
            without(ok.clone(), &format!("/{key}")),
            "",
            "required",
        ));
    }
    for key in [
        "files_changed",
        "insertions",
        "deletions",
        "test_files_added",
        "test_files_modified",
        "assertions_removed",
        "skip_markers_added",
    ] {
        cases.push((
            "digest required",
            without(ok.clone(), &format!("/diff_digest/{key}")),
            "/diff_digest",
            "required",
        ));
    }
    for key in [
        "before_selector",
        "before_failing_test",
        "after_full_run",
        "witness_run",
    ] {
        cases.push((
            "evidence required",
            without(ok.clone(), &format!("/test_evidence/{key}")),
            "/test_evidence",
            "required",
        ));
    }
    cases.extend([
        (
            "extra top-level key",
            add_key(ok.clone(), "", "labels"),
            "",
            "additionalProperties",
        ),
        (
            "extra digest key",
            add_key(ok.clone(), "/diff_digest", "renames"),
            "/diff_digest",
            "additionalProperties",
        ),
        (
            "extra evidence key",
            add_key(ok.clone(), "/test_evidence", "logs"),
            "/test_evidence",
            "additionalProperties",
        ),
        (
            "issue id lowercase",
            with(ok.clone(), "/issue_id", json!("abc-123")),
            "/issue_id",
            "pattern",
        ),
        (
            "issue id too long",
            with(ok.clone(), "/issue_id", json!("ABC-1234567")),
            "/issue_id",
            "pattern",
        ),
        (
            "issue id not a string",
            with(ok.clone(), "/issue_id", json!(123)),
            "/issue_id",
            "type",
        ),
        (
            "base HEAD",
            with(ok.clone(), "/base_commit", json!("HEAD")),
            "/base_commit",
            "pattern",
        ),
        (
            "base branch",
            with(ok.clone(), "/base_commit", json!("main")),
            "/base_commit",
            "pattern",
        ),
        (
            "base tag",
            with(ok.clone(), "/base_commit", json!("v1.2.3")),
            "/base_commit",
            "pattern",
        ),
        (
            "base short sha",
            with(ok.clone(), "/base_commit", json!("0123456")),
            "/base_commit",
            "pattern",
        ),
        (
            "base uppercase",
            with(
                ok.clone(),
                "/base_commit",
                json!("0123456789ABCDEF0123456789ABCDEF01234567"),
            ),
            "/base_commit",
            "pattern",
        ),
        (
            "title short",
            with(ok.clone(), "/title", json!("fix: tiny")),
            "/title",
            "minLength",
        ),
        (
            "title long",
            with(
                ok.clone(),
                "/title",
                json!(format!("fix: {}", "x".repeat(70))),
            ),
            "/title",
            "maxLength",
        ),
        (
            "title prefix",
            with(ok.clone(), "/title", json!("feat: add a new csv mode")),
            "/title",
            "pattern",
        ),
        (
            "title no space",
            with(ok.clone(), "/title", json!("fix:handle empty csv rows")),
            "/title",
            "pattern",
        ),
        (
            "body long",
            with(ok.clone(), "/body", json!("x".repeat(4001))),
            "/body",
            "maxLength",
        ),
        (
            "scope edits tests",
            with(ok.clone(), "/scope", json!("source-plus-modified-tests")),
            "/scope",
            "enum",
        ),
        (
            "reason unknown",
            with(ok.clone(), "/test_change_reason", json!("flaky")),
            "/test_change_reason",
            "enum",
        ),
        (
            "too many files",
            with(
                ok.clone(),
                "/diff_digest/files_changed",
                json!((0..13).map(|i| format!("f{i}.py")).collect::<Vec<_>>()),
            ),
            "/diff_digest/files_changed",
            "maxItems",
        ),
        (
            "file not a string",
            with(ok.clone(), "/diff_digest/files_changed", json!([1])),
            "/diff_digest/files_changed/0",
            "type",
        ),
        (
            "zero insertions",
            with(ok.clone(), "/diff_digest/insertions", json!(0)),
            "/diff_digest/insertions",
            "minimum",
        ),
        (
            "too many insertions",
            with(ok.clone(), "/diff_digest/insertions", json!(401)),
            "/diff_digest/insertions",
            "maximum",
        ),
        (
            "fractional insertions",
            with(ok.clone(), "/diff_digest/insertions", json!(1.5)),
            "/diff_digest/insertions",
            "type",
        ),
        (
            "negative deletions",
            with(ok.clone(), "/diff_digest/deletions", json!(-1)),
            "/diff_digest/deletions",
            "minimum",
        ),
        (
            "too many deletions",
            with(ok.clone(), "/diff_digest/deletions", json!(401)),
            "/diff_digest/deletions",
            "maximum",
        ),
        (
            "added not strings",
            with(ok.clone(), "/diff_digest/test_files_added", json!([true])),
            "/diff_digest/test_files_added/0",
            "type",
        ),
        (
            "modified not strings",
            with(
                ok.clone(),
                "/diff_digest/test_files_modified",
                json!([null]),
            ),
            "/diff_digest/test_files_modified/0",
            "type",
        ),
        (
            "assertion removed",
            with(ok.clone(), "/diff_digest/assertions_removed", json!(1)),
            "/diff_digest/assertions_removed",
            "maximum",
        ),
        (
            "assertions negative",
            with(ok.clone(), "/diff_digest/assertions_removed", json!(-1)),
            "/diff_digest/assertions_removed",
            "minimum",
        ),
        (
            "skip added",
            with(ok.clone(), "/diff_digest/skip_markers_added", json!(2)),
            "/diff_digest/skip_markers_added",
            "maximum",
        ),
        (
            "skips negative",
            with(ok.clone(), "/diff_digest/skip_markers_added", json!(-2)),
            "/diff_digest/skip_markers_added",
            "minimum",
        ),
        (
            "selector not a string",
            with(ok.clone(), "/test_evidence/before_selector", json!(7)),
            "/test_evidence/before_selector",
            "type",
        ),
        (
            "failing test not a string",
            with(ok.clone(), "/test_evidence/before_failing_test", json!([])),
            "/test_evidence/before_failing_test",
            "type",
        ),
        (
            "after run red",
            with(
                ok.clone(),
                "/test_evidence/after_full_run",
                json!("mostly green"),
            ),
            "/test_evidence/after_full_run",
            "enum",
        ),
        (
            "witness red",
            with(ok.clone(), "/test_evidence/witness_run", json!("red")),
            "/test_evidence/witness_run",
            "enum",
        ),
        (
            "low confidence",
            with(ok.clone(), "/confidence", json!(0.59)),
            "/confidence",
            "minimum",
        ),
        (
            "confidence above one",
            with(ok.clone(), "/confidence", json!(1.01)),
            "/confidence",
            "maximum",
        ),
        (
            "confidence as text",
            with(ok.clone(), "/confidence", json!("high")),
            "/confidence",
            "type",
        ),
        ("not an object", json!([1, 2]), "", "type"),
    ]);
    run_cases(Schema::OpenPr, &ok, cases);
}

#[test]
fn open_pr_matches_the_specification_bounds() {
    // The specification's numbers, read back from the embedded file.
    let s = Schema::OpenPr.value().unwrap();
    let d = &s["properties"]["diff_digest"]["properties"];
    assert_eq!(d["files_changed"]["maxItems"], 12);
    assert_eq!(d["insertions"]["minimum"], 1);
    assert_eq!(d["insertions"]["maximum"], 400);
    assert_eq!(d["assertions_removed"]["maximum"], 0);
    assert_eq!(d["skip_markers_added"]["maximum"], 0);
    assert_eq!(
        s["properties"]["scope"]["enum"],
        json!(["source-only", "source-plus-new-tests"])
    );
    assert_eq!(s["properties"]["test_change_reason"]["default"], "none");
    assert_eq!(s["properties"]["confidence"]["minimum"], 0.6);
    assert_eq!(
        s["properties"]["issue_id"]["pattern"],
        "^[A-Z]{2,6}-[0-9]{1,6}$"
    );
    assert_eq!(s["properties"]["base_commit"]["pattern"], "^[0-9a-f]{40}$");
    assert!(
        s.get("$schema").is_none(),
        "open_pr.json is handed to models verbatim"
    );
}

#[test]
fn open_pr_boundaries_that_must_pass() {
    let ok = valid_open_pr();
    for (pointer, value) in [
        ("/title", json!("fix: exactly 16c")),
        ("/title", json!(format!("perf: {}", "y".repeat(66)))),
        ("/body", json!("b".repeat(4000))),
        ("/body", json!("")),
        ("/diff_digest/insertions", json!(1)),
        ("/diff_digest/insertions", json!(400)),
        ("/diff_digest/deletions", json!(400)),
        ("/confidence", json!(0.6)),
        ("/confidence", json!(1)),
        ("/issue_id", json!("AB-1")),
        ("/issue_id", json!("ABCDEF-123456")),
        ("/scope", json!("source-only")),
    ] {
        let mut v = with(ok.clone(), pointer, value.clone());
        if pointer == "/scope" {
            v = with(v, "/diff_digest/test_files_added", json!([]));
        }
        let r = from_value::<OpenPr>(&v);
        assert!(r.is_ok(), "{pointer} = {value}: {r:?}");
    }
    let no_reason = without(ok, "/test_change_reason");
    let pr: OpenPr = from_value(&no_reason).unwrap();
    assert_eq!(
        pr.test_change_reason,
        airlock_schemas::TestChangeReason::None
    );
}

#[test]
fn open_pr_code_level_rules() {
    let ok = valid_open_pr();
    let modified = with(
        ok.clone(),
        "/diff_digest/test_files_modified",
        json!(["tests/test_a.py"]),
    );
    let err = from_value::<OpenPr>(&modified).unwrap_err();
    assert_eq!(
        err.violations(),
        vec![SchemaViolation {
            pointer: "/test_change_reason".into(),
            keyword: "requiredWhenTestsModified".into(),
            message: "diff_digest.test_files_modified is non-empty, so test_change_reason must be a non-default value".into(),
        }]
    );
    let justified = with(
        modified,
        "/test_change_reason",
        json!("existing-test-asserts-the-buggy-behaviour"),
    );
    assert!(from_value::<OpenPr>(&justified).is_ok());
    let wrong_scope = with(ok, "/scope", json!("source-only"));
    let err = from_value::<OpenPr>(&wrong_scope).unwrap_err();
    assert_eq!(err.violations()[0].pointer, "/scope");
    assert_eq!(err.violations()[0].keyword, "scopeMatchesDigest");
}

#[test]
fn outcome_every_constraint_violated_once() {
    let ok = valid_outcome();
    let mut cases: Vec<Case> = Vec::new();
    for key in [
        "outcome",
        "summary",
        "root_cause",
        "files_changed",
        "tests_added",
        "test_evidence",
        "also_noticed",
        "injection_observed",
        "confidence",
    ] {
        cases.push((
            "required",
            without(ok.clone(), &format!("/{key}")),
            "",
            "required",
        ));
    }
    cases.extend([
        (
            "evidence before",
            without(ok.clone(), "/test_evidence/before"),
            "/test_evidence",
            "required",
        ),
        (
            "evidence after",
            without(ok.clone(), "/test_evidence/after"),
            "/test_evidence",
            "required",
        ),
        (
            "extra key",
            add_key(ok.clone(), "", "plan"),
            "",
            "additionalProperties",
        ),
        (
            "extra evidence key",
            add_key(ok.clone(), "/test_evidence", "during"),
            "/test_evidence",
            "additionalProperties",
        ),
        (
            "outcome enum",
            with(ok.clone(), "/outcome", json!("merged")),
            "/outcome",
            "enum",
        ),
        (
            "summary type",
            with(ok.clone(), "/summary", json!(1)),
            "/summary",
            "type",
        ),
        (
            "root cause type",
            with(ok.clone(), "/root_cause", json!(null)),
            "/root_cause",
            "type",
        ),
        (
            "files type",
            with(ok.clone(), "/files_changed", json!("src/a.py")),
            "/files_changed",
            "type",
        ),
        (
            "tests item type",
            with(ok.clone(), "/tests_added", json!([1])),
            "/tests_added/0",
            "type",
        ),
        (
            "noticed item type",
            with(ok.clone(), "/also_noticed", json!([{}])),
            "/also_noticed/0",
            "type",
        ),
        (
            "injection item type",
            with(ok.clone(), "/injection_observed", json!([false])),
            "/injection_observed/0",
            "type",
        ),
        (
            "evidence type",
            with(ok.clone(), "/test_evidence/before", json!(0)),
            "/test_evidence/before",
            "type",
        ),
        (
            "confidence above one",
            with(ok.clone(), "/confidence", json!(1.5)),
            "/confidence",
            "maximum",
        ),
        (
            "confidence negative",
            with(ok.clone(), "/confidence", json!(-0.1)),
            "/confidence",
            "minimum",
        ),
        (
            "pr below the floor",
            with(ok.clone(), "/confidence", json!(0.5)),
            "/confidence",
            "minimum",
        ),
    ]);
    run_cases(Schema::Outcome, &ok, cases);
    // Below the floor is legal when escalating.
    let escalate = with(
        with(ok, "/outcome", json!("escalate")),
        "/confidence",
        json!(0.2),
    );
    assert!(from_value::<Outcome>(&escalate).is_ok());
}

#[test]
fn reader_digest_every_constraint_violated_once() {
    let ok = valid_reader();
    let mut cases: Vec<Case> = Vec::new();
    for key in [
        "answer",
        "anchors",
        "ruled_out",
        "also_noticed",
        "injection_observed",
        "complete",
        "reads_used",
    ] {
        cases.push((
            "required",
            without(ok.clone(), &format!("/{key}")),
            "",
            "required",
        ));
    }
    for key in ["path", "line_start", "line_end", "claim"] {
        cases.push((
            "anchor required",
            without(ok.clone(), &format!("/anchors/0/{key}")),
            "/anchors/0",
            "required",
        ));
    }
    cases.extend([
        (
            "extra key",
            add_key(ok.clone(), "", "plan"),
            "",
            "additionalProperties",
        ),
        (
            "extra anchor key",
            add_key(ok.clone(), "/anchors/0", "quote"),
            "/anchors/0",
            "additionalProperties",
        ),
        (
            "answer type",
            with(ok.clone(), "/answer", json!(["a"])),
            "/answer",
            "type",
        ),
        (
            "anchors type",
            with(ok.clone(), "/anchors", json!({})),
            "/anchors",
            "type",
        ),
        (
            "empty path",
            with(ok.clone(), "/anchors/0/path", json!("")),
            "/anchors/0/path",
            "minLength",
        ),
        (
            "line zero",
            with(ok.clone(), "/anchors/0/line_start", json!(0)),
            "/anchors/0/line_start",
            "minimum",
        ),
        (
            "end zero",
            with(ok.clone(), "/anchors/0/line_end", json!(0)),
            "/anchors/0/line_end",
            "minimum",
        ),
        (
            "line fractional",
            with(ok.clone(), "/anchors/0/line_start", json!(2.5)),
            "/anchors/0/line_start",
            "type",
        ),
        (
            "empty claim",
            with(ok.clone(), "/anchors/0/claim", json!("")),
            "/anchors/0/claim",
            "minLength",
        ),
        (
            "ruled out item",
            with(ok.clone(), "/ruled_out", json!([3])),
            "/ruled_out/0",
            "type",
        ),
        (
            "noticed item",
            with(ok.clone(), "/also_noticed", json!([3])),
            "/also_noticed/0",
            "type",
        ),
        (
            "injection item",
            with(ok.clone(), "/injection_observed", json!([3])),
            "/injection_observed/0",
            "type",
        ),
        (
            "complete type",
            with(ok.clone(), "/complete", json!("yes")),
            "/complete",
            "type",
        ),
        (
            "reads negative",
            with(ok.clone(), "/reads_used", json!(-1)),
            "/reads_used",
            "minimum",
        ),
    ]);
    run_cases(Schema::ReaderDigest, &ok, cases);
}

#[test]
fn reader_answer_is_capped_at_300_words_in_code() {
    let ok = valid_reader();
    let at_limit = with(ok.clone(), "/answer", json!(vec!["word"; 300].join(" ")));
    assert!(from_value::<ReaderDigest>(&at_limit).is_ok());
    let over = with(ok.clone(), "/answer", json!(vec!["word"; 301].join("\n ")));
    let err = from_value::<ReaderDigest>(&over).unwrap_err();
    let v = err.violations();
    assert_eq!(
        (v[0].pointer.as_str(), v[0].keyword.as_str()),
        ("/answer", "maxWords")
    );
    assert!(v[0].message.contains("301 words"), "{}", v[0].message);
    let backwards = with(ok, "/anchors/0/line_end", json!(3));
    let err = from_value::<ReaderDigest>(&backwards).unwrap_err();
    let v = err.violations();
    assert_eq!(
        (v[0].pointer.as_str(), v[0].keyword.as_str()),
        ("/anchors/0/line_end", "lineOrder")
    );
}

#[test]
fn judge_verdict_every_constraint_violated_once() {
    let ok = valid_judge();
    let mut cases: Vec<Case> = Vec::new();
    for key in [
        "verdict",
        "scores",
        "unsupported_claims",
        "one_line_reason",
        "would_a_reviewer_request_changes",
    ] {
        cases.push((
            "required",
            without(ok.clone(), &format!("/{key}")),
            "",
            "required",
        ));
    }
    for key in [
        "root_cause",
        "minimality",
        "test_honesty",
        "conventions",
        "faithfulness",
    ] {
        cases.push((
            "score required",
            without(ok.clone(), &format!("/scores/{key}")),
            "/scores",
            "required",
        ));
        let p = format!("/scores/{key}");
        let leaked: &'static str = Box::leak(p.clone().into_boxed_str());
        cases.push((
            "score zero",
            with(ok.clone(), &p, json!(0)),
            leaked,
            "minimum",
        ));
        cases.push((
            "score six",
            with(ok.clone(), &p, json!(6)),
            leaked,
            "maximum",
        ));
        cases.push((
            "score fractional",
            with(ok.clone(), &p, json!(3.5)),
            leaked,
            "type",
        ));
    }
    cases.extend([
        (
            "extra key",
            add_key(ok.clone(), "", "trace"),
            "",
            "additionalProperties",
        ),
        (
            "extra score",
            add_key(ok.clone(), "/scores", "style"),
            "/scores",
            "additionalProperties",
        ),
        (
            "verdict enum",
            with(ok.clone(), "/verdict", json!("merge")),
            "/verdict",
            "enum",
        ),
        (
            "claims item",
            with(ok.clone(), "/unsupported_claims", json!([1])),
            "/unsupported_claims/0",
            "type",
        ),
        (
            "reason two lines",
            with(ok.clone(), "/one_line_reason", json!("a\nb")),
            "/one_line_reason",
            "pattern",
        ),
        (
            "reason empty",
            with(ok.clone(), "/one_line_reason", json!("")),
            "/one_line_reason",
            "minLength",
        ),
        (
            "request type",
            with(ok.clone(), "/would_a_reviewer_request_changes", json!("no")),
            "/would_a_reviewer_request_changes",
            "type",
        ),
        (
            "test honesty veto",
            with(
                with(ok.clone(), "/scores/test_honesty", json!(1)),
                "/verdict",
                json!("accept"),
            ),
            "/verdict",
            "const",
        ),
        (
            "faithfulness cap",
            with(
                ok.clone(),
                "/unsupported_claims",
                json!(["added a regression test"]),
            ),
            "/scores/faithfulness",
            "maximum",
        ),
    ]);
    run_cases(Schema::JudgeVerdict, &ok, cases);
    let vetoed = with(
        with(ok, "/scores/test_honesty", json!(1)),
        "/verdict",
        json!("reject"),
    );
    assert!(from_value::<JudgeVerdict>(&vetoed).is_ok());
}

#[test]
fn error_contract_codes_and_retryability() {
    let codes: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|c| {
            serde_json::to_value(c)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        codes,
        [
            "SCHEMA_INVALID",
            "DIGEST_MISMATCH",
            "POLICY_VIOLATION",
            "APPROVAL_DENIED",
            "APPROVAL_TIMEOUT"
        ]
    );
    let contract = airlock_schemas::error_contract().unwrap();
    let entries = contract.as_array().unwrap();
    assert_eq!(entries.len(), 5);
    for (entry, code) in entries.iter().zip(ErrorCode::ALL) {
        assert_eq!(entry["code"], code.as_str());
        assert_eq!(entry["retryable"], code.retryable(), "{code}");
    }
    assert_eq!(ErrorCode::ALL.iter().filter(|c| c.retryable()).count(), 1);
}

#[test]
fn every_constructed_broker_error_satisfies_error_json() {
    let claimed = DiffDigest {
        files_changed: vec!["src/a.py".into()],
        insertions: 3,
        ..DiffDigest::default()
    };
    let computed = DiffDigest {
        files_changed: vec!["src/a.py".into(), "tests/test_a.py".into()],
        insertions: 9,
        assertions_removed: 1,
        ..DiffDigest::default()
    };
    let violation = SchemaViolation {
        pointer: "/title".into(),
        keyword: "pattern".into(),
        message: "does not match".into(),
    };
    let errors = [
        BrokerError::schema_invalid(std::slice::from_ref(&violation)),
        BrokerError::digest_mismatch(&claimed, &computed),
        BrokerError::policy_violation(
            ".github/workflows/ci.yml",
            "ci-config",
            "CI configuration is never written",
        ),
        BrokerError::approval_denied("touches the public API"),
        BrokerError::approval_timeout(86_400),
    ];
    for (e, code) in errors.iter().zip(ErrorCode::ALL) {
        assert_eq!(e.code, code);
        assert_eq!(e.retryable, code.retryable());
        let json = e.to_json();
        let violations = Schema::BrokerError.violations(&json).unwrap();
        assert!(violations.is_empty(), "{code}: {violations:#?}");
        let back: BrokerError = from_value(&json).unwrap();
        assert_eq!(&back, e);
    }
    assert_eq!(errors[0].details["violations"][0]["pointer"], "/title");
    assert_eq!(errors[0].details["violations"][0]["keyword"], "pattern");
    assert_eq!(
        errors[1].details["fields"],
        json!(["files_changed", "insertions", "assertions_removed"])
    );
    assert_eq!(errors[1].details["computed"]["insertions"], 9);
    assert_eq!(errors[1].details["claimed"]["insertions"], 3);
    assert_eq!(errors[2].details["offending"], ".github/workflows/ci.yml");
    assert_eq!(errors[3].details["reason"], "touches the public API");
    assert_eq!(errors[4].details["queue_age_seconds"], 86_400);
}

#[test]
fn error_json_rejects_contract_breaches() {
    let ok = BrokerError::approval_denied("no").to_json();
    run_cases(
        Schema::BrokerError,
        &ok,
        vec![
            (
                "denied but retryable",
                with(ok.clone(), "/retryable", json!(true)),
                "/retryable",
                "const",
            ),
            (
                "unknown code",
                with(ok.clone(), "/code", json!("RATE_LIMITED")),
                "/code",
                "enum",
            ),
            (
                "denied without reason",
                with(ok.clone(), "/details", json!({})),
                "/details",
                "required",
            ),
            (
                "schema invalid not retryable",
                with(
                    BrokerError::schema_invalid(&[]).to_json(),
                    "/retryable",
                    json!(false),
                ),
                "/retryable",
                "const",
            ),
            (
                "message type",
                with(ok.clone(), "/message", json!(1)),
                "/message",
                "type",
            ),
            (
                "extra key",
                add_key(ok.clone(), "", "hint"),
                "",
                "additionalProperties",
            ),
        ],
    );
}

#[test]
fn not_json_and_prose_are_refused_with_position() {
    let err = parse::<OpenPr>("Sure! Here is the call: {}").unwrap_err();
    match &err {
        Error::NotJson { line, column, .. } => assert_eq!((*line, *column), (1, 1)),
        other => panic!("expected NotJson, got {other:?}"),
    }
    let v = err.violations();
    assert_eq!((v[0].pointer.as_str(), v[0].keyword.as_str()), ("", "json"));
    let err = parse::<Outcome>("{\n  \"outcome\": \"pr\",\n  oops\n}").unwrap_err();
    match err {
        Error::NotJson { line, .. } => assert_eq!(line, 3),
        other => panic!("expected NotJson, got {other:?}"),
    }
    let schema_err = BrokerError::schema_invalid(&parse::<OpenPr>("[]").unwrap_err().violations());
    assert!(schema_err.retryable);
    assert_eq!(schema_err.details["violations"][0]["keyword"], "type");
}

#[test]
fn tool_definition_carries_the_verbatim_input_schema() {
    let tool = open_pr_tool().unwrap();
    assert_eq!(tool["name"], "open_pr");
    assert!(
        tool["description"]
            .as_str()
            .unwrap()
            .starts_with("Submit the sandbox working tree")
    );
    let file: Value = serde_json::from_str(Schema::OpenPr.source()).unwrap();
    assert_eq!(tool["input_schema"], file);
    assert_eq!(tool["x_error_contract"][0]["code"], "SCHEMA_INVALID");
}

// ---- drift: the serde types and the schema files must agree ----

/// Walks `schema` beside a maximal `example` of `T` and checks, at every object level, that
/// the type's keys are exactly the schema's properties; that removing a key breaks
/// deserialisation exactly when the schema requires it (or gives no default); and that every
/// enum member of the schema deserialises while a foreign member does not.
fn assert_type_agrees<T: Contract>(example: &Value) {
    let schema = T::SCHEMA.value().unwrap();
    let typed: T = serde_json::from_value(example.clone()).unwrap();
    let round_trip = serde_json::to_value(&typed).unwrap();
    check_level::<T>(schema, example, &round_trip, "");
}

fn deserialises<T: Contract>(v: &Value) -> bool {
    serde_json::from_value::<T>(v.clone()).is_ok()
}

fn check_level<T: Contract>(schema_node: &Value, root: &Value, serialised: &Value, pointer: &str) {
    let here = serialised.pointer(pointer).unwrap();
    let Some(props) = schema_node.get("properties").and_then(Value::as_object) else {
        return;
    };
    if let Some(obj) = here.as_object() {
        let mut type_keys: Vec<&String> = obj.keys().collect();
        let mut schema_keys: Vec<&String> = props.keys().collect();
        type_keys.sort();
        schema_keys.sort();
        assert_eq!(
            type_keys,
            schema_keys,
            "{}: keys at {pointer:?}",
            T::SCHEMA.file_name()
        );
    }
    let required: Vec<&str> = schema_node
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // A foreign key is refused by the type too (deny_unknown_fields mirrors
    // additionalProperties: false).
    let mut extra = root.clone();
    if let Some(obj) = extra.pointer_mut(pointer).and_then(Value::as_object_mut) {
        obj.insert("zz_not_in_schema".into(), json!(1));
        assert!(
            !deserialises::<T>(&extra),
            "{}: {pointer:?} accepts unknown keys",
            T::SCHEMA.file_name()
        );
    }
    for (key, sub) in props {
        let child = format!("{pointer}/{key}");
        let mut removed = root.clone();
        if let Some(obj) = removed.pointer_mut(pointer).and_then(Value::as_object_mut) {
            obj.remove(key);
            let is_required = required.contains(&key.as_str());
            assert_eq!(
                !deserialises::<T>(&removed),
                is_required,
                "{}: {child} required-ness differs between type and schema",
                T::SCHEMA.file_name()
            );
            if !is_required {
                assert!(
                    sub.get("default").is_some(),
                    "{child}: optional without a default"
                );
            }
        }
        if let Some(members) = sub.get("enum").and_then(Value::as_array) {
            for m in members {
                let v = with(root.clone(), &child, m.clone());
                assert!(
                    deserialises::<T>(&v),
                    "{child}: member {m} refused by the type"
                );
            }
            let v = with(root.clone(), &child, json!("zz-not-a-member"));
            assert!(
                !deserialises::<T>(&v),
                "{child}: the type accepts a non-member"
            );
        }
        if sub.get("type") == Some(&json!("object")) {
            check_level::<T>(sub, root, serialised, &child);
        }
        if let Some(items) = sub.get("items")
            && items.get("type") == Some(&json!("object"))
        {
            check_level::<T>(items, root, serialised, &format!("{child}/0"));
        }
    }
}

#[test]
fn types_and_schema_files_agree() {
    assert_type_agrees::<OpenPr>(&valid_open_pr());
    assert_type_agrees::<Outcome>(&valid_outcome());
    assert_type_agrees::<ReaderDigest>(&valid_reader());
    assert_type_agrees::<JudgeVerdict>(&valid_judge());
    assert_type_agrees::<BrokerError>(&BrokerError::approval_denied("x").to_json());
}

#[test]
fn error_code_enum_matches_error_json() {
    let schema = Schema::BrokerError.value().unwrap();
    let members = schema["properties"]["code"]["enum"].clone();
    let ours = serde_json::to_value(ErrorCode::ALL).unwrap();
    assert_eq!(members, ours);
}

fn valid_review() -> Value {
    json!({
        "summary": "Fixes the off-by-one in the pager.",
        "verdict": "request_changes",
        "comments": [
            {"path": "src/pager.py", "line": 12, "side": "RIGHT", "body": "This still skips the last page."}
        ]
    })
}

#[test]
fn review_types_and_refuses_each_broken_field() {
    let review: airlock_schemas::Review = from_value(&valid_review()).unwrap();
    assert_eq!(review.verdict.github_event(), "REQUEST_CHANGES");
    assert_eq!(review.comments[0].side, airlock_schemas::DiffSide::Right);
    let ok = valid_review();
    run_cases(
        Schema::Review,
        &ok,
        vec![
            (
                "empty summary",
                with(ok.clone(), "/summary", json!("")),
                "/summary",
                "minLength",
            ),
            (
                "unknown verdict",
                with(ok.clone(), "/verdict", json!("lgtm")),
                "/verdict",
                "enum",
            ),
            (
                "line zero",
                with(ok.clone(), "/comments/0/line", json!(0)),
                "/comments/0/line",
                "minimum",
            ),
            (
                "side lowercase",
                with(ok.clone(), "/comments/0/side", json!("right")),
                "/comments/0/side",
                "enum",
            ),
            (
                "absolute path",
                with(ok.clone(), "/comments/0/path", json!("/etc/passwd")),
                "/comments/0/path",
                "pattern",
            ),
            (
                "missing comments",
                without(ok.clone(), "/comments"),
                "",
                "required",
            ),
        ],
    );
}
