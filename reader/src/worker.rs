//! The worker loop: brief in, digest text out, every model call relayed by the supervisor.

use crate::brief::render_brief;
use crate::protocol::{FromSupervisor, FromWorker, ReadReport};
use crate::repo_tools::render_read;
use crate::tools::{
    ReadArgs, ReadTool, ReaderTools, SearchArgs, check_range, decode_args, tool_specs,
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
            let (content, is_error) = match execute(call, tools, &mut reads, brief.max_reads) {
                Ok(Executed { text, read }) => {
                    if let Some(read) = read {
                        ch.send(&FromWorker::Read { read })?;
                    }
                    (text, false)
                }
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

/// A call's result for the model, and the read to report when it was a successful read.
struct Executed {
    text: String,
    read: Option<ReadReport>,
}

/// Execute one call. Every `read_file` call counts as a read, refused or not, so the count
/// the supervisor makes from the relayed calls is the same number.
fn execute(
    call: &ToolCall,
    tools: &dyn ReaderTools,
    reads: &mut u32,
    max_reads: u32,
) -> std::result::Result<Executed, String> {
    match ReadTool::from_name(&call.name) {
        Some(ReadTool::SearchRepo) => {
            let args: SearchArgs = decode_args(call)?;
            let text = tools.search(&args.query, args.limit_or_default())?;
            Ok(Executed { text, read: None })
        }
        Some(ReadTool::ReadFile) => {
            *reads += 1;
            if *reads > max_reads {
                return Err(format!(
                    "read budget spent ({max_reads} reads): answer with what you have and set \
                     \"complete\": false"
                ));
            }
            let args: ReadArgs = decode_args(call)?;
            check_range(&args)?;
            let out = tools.read_lines(&args.path, args.start_line, args.end_line)?;
            Ok(Executed {
                text: render_read(&out),
                read: Some(ReadReport::of(&call.id, &out)),
            })
        }
        None => Err(format!(
            "no such tool `{}`: a reader has only {} and {}",
            call.name,
            ReadTool::SearchRepo.name(),
            ReadTool::ReadFile.name()
        )),
    }
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
        ) -> std::result::Result<airlock_checkout::ReadOutcome, String> {
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
        let results = last_tool_results(&out[3]);
        assert_eq!(
            results[1],
            (
                "calc/ops.py lines 1-2 of 10\n1| calc/ops.py lines 1-2\n".to_string(),
                false
            )
        );
        assert!(results[2].0.contains("read budget spent") && results[2].1);
        assert_eq!(
            out[4],
            FromWorker::Digest {
                text: "{\"answer\": \"done\"}".into()
            }
        );
        assert_eq!(out.len(), 5);
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
