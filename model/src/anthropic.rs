//! The Anthropic Messages wire format: building the request body and reading the response
//! body. Pure functions, no I/O.

use serde_json::{Map, Value, json};

use crate::types::{
    AssistantMessage, ChatRequest, InvalidToolArguments, Message, StopReason, ToolCall, ToolChoice,
    Usage,
};
use crate::{Error, Result};

/// The request body for `POST {base}/messages`.
///
/// System messages go to the top-level `system` field (joined by a blank line); tool results
/// become `tool_result` blocks in a user turn; consecutive turns of one role are merged, since
/// the API wants user and assistant to alternate.
pub(crate) fn encode(model: &str, req: &ChatRequest) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let (role, blocks) = match m {
            Message::System { content } => {
                system.push(content.as_str());
                continue;
            }
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::Assistant(a) => {
                let mut blocks = Vec::new();
                if !a.text.is_empty() {
                    blocks.push(json!({"type": "text", "text": a.text}));
                }
                for c in &a.tool_calls {
                    // The API needs an object; arguments that never parsed are sent as `{}`.
                    let input = if c.invalid_arguments.is_none() && c.arguments.is_object() {
                        c.arguments.clone()
                    } else {
                        Value::Object(Map::new())
                    };
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": input,
                    }));
                }
                if blocks.is_empty() {
                    continue;
                }
                ("assistant", blocks)
            }
            Message::Tool(r) => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert("tool_use_id".into(), json!(r.tool_call_id));
                block.insert("content".into(), json!(r.content));
                if r.is_error {
                    block.insert("is_error".into(), json!(true));
                }
                ("user", vec![Value::Object(block)])
            }
        };
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(req.options.max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = req.options.temperature {
        body.insert("temperature".into(), crate::wire::temperature_value(t));
    }
    if !req.options.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.options.stop));
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &req.options.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
        body.insert("tool_choice".into(), choice);
    }
    Value::Object(body)
}

/// Reads a 2xx response body into the assistant turn, stop reason and usage. Text blocks are
/// joined by a blank line; `tool_use` blocks become tool calls in order; other block types
/// (thinking) are skipped.
pub(crate) fn decode(
    provider: &str,
    body: &Value,
) -> Result<(AssistantMessage, StopReason, Usage)> {
    let malformed = |detail: String| Error::MalformedResponse {
        provider: provider.to_string(),
        detail,
    };
    if body.get("type").and_then(Value::as_str) == Some("error") {
        let message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        return Err(malformed(format!(
            "error object in a success response: {message}"
        )));
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no `content` array in the response".to_string()))?;

    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(format!("content[{i}] text block has no `text`")))?;
                if !text.is_empty() {
                    texts.push(text);
                }
            }
            Some("tool_use") => {
                let id = block
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(format!("content[{i}] tool_use has no `id`")))?;
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(format!("content[{i}] tool_use has no `name`")))?;
                tool_calls.push(tool_call_from_input(id, name, block.get("input")));
            }
            Some(_) => {}
            None => return Err(malformed(format!("content[{i}] has no `type`"))),
        }
    }

    let stop_reason = match body.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::ContentFilter,
        Some(other) => StopReason::Other(other.to_string()),
        None if !tool_calls.is_empty() => StopReason::ToolUse,
        None => StopReason::Other("none".to_string()),
    };

    let usage = body.get("usage");
    let count = |field: &str| {
        usage
            .and_then(|u| u.get(field))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let usage = Usage {
        input_tokens: count("input_tokens")
            .saturating_add(count("cache_creation_input_tokens"))
            .saturating_add(count("cache_read_input_tokens")),
        output_tokens: count("output_tokens"),
    };
    Ok((
        AssistantMessage {
            text: texts.join("\n\n"),
            tool_calls,
        },
        stop_reason,
        usage,
    ))
}

/// `input` should be an object; a string holding JSON (some proxies send that) is parsed, and
/// anything else is reported as invalid arguments.
fn tool_call_from_input(id: &str, name: &str, input: Option<&Value>) -> ToolCall {
    match input {
        Some(v @ Value::Object(_)) => ToolCall::new(id, name, v.clone()),
        Some(Value::String(raw)) => {
            let call = ToolCall::from_raw_arguments(id, name, raw);
            if call.invalid_arguments.is_none() && !call.arguments.is_object() {
                not_an_object(id, name, raw.clone())
            } else {
                call
            }
        }
        None | Some(Value::Null) => ToolCall::new(id, name, Value::Object(Map::new())),
        Some(other) => not_an_object(id, name, other.to_string()),
    }
}

fn not_an_object(id: &str, name: &str, raw: String) -> ToolCall {
    ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments: Value::Null,
        invalid_arguments: Some(InvalidToolArguments {
            raw,
            error: "tool_use input is not a JSON object".to_string(),
        }),
    }
}
