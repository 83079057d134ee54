//! The JSON-lines protocol between a reader worker (stdout) and the supervisor (stdin).
//!
//! One JSON object per line, tagged by `type`. The supervisor starts the exchange with `start`;
//! the worker asks for model turns with `chat`, which the supervisor answers with `chat_result`
//! or `chat_error`; the worker ends with `digest`, after which the supervisor either sends one
//! `repair` (the worker answers with another `digest`) or `finish`.

use crate::brief::Brief;
use airlock_model::{ChatRequest, ChatResponse};
use serde::{Deserialize, Serialize};

/// Messages the worker writes to stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// Please relay this request to the model.
    Chat {
        /// The request; the supervisor replaces its tool list with [`crate::tool_specs`].
        request: ChatRequest,
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
