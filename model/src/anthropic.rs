//! The Anthropic Messages wire format: building the request body and reading the response
//! body. Pure functions, no I/O.

use serde_json::{Map, Value, json};

use crate::types::{
    AssistantMessage, ChatRequest, InvalidToolArguments, Message, StopReason, ToolCall, ToolChoice,
    Usage,
};
use crate::{Error, Result};

/// The most `cache_control` breakpoints the API takes in one request.
pub(crate) const MAX_CACHE_BREAKPOINTS: usize = 4;

/// The request body for `POST {base}/messages`.
///
/// System messages go to the top-level `system` field (joined by a blank line); tool results
/// become `tool_result` blocks in a user turn; consecutive turns of one role are merged, since
/// the API wants user and assistant to alternate.
///
/// With `prompt_cache`, the body carries `cache_control` breakpoints (see [`cache_breakpoints`])
/// and `system` is sent as one text block, the form that can carry one.
pub(crate) fn encode(model: &str, req: &ChatRequest, prompt_cache: bool) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // For each message: the (turn, block) of the last block it produced, if any.
    let mut last_block_of: Vec<Option<(usize, usize)>> = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        let (role, blocks) = match m {
            Message::System { content } => {
                system.push(content.as_str());
                last_block_of.push(None);
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
                    last_block_of.push(None);
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
        let turn = turns.len() - 1;
        last_block_of.push(Some((turn, turns[turn].1.len() - 1)));
    }

    let mut system_value = (!system.is_empty()).then(|| json!(system.join("\n\n")));
    let mut tools: Vec<Value> = req
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
    if prompt_cache {
        let shape: Vec<(&str, usize)> = turns.iter().map(|(role, b)| (*role, b.len())).collect();
        let stable_end = req
            .options
            .stable_prefix
            .min(last_block_of.len())
            .checked_sub(1)
            .and_then(|i| last_block_of[..=i].iter().rev().find_map(|b| *b));
        let marks = cache_breakpoints(&shape, stable_end);
        let ephemeral = json!({"type": "ephemeral"});
        if let Some(text) = system_value.take() {
            system_value = Some(json!([
                {"type": "text", "text": text, "cache_control": ephemeral}
            ]));
        } else if let Some(Value::Object(last)) = tools.last_mut() {
            // No system prompt: the tools are the stable prefix's end.
            last.insert("cache_control".into(), ephemeral.clone());
        }
        for (turn, block) in marks {
            if let Some(Value::Object(b)) = turns.get_mut(turn).and_then(|t| t.1.get_mut(block)) {
                b.insert("cache_control".into(), ephemeral.clone());
            }
        }
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(req.options.max_tokens));
    if let Some(system) = system_value {
        body.insert("system".into(), system);
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = req.options.temperature {
        body.insert("temperature".into(), crate::json::temperature_value(t));
    }
    if !req.options.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.options.stop));
    }
    if !tools.is_empty() {
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

/// Where the conversation's `cache_control` breakpoints go, as (turn, block) pairs, given each
/// wire turn's role and the last block of the caller's stable prefix.
///
/// The API caches the prefix up to each breakpoint (tools, then system, then messages) and, at
/// a breakpoint, finds an earlier request's entry only within a short look-back, so the marks
/// go where the next request will find them unchanged:
/// - the system prompt (placed by the caller of this function; it covers the tools too);
/// - the end of the stable prefix (the warm start), which survives whatever later turns do
///   to the conversation (condensation rewrites only what follows it);
/// - the end of the previous request's conversation (the user turn before the last assistant
///   turn), where the previous request wrote its entry: this request reads it there exactly,
///   however many tool results the last turn added;
/// - the moving end (the last block), written now for the next request.
///
/// Together at most [`MAX_CACHE_BREAKPOINTS`]; a mark that coincides with another is placed once.
fn cache_breakpoints(
    turns: &[(&str, usize)],
    stable_end: Option<(usize, usize)>,
) -> Vec<(usize, usize)> {
    let mut marks: Vec<(usize, usize)> = Vec::new();
    let mut push = |mark: (usize, usize)| {
        // One of the four goes to the system prompt or the tools.
        if !marks.contains(&mark) && marks.len() < MAX_CACHE_BREAKPOINTS - 1 {
            marks.push(mark);
        }
    };
    if let Some(mark) = stable_end {
        push(mark);
    }
    let end_of = |t: usize| (t, turns[t].1.saturating_sub(1));
    let Some(last) = turns.len().checked_sub(1) else {
        return marks;
    };
    // The previous request ended with the user turn before the last assistant turn.
    if let Some(previous) = (0..last)
        .rev()
        .skip_while(|&t| turns[t].0 != "assistant")
        .find(|&t| turns[t].0 == "user")
    {
        push(end_of(previous));
    }
    push(end_of(last));
    marks
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
    // Anthropic's `input_tokens` are only those after the last breakpoint; the prompt is the
    // sum of the three.
    let cache_read_tokens = count("cache_read_input_tokens");
    let cache_write_tokens = count("cache_creation_input_tokens");
    let usage = Usage {
        input_tokens: count("input_tokens")
            .saturating_add(cache_write_tokens)
            .saturating_add(cache_read_tokens),
        output_tokens: count("output_tokens"),
        cache_read_tokens,
        cache_write_tokens,
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
