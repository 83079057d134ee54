//! The worker loop: brief in, digest text out, every model call relayed by the supervisor.

use crate::brief::render_brief;
use crate::protocol::{FromSupervisor, FromWorker, ReadReport, RefusedReadReport};
use crate::repo_tools::render_read;
use crate::tools::{
    ReadArgs, ReadRefused, ReadTool, ReaderTools, RefusalClass, SearchArgs, asked_path,
    check_range, decode_args, tool_specs,
};
use airlock_model::{ChatOptions, ChatRequest, ChatResponse, Message, ToolCall, ToolChoice};
use std::io::{BufRead, Write};

/// Errors of the worker process (the protocol broke; model-side problems are not errors).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Reading stdin or writing stdout failed.
    #[error("reader worker I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A line from the supervisor was not a protocol message.
    #[error("reader worker got a malformed message: {0}")]
    Protocol(String),
    /// The supervisor closed stdin before the exchange ended.
    #[error("reader worker: the supervisor hung up")]
    HungUp,
}

/// Result alias for the worker.
pub type Result<T> = std::result::Result<T, WorkerError>;

const BEGIN: &str =
    "Begin. Answer the question in your brief and finish with the JSON object only.";

struct Channel<R, W> {
    input: R,
    output: W,
}

impl<R: BufRead, W: Write> Channel<R, W> {
    fn send(&mut self, msg: &FromWorker) -> Result<()> {
        let line = serde_json::to_string(msg).map_err(|e| WorkerError::Protocol(e.to_string()))?;
        self.output.write_all(line.as_bytes())?;
        self.output.write_all(b"\n")?;
        self.output.flush()?;
        Ok(())
    }

    fn recv(&mut self) -> Result<FromSupervisor> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.input.read_line(&mut line)? == 0 {
                return Err(WorkerError::HungUp);
            }
            if !line.trim().is_empty() {
                break;
            }
        }
        serde_json::from_str(line.trim()).map_err(|e| WorkerError::Protocol(e.to_string()))
    }

    /// Relay one request; `None` when the supervisor refused or the model failed.
    fn chat(&mut self, request: ChatRequest) -> Result<Option<ChatResponse>> {
        self.send(&FromWorker::Chat { request })?;
        match self.recv()? {
            FromSupervisor::ChatResult { response } => Ok(Some(response)),
            FromSupervisor::ChatError { .. } | FromSupervisor::Finish => Ok(None),
            other => Err(WorkerError::Protocol(format!(
                "expected a chat result, got {other:?}"
            ))),
        }
    }
}

/// Run one reader: wait for `start`, loop within the brief's budget, send the digest text,
/// answer at most the supervisor's repair requests, stop at `finish`.
pub fn run_worker(input: impl BufRead, output: impl Write, tools: &dyn ReaderTools) -> Result<()> {
    let mut ch = Channel { input, output };
    let brief = match ch.recv()? {
        FromSupervisor::Start { brief } => brief,
        FromSupervisor::Finish => return Ok(()),
        other => {
            return Err(WorkerError::Protocol(format!(
                "expected start, got {other:?}"
            )));
        }
    };
    let mut messages = vec![Message::system(render_brief(&brief)), Message::user(BEGIN)];
    let mut reads: u32 = 0;
    let mut final_text: Option<String> = None;
    for _turn in 0..brief.max_turns {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: tool_specs(),
            options: ChatOptions::default(),
        };
        let Some(response) = ch.chat(request)? else {
            ch.send(&FromWorker::Failed {
                message: "the supervisor refused or failed a model call".into(),
            })?;
            return wait_for_finish(&mut ch);
        };
        let calls = response.message.tool_calls.clone();
        let text = response.message.text.clone();
        messages.push(Message::Assistant(response.message));
        if calls.is_empty() {
            final_text = Some(text);
            break;
        }
        for call in &calls {
            let executed = execute(call, tools, &mut reads, brief.max_reads);
            if let Some(report) = executed.report {
                ch.send(&report)?;
            }
            let (content, is_error) = match executed.result {
                Ok(text) => (text, false),
                Err(text) => (text, true),
            };
            messages.push(Message::tool_result(&call.id, content, is_error));
        }
    }
    let text = match final_text {
        Some(text) => text,
        None => {
            messages.push(Message::user(format!(
                "Your turn budget ({} turns) is spent. Reply now with the JSON object only, with \
                 \"complete\": false and \"reads_used\": {reads}.",
                brief.max_turns
            )));
            match ch.chat(closing_request(&messages))? {
                Some(response) => {
                    let text = response.message.text.clone();
                    messages.push(Message::Assistant(response.message));
                    text
                }
                None => {
                    ch.send(&FromWorker::Failed {
                        message: "no final answer: the closing model call failed".into(),
                    })?;
                    return wait_for_finish(&mut ch);
                }
            }
        }
    };
    ch.send(&FromWorker::Digest { text })?;
    loop {
        match ch.recv()? {
            FromSupervisor::Finish => return Ok(()),
            FromSupervisor::Repair { message } => {
                messages.push(Message::user(message));
                match ch.chat(closing_request(&messages))? {
                    Some(response) => {
                        let text = response.message.text.clone();
                        messages.push(Message::Assistant(response.message));
                        ch.send(&FromWorker::Digest { text })?;
                    }
                    None => {
                        ch.send(&FromWorker::Failed {
                            message: "the repair model call failed".into(),
                        })?;
                        return wait_for_finish(&mut ch);
                    }
                }
            }
            other => {
                return Err(WorkerError::Protocol(format!(
                    "expected repair or finish, got {other:?}"
                )));
            }
        }
    }
}

fn closing_request(messages: &[Message]) -> ChatRequest {
    ChatRequest {
        messages: messages.to_vec(),
        tools: Vec::new(),
        options: ChatOptions {
            tool_choice: ToolChoice::None,
            ..ChatOptions::default()
        },
    }
}

fn wait_for_finish<R: BufRead, W: Write>(ch: &mut Channel<R, W>) -> Result<()> {
    loop {
        match ch.recv() {
            Ok(FromSupervisor::Finish) | Err(WorkerError::HungUp) => return Ok(()),
            Ok(_) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A call's result for the model (`Err`: an error result), and what to report of it when it
/// was a `read_file` call, served or refused.
struct Executed {
    result: std::result::Result<String, String>,
    report: Option<FromWorker>,
}

/// Execute one call. Every `read_file` call counts as a read, refused or not, so the count
/// the supervisor makes from the relayed calls is the same number; and every one is reported.
fn execute(call: &ToolCall, tools: &dyn ReaderTools, reads: &mut u32, max_reads: u32) -> Executed {
    match ReadTool::from_name(&call.name) {
        Some(ReadTool::SearchRepo) => Executed {
            result: decode_args::<SearchArgs>(call)
                .and_then(|args| tools.search(&args.query, args.limit_or_default())),
            report: None,
        },
        Some(ReadTool::ReadFile) => {
            *reads += 1;
            match read_file(call, tools, *reads, max_reads) {
                Ok(out) => Executed {
                    result: Ok(render_read(&out)),
                    report: Some(FromWorker::Read {
                        read: ReadReport::of(&call.id, &out),
                    }),
                },
                Err(refused) => Executed {
                    result: Err(refused.message),
                    report: Some(FromWorker::ReadRefused {
                        refused: RefusedReadReport {
                            call_id: call.id.clone(),
                            path: asked_path(call),
                            class: refused.class,
                        },
                    }),
                },
            }
        }
        None => Executed {
            result: Err(format!(
                "no such tool `{}`: a reader has only {} and {}",
                call.name,
                ReadTool::SearchRepo.name(),
                ReadTool::ReadFile.name()
            )),
            report: None,
        },
    }
}

/// The `read_file` call that is the worker's `nth` (1-based): refused when the budget is
/// spent, its arguments do not decode or its window is empty, else the bounded reader's answer.
fn read_file(
    call: &ToolCall,
    tools: &dyn ReaderTools,
    nth: u32,
    max_reads: u32,
) -> std::result::Result<airlock_checkout::ReadOutcome, ReadRefused> {
    if nth > max_reads {
        return Err(ReadRefused::new(
            RefusalClass::ReadBudgetSpent,
            format!(
                "read budget spent ({max_reads} reads): answer with what you have and set \
                 \"complete\": false"
            ),
        ));
    }
    let args: ReadArgs =
        decode_args(call).map_err(|e| ReadRefused::new(RefusalClass::InvalidArguments, e))?;
    check_range(&args).map_err(|e| {
        ReadRefused::new(
            RefusalClass::Bounded(airlock_checkout::RefusalCode::InvalidRange),
            e,
        )
    })?;
    tools.read_lines(&args.path, args.start_line, args.end_line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use airlock_model::{AssistantMessage, StopReason, ToolCall, Usage};
    use serde_json::json;

    struct FakeTools;

    impl ReaderTools for FakeTools {
        fn search(&self, query: &str, _limit: usize) -> std::result::Result<String, String> {
            Ok(format!("1. calc/ops.py:1-2 for {query}"))
        }
        fn read_lines(
            &self,
            path: &str,
            start: usize,
            end: usize,
        ) -> std::result::Result<airlock_checkout::ReadOutcome, ReadRefused> {
            if path.starts_with('/') {
                return Err(ReadRefused::new(
                    RefusalClass::Bounded(airlock_checkout::RefusalCode::AbsolutePath),
                    "absolute_path: use a relative path",
                ));
            }
            let content = format!("{path} lines {start}-{end}\n");
            Ok(airlock_checkout::ReadOutcome {
                path: path.to_string(),
                bytes_returned: content.len() as u64,
                content,
                language: "text".into(),
                line_count: 10,
                line_start: start as u32,
                line_end: end as u32,
                truncated: false,
                bytes_total: 1000,
            })
        }
    }

    fn reply(calls: Vec<ToolCall>, text: &str) -> String {
        serde_json::to_string(&FromSupervisor::ChatResult {
            response: airlock_model::ChatResponse {
                message: AssistantMessage {
                    text: text.into(),
                    tool_calls: calls,
                },
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
                cost_usd: None,
            },
        })
        .unwrap()
    }

    fn run(lines: &[String]) -> Vec<FromWorker> {
        let input = lines.join("\n") + "\n";
        let mut out = Vec::new();
        run_worker(input.as_bytes(), &mut out, &FakeTools).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn start(max_reads: u32, max_turns: u32) -> String {
        serde_json::to_string(&FromSupervisor::Start {
            brief: Brief {
                repo: "calc".into(),
                base_commit: "a".repeat(40),
                question: "What does add return?".into(),
                why: "Checking a report.".into(),
                max_reads,
                max_turns,
                references: Vec::new(),
            },
        })
        .unwrap()
    }

    fn last_tool_results(msg: &FromWorker) -> Vec<(String, bool)> {
        let FromWorker::Chat { request } = msg else {
            panic!("expected a chat request, got {msg:?}")
        };
        request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(r) => Some((r.content.clone(), r.is_error)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn other_tools_are_refused_and_reads_are_budgeted() {
        let read = |id: &str| {
            ToolCall::new(
                id,
                "read_file",
                json!({"path": "calc/ops.py", "start_line": 1, "end_line": 2}),
            )
        };
        let out = run(&[
            start(1, 5),
            reply(
                vec![ToolCall::new(
                    "w",
                    "write_file",
                    json!({"path": "x", "content": "y"}),
                )],
                "",
            ),
            reply(vec![read("r1"), read("r2")], ""),
            reply(vec![], "{\"answer\": \"done\"}"),
            serde_json::to_string(&FromSupervisor::Finish).unwrap(),
        ]);
        let FromWorker::Chat { request } = &out[0] else {
            panic!()
        };
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(offered, vec!["search_repo", "read_file"]);
        let results = last_tool_results(&out[1]);
        assert!(results[0].0.contains("no such tool `write_file`") && results[0].1);
        // The one read that went through is reported, typed, before the request carrying it.
        assert_eq!(
            out[2],
            FromWorker::Read {
                read: ReadReport {
                    call_id: "r1".into(),
                    path: "calc/ops.py".into(),
                    line_start: 1,
                    line_end: 2,
                    content_bytes: 22,
                    total_bytes: 1000,
                    truncated: false,
                }
            }
        );
        // The read over budget is reported too, refused, with its class.
        assert_eq!(
            out[3],
            FromWorker::ReadRefused {
                refused: RefusedReadReport {
                    call_id: "r2".into(),
                    path: Some("calc/ops.py".into()),
                    class: RefusalClass::ReadBudgetSpent,
                }
            }
        );
        let results = last_tool_results(&out[4]);
        assert_eq!(
            results[1],
            (
                "calc/ops.py lines 1-2 of 10\n1| calc/ops.py lines 1-2\n".to_string(),
                false
            )
        );
        assert!(results[2].0.contains("read budget spent") && results[2].1);
        assert_eq!(
            out[5],
            FromWorker::Digest {
                text: "{\"answer\": \"done\"}".into()
            }
        );
        assert_eq!(out.len(), 6);
    }

    /// Every refused `read_file` call is reported with its class, before the request that
    /// carries its error result, in the order the calls were made; a search is not a read.
    #[test]
    fn every_refused_read_is_reported_with_its_class() {
        let read = |id: &str, args: serde_json::Value| ToolCall::new(id, "read_file", args);
        let out = run(&[
            start(4, 5),
            reply(
                vec![
                    read(
                        "abs",
                        json!({"path": "/etc/passwd", "start_line": 1, "end_line": 2}),
                    ),
                    read("args", json!({"path": "calc/ops.py", "start_line": "one"})),
                    ToolCall::new("s", "search_repo", json!({"query": "add"})),
                    read(
                        "range",
                        json!({"path": "calc/ops.py", "start_line": 5, "end_line": 2}),
                    ),
                    read(
                        "ok",
                        json!({"path": "calc/ops.py", "start_line": 1, "end_line": 1}),
                    ),
                    read("over", json!({"nothing": true})),
                ],
                "",
            ),
            reply(vec![], "done"),
            serde_json::to_string(&FromSupervisor::Finish).unwrap(),
        ]);
        let reports: Vec<(String, Option<String>, String)> = out
            .iter()
            .filter_map(|m| match m {
                FromWorker::Read { read } => Some((
                    read.call_id.clone(),
                    Some(read.path.clone()),
                    "served".into(),
                )),
                FromWorker::ReadRefused { refused } => Some((
                    refused.call_id.clone(),
                    refused.path.clone(),
                    refused.class.to_string(),
                )),
                _ => None,
            })
            .collect();
        let ops = Some("calc/ops.py".to_string());
        assert_eq!(
            reports,
            vec![
                (
                    "abs".into(),
                    Some("/etc/passwd".into()),
                    "absolute_path".into()
                ),
                ("args".into(), ops.clone(), "invalid_arguments".into()),
                ("range".into(), ops.clone(), "invalid_range".into()),
                ("ok".into(), ops, "served".into()),
                ("over".into(), None, "read_budget_spent".into()),
            ]
        );
        // All five reports precede the request that carries their results.
        assert!(matches!(out[6], FromWorker::Chat { .. }));
        let results = last_tool_results(&out[6]);
        let errors: Vec<bool> = results.iter().map(|r| r.1).collect();
        assert_eq!(errors, vec![true, true, false, true, false, true]);
        assert!(results[0].0.starts_with("absolute_path: "));
    }

    #[test]
    fn an_exhausted_turn_budget_asks_for_an_incomplete_answer_without_tools() {
        let search = ToolCall::new("s", "search_repo", json!({"query": "add"}));
        let repair = serde_json::to_string(&FromSupervisor::Repair {
            message: "fix reads_used".into(),
        })
        .unwrap();
        let out = run(&[
            start(3, 1),
            reply(vec![search], ""),
            reply(vec![], "partial"),
            repair,
            reply(vec![], "repaired"),
            serde_json::to_string(&FromSupervisor::Finish).unwrap(),
        ]);
        let FromWorker::Chat { request } = &out[1] else {
            panic!()
        };
        assert!(request.tools.is_empty());
        assert!(
            request
                .messages
                .last()
                .unwrap()
                .text()
                .contains("\"complete\": false")
        );
        assert_eq!(
            out[2],
            FromWorker::Digest {
                text: "partial".into()
            }
        );
        let FromWorker::Chat { request } = &out[3] else {
            panic!()
        };
        assert_eq!(request.messages.last().unwrap().text(), "fix reads_used");
        assert_eq!(
            out[4],
            FromWorker::Digest {
                text: "repaired".into()
            }
        );
    }
}
