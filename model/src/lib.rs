//! airlock-model owns every conversation with a language model: the provider-neutral
//! [`ChatModel`] trait and its message types, the OpenAI chat-completions and Anthropic
//! Messages wire adapters (blocking reqwest over rustls), retries and timeouts, the per-run
//! [`Budget`] with token and cost accounting, the [`ScriptedModel`] used by demos and tests, and
//! cassettes that record real exchanges and replay them strictly.
//!
//! It must never log, record or put into an error an API key (keys are read from an
//! environment variable named in [`ModelConfig`] and scrubbed from provider messages and
//! cassettes), never run tools itself (it only reports the calls a model asks for), and never
//! touch the repository being worked on. The supervisor, reader and judge depend on it; it
//! depends on no other airlock crate.
//!
//! ```
//! use airlock_model::{Budget, ChatModel, ChatRequest, Message, Metered, ModelConfig, from_spec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let script = dir.path().join("demo.jsonl");
//! # std::fs::write(&script, r#"{"tool_calls": [{"name": "search_repo", "arguments": {"query": "parse"}}]}
//! # {"text": "done", "expect_contains": "fn parse"}
//! # "#)?;
//! let config = ModelConfig::default();
//! let budget = Budget::new(config.budget.clone());
//! let model = Metered::new(from_spec(&format!("scripted:{}", script.display()), &config)?, budget.clone());
//!
//! let mut req = ChatRequest { messages: vec![Message::user("fix the parser")], ..Default::default() };
//! let turn = model.chat(&req)?;
//! req.messages.push(Message::Assistant(turn.message.clone()));
//! for call in &turn.message.tool_calls {
//!     // Arguments that were not JSON come back as a typed error for the model to read.
//!     let result = match call.checked_arguments() {
//!         Ok(_args) => ("src/parse.rs:1: fn parse".to_string(), false),
//!         Err(bad) => (bad.to_string(), true),
//!     };
//!     req.messages.push(Message::tool_result(&call.id, result.0, result.1));
//! }
//! assert_eq!(model.chat(&req)?.message.text, "done");
//! model.finish()?; // replay and scripted models fail here when turns were left unused
//! assert_eq!(budget.totals().calls, 2);
//! # Ok(())
//! # }
//! ```

mod anthropic;
mod budget;
mod cassette;
mod config;
mod error;
mod factory;
mod http;
mod json;
mod openai;
mod scripted;
mod spec;
mod types;
mod wire;

pub use budget::{Budget, CallRecord, Metered, ModelTotals, RunTotals};
pub use cassette::{
    CassetteEntry, REDACTED, RecordedRequest, RecordedResponse, ReplayModel, read_cassette,
};
pub use config::{BudgetLimits, CacheRates, ModelConfig, ModelPrice, RetryConfig};
pub use error::{Error, Result};
pub use factory::{check_spec, check_spec_with_env, from_spec, from_spec_with_env};
pub use http::HttpModel;
pub use scripted::{ScriptToolCall, ScriptTurn, ScriptedModel, parse_script};
pub use spec::{ACCEPTED_SPECS, KINDS, ModelSpec, OLLAMA_BASE_URL};
pub use types::{
    AssistantMessage, ChatOptions, ChatRequest, ChatResponse, InvalidToolArguments, Message, Role,
    StopReason, ToolCall, ToolChoice, ToolResult, ToolSpec, Usage,
};

/// A language model the loop can talk to, one blocking call at a time.
///
/// Object-safe: the supervisor holds a `Box<dyn ChatModel>` built by [`from_spec`].
pub trait ChatModel: Send + Sync {
    /// Sends the conversation and returns the model's next turn.
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse>;

    /// A stable name for records, e.g. `openai:gpt-4o` or `scripted:demo.jsonl`.
    fn name(&self) -> &str;

    /// Called once when the run is over. Replay and scripted models fail here when recorded
    /// turns were left unused; other models have nothing to check.
    fn finish(&self) -> Result<()> {
        Ok(())
    }
}

impl<M: ChatModel + ?Sized> ChatModel for Box<M> {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse> {
        (**self).chat(req)
    }

    fn name(&self) -> &str {
        (**self).name()
    }

    fn finish(&self) -> Result<()> {
        (**self).finish()
    }
}

impl<M: ChatModel + ?Sized> ChatModel for std::sync::Arc<M> {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse> {
        (**self).chat(req)
    }

    fn name(&self) -> &str {
        (**self).name()
    }

    fn finish(&self) -> Result<()> {
        (**self).finish()
    }
}
