//! A model server on 127.0.0.1 that plays scripted turns, so a test or a benchmark can drive
//! the real `airlock run` over a real wire protocol: OpenAI chat completions
//! (`--model openai-compatible:{base}#MODEL`, [`MockModel::start`]) or Anthropic Messages
//! (`anthropic:MODEL` with `base_url` pointing here, [`MockModel::start_anthropic`]).
//!
//! A turn has the shape of the `scripted:` model's turns: `{"text": "..."}` for a final message,
//! `{"tool_calls": [{"name": N, "arguments": {...}}], "text": "..."}` for tool calls. Each
//! `POST .../chat/completions` (or `.../messages`) is recorded and answered with the next turn
//! in the protocol's response shape; once the turns are spent it answers 500 with an error body.
//!
//! A turn may also misbehave, for tests of a client's failure handling: `"delay_ms": N` waits
//! before answering, `"status": 500` answers that status with an OpenAI error body, and
//! `"raw_body": "..."` answers 200 with that body as is (not JSON, or the wrong shape).
//!
//! [`MockModel::start`] reports a fixed usage. The servers made by [`MockModel::start_priced`]
//! and [`MockModel::start_anthropic`] count tokens (a token per [`BYTES_PER_TOKEN`] bytes of
//! the request's content) and simulate the providers' prompt caches, so a client is billed as
//! it would be: Anthropic caches the prefix up to each `cache_control` breakpoint (at least
//! [`MIN_CACHED_TOKENS`]) and finds an earlier entry at a breakpoint or up to
//! [`LOOKBACK_BLOCKS`] blocks before it; OpenAI caches every request's prefix on its own, in
//! steps of 128 tokens from 1,024.

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::BufReader;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::http::{read_request, write_json};

pub use crate::http::SeenRequest;

/// Bytes of request content counted as one token by the priced servers.
pub const BYTES_PER_TOKEN: usize = 4;
/// The shortest prefix the simulated caches keep, in tokens (both providers' minimum).
pub const MIN_CACHED_TOKENS: u64 = 1024;
/// How many blocks before a breakpoint the simulated Anthropic cache looks for an entry.
pub const LOOKBACK_BLOCKS: usize = 20;
/// OpenAI's cache grows in steps of this many tokens.
const OPENAI_CACHE_STEP_TOKENS: usize = 128;

/// The wire protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI chat completions (`POST .../chat/completions`).
    OpenAi,
    /// Anthropic Messages (`POST .../messages`).
    Anthropic,
}

/// When one request arrived and when its answer was sent.
#[derive(Debug, Clone, Copy)]
pub struct Exchange {
    /// The request was read.
    pub received: Instant,
    /// The answer was written.
    pub answered: Instant,
    /// What the priced server billed (`None` for the fixed-usage server and failed turns).
    pub usage: Option<SimulatedUsage>,
}

/// The running server.
pub struct MockModel {
    /// `http://127.0.0.1:PORT/v1`: the base URL of an `openai-compatible:` spec, or the
    /// `base_url` of an `anthropic:` model's configuration.
    pub base: String,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
}

/// What the serving threads share.
struct Shared {
    protocol: Protocol,
    priced: bool,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    turns: Mutex<VecDeque<Value>>,
    cache: Mutex<HashSet<u64>>,
}

impl MockModel {
    /// Serve `turns` in order over OpenAI's protocol, one per chat-completions request, with a
    /// fixed usage in every answer.
    pub fn start(turns: Vec<Value>) -> MockModel {
        Self::start_with(Protocol::OpenAi, false, turns)
    }

    /// Serve `turns` over `protocol`, counting tokens and simulating its prompt cache.
    pub fn start_priced(protocol: Protocol, turns: Vec<Value>) -> MockModel {
        Self::start_with(protocol, true, turns)
    }

    /// Serve `turns` over Anthropic's protocol, counting tokens and simulating its prompt cache.
    pub fn start_anthropic(turns: Vec<Value>) -> MockModel {
        Self::start_priced(Protocol::Anthropic, turns)
    }

    fn start_with(protocol: Protocol, priced: bool, turns: Vec<Value>) -> MockModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}/v1", listener.local_addr().expect("local addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            protocol,
            priced,
            seen: seen.clone(),
            exchanges: exchanges.clone(),
            turns: Mutex::new(VecDeque::from(turns)),
            cache: Mutex::new(HashSet::new()),
        });
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        MockModel {
            base,
            seen,
            exchanges,
        }
    }

    /// The model spec that points `airlock run` here (OpenAI protocol).
    pub fn spec(&self, model: &str) -> String {
        format!("openai-compatible:{}#{model}", self.base)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// When each model request arrived and was answered, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }

    /// The parsed bodies of the model requests so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| {
                r.method == "POST"
                    && (r.path.ends_with("/chat/completions") || r.path.ends_with("/messages"))
            })
            .map(|r| serde_json::from_str(&r.body).unwrap_or(Value::Null))
            .collect()
    }
}

/// Token counts of one answered request, as the simulated provider bills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimulatedUsage {
    /// Every prompt token.
    pub prompt_tokens: u64,
    /// Of those, read from the cache.
    pub cache_read: u64,
    /// Of those, written to the cache.
    pub cache_write: u64,
}

fn tokens_of(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// `v` without its `cache_control` marks: a mark says where to cache, it is not content (the
/// mock's cache compares requests this way, and so do tests of a stable prefix).
pub fn unmarked(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), unmarked(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(unmarked).collect()),
        other => other.clone(),
    }
}

/// An Anthropic request as the cache sees it: its blocks in prefix order (tools, system,
/// messages), each with whether it carries a breakpoint.
fn anthropic_blocks(body: &Value) -> Vec<(String, bool)> {
    let mut blocks = Vec::new();
    let marked = |b: &Value| b.get("cache_control").is_some();
    for tool in body["tools"].as_array().into_iter().flatten() {
        blocks.push((unmarked(tool).to_string(), marked(tool)));
    }
    match &body["system"] {
        Value::String(text) => blocks.push((text.clone(), false)),
        Value::Array(items) => {
            for b in items {
                blocks.push((unmarked(b).to_string(), marked(b)));
            }
        }
        _ => {}
    }
    for turn in body["messages"].as_array().into_iter().flatten() {
        let role = turn["role"].as_str().unwrap_or("");
        match &turn["content"] {
            Value::String(text) => blocks.push((format!("{role}:{text}"), false)),
            Value::Array(items) => {
                for (i, b) in items.iter().enumerate() {
                    // The role is part of the content where a turn begins.
                    let prefix = if i == 0 { role } else { "" };
                    blocks.push((format!("{prefix}:{}", unmarked(b)), marked(b)));
                }
            }
            _ => {}
        }
    }
    blocks
}

/// Bills one Anthropic request against the cache and writes its entries.
fn anthropic_usage(body: &Value, cache: &mut HashSet<u64>) -> SimulatedUsage {
    let blocks = anthropic_blocks(body);
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut cumulative = Vec::with_capacity(blocks.len());
    let mut hasher = DefaultHasher::new();
    let mut total = 0u64;
    for (text, _) in &blocks {
        text.hash(&mut hasher);
        hashes.push(hasher.finish());
        total += tokens_of(text.len());
        cumulative.push(total);
    }
    let breakpoints: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].1).collect();
    // The longest prefix an earlier request wrote, found at a breakpoint or a few blocks
    // before one.
    let hit = breakpoints
        .iter()
        .flat_map(|&b| (b.saturating_sub(LOOKBACK_BLOCKS)..=b).rev())
        .filter(|&i| cache.contains(&hashes[i]))
        .max();
    let read = hit.map_or(0, |i| cumulative[i]);
    // This request writes an entry at each breakpoint long enough to be cached.
    let written: Vec<usize> = breakpoints
        .iter()
        .copied()
        .filter(|&b| cumulative[b] >= MIN_CACHED_TOKENS)
        .collect();
    let write_end = written.iter().copied().max().map_or(0, |b| cumulative[b]);
    for b in written {
        cache.insert(hashes[b]);
    }
    SimulatedUsage {
        prompt_tokens: total,
        cache_read: read,
        cache_write: write_end.saturating_sub(read),
    }
}

/// Bills one OpenAI request: the longest earlier prefix, in steps of 128 tokens from 1,024,
/// is read from the cache; every prefix of this one is kept for later requests.
fn openai_usage(body: &Value, cache: &mut HashSet<u64>) -> SimulatedUsage {
    // Tools come first in the prompt, then the messages in order.
    let text = format!("{}{}", body["tools"], body["messages"]);
    let step = OPENAI_CACHE_STEP_TOKENS * BYTES_PER_TOKEN;
    let mut hasher = DefaultHasher::new();
    let mut matched = 0u64;
    let mut matching = true;
    let mut hashes = Vec::new();
    for (i, chunk) in text.as_bytes().chunks_exact(step).enumerate() {
        chunk.hash(&mut hasher);
        let h = hasher.finish();
        if matching && cache.contains(&h) {
            matched = ((i + 1) * OPENAI_CACHE_STEP_TOKENS) as u64;
        } else {
            matching = false;
        }
        hashes.push(h);
    }
    let read = if matched >= MIN_CACHED_TOKENS {
        matched
    } else {
        0
    };
    cache.extend(hashes);
    SimulatedUsage {
        prompt_tokens: tokens_of(text.len()),
        cache_read: read,
        cache_write: 0,
    }
}

/// The answer's usage object in `protocol`'s spelling.
fn usage_value(protocol: Protocol, usage: SimulatedUsage, output_tokens: u64) -> Value {
    match protocol {
        Protocol::OpenAi => json!({
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": usage.prompt_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read},
        }),
        Protocol::Anthropic => json!({
            "input_tokens": usage.prompt_tokens - usage.cache_read - usage.cache_write,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": output_tokens,
        }),
    }
}

/// Anthropic's response to one turn.
pub fn anthropic_message(n: usize, model: &str, turn: &Value, usage: Value) -> Value {
    let mut content = Vec::new();
    if let Some(text) = turn["text"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    let calls = turn["tool_calls"].as_array().cloned().unwrap_or_default();
    for (i, c) in calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": format!("toolu_{n}_{i}"),
            "name": c["name"],
            "input": c["arguments"],
        }));
    }
    json!({
        "id": format!("msg_{n}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
        "stop_sequence": null,
        "usage": usage,
    })
}

/// OpenAI's response to one turn.
pub fn completion(n: usize, model: &str, turn: &Value) -> Value {
    let calls: Vec<Value> = turn["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({
                        "id": format!("call_{n}_{i}"),
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": c["arguments"].to_string(),
                        },
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let text = turn["text"].as_str();
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls.clone());
    }
    json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion",
        "created": 1_700_000_000 + n,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" },
        }],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    })
}

fn serve(stream: std::net::TcpStream, shared: &Shared) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let endpoint = match shared.protocol {
        Protocol::OpenAi => "/chat/completions",
        Protocol::Anthropic => "/messages",
    };
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader) {
        let received = Instant::now();
        let n = {
            let mut seen = shared.seen.lock().unwrap();
            seen.push(req.clone());
            seen.len()
        };
        let mut billed = None;
        let (code, reply) = if req.method != "POST" || !req.path.ends_with(endpoint) {
            (
                404,
                json!({"error": {"message": "not found", "type": "invalid_request_error"}}),
            )
        } else {
            let body = serde_json::from_str::<Value>(&req.body).unwrap_or(Value::Null);
            let model = body["model"].as_str().unwrap_or_default().to_owned();
            let next = shared.turns.lock().unwrap().pop_front();
            if let Some(ms) = next.as_ref().and_then(|t| t["delay_ms"].as_u64()) {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            if let Some(raw) = next.as_ref().and_then(|t| t["raw_body"].as_str()) {
                if !write_json(&mut writer, 200, raw) {
                    return;
                }
                continue;
            }
            match next {
                Some(turn) if turn["status"].is_u64() => {
                    let code = turn["status"].as_u64().and_then(|c| u16::try_from(c).ok());
                    (
                        code.unwrap_or(500),
                        json!({"error": {"message": "the mock model was told to fail", "type": "server_error"}}),
                    )
                }
                Some(turn) => {
                    let (reply, usage) = answer(shared, n, &model, &body, &turn);
                    billed = usage;
                    (200, reply)
                }
                None => (
                    500,
                    json!({"error": {"message": "the mock model has no turn left", "type": "server_error"}}),
                ),
            }
        };
        let written = write_json(&mut writer, code, &reply.to_string());
        shared.exchanges.lock().unwrap().push(Exchange {
            received,
            answered: Instant::now(),
            usage: billed,
        });
        if !written {
            return;
        }
    }
}

/// The 200 answer to request `n` playing `turn`, and what it billed when priced.
fn answer(
    shared: &Shared,
    n: usize,
    model: &str,
    body: &Value,
    turn: &Value,
) -> (Value, Option<SimulatedUsage>) {
    if !shared.priced {
        let reply = match shared.protocol {
            Protocol::OpenAi => completion(n, model, turn),
            Protocol::Anthropic => anthropic_message(
                n,
                model,
                turn,
                json!({"input_tokens": 100, "output_tokens": 20}),
            ),
        };
        return (reply, None);
    }
    let output_tokens = tokens_of(turn.to_string().len());
    let mut cache = shared.cache.lock().unwrap();
    match shared.protocol {
        Protocol::OpenAi => {
            let usage = openai_usage(body, &mut cache);
            let mut reply = completion(n, model, turn);
            reply["usage"] = usage_value(Protocol::OpenAi, usage, output_tokens);
            (reply, Some(usage))
        }
        Protocol::Anthropic => {
            let usage = anthropic_usage(body, &mut cache);
            let reply = anthropic_message(
                n,
                model,
                turn,
                usage_value(Protocol::Anthropic, usage, output_tokens),
            );
            (reply, Some(usage))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str, n: usize) -> String {
        text.repeat(n)
    }

    fn request(blocks: &[(String, bool)]) -> Value {
        let content: Vec<Value> = blocks
            .iter()
            .map(|(t, mark)| {
                let mut b = json!({"type": "text", "text": t});
                if *mark {
                    b["cache_control"] = json!({"type": "ephemeral"});
                }
                b
            })
            .collect();
        json!({"system": [{"type": "text", "text": block("s", 8000), "cache_control": {"type": "ephemeral"}}],
               "messages": [{"role": "user", "content": content}]})
    }

    #[test]
    fn anthropic_reads_an_earlier_prefix_and_writes_the_rest() {
        let mut cache = HashSet::new();
        let a = (block("a", 4000), true);
        let b = (block("b", 4000), true);
        let first = anthropic_usage(&request(std::slice::from_ref(&a)), &mut cache);
        assert_eq!(first.cache_read, 0);
        assert_eq!(first.cache_write, first.prompt_tokens);
        // The same prefix with one more block: the prefix is read, the new block written.
        let second = anthropic_usage(&request(&[(a.0.clone(), false), b.clone()]), &mut cache);
        assert_eq!(second.cache_read, first.prompt_tokens);
        assert_eq!(
            second.cache_write,
            second.prompt_tokens - first.prompt_tokens
        );
        // Changing the first block leaves only the system prompt cached.
        let third = anthropic_usage(&request(&[(block("c", 4000), true)]), &mut cache);
        let system_tokens = tokens_of(anthropic_blocks(&request(&[]))[0].0.len());
        assert_eq!(third.cache_read, system_tokens);
        // Without marks nothing is cached or read.
        let unmarked =
            json!({"system": block("s", 8000), "messages": [{"role": "user", "content": "x"}]});
        let none = anthropic_usage(&unmarked, &mut cache);
        assert_eq!((none.cache_read, none.cache_write), (0, 0));
    }

    #[test]
    fn openai_reads_the_longest_earlier_prefix_in_steps() {
        let mut cache = HashSet::new();
        let long = block("x", 10_000);
        let body = |tail: &str| json!({"messages": [{"role": "user", "content": format!("{long}{tail}")}]});
        let first = openai_usage(&body("a"), &mut cache);
        assert_eq!(first.cache_read, 0);
        let second = openai_usage(&body("b"), &mut cache);
        assert!(second.cache_read >= MIN_CACHED_TOKENS, "{second:?}");
        assert_eq!(second.cache_read % OPENAI_CACHE_STEP_TOKENS as u64, 0);
        assert!(second.cache_read <= second.prompt_tokens);
        let short = openai_usage(&json!({"messages": "tiny"}), &mut cache);
        assert_eq!(short.cache_read, 0);
    }
}
