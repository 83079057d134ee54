use crate::fixture::*;
use airlock_model::{ChatModel, ChatRequest, ChatResponse, Message};
use airlock_reader::{Brief, FromSupervisor, FromWorker};
use airlock_supervisor::RunEnd;
use airlock_supervisor::delegate::{self, DelegateCtx, ReaderChannel, ReaderLauncher};
use airlock_supervisor::ports::{PortResult, ToolFailure, Worktree};
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
    fn launch(&self) -> PortResult<Box<dyn ReaderChannel>> {
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
    fn read_lines(&self, _: &str, _: usize, _: usize) -> PortResult<String> {
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
    };
    let brief = Brief {
        repo: "r".into(),
        base_commit: "a".repeat(40),
        question: "q".into(),
        why: "w".into(),
        max_reads: 1,
        max_turns: 1,
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
