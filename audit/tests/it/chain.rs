//! Verification catches every kind of tampering; torn tails are reported and repaired.

use airlock_audit::{
    AuditLog, Error, Event, GENESIS, ProblemKind, TestResult, TestScope, sha256_hex, verify,
};
use std::path::{Path, PathBuf};

pub fn sample_events() -> Vec<Event> {
    vec![
        Event::RunStarted {
            repository: "acme/widgets".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            issue: "WID-12".into(),
            config_digest: sha256_hex(b"config"),
        },
        Event::ModelCall {
            model: "test-model-1".into(),
            input_tokens: 1200,
            output_tokens: 80,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: None,
            latency_ms: 900,
        },
        Event::ToolCall {
            tool: "read_file".into(),
            args_digest: sha256_hex(b"{\"path\":\"src/a.py\"}"),
            result_bytes: 2048,
            truncated: false,
            path: Some("src/a.py".into()),
            bytes_returned: Some(2048),
        },
        Event::TestRun {
            selector: Some("tests/test_a.py::test_leap".into()),
            scope: TestScope::Narrow,
            result: TestResult::Failed,
            witness: false,
        },
        Event::PolicyRefusal {
            path: ".github/workflows/ci.yml".into(),
            rule: "dot-directory".into(),
            reader: None,
        },
        Event::BrokerDecision {
            code: "QUEUED".into(),
            detail: None,
        },
    ]
}

/// A log with the sample events of run `r1`, returned with its lines.
pub fn fresh_log(dir: &Path) -> (PathBuf, Vec<String>) {
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    for e in sample_events() {
        log.append("r1", e).unwrap();
    }
    (path.clone(), read_lines(&path))
}

pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut s = lines.join("\n");
    s.push('\n');
    std::fs::write(path, s).unwrap();
}

/// Recompute a line's self-hash the way a careful forger would.
fn rehash(line: &str) -> String {
    let cut = line.rfind(",\"hash\":\"").unwrap();
    let body = format!("{}}}", &line[..cut]);
    let h = sha256_hex(body.as_bytes());
    format!("{},\"hash\":\"{h}\"}}", &line[..cut])
}

/// Serialise a forged record and give it a valid self-hash.
fn forge(mut value: serde_json::Value) -> String {
    value.as_object_mut().unwrap().remove("hash");
    let body = serde_json::to_string(&value).unwrap();
    let h = sha256_hex(body.as_bytes());
    format!("{},\"hash\":\"{h}\"}}", &body[..body.len() - 1])
}

fn kinds(path: &Path) -> Vec<(ProblemKind, u64, Option<u64>)> {
    verify(path)
        .unwrap()
        .problems
        .into_iter()
        .map(|p| (p.kind, p.line, p.seq))
        .collect()
}

#[test]
fn a_fresh_chain_verifies_and_links_each_line_to_the_previous() {
    let dir = tempfile::tempdir().unwrap();
    let (path, lines) = fresh_log(dir.path());
    assert_eq!(lines.len(), 6);
    let report = verify(&path).unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    assert!(report.head_checked);
    assert_eq!(report.records, 6);
    assert_eq!(report.last_seq, 6);
    assert_eq!(
        report.head_hash.as_deref(),
        Some(sha256_hex(lines[5].as_bytes()).as_str())
    );
    let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["prev"], GENESIS);
    assert_eq!(first["seq"], 1);
    assert_eq!(first["kind"], "run_started");
    assert_eq!(first["payload"]["issue"], "WID-12");
    for w in lines.windows(2) {
        let next: serde_json::Value = serde_json::from_str(&w[1]).unwrap();
        assert_eq!(next["prev"], sha256_hex(w[0].as_bytes()));
    }
    // Reopening continues the chain.
    let log = AuditLog::open(&path).unwrap();
    let r = log
        .append(
            "r1",
            Event::Approval {
                reviewer: Some("dana".into()),
                reason: None,
            },
        )
        .unwrap();
    assert_eq!(r.seq, 7);
    assert_eq!(r.prev, sha256_hex(lines[5].as_bytes()));
    assert!(verify(&path).unwrap().is_intact());
}

#[test]
fn an_edit_is_named_even_when_the_forger_rehashes_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = fresh_log(dir.path());
    lines[1] = lines[1].replace("\"input_tokens\":1200", "\"input_tokens\":12");
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Edited, 2, Some(2))]);

    let (path, mut lines) = fresh_log(&dir.path().join("b"));
    lines[2] = rehash(&lines[2].replace("src/a.py", "src/b.py"));
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Edited, 3, Some(3))]);
}

#[test]
fn an_edit_of_the_last_record_is_caught_by_the_head_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = fresh_log(dir.path());
    lines[5] = rehash(&lines[5].replace("QUEUED", "APPROVAL_DENIED"));
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Edited, 6, Some(6))]);
}

#[test]
fn a_removal_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = fresh_log(dir.path());
    lines.remove(2);
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Removed, 3, Some(3))]);

    let (path, mut lines) = fresh_log(&dir.path().join("first"));
    lines.remove(0);
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Removed, 1, Some(1))]);
}

#[test]
fn an_insertion_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // A forger who links the new record correctly and gives it the next seq.
    let (path, mut lines) = fresh_log(dir.path());
    let mut forged: serde_json::Value = serde_json::from_str(&lines[3]).unwrap();
    forged["prev"] = sha256_hex(lines[2].as_bytes()).into();
    forged["seq"] = 4.into();
    forged["payload"]["result"] = "passed".into();
    let forged = forge(forged);
    lines.insert(3, forged);
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Inserted, 4, Some(4))]);

    // A copy of an existing record pasted elsewhere.
    let (path, mut lines) = fresh_log(&dir.path().join("dup"));
    let copy = lines[1].clone();
    lines.insert(4, copy);
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Inserted, 5, Some(2))]);

    // A line that is not a record at all.
    let (path, mut lines) = fresh_log(&dir.path().join("junk"));
    lines.insert(2, "{\"note\":\"hello\"}".into());
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Malformed, 3, None)]);
}

#[test]
fn a_reorder_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = fresh_log(dir.path());
    lines.swap(2, 3);
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Reordered, 3, Some(4))]);
}

#[test]
fn truncation_at_a_record_boundary_is_caught_by_the_head_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = fresh_log(dir.path());
    lines.truncate(4);
    write_lines(&path, &lines);
    assert_eq!(kinds(&path), vec![(ProblemKind::Truncated, 5, Some(5))]);
}

#[test]
fn a_head_cut_short_by_a_crash_counts_as_absent_and_the_next_append_writes_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = fresh_log(dir.path());
    let head = airlock_audit::head_path(&path);
    let whole = std::fs::read(&head).unwrap();
    // The head is rewritten in place: a crash may leave its start only.
    std::fs::write(&head, &whole[..10]).unwrap();
    let report = verify(&path).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(!report.head_checked);
    let log = AuditLog::open(&path).unwrap();
    let r = log
        .append(
            "r1",
            Event::Denial {
                reviewer: None,
                reason: "no".into(),
            },
        )
        .unwrap();
    let report = verify(&path).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.head_checked);
    let text = std::fs::read_to_string(&head).unwrap();
    assert!(text.starts_with(&format!("{{\"seq\":{},", r.seq)), "{text}");
    assert!(text.ends_with("\"}\n"), "{text}");
}

#[test]
fn a_torn_tail_is_reported_then_repaired_without_losing_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, lines) = fresh_log(dir.path());
    // Simulate a crash mid-append: half of a seventh record, no newline, head file not updated.
    let torn = &lines[5][..40];
    let mut content = std::fs::read(&path).unwrap();
    let torn_offset = content.len() as u64;
    content.extend_from_slice(torn.as_bytes());
    std::fs::write(&path, &content).unwrap();

    let report = verify(&path).unwrap();
    assert!(!report.is_tampered());
    assert_eq!(
        report
            .problems
            .iter()
            .map(|p| (p.kind, p.line))
            .collect::<Vec<_>>(),
        vec![(ProblemKind::TornTail, 7)]
    );

    let log = AuditLog::open(&path).unwrap();
    let t = log.torn_tail().expect("open reports the torn tail");
    assert_eq!((t.offset, t.len), (torn_offset, 40));
    let r = log
        .append(
            "r1",
            Event::Denial {
                reviewer: None,
                reason: "no".into(),
            },
        )
        .unwrap();
    assert_eq!(r.seq, 8, "seq 7 is the tail_repaired record");

    let after = std::fs::read(&path).unwrap();
    assert_eq!(
        &after[..content.len()],
        &content[..],
        "the torn bytes are kept in place"
    );
    let lines = read_lines(&path);
    let repair: serde_json::Value = serde_json::from_str(&lines[7]).unwrap();
    assert_eq!(repair["kind"], "tail_repaired");
    assert_eq!(repair["seq"], 7);
    assert_eq!(repair["payload"]["offset"], torn_offset);
    assert_eq!(repair["payload"]["sha256"], sha256_hex(torn.as_bytes()));
    let report = verify(&path).unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    assert_eq!(report.repaired.len(), 1);
    assert_eq!(report.last_seq, 8);
}

#[test]
fn cutting_a_record_in_half_is_reported_as_torn_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = fresh_log(dir.path());
    let content = std::fs::read(&path).unwrap();
    std::fs::write(&path, &content[..content.len() - 30]).unwrap();
    let k = kinds(&path);
    assert!(k.contains(&(ProblemKind::TornTail, 6, None)), "{k:?}");
    assert!(
        k.iter()
            .any(|(kind, _, seq)| *kind == ProblemKind::Truncated && *seq == Some(6)),
        "{k:?}"
    );
}

#[test]
fn a_complete_but_invalid_last_line_refuses_appends() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = fresh_log(dir.path());
    lines[5] = lines[5].replace("QUEUED", "APPROVAL_DENIED");
    write_lines(&path, &lines);
    match AuditLog::open(&path) {
        Err(Error::CorruptTail { line, .. }) => assert_eq!(line, 6),
        other => panic!("expected CorruptTail, got {other:?}"),
    }
    assert_eq!(read_lines(&path), lines, "nothing was written");
}

#[test]
fn a_key_shaped_model_name_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (path, lines) = fresh_log(dir.path());
    let log = AuditLog::open(&path).unwrap();
    let err = log
        .append(
            "r1",
            Event::ModelCall {
                model: "sk-live-0123456789abcdefghijklmnopqrstuv".into(),
                input_tokens: 1,
                output_tokens: 1,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost_usd: None,
                latency_ms: 1,
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::RejectedField { field: "model", .. }),
        "{err}"
    );
    assert_eq!(read_lines(&path), lines);
    assert!(matches!(
        log.append(
            "",
            Event::Approval {
                reviewer: None,
                reason: None
            }
        ),
        Err(Error::InvalidRunId { .. })
    ));
}
