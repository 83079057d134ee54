//! An OpenAI-compatible chat-completions server on 127.0.0.1 that plays scripted turns, so a
//! test can drive the real `airlock run` over the real wire protocol
//! (`--model openai-compatible:{base}#MODEL`).
//!
//! A turn has the shape of the `scripted:` model's turns: `{"text": "..."}` for a final message,
//! `{"tool_calls": [{"name": N, "arguments": {...}}], "text": "..."}` for tool calls. Each
//! `POST .../chat/completions` is recorded and answered with the next turn, in OpenAI's response
//! shape (`choices[0].message` with `tool_calls[].function.arguments` as a JSON string,
//! `finish_reason`, `usage`); once the turns are spent it answers 500 with an OpenAI error body.
//!
//! A turn may also misbehave, for tests of a client's failure handling: `"delay_ms": N` waits
//! before answering, `"status": 500` answers that status with an OpenAI error body, and
//! `"raw_body": "..."` answers 200 with that body as is (not JSON, or the wrong shape).

use std::collections::VecDeque;
use std::io::BufReader;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::http::{read_request, write_json};

pub use crate::http::SeenRequest;

/// The running server.
pub struct MockModel {
    /// `http://127.0.0.1:PORT/v1`: the base URL of an `openai-compatible:` spec.
    pub base: String,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

impl MockModel {
    /// Serve `turns` in order, one per chat-completions request.
    pub fn start(turns: Vec<Value>) -> MockModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}/v1", listener.local_addr().expect("local addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let turns = Arc::new(Mutex::new(VecDeque::from(turns)));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (seen, turns) = (seen2.clone(), turns.clone());
                std::thread::spawn(move || serve(stream, &seen, &turns));
            }
        });
        MockModel { base, seen }
    }

    /// The model spec that points `airlock run` here.
    pub fn spec(&self, model: &str) -> String {
        format!("openai-compatible:{}#{model}", self.base)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// The parsed bodies of the chat-completions requests so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/chat/completions"))
            .map(|r| serde_json::from_str(&r.body).unwrap_or(Value::Null))
            .collect()
    }
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

fn serve(
    stream: std::net::TcpStream,
    seen: &Mutex<Vec<SeenRequest>>,
    turns: &Mutex<VecDeque<Value>>,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader) {
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(req.clone());
            seen.len()
        };
        let (code, reply) = if req.method != "POST" || !req.path.ends_with("/chat/completions") {
            (
                404,
                json!({"error": {"message": "not found", "type": "invalid_request_error"}}),
            )
        } else {
            let model = serde_json::from_str::<Value>(&req.body)
                .ok()
                .and_then(|b| b["model"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let next = turns.lock().unwrap().pop_front();
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
                Some(turn) => (200, completion(n, &model, &turn)),
                None => (
                    500,
                    json!({"error": {"message": "the mock model has no turn left", "type": "server_error"}}),
                ),
            }
        };
        if !write_json(&mut writer, code, &reply.to_string()) {
            return;
        }
    }
}
