//! The scripted model: plays a file of assistant turns in order and checks what it is sent.
//!
//! # Script format
//!
//! A JSON array of turns, a JSON object `{"turns": [...]}`, or JSONL with one turn per line
//! (blank lines ignored). A turn:
//!
//! ```json
//! {
//!   "text": "I will search first.",
//!   "tool_calls": [
//!     {"id": "call_1", "name": "search_repo", "arguments": {"query": "parser"}},
//!     {"name": "read_file", "raw_arguments": "{\"path\": \"src/lib.rs\""}
//!   ],
//!   "stop_reason": "tool_use",
//!   "usage": {"input_tokens": 1200, "output_tokens": 40},
//!   "expect_contains": ["fn parse"],
//!   "expect_last_message_contains": ["fn parse"],
//!   "expect_tool_error": false,
//!   "expect_tools": ["search_repo", "read_file"]
//! }
//! ```
//!
//! Every field is optional. `id` defaults to `call_T_I` (turn and call numbers, 1-based);
//! `raw_arguments` plays arguments that are not valid JSON (to exercise the loop's error path)
//! and excludes `arguments`. `stop_reason` defaults to `tool_use` when there are tool calls and
//! `end_turn` otherwise. `usage` defaults to an estimate of a quarter token per byte of the
//! request and of the turn, so budgets behave as with a real model, deterministically.
//!
//! Expectations are checked against the request that asks for the turn, before it is played:
//! `expect_contains` strings must all occur in the content of the request's last tool result;
//! `expect_last_message_contains` in the text of its last message, whatever the role;
//! `expect_tool_error` is the `is_error` flag of the last tool result; `expect_tools` names
//! tools that must be on offer. A failed expectation, or a call after the last turn, is an
//! error naming the script and the turn.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::Value;

use crate::types::{AssistantMessage, Message, StopReason, ToolCall, Usage};
use crate::{CacheRates, ChatModel, ChatRequest, ChatResponse, Error, ModelConfig, Result};

/// One turn of a script, as written in the file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// The assistant's text.
    #[serde(default)]
    pub text: String,
    /// Tool calls to make.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Stop reason; defaults from the tool calls.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Usage to report; defaults to an estimate.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Strings the last tool result must contain.
    #[serde(default, deserialize_with = "one_or_many")]
    pub expect_contains: Vec<String>,
    /// Strings the last message must contain.
    #[serde(default, deserialize_with = "one_or_many")]
    pub expect_last_message_contains: Vec<String>,
    /// Required `is_error` flag of the last tool result.
    #[serde(default)]
    pub expect_tool_error: Option<bool>,
    /// Tools that must be offered.
    #[serde(default)]
    pub expect_tools: Vec<String>,
}

/// A tool call in a script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// Call id; defaults to `call_T_I`.
    #[serde(default)]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments (defaults to `{}`).
    #[serde(default)]
    pub arguments: Option<Value>,
    /// Raw argument text, played as the provider would send it (may be invalid JSON).
    #[serde(default)]
    pub raw_arguments: Option<String>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<ScriptTurn>,
}

/// Plays a script; see the module documentation for the format.
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    path: PathBuf,
    turns: Vec<ScriptTurn>,
    config: ModelConfig,
    cursor: Mutex<usize>,
}

impl ScriptedModel {
    /// Loads a script file. `config` supplies a price under the model name `scripted`, if any.
    pub fn open(path: &Path, config: &ModelConfig) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let turns = parse_script(path, &text)?;
        Ok(Self::from_turns(path, turns, config))
    }

    /// A scripted model over turns already in memory; `path` only names it in errors.
    pub fn from_turns(path: &Path, turns: Vec<ScriptTurn>, config: &ModelConfig) -> Self {
        ScriptedModel {
            name: format!("scripted:{}", path.display()),
            path: path.to_path_buf(),
            turns,
            config: config.clone(),
            cursor: Mutex::new(0),
        }
    }

    /// Turns not played yet.
    pub fn remaining(&self) -> usize {
        let cursor = *self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        self.turns.len().saturating_sub(cursor)
    }

    fn check(&self, turn_no: usize, turn: &ScriptTurn, req: &ChatRequest) -> Result<()> {
        let fail = |expectation: String, actual: &str| Error::ScriptAssertion {
            path: self.path.clone(),
            turn: turn_no,
            expectation,
            actual: excerpt(actual),
        };
        let last_tool = req.messages.iter().rev().find_map(|m| match m {
            Message::Tool(r) => Some(r),
            _ => None,
        });
        if !turn.expect_contains.is_empty() || turn.expect_tool_error.is_some() {
            let Some(result) = last_tool else {
                return Err(fail(
                    "the request carries a tool result".to_string(),
                    "no tool result in the request",
                ));
            };
            for needle in &turn.expect_contains {
                if !result.content.contains(needle.as_str()) {
                    return Err(fail(
                        format!("last tool result contains {needle:?}"),
                        &result.content,
                    ));
                }
            }
            if let Some(flag) = turn.expect_tool_error
                && result.is_error != flag
            {
                return Err(fail(
                    format!("last tool result has is_error = {flag}"),
                    &format!("is_error = {}: {}", result.is_error, result.content),
                ));
            }
        }
        if !turn.expect_last_message_contains.is_empty() {
            let last = req.messages.last().map(Message::text).unwrap_or("");
            for needle in &turn.expect_last_message_contains {
                if !last.contains(needle.as_str()) {
                    return Err(fail(format!("last message contains {needle:?}"), last));
                }
            }
        }
        for tool in &turn.expect_tools {
            if !req.tools.iter().any(|t| &t.name == tool) {
                let offered: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
                return Err(fail(
                    format!("tool {tool:?} is offered"),
                    &format!("offered: {}", offered.join(", ")),
                ));
            }
        }
        Ok(())
    }
}

fn excerpt(s: &str) -> String {
    const MAX: usize = 500;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        format!("{:?}...", s.chars().take(MAX).collect::<String>())
    }
}

/// Parses script text (JSON array, `{"turns": [...]}` object, or JSONL).
pub fn parse_script(path: &Path, text: &str) -> Result<Vec<ScriptTurn>> {
    let format_err = |detail: String| Error::ScriptFormat {
        path: path.to_path_buf(),
        detail,
    };
    let whole = serde_json::from_str::<Value>(text).ok();
    let turns: Vec<ScriptTurn> = match whole {
        Some(value @ Value::Array(_)) => {
            serde_json::from_value(value).map_err(|e| format_err(e.to_string()))?
        }
        Some(value) if value.get("turns").is_some() => serde_json::from_value::<ScriptFile>(value)
            .map(|f| f.turns)
            .map_err(|e| format_err(e.to_string()))?,
        _ => {
            let mut turns = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let turn: ScriptTurn = serde_json::from_str(line)
                    .map_err(|e| format_err(format!("line {}: {e}", i + 1)))?;
                turns.push(turn);
            }
            turns
        }
    };
    for (i, turn) in turns.iter().enumerate() {
        for call in &turn.tool_calls {
            if call.arguments.is_some() && call.raw_arguments.is_some() {
                return Err(format_err(format!(
                    "turn {}: tool call {:?} has both `arguments` and `raw_arguments`",
                    i + 1,
                    call.name
                )));
            }
        }
    }
    if turns.is_empty() {
        return Err(format_err("the script has no turns".to_string()));
    }
    Ok(turns)
}

fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

impl ChatModel for ScriptedModel {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse> {
        let mut cursor = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        let index = *cursor;
        let Some(turn) = self.turns.get(index) else {
            return Err(Error::ScriptExhausted {
                path: self.path.clone(),
                call: index + 1,
                turns: self.turns.len(),
            });
        };
        let turn_no = index + 1;
        // The turn is consumed even when its expectations fail, so the error names it once.
        *cursor += 1;
        drop(cursor);
        self.check(turn_no, turn, req)?;

        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let id =
                    c.id.clone()
                        .unwrap_or_else(|| format!("call_{turn_no}_{}", i + 1));
                match (&c.raw_arguments, &c.arguments) {
                    (Some(raw), _) => ToolCall::from_raw_arguments(id, &c.name, raw),
                    (None, Some(args)) => ToolCall::new(id, &c.name, args.clone()),
                    (None, None) => ToolCall::new(id, &c.name, Value::Object(Default::default())),
                }
            })
            .collect();
        let stop_reason = turn
            .stop_reason
            .clone()
            .unwrap_or(if tool_calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            });
        let message = AssistantMessage {
            text: turn.text.clone(),
            tool_calls,
        };
        let usage = turn.usage.unwrap_or_else(|| {
            let request_bytes = serde_json::to_string(req).map(|s| s.len()).unwrap_or(0);
            let reply_bytes = serde_json::to_string(&message)
                .map(|s| s.len())
                .unwrap_or(0);
            Usage::new(estimate_tokens(request_bytes), estimate_tokens(reply_bytes))
        });
        Ok(ChatResponse {
            cost_usd: self
                .config
                .cost_usd("scripted", &usage, CacheRates::UNDISCOUNTED),
            message,
            stop_reason,
            usage,
        })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn finish(&self) -> Result<()> {
        let remaining = self.remaining();
        if remaining > 0 {
            return Err(Error::ScriptFormat {
                path: self.path.clone(),
                detail: format!(
                    "the run ended with {remaining} of {} turns not played",
                    self.turns.len()
                ),
            });
        }
        Ok(())
    }
}
