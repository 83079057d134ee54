//! Several threads and several processes appending at once keep one valid chain.

use airlock_audit::{AuditLog, Event, verify};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

const CHILD_ENV: &str = "AIRLOCK_AUDIT_TEST_CHILD_LOG";
const PER_WRITER: u64 = 40;

fn tool_call(n: u64) -> Event {
    Event::ToolCall {
        tool: "search_repo".into(),
        args_digest: format!("{n:064x}"),
        result_bytes: n,
        truncated: n.is_multiple_of(2),
        path: None,
        bytes_returned: None,
    }
}

fn write_many(path: &Path, run: &str) {
    // Each writer opens its own handle, as the supervisor and the broker do.
    let log = AuditLog::open(path).unwrap();
    for n in 0..PER_WRITER {
        log.append(run, tool_call(n)).unwrap();
    }
}

fn assert_complete_chain(path: &Path, writers: u64) {
    let report = verify(path).unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    assert_eq!(report.records, writers * PER_WRITER);
    assert_eq!(report.last_seq, writers * PER_WRITER);
    let scan = airlock_audit::scan(path).unwrap();
    let seqs: BTreeSet<u64> = scan.records.iter().map(|(_, r)| r.seq).collect();
    assert_eq!(
        seqs.len() as u64,
        writers * PER_WRITER,
        "every seq appears once"
    );
}

#[test]
fn threads_with_separate_and_shared_handles_keep_a_valid_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let shared = Arc::new(AuditLog::open(&path).unwrap());
    let mut handles = Vec::new();
    for t in 0..4 {
        let p = path.clone();
        handles.push(std::thread::spawn(move || {
            write_many(&p, &format!("own-{t}"))
        }));
    }
    for t in 0..4 {
        let log = Arc::clone(&shared);
        handles.push(std::thread::spawn(move || {
            for n in 0..PER_WRITER {
                log.append(&format!("shared-{t}"), tool_call(n)).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_complete_chain(&path, 8);
}

/// In a child process (started by the test below) this appends to the log it is given; run
/// directly it writes and verifies a log of its own.
#[test]
fn child_writer() {
    match std::env::var_os(CHILD_ENV) {
        Some(path) => write_many(Path::new(&path), &format!("proc-{}", std::process::id())),
        None => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("audit.jsonl");
            write_many(&path, "solo");
            assert_complete_chain(&path, 1);
        }
    }
}

#[test]
fn processes_appending_at_once_keep_a_valid_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrency::child_writer",
                    "--test-threads",
                    "1",
                    "--quiet",
                ])
                .env(CHILD_ENV, &path)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // This process writes at the same time.
    write_many(&path, "parent");
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_complete_chain(&path, 5);
    let scan = airlock_audit::scan(&path).unwrap();
    let runs: BTreeSet<&str> = scan
        .records
        .iter()
        .map(|(_, r)| r.run_id.as_str())
        .collect();
    assert_eq!(runs.len(), 5, "records from all five processes: {runs:?}");
}
