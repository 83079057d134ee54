//! The provider-neutral conversation types every adapter translates to and from.

use serde::{Deserialize, Serialize};

/// Who speaks a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from the operator; adapters move them where the provider wants them.
    System,
    /// A turn from the user (or the supervisor speaking for it).
    User,
    /// A turn produced by the model: text and tool calls.
    Assistant,
    /// The result of one tool call, answering an assistant's [`ToolCall`].
    Tool,
}

/// One message of a conversation.
///
/// Serialised with a `role` tag: `{"role":"user","content":"..."}`,
/// `{"role":"assistant","text":"...","tool_calls":[...]}`,
/// `{"role":"tool","tool_call_id":"...","content":"...","is_error":false}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A system prompt. Several are concatenated in order for providers that take one.
    System {
        /// The instruction text.
        content: String,
    },
    /// A user turn.
    User {
        /// The user's text.
        content: String,
    },
    /// A model turn.
    Assistant(AssistantMessage),
    /// The result of a tool call.
    Tool(ToolResult),
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Message::Assistant(AssistantMessage {
            text: text.into(),
            tool_calls: Vec::new(),
        })
    }

    /// A tool result answering the call with id `tool_call_id`.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Message::Tool(ToolResult {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            is_error,
        })
    }

    /// The role of this message.
    pub fn role(&self) -> Role {
        match self {
            Message::System { .. } => Role::System,
            Message::User { .. } => Role::User,
            Message::Assistant(_) => Role::Assistant,
            Message::Tool(_) => Role::Tool,
        }
    }

    /// The main text of the message (an assistant's text, a tool result's content).
    pub fn text(&self) -> &str {
        match self {
            Message::System { content } | Message::User { content } => content,
            Message::Assistant(a) => &a.text,
            Message::Tool(t) => &t.content,
        }
    }
}

impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Message::Assistant(m)
    }
}

impl From<ToolResult> for Message {
    fn from(r: ToolResult) -> Self {
        Message::Tool(r)
    }
}

/// What the model said in one turn: free text (possibly empty) and the tools it wants called,
/// in the order the provider returned them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The text of the turn, text blocks joined with a blank line; empty when there is none.
    #[serde(default)]
    pub text: String,
    /// Tool calls requested in this turn.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// The answer to one [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The `id` of the [`ToolCall`] this answers.
    pub tool_call_id: String,
    /// What the tool returned (or the error text the model should see).
    pub content: String,
    /// True when the call failed; providers that support it are told so.
    #[serde(default)]
    pub is_error: bool,
}

/// A tool call requested by the model.
///
/// When the provider sent arguments that are not a JSON value, `arguments` is `null` and
/// `invalid_arguments` holds the raw text and the parse error; [`ToolCall::checked_arguments`]
/// turns that into a typed error the loop can hand back to the model as a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for this call; tool results refer to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The parsed arguments (`null` when they were not valid JSON).
    #[serde(default)]
    pub arguments: serde_json::Value,
    /// Set when the raw arguments could not be parsed as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_arguments: Option<InvalidToolArguments>,
}

impl ToolCall {
    /// A call with valid JSON arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            invalid_arguments: None,
        }
    }

    /// Builds a call from the raw argument text a provider sent, parsing it as JSON.
    /// An empty string counts as `{}` (some servers send it for argument-less tools).
    pub fn from_raw_arguments(id: impl Into<String>, name: impl Into<String>, raw: &str) -> Self {
        let (arguments, invalid_arguments) = if raw.trim().is_empty() {
            (serde_json::Value::Object(serde_json::Map::new()), None)
        } else {
            match serde_json::from_str::<serde_json::Value>(raw) {
                Ok(v) => (v, None),
                Err(e) => (
                    serde_json::Value::Null,
                    Some(InvalidToolArguments {
                        raw: raw.to_string(),
                        error: e.to_string(),
                    }),
                ),
            }
        };
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            invalid_arguments,
        }
    }

    /// The arguments, or the typed error to hand back to the model when they were not JSON.
    pub fn checked_arguments(
        &self,
    ) -> std::result::Result<&serde_json::Value, InvalidToolArguments> {
        match &self.invalid_arguments {
            Some(bad) => Err(bad.clone()),
            None => Ok(&self.arguments),
        }
    }

    /// The argument text to send back to a provider that wants a string (OpenAI): the raw text
    /// when it was invalid, otherwise the compact JSON.
    pub fn arguments_text(&self) -> String {
        match &self.invalid_arguments {
            Some(bad) => bad.raw.clone(),
            None => self.arguments.to_string(),
        }
    }
}

/// Tool-call arguments that were not valid JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("tool call arguments are not valid JSON ({error}); raw text: {raw}")]
pub struct InvalidToolArguments {
    /// The text the model produced.
    pub raw: String,
    /// The JSON parser's message.
    pub error: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name, as the model will call it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: serde_json::Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// Sampling and control options for one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatOptions {
    /// Upper bound on output tokens for this call.
    pub max_tokens: u32,
    /// Sampling temperature; `None` leaves the provider's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Stop sequences.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Tool choice; ignored when the request has no tools.
    pub tool_choice: ToolChoice,
    /// How many of the request's first messages stay the same for the rest of the
    /// conversation (the system prompt and a warm start): adapters that place prompt-cache
    /// breakpoints put one at its end. 0 when the caller knows of no such prefix.
    #[serde(skip_serializing_if = "is_zero")]
    pub stable_prefix: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Default for ChatOptions {
    fn default() -> Self {
        ChatOptions {
            max_tokens: 4096,
            temperature: None,
            stop: Vec::new(),
            tool_choice: ToolChoice::Auto,
            stable_prefix: 0,
        }
    }
}

/// One call to a model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools offered.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Options for this call.
    #[serde(default)]
    pub options: ChatOptions,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model wants its tool calls run.
    ToolUse,
    /// The output hit `max_tokens`: the message may be truncated.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The provider filtered the output.
    ContentFilter,
    /// A reason this crate does not know, as the provider spelled it.
    Other(String),
}

/// Token counts for one call (or a sum of calls).
///
/// `input_tokens` counts every prompt token, wherever it was served from; the two cache fields
/// say how many of them were read from the provider's prompt cache or written to it, so that
/// `input_tokens - cache_read_tokens - cache_write_tokens` were billed at the plain input price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached or not.
    pub input_tokens: u64,
    /// Completion tokens billed.
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`; OpenAI reports none).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Plain input and output tokens, nothing cached.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }

    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Prompt tokens neither read from nor written to the cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cache_read_tokens)
            .saturating_sub(self.cache_write_tokens)
    }

    /// The sum of two counts, field by field.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_read_tokens: self
                .cache_read_tokens
                .saturating_add(other.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_add(other.cache_write_tokens),
        }
    }
}

/// The model's answer to one [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant turn; push `Message::Assistant(response.message.clone())` onto the history.
    pub message: AssistantMessage,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Tokens billed for this call.
    pub usage: Usage,
    /// Cost of this call in US dollars, when the model's price is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}
