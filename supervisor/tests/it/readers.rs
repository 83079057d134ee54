use crate::fixture::*;
use airlock_model::{ChatModel, ChatRequest, ChatResponse, Message};
use airlock_reader::{Brief, FromSupervisor, FromWorker};
use airlock_supervisor::RunEnd;
use airlock_supervisor::delegate::{self, DelegateCtx, ReaderChannel, ReaderLauncher};
use airlock_supervisor::ports::{PortResult, ReadOutcome, ToolFailure, Worktree};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

fn digest(reads_used: u64, path: &str, start: u64, end: u64) -> serde_json::Value {
    json!({
        "answer": "add() computes a - b instead of a + b.",
        "anchors": [{"path": path, "line_start": start, "line_end": end, "claim": "add subtracts"}],
        "ruled_out": ["mul is correct"],
        "also_noticed": [],
        "injection_observed": [],
        "complete": true,
        "reads_used": reads_used,
    })
}

pub fn readers_are_checked_repaired_once_and_dropped_when_they_lie() {
    let fx = Fixture::new();
    let config = fx.config("reader_max_reads = 3\nreader_max_turns = 4");
    let issue = fx.issue(ready_issue());
    let ask = json!({"question": "Where is add() defined and what does it return?",
                     "why": "The issue says add is wrong.", "max_reads": 10, "max_turns": 10});
    let model = fx.script(&[
        // Supervisor: delegate.
        call("delegate_read", ask.clone()),
        // Reader 1: search, read, a digest that lies about reads_used, then a correct one.
        json!({"tool_calls": [{"name": "search_repo", "arguments": {"query": "def add"}}],
               "expect_tools": ["search_repo", "read_file"],
               "expect_last_message_contains": "Begin."}),
        json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "calc/ops.py", "start_line": 4, "end_line": 6}}],
               "expect_contains": "calc/ops.py"}),
        json!({"text": digest(2, "calc/ops.py", 4, 6).to_string(), "expect_contains": "return a - b"}),
        json!({"text": digest(1, "calc/ops.py", 4, 6).to_string(),
               "expect_last_message_contains": "says 2 but the reader made 1 read_file calls"}),
        // Supervisor: sees the digest; delegates again.
        json!({"tool_calls": [{"name": "delegate_read", "arguments": ask}],
               "expect_contains": ["Reader digest", "\"reads_used\": 1"], "expect_tool_error": false}),
        // Reader 2: tries to write (no such tool), then lies about its anchors twice.
        json!({"tool_calls": [{"name": "write_file", "arguments": {"path": "calc/ops.py", "content": "x"}}]}),
        json!({"text": digest(0, "calc/nope.py", 1, 2).to_string(),
               "expect_contains": "no such tool `write_file`", "expect_tool_error": true}),
        json!({"text": digest(0, "calc/ops.py", 50, 60).to_string(),
               "expect_last_message_contains": "/anchors/0/path: `calc/nope.py` is not a file"}),
        // Supervisor: told the digest was dropped.
        json!({"text": outcome("escalate", 0.3).to_string(),
               "expect_contains": ["digest was dropped", "lines 50..60 are not inside `calc/ops.py` (10 lines)"],
               "expect_tool_error": true}),
    ]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    let RunEnd::Finished { outcome, .. } = &report.end else {
        panic!()
    };
    let outcome = &serde_json::to_value(outcome).unwrap();
    assert_eq!(outcome["outcome"], "escalate");
    let t = trajectory(&report);
    let digests = kinds(&t, "reader_digest");
    assert_eq!(digests.len(), 2);
    assert_eq!(digests[0]["accepted"], true);
    assert_eq!(digests[0]["repaired"], true);
    assert_eq!(
        digests[0]["max_reads"], 3,
        "the config caps what the model asks for"
    );
    assert_eq!(digests[1]["accepted"], false);
    assert!(
        digests[1]["dropped_reason"]
            .as_str()
            .unwrap()
            .contains("after one repair")
    );
    assert_eq!(
        std::fs::read_to_string(report.run_dir.join("worktree/calc/ops.py")).unwrap(),
        OPS_PY
    );
    let audit = fx.audit_kinds();
    assert_eq!(audit.iter().filter(|k| *k == "reader_digest").count(), 1);
}

/// A worker that asks for a write tool and a model that records what it is offered.
struct GreedyWorker {
    sent: Vec<FromWorker>,
}

impl ReaderChannel for GreedyWorker {
    fn send(&mut self, _msg: &FromSupervisor) -> PortResult<()> {
        Ok(())
    }
    fn recv(&mut self) -> PortResult<FromWorker> {
        if self.sent.is_empty() {
            return Err(ToolFailure::new("done", "no more"));
        }
        Ok(self.sent.remove(0))
    }
    fn close(&mut self) -> String {
        "closed".into()
    }
}

struct GreedyLauncher;

impl ReaderLauncher for GreedyLauncher {
    fn launch(
        &self,
        _: &[airlock_supervisor::delegate::ReferenceMount],
    ) -> PortResult<Box<dyn ReaderChannel>> {
        let mut tools = airlock_reader::tool_specs();
        tools.push(airlock_model::ToolSpec {
            name: "write_file".into(),
            description: "write".into(),
            input_schema: json!({"type": "object"}),
        });
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            tools,
            options: Default::default(),
        };
        Ok(Box::new(GreedyWorker {
            sent: vec![
                FromWorker::Chat { request },
                FromWorker::Failed {
                    message: "gave up".into(),
                },
            ],
        }))
    }
}

#[derive(Default)]
struct RecordingModel {
    offered: Mutex<Vec<Vec<String>>>,
}

impl ChatModel for RecordingModel {
    fn chat(&self, req: &ChatRequest) -> airlock_model::Result<ChatResponse> {
        self.offered
            .lock()
            .unwrap()
            .push(req.tools.iter().map(|t| t.name.clone()).collect());
        Ok(ChatResponse {
            message: airlock_model::AssistantMessage {
                text: "{}".into(),
                tool_calls: vec![],
            },
            stop_reason: airlock_model::StopReason::EndTurn,
            usage: Default::default(),
            cost_usd: None,
        })
    }
    fn name(&self) -> &str {
        "recording"
    }
}

struct NoTree;

impl Worktree for NoTree {
    fn root(&self) -> &Path {
        Path::new("/nonexistent")
    }
    fn read_lines(&self, _: &str, _: usize, _: usize) -> PortResult<ReadOutcome> {
        Err(ToolFailure::new("not_found", "none"))
    }
    fn read_for_edit(&self, _: &str) -> PortResult<String> {
        Err(ToolFailure::new("not_found", "none"))
    }
    fn write(&self, _: &str, _: &str) -> PortResult<()> {
        Err(ToolFailure::new("refused", "none"))
    }
    fn line_count(&self, _: &str) -> Option<usize> {
        None
    }
    fn file_tree(&self, _: &str, _: usize) -> String {
        String::new()
    }
}

pub fn the_relay_offers_the_model_only_the_reader_tools_whatever_the_worker_asks() {
    let model = RecordingModel::default();
    let ctx = DelegateCtx {
        model: &model,
        worktree: &NoTree,
        launcher: &GreedyLauncher,
        references: &[],
    };
    let brief = Brief {
        repo: "r".into(),
        base_commit: "a".repeat(40),
        question: "q".into(),
        why: "w".into(),
        max_reads: 1,
        max_turns: 1,
        references: Vec::new(),
    };
    let d = delegate::delegate(&ctx, &brief).unwrap();
    assert_eq!(
        *model.offered.lock().unwrap(),
        vec![vec!["search_repo".to_string(), "read_file".to_string()]]
    );
    assert!(d.digest.is_none());
    assert!(d.dropped.unwrap().contains("gave up"));
}

pub fn quoted_lines_are_counted_from_fences_quotes_and_lines_the_reader_was_shown() {
    let shown: BTreeSet<String> = ["return a - b".to_string()].into_iter().collect();
    let fenced: String = (0..13).map(|i| format!("x = {i}\n")).collect();
    let d = airlock_schemas::ReaderDigest {
        answer: format!("```\n{fenced}```\n> quoted\nreturn a - b\nplain words"),
        anchors: vec![],
        ruled_out: vec![],
        also_noticed: vec![],
        injection_observed: vec![],
        complete: true,
        reads_used: 0,
    };
    assert_eq!(delegate::count_quoted_lines(&d, &shown), 15);
}

/// A worker's report of a read is never believed: the figures recorded are the supervisor's
/// re-read, and every figure it got wrong, a served read it did not report and a report that
/// answers no relayed call are integrity violations.
pub fn a_readers_reported_reads_are_rechecked_against_the_supervisors_own_read() {
    let dir = tempfile::tempdir().unwrap();
    airlock_testkit::write(dir.path(), "calc/ops.py", OPS_PY);
    let worktree =
        airlock_supervisor::adapters::CheckoutWorktree::open(dir.path(), vec![]).unwrap();
    let args = |id: &str, start, end| delegate::ReadCall {
        id: id.into(),
        path: Some("calc/ops.py".into()),
        args: Ok(airlock_reader::tools::ReadArgs {
            path: "calc/ops.py".into(),
            start_line: start,
            end_line: end,
        }),
    };
    let lying = airlock_reader::ReadReport {
        call_id: "c1".into(),
        path: "calc/ops.py".into(),
        line_start: 4,
        line_end: 6,
        content_bytes: 9,
        total_bytes: 10,
        truncated: true,
    };
    let invented = airlock_reader::ReadReport {
        call_id: "c9".into(),
        ..lying.clone()
    };
    let d = delegate::Delegation {
        digest: None,
        dropped: None,
        reads_made: 3,
        model_calls: 3,
        repaired: false,
        tool_texts: vec![],
        calls: vec![],
        max_reads: 3,
        read_calls: vec![args("c1", 4, 6), args("c2", 1, 2), args("c3", 1, 1)],
        reads_served: ["c1".to_string(), "c2".to_string()].into_iter().collect(),
        reads_refused: BTreeSet::new(),
        reported_reads: vec![lying, invented],
        reported_refusals: vec![],
        rendered: vec![],
    };
    let events = delegate::read_events(&worktree, &d, 3);
    let lines: Vec<String> = events
        .iter()
        .map(|e| match e {
            airlock_audit::Event::FileRead {
                path,
                reader,
                line_start,
                line_end,
                content_bytes,
                total_bytes,
                truncated,
            } => format!(
                "read {path} {line_start}-{line_end} {content_bytes}/{total_bytes} \
                 {truncated} by {reader}"
            ),
            airlock_audit::Event::IntegrityViolation {
                check,
                claimed,
                computed,
            } => format!("violation {check}: {claimed} vs {computed}"),
            other => format!("unexpected {other:?}"),
        })
        .collect();
    let ops_4_6: usize = OPS_PY
        .split_inclusive('\n')
        .skip(3)
        .take(3)
        .map(str::len)
        .sum();
    let ops_1_2: usize = OPS_PY.split_inclusive('\n').take(2).map(str::len).sum();
    let total = OPS_PY.len();
    assert_eq!(
        lines,
        vec![
            format!("read calc/ops.py 4-6 {ops_4_6}/{total} false by reader#3"),
            format!("violation reader_read.content_bytes (calc/ops.py lines 4-6): 9 vs {ops_4_6}"),
            format!("violation reader_read.total_bytes (calc/ops.py lines 4-6): 10 vs {total}"),
            "violation reader_read.truncated (calc/ops.py lines 4-6): true vs false".to_string(),
            format!("read calc/ops.py 1-2 {ops_1_2}/{total} false by reader#3"),
            format!(
                "violation reader_read.reported (calc/ops.py lines 1-2): no read reported vs \
                 {ops_1_2} bytes of content served"
            ),
            "violation reader_read.call_id: c9: calc/ops.py lines 4-6 vs no read_file call \
             with this id was relayed"
                .to_string(),
        ]
    );
}

/// The `file_read` and `policy_refusal` records of reader `delegation`, in log order, as
/// `path rule` (`read` for a read served).
fn reader_reads(fx: &Fixture, delegation: u32) -> Vec<String> {
    let text = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    let by = json!({"by": "reader", "delegation": delegation});
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["payload"]["reader"] == by)
        .map(|r| match r["kind"].as_str().unwrap() {
            "file_read" => format!(
                "{} read {}-{} {}",
                r["payload"]["path"].as_str().unwrap(),
                r["payload"]["line_start"],
                r["payload"]["line_end"],
                r["payload"]["content_bytes"],
            ),
            "policy_refusal" => format!(
                "{} {}",
                r["payload"]["path"].as_str().unwrap(),
                r["payload"]["rule"].as_str().unwrap()
            ),
            other => format!("unexpected {other}"),
        })
        .collect()
}

/// Every `read_file` call a reader worker makes is one audit event, attributed to its
/// delegation: a refusal of every class with the path asked for and its class, the one read
/// served with its bytes, the read past the budget refused too; and none is an integrity
/// violation (the worker's reports agree with the supervisor's own checks).
pub fn every_read_a_reader_makes_is_recorded_refused_or_not() {
    let fx = Fixture::with_files(&[("data/blob.bin", "\u{0}\u{1}binary".to_string())]);
    std::os::unix::fs::symlink("../../etc/passwd", fx.repo.join("calc/link.py")).unwrap();
    let fx = Fixture {
        commit: git::commit_all(&fx.repo, "a link out"),
        ..fx
    };
    let config = fx.config("reader_max_reads = 10\nreader_max_turns = 3");
    let issue = fx.issue(ready_issue());
    let ask = json!({"question": "What does add return?", "why": "The issue says add is wrong.",
                     "max_reads": 10, "max_turns": 3});
    let read = |path: &str, start: u64, end: u64| json!({"name": "read_file", "arguments": {"path": path, "start_line": start, "end_line": end}});
    let asked = [
        read("/etc/passwd", 1, 2),
        read("../outside.txt", 1, 2),
        read("calc/link.py", 1, 2),
        read("calc/nope.py", 1, 2),
        read("calc", 1, 2),
        read("data/blob.bin", 1, 2),
        read("calc/ops.py", 5, 2),
        json!({"name": "read_file", "arguments": {"path": "calc/ops.py", "start_line": 1}}),
        read("@reference/nope/a.py", 1, 2),
        read("calc/ops.py", 4, 6),
        read("calc/ops.py", 1, 1),
    ];
    let model = fx.script(&[
        call("delegate_read", ask),
        json!({"tool_calls": asked, "expect_tools": ["search_repo", "read_file"]}),
        json!({"text": digest(11, "calc/ops.py", 4, 6).to_string(),
               "expect_contains": "read budget spent", "expect_tool_error": true}),
        json!({"text": outcome("escalate", 0.3).to_string(),
               "expect_contains": "Reader digest", "expect_tool_error": false}),
    ]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    let ops_4_6: usize = OPS_PY
        .split_inclusive('\n')
        .skip(3)
        .take(3)
        .map(str::len)
        .sum();
    assert_eq!(
        reader_reads(&fx, 1),
        vec![
            "/etc/passwd read:absolute_path".to_string(),
            "../outside.txt read:parent_segment".into(),
            "calc/link.py read:escapes_root".into(),
            "calc/nope.py read:not_found".into(),
            "calc read:is_directory".into(),
            "data/blob.bin read:binary".into(),
            "calc/ops.py read:invalid_range".into(),
            "calc/ops.py read:invalid_arguments".into(),
            "@reference/nope/a.py read:unknown_reference".into(),
            format!("calc/ops.py read 4-6 {ops_4_6}"),
            "calc/ops.py read:read_budget_spent".into(),
        ]
    );
    let audit = fx.audit_kinds();
    assert!(
        !audit.iter().any(|k| k == "integrity_violation"),
        "{audit:?}"
    );
    let digests = kinds(&trajectory(&report), "reader_digest");
    assert_eq!(digests[0]["reads_made"], 11);
    assert_eq!(digests[0]["accepted"], true);
}

/// A worker that reports its reads and then dies before its next request: the delegation is
/// a dropped digest (not a reader that never started), and the reads it reported are
/// recorded, each class checked against the supervisor's own (a class it got wrong is a
/// violation).
struct BreakingWorker {
    sent: Vec<FromWorker>,
}

impl ReaderChannel for BreakingWorker {
    fn send(&mut self, _msg: &FromSupervisor) -> PortResult<()> {
        Ok(())
    }
    fn recv(&mut self) -> PortResult<FromWorker> {
        if self.sent.is_empty() {
            return Err(ToolFailure::new("reader_ended", "worker closed its output"));
        }
        Ok(self.sent.remove(0))
    }
    fn close(&mut self) -> String {
        "killed by signal 9".into()
    }
}

struct BreakingLauncher;

impl ReaderLauncher for BreakingLauncher {
    fn launch(
        &self,
        _: &[airlock_supervisor::delegate::ReferenceMount],
    ) -> PortResult<Box<dyn ReaderChannel>> {
        let refused = |id: &str, path: &str, code| FromWorker::ReadRefused {
            refused: airlock_reader::RefusedReadReport {
                call_id: id.into(),
                path: Some(path.into()),
                class: airlock_reader::RefusalClass::Bounded(code),
            },
        };
        Ok(Box::new(BreakingWorker {
            sent: vec![
                FromWorker::Chat {
                    request: ChatRequest {
                        messages: vec![Message::user("Begin.")],
                        tools: airlock_reader::tool_specs(),
                        options: Default::default(),
                    },
                },
                refused(
                    "c1",
                    "calc/gone.py",
                    airlock_checkout::RefusalCode::NotFound,
                ),
                refused("c2", "calc/also.py", airlock_checkout::RefusalCode::Binary),
            ],
        }))
    }
}

/// A model that asks for two reads.
struct TwoReads;

impl ChatModel for TwoReads {
    fn chat(&self, _: &ChatRequest) -> airlock_model::Result<ChatResponse> {
        let read = |id: &str, path: &str| {
            airlock_model::ToolCall::new(
                id,
                "read_file",
                json!({"path": path, "start_line": 1, "end_line": 2}),
            )
        };
        Ok(ChatResponse {
            message: airlock_model::AssistantMessage {
                text: String::new(),
                tool_calls: vec![read("c1", "calc/gone.py"), read("c2", "calc/also.py")],
            },
            stop_reason: airlock_model::StopReason::ToolUse,
            usage: Default::default(),
            cost_usd: None,
        })
    }
    fn name(&self) -> &str {
        "two-reads"
    }
}

pub fn a_reader_that_breaks_off_keeps_the_reads_it_reported() {
    let ctx = DelegateCtx {
        model: &TwoReads,
        worktree: &NoTree,
        launcher: &BreakingLauncher,
        references: &[],
    };
    let brief = Brief {
        repo: "r".into(),
        base_commit: "a".repeat(40),
        question: "q".into(),
        why: "w".into(),
        max_reads: 3,
        max_turns: 2,
        references: Vec::new(),
    };
    let d = delegate::delegate(&ctx, &brief).unwrap();
    assert!(d.digest.is_none());
    let dropped = d.dropped.clone().unwrap();
    assert!(
        dropped.contains("broke off") && dropped.contains("killed by signal 9"),
        "{dropped}"
    );
    let events = delegate::read_events(&NoTree, &d, 2);
    let reader = Some(airlock_audit::ReadBy::Reader { delegation: 2 });
    assert_eq!(
        events,
        vec![
            airlock_audit::Event::PolicyRefusal {
                path: "calc/gone.py".into(),
                rule: "read:not_found".into(),
                reader,
            },
            airlock_audit::Event::PolicyRefusal {
                path: "calc/also.py".into(),
                rule: "read:not_found".into(),
                reader,
            },
            airlock_audit::Event::IntegrityViolation {
                check: "reader_read.class (calc/also.py lines 1-2)".into(),
                claimed: "binary".into(),
                computed: "not_found".into(),
            },
        ]
    );
}
