//! The crate's error type. No variant ever carries an API key: provider messages are scrubbed
//! of the key before they are stored here.

use std::path::PathBuf;

/// Everything that can go wrong talking to a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model spec string is not one of the accepted forms.
    #[error("bad model spec {spec:?}: {reason}; accepted forms: {accepted}")]
    BadSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
        /// The accepted forms, for the person fixing it.
        accepted: &'static str,
    },
    /// The configuration is unusable.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// The environment variable that should hold the API key is unset or empty.
    #[error(
        "API key environment variable {env_var} is not set (or is empty): export it in this \
         shell, or name the variable that holds the key with [model.config] api_key_env"
    )]
    MissingApiKey {
        /// The variable's name (never its value).
        env_var: String,
    },
    /// The provider answered with a non-success status that is not retried (or retries ran out).
    #[error("{provider} returned HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        /// `openai` or `anthropic`.
        provider: String,
        /// The HTTP status code.
        status: u16,
        /// The provider's error message (scrubbed of the API key).
        message: String,
        /// How many requests were made.
        attempts: u32,
    },
    /// The call did not complete within the per-call timeout.
    #[error("{provider} call timed out after {timeout_ms} ms (attempt {attempts})")]
    Timeout {
        /// `openai` or `anthropic`.
        provider: String,
        /// The per-call timeout that elapsed.
        timeout_ms: u64,
        /// How many requests were made.
        attempts: u32,
    },
    /// The connection failed (refused, reset, DNS) and retries ran out.
    #[error("{provider} connection failed after {attempts} attempt(s): {message}")]
    Connection {
        /// `openai` or `anthropic`.
        provider: String,
        /// The transport's message.
        message: String,
        /// How many requests were made.
        attempts: u32,
    },
    /// The provider answered 2xx but the body is not the documented shape.
    #[error("{provider} sent a malformed response: {detail}")]
    MalformedResponse {
        /// `openai` or `anthropic`.
        provider: String,
        /// What was wrong.
        detail: String,
    },
    /// The provider answered with no text, no tool calls and no truncation.
    #[error("{provider} sent an empty response (stop reason {stop_reason})")]
    EmptyResponse {
        /// `openai` or `anthropic`.
        provider: String,
        /// The stop reason as the provider spelled it.
        stop_reason: String,
    },
    /// The per-run budget does not allow another call.
    #[error("model budget exhausted: {resource} used {used} of {limit}")]
    BudgetExhausted {
        /// `calls`, `tokens` or `cost_usd`.
        resource: &'static str,
        /// How much was used.
        used: String,
        /// The limit.
        limit: String,
    },
    /// The scripted model has no turn left for this call.
    #[error("script {path} ran out: call {call} asked for a turn but the script has {turns}")]
    ScriptExhausted {
        /// The script file.
        path: PathBuf,
        /// The 1-based number of the call that found no turn.
        call: usize,
        /// How many turns the script has.
        turns: usize,
    },
    /// A scripted turn's expectation about the request did not hold.
    #[error("script {path} turn {turn}: expectation failed: {expectation}; got: {actual}")]
    ScriptAssertion {
        /// The script file.
        path: PathBuf,
        /// The 1-based turn number.
        turn: usize,
        /// The expectation, as written in the script.
        expectation: String,
        /// An excerpt of what the request actually carried.
        actual: String,
    },
    /// The script file is unreadable or not the documented format.
    #[error("script {path}: {detail}")]
    ScriptFormat {
        /// The script file.
        path: PathBuf,
        /// What is wrong, with the line when known.
        detail: String,
    },
    /// A replayed request differs from the recorded one.
    #[error("cassette {path} entry {index}: request differs from the recording: {detail}")]
    CassetteMismatch {
        /// The cassette file.
        path: PathBuf,
        /// The 1-based entry number.
        index: usize,
        /// The first difference found.
        detail: String,
    },
    /// The replay was asked for more calls than were recorded.
    #[error("cassette {path} is exhausted: call {call} has no recorded entry ({entries} recorded)")]
    CassetteExhausted {
        /// The cassette file.
        path: PathBuf,
        /// The 1-based number of the call.
        call: usize,
        /// How many entries were recorded.
        entries: usize,
    },
    /// The run ended before every recorded entry was replayed.
    #[error("cassette {path}: {remaining} of {entries} recorded entries were not replayed")]
    CassetteUnconsumed {
        /// The cassette file.
        path: PathBuf,
        /// Entries left over.
        remaining: usize,
        /// How many entries were recorded.
        entries: usize,
    },
    /// The cassette file is unreadable or not the documented format.
    #[error("cassette {path}: {detail}")]
    CassetteFormat {
        /// The cassette file.
        path: PathBuf,
        /// What is wrong, with the line when known.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// True for failures that say nothing about the request itself (rate limits, server errors,
    /// timeouts, connection failures); a caller may try again later.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Http { status, .. } => *status == 429 || *status >= 500,
            Error::Timeout { .. } | Error::Connection { .. } => true,
            _ => false,
        }
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
