//! The two wire protocols, behind one enum so the HTTP adapter and the cassette replay encode
//! and decode exactly the same way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{AssistantMessage, ChatRequest, StopReason, Usage};
use crate::{CacheRates, Error, Result, anthropic, openai};

/// A wire protocol and the request-shape choices that go with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireProtocol {
    /// OpenAI chat completions, as OpenAI serves it (`max_completion_tokens`).
    OpenaiChat,
    /// OpenAI chat completions as compatible servers take it (`max_tokens`).
    OpenaiCompatibleChat,
    /// Anthropic Messages.
    AnthropicMessages,
}

impl WireProtocol {
    /// The request body for `model`; `prompt_cache` places Anthropic's cache breakpoints
    /// (OpenAI caches prefixes without being asked).
    pub(crate) fn encode(self, model: &str, req: &ChatRequest, prompt_cache: bool) -> Value {
        match self {
            WireProtocol::OpenaiChat => openai::encode(model, req, "max_completion_tokens"),
            WireProtocol::OpenaiCompatibleChat => openai::encode(model, req, "max_tokens"),
            WireProtocol::AnthropicMessages => anthropic::encode(model, req, prompt_cache),
        }
    }

    /// What the provider bills for cached prompt tokens when no cache price is configured.
    pub(crate) fn cache_rates(self) -> CacheRates {
        match self {
            WireProtocol::OpenaiChat | WireProtocol::OpenaiCompatibleChat => CacheRates::OPENAI,
            WireProtocol::AnthropicMessages => CacheRates::ANTHROPIC,
        }
    }

    /// Reads a 2xx body, then rejects a turn with nothing in it.
    pub(crate) fn decode(
        self,
        provider: &str,
        body: &Value,
    ) -> Result<(AssistantMessage, StopReason, Usage)> {
        let decoded = match self {
            WireProtocol::OpenaiChat | WireProtocol::OpenaiCompatibleChat => {
                openai::decode(provider, body)?
            }
            WireProtocol::AnthropicMessages => anthropic::decode(provider, body)?,
        };
        let (message, stop_reason, _) = &decoded;
        let empty = message.text.trim().is_empty() && message.tool_calls.is_empty();
        // A truncated or filtered turn may legitimately be empty; the caller sees the reason.
        let explained = matches!(
            stop_reason,
            StopReason::MaxTokens | StopReason::ContentFilter | StopReason::StopSequence
        );
        if empty && !explained {
            return Err(Error::EmptyResponse {
                provider: provider.to_string(),
                stop_reason: match stop_reason {
                    StopReason::Other(s) => s.clone(),
                    other => serde_json::to_value(other)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                },
            });
        }
        Ok(decoded)
    }

    /// The path appended to the base URL.
    pub(crate) fn endpoint(self) -> &'static str {
        match self {
            WireProtocol::OpenaiChat | WireProtocol::OpenaiCompatibleChat => "/chat/completions",
            WireProtocol::AnthropicMessages => "/messages",
        }
    }
}

/// The provider's own words from an error body: `error.type: error.message` when the body is
/// the documented JSON, otherwise the start of the raw text.
pub(crate) fn provider_error_message(body: &Value) -> String {
    let kind = body
        .pointer("/error/type")
        .and_then(Value::as_str)
        .or_else(|| body.pointer("/error/code").and_then(Value::as_str));
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .or_else(|| body.get("error").and_then(Value::as_str))
        .or_else(|| body.get("message").and_then(Value::as_str));
    match (kind, message) {
        (Some(k), Some(m)) => format!("{k}: {m}"),
        (None, Some(m)) => m.to_string(),
        _ => {
            let raw = match body {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            truncate(&raw, 2000)
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// A body as JSON when it parses, otherwise as a JSON string holding the text.
pub(crate) fn body_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The request with the configuration's defaults filled in where the caller left them unset.
pub(crate) fn with_defaults<'a>(
    req: &'a ChatRequest,
    config: &crate::ModelConfig,
) -> std::borrow::Cow<'a, ChatRequest> {
    match (req.options.temperature, config.temperature) {
        (None, Some(t)) => {
            let mut owned = req.clone();
            owned.options.temperature = Some(t);
            std::borrow::Cow::Owned(owned)
        }
        _ => std::borrow::Cow::Borrowed(req),
    }
}
