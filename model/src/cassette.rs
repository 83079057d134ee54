//! Cassettes: JSONL files of real HTTP exchanges, written by the HTTP adapter when
//! [`crate::ModelConfig::record_cassette`] is set, and replayed strictly in order by
//! [`ReplayModel`].
//!
//! One line per chat call (retries collapse to the final exchange):
//!
//! ```json
//! {"provider":"openai","protocol":"openai_chat","model":"gpt-4o",
//!  "request":{"method":"POST","url":"https://api.openai.com/v1/chat/completions",
//!             "headers":{"authorization":"[REDACTED]","content-type":"application/json"},
//!             "body":{...}},
//!  "response":{"outcome":"http","status":200,"body":{...}}}
//! ```
//!
//! `response` is `{"outcome":"http","status":N,"body":...}`, `{"outcome":"timeout",
//! "timeout_ms":N}` or `{"outcome":"connection","message":"..."}`. Authentication headers and
//! any header whose name mentions a key, token, secret or cookie are written as `[REDACTED]`,
//! and every occurrence of the API key in any recorded string is replaced by `[REDACTED]`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::{WireProtocol, provider_error_message, with_defaults};
use crate::{ChatModel, ChatRequest, ChatResponse, Error, ModelConfig, Result};

/// What replaces secrets in cassettes and errors.
pub const REDACTED: &str = "[REDACTED]";

/// One recorded chat call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CassetteEntry {
    /// The spec kind that made the call (`openai`, `anthropic`, `ollama`, `openai-compatible`).
    pub provider: String,
    /// The wire protocol, which says how to re-encode a request and decode the response.
    pub protocol: WireProtocol,
    /// The model name sent.
    pub model: String,
    /// The request as sent, scrubbed.
    pub request: RecordedRequest,
    /// What came back.
    pub response: RecordedResponse,
}

/// A request as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedRequest {
    /// Always `POST`.
    pub method: String,
    /// The full URL.
    pub url: String,
    /// Headers sent, lower-case names, secrets redacted.
    pub headers: BTreeMap<String, String>,
    /// The JSON body.
    pub body: Value,
}

/// How the final attempt of a call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum RecordedResponse {
    /// An HTTP response; `body` is JSON, or a JSON string when the body was not JSON.
    Http {
        /// The status code.
        status: u16,
        /// The body.
        body: Value,
    },
    /// The per-call timeout elapsed.
    Timeout {
        /// The timeout that elapsed.
        timeout_ms: u64,
    },
    /// The connection failed.
    Connection {
        /// The transport's message.
        message: String,
    },
}

/// True for header names whose values must never be recorded.
pub(crate) fn is_sensitive_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "session"]
        .iter()
        .any(|s| n.contains(s))
}

/// Replaces every occurrence of `secret` in `text`.
pub(crate) fn scrub_str(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if !s.is_empty() => text.replace(s, REDACTED),
        _ => text.to_string(),
    }
}

/// Replaces every occurrence of `secret` in every string (and object key) of `value`.
pub(crate) fn scrub_value(value: &Value, secret: Option<&str>) -> Value {
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return value.clone();
    };
    match value {
        Value::String(s) => Value::String(s.replace(secret, REDACTED)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| scrub_value(v, Some(secret))).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.replace(secret, REDACTED), scrub_value(v, Some(secret))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Appends entries to a cassette file, one JSON line each, flushed per entry.
#[derive(Debug)]
pub(crate) struct CassetteWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl CassetteWriter {
    /// Opens `path` for appending, creating it if needed.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(CassetteWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends one entry.
    pub(crate) fn append(&self, entry: &CassetteEntry) -> Result<()> {
        let mut line = serde_json::to_string(entry).map_err(|e| Error::CassetteFormat {
            path: self.path.clone(),
            detail: format!("cannot serialise entry: {e}"),
        })?;
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Reads every entry of a cassette.
pub fn read_cassette(path: &Path) -> Result<Vec<CassetteEntry>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(line).map_err(|e| Error::CassetteFormat {
            path: path.to_path_buf(),
            detail: format!("line {}: {e}", i + 1),
        })?;
        entries.push(entry);
    }
    Ok(entries)
}

/// Replays a cassette strictly in order.
///
/// Each call re-encodes the request with the recorded protocol and model and compares the
/// body with the recording; any difference fails with the JSON pointer of the first one. The
/// recorded response is then decoded exactly as the live adapter would (HTTP errors, timeouts
/// and connection failures come back as the same typed errors). [`ChatModel::finish`] fails if
/// entries were left over; dropping an unfinished replay with entries left logs an error.
#[derive(Debug)]
pub struct ReplayModel {
    name: String,
    path: PathBuf,
    entries: Vec<CassetteEntry>,
    config: ModelConfig,
    cursor: Mutex<usize>,
    finished: Mutex<bool>,
}

impl ReplayModel {
    /// Loads a cassette; `config` supplies prices for cost accounting.
    pub fn open(path: &Path, config: &ModelConfig) -> Result<Self> {
        let entries = read_cassette(path)?;
        Ok(ReplayModel {
            name: format!("replay:{}", path.display()),
            path: path.to_path_buf(),
            entries,
            config: config.clone(),
            cursor: Mutex::new(0),
            finished: Mutex::new(false),
        })
    }

    /// How many recorded entries have not been replayed yet.
    pub fn remaining(&self) -> usize {
        let cursor = *self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        self.entries.len().saturating_sub(cursor)
    }
}

impl ChatModel for ReplayModel {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse> {
        let index = {
            let mut cursor = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
            let index = *cursor;
            if index >= self.entries.len() {
                return Err(Error::CassetteExhausted {
                    path: self.path.clone(),
                    call: index + 1,
                    entries: self.entries.len(),
                });
            }
            *cursor += 1;
            index
        };
        let entry = &self.entries[index];
        let req = with_defaults(req, &self.config);
        let body = entry
            .protocol
            .encode(&entry.model, &req, self.config.prompt_cache);
        if let Some(diff) = first_difference("", &entry.request.body, &body) {
            return Err(Error::CassetteMismatch {
                path: self.path.clone(),
                index: index + 1,
                detail: diff,
            });
        }
        match &entry.response {
            RecordedResponse::Http { status, body } if (200..300).contains(status) => {
                let (message, stop_reason, usage) = entry.protocol.decode(&entry.provider, body)?;
                Ok(ChatResponse {
                    cost_usd: self.config.cost_usd(
                        &entry.model,
                        &usage,
                        entry.protocol.cache_rates(),
                    ),
                    message,
                    stop_reason,
                    usage,
                })
            }
            RecordedResponse::Http { status, body } => Err(Error::Http {
                provider: entry.provider.clone(),
                status: *status,
                message: provider_error_message(body),
                attempts: 1,
            }),
            RecordedResponse::Timeout { timeout_ms } => Err(Error::Timeout {
                provider: entry.provider.clone(),
                timeout_ms: *timeout_ms,
                attempts: 1,
            }),
            RecordedResponse::Connection { message } => Err(Error::Connection {
                provider: entry.provider.clone(),
                message: message.clone(),
                attempts: 1,
            }),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn finish(&self) -> Result<()> {
        *self.finished.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let remaining = self.remaining();
        if remaining > 0 {
            return Err(Error::CassetteUnconsumed {
                path: self.path.clone(),
                remaining,
                entries: self.entries.len(),
            });
        }
        Ok(())
    }
}

impl Drop for ReplayModel {
    fn drop(&mut self) {
        let finished = *self.finished.lock().unwrap_or_else(|p| p.into_inner());
        let remaining = self.remaining();
        if !finished && remaining > 0 {
            tracing::error!(
                cassette = %self.path.display(),
                remaining,
                "replay dropped with recorded entries not replayed"
            );
            eprintln!(
                "airlock-model: cassette {}: {remaining} of {} recorded entries were not replayed",
                self.path.display(),
                self.entries.len()
            );
        }
    }
}

/// The JSON pointer and both values at the first place `recorded` and `actual` differ.
pub(crate) fn first_difference(pointer: &str, recorded: &Value, actual: &Value) -> Option<String> {
    match (recorded, actual) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => {
                        if let Some(d) = first_difference(&p, x, y) {
                            return Some(d);
                        }
                    }
                    (Some(x), None) => {
                        return Some(format!("{p}: recorded {}, request has none", excerpt(x)));
                    }
                    (None, Some(y)) => {
                        return Some(format!("{p}: not recorded, request has {}", excerpt(y)));
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                if let Some(d) = first_difference(&format!("{pointer}/{i}"), x, y) {
                    return Some(d);
                }
            }
            if a.len() != b.len() {
                return Some(format!(
                    "{pointer}: recorded {} items, request has {}",
                    a.len(),
                    b.len()
                ));
            }
            None
        }
        (x, y) if x == y => None,
        (x, y) => Some(format!(
            "{}: recorded {}, request has {}",
            if pointer.is_empty() { "/" } else { pointer },
            excerpt(x),
            excerpt(y)
        )),
    }
}

fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 200 {
        s
    } else {
        format!("{}...", s.chars().take(200).collect::<String>())
    }
}
