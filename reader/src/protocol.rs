//! The JSON-lines protocol between a reader worker (stdout) and the supervisor (stdin).
//!
//! One JSON object per line, tagged by `type`. The supervisor starts the exchange with `start`;
//! the worker asks for model turns with `chat`, which the supervisor answers with `chat_result`
//! or `chat_error`; the worker ends with `digest`, after which the supervisor either sends one
//! `repair` (the worker answers with another `digest`) or `finish`. After each `read_file` call
//! the worker reports it, typed, before the request that carries its result (no answer
//! expected): `read` for a read it served, `read_refused` with the refusal's class for one it
//! refused. So the supervisor records and re-checks every read, refused or not, without parsing
//! the rendered text, and keeps the reports of a worker that dies mid-way.

use crate::brief::Brief;
use crate::tools::RefusalClass;
use airlock_model::{ChatRequest, ChatResponse};
use serde::{Deserialize, Serialize};

/// One successful `read_file` of the worker: what its model was shown of the file. The
/// supervisor believes none of it; it re-reads the same window to check every figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReport {
    /// The id of the model's tool call this read answered.
    pub call_id: String,
    /// The path read, normalised by the bounded reader.
    pub path: String,
    /// First line returned, 1-based (0 for an empty file).
    pub line_start: u32,
    /// Last line returned, inclusive.
    pub line_end: u32,
    /// Bytes of file content returned (the rendering's header and line numbers not counted).
    pub content_bytes: u64,
    /// Bytes in the whole file.
    pub total_bytes: u64,
    /// Whether the read cap cut the requested window short.
    pub truncated: bool,
}

impl ReadReport {
    /// The report of a bounded read that answered call `call_id`.
    pub fn of(call_id: &str, out: &airlock_checkout::ReadOutcome) -> Self {
        ReadReport {
            call_id: call_id.to_string(),
            path: out.path.clone(),
            line_start: out.line_start,
            line_end: out.line_end,
            content_bytes: out.bytes_returned,
            total_bytes: out.bytes_total,
            truncated: out.truncated,
        }
    }
}

/// One refused `read_file` call of the worker. The supervisor believes none of it either: it
/// works the class out again from the call and its own re-read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedReadReport {
    /// The id of the model's tool call this refusal answered.
    pub call_id: String,
    /// The path the call asked for, when its arguments named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why it was refused.
    pub class: RefusalClass,
}

/// Messages the worker writes to stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// Please relay this request to the model.
    Chat {
        /// The request; the supervisor replaces its tool list with [`crate::tool_specs`].
        request: ChatRequest,
    },
    /// A `read_file` call succeeded; sent before the request that carries its result.
    Read {
        /// The read.
        read: ReadReport,
    },
    /// A `read_file` call was refused; sent before the request that carries its result.
    ReadRefused {
        /// The refusal.
        refused: RefusedReadReport,
    },
    /// The final text of the reader (the digest candidate, not yet validated).
    Digest {
        /// The model's final message text.
        text: String,
    },
    /// The worker cannot go on.
    Failed {
        /// Why.
        message: String,
    },
}

/// Messages the supervisor writes to the worker's stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromSupervisor {
    /// The brief: everything the reader will know.
    Start {
        /// The brief.
        brief: Brief,
    },
    /// The model's answer to the last `chat`.
    ChatResult {
        /// The response.
        response: ChatResponse,
    },
    /// The model call failed or was refused (budget); the worker stops.
    ChatError {
        /// Why.
        message: String,
    },
    /// The digest failed validation; this is the one repair request.
    Repair {
        /// What was wrong.
        message: String,
    },
    /// The exchange is over.
    Finish,
}
