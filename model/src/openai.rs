//! The OpenAI chat-completions wire format (also spoken by Ollama, vLLM and llama.cpp):
//! building the request body and reading the response body. Pure functions, no I/O.

use serde_json::{Map, Value, json};

use crate::types::{
    AssistantMessage, ChatRequest, Message, StopReason, ToolCall, ToolChoice, Usage,
};
use crate::{Error, Result};

/// Prefix put on a failed tool result, since the protocol has no error flag.
pub(crate) const TOOL_ERROR_PREFIX: &str = "ERROR: ";

/// The request body for `POST {base}/chat/completions`. `max_tokens_field` is
/// `max_completion_tokens` for OpenAI itself and `max_tokens` for compatible servers.
pub(crate) fn encode(model: &str, req: &ChatRequest, max_tokens_field: &str) -> Value {
    let messages: Vec<Value> = req.messages.iter().map(encode_message).collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert(max_tokens_field.into(), json!(req.options.max_tokens));
    if let Some(t) = req.options.temperature {
        body.insert("temperature".into(), crate::json::temperature_value(t));
    }
    if !req.options.stop.is_empty() {
        body.insert("stop".into(), json!(req.options.stop));
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &req.options.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
    }
    Value::Object(body)
}

fn encode_message(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant(a) => {
            let mut msg = Map::new();
            msg.insert("role".into(), json!("assistant"));
            let content = if a.text.is_empty() && !a.tool_calls.is_empty() {
                Value::Null
            } else {
                json!(a.text)
            };
            msg.insert("content".into(), content);
            if !a.tool_calls.is_empty() {
                let calls: Vec<Value> = a
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments_text()},
                        })
                    })
                    .collect();
                msg.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(msg)
        }
        Message::Tool(r) => {
            let content = if r.is_error {
                format!("{TOOL_ERROR_PREFIX}{}", r.content)
            } else {
                r.content.clone()
            };
            json!({"role": "tool", "tool_call_id": r.tool_call_id, "content": content})
        }
    }
}

/// Reads a 2xx response body into the assistant turn, stop reason and usage.
pub(crate) fn decode(
    provider: &str,
    body: &Value,
) -> Result<(AssistantMessage, StopReason, Usage)> {
    let malformed = |detail: String| Error::MalformedResponse {
        provider: provider.to_string(),
        detail,
    };
    if let Some(err) = body.get("error").filter(|e| !e.is_null()) {
        return Err(malformed(format!(
            "error object in a success response: {err}"
        )));
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| malformed("no `choices[0]` in the response".to_string()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| malformed("no `choices[0].message` in the response".to_string()))?;

    let mut text = content_text(message.get("content"));
    if text.is_empty()
        && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
    {
        text = refusal.to_string();
    }

    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, call) in calls.iter().enumerate() {
            let function = call
                .get("function")
                .ok_or_else(|| malformed(format!("tool_calls[{i}] has no `function`")))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed(format!("tool_calls[{i}].function has no `name`")))?;
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| format!("call_{i}"));
            let call = match function.get("arguments") {
                Some(Value::String(raw)) => ToolCall::from_raw_arguments(id, name, raw),
                None | Some(Value::Null) => ToolCall::from_raw_arguments(id, name, ""),
                // Some compatible servers send the arguments as an object already.
                Some(other) => ToolCall::new(id, name, other.clone()),
            };
            tool_calls.push(call);
        }
    }

    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let stop_reason = match finish {
        Some("stop") if !tool_calls.is_empty() => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
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
    // `prompt_tokens` includes the cached ones, reported apart under `prompt_tokens_details`.
    let usage = Usage {
        input_tokens: count("prompt_tokens"),
        output_tokens: count("completion_tokens"),
        cache_read_tokens: usage
            .and_then(|u| u.pointer("/prompt_tokens_details/cached_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cache_write_tokens: 0,
    };
    Ok((AssistantMessage { text, tool_calls }, stop_reason, usage))
}

/// `content` is a string, null, or (on some servers) an array of `{type: text, text}` parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}
