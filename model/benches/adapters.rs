//! Per-call overhead of the adapters, side by side with a bare HTTP post of the same body to
//! the same local server (the floor any adapter pays), plus replay and scripted calls.
//!
//! Run: `cargo bench -p airlock-model --bench adapters`. Prints medians and p90s in
//! microseconds and the machine it ran on. Nothing leaves 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use airlock_model::{
    AssistantMessage, ChatModel, ChatOptions, ChatRequest, HttpModel, Message, ModelConfig,
    ModelSpec, ReplayModel, ScriptedModel, ToolCall, ToolSpec, read_cassette,
};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const ITERATIONS: usize = 300;

fn conversation(round_trips: usize) -> ChatRequest {
    let mut messages = vec![
        Message::system("You fix bugs. ".repeat(100)),
        Message::user("The parser drops trailing newlines.".repeat(10)),
    ];
    for i in 0..round_trips {
        let id = format!("call_{i}");
        messages.push(Message::Assistant(AssistantMessage {
            text: format!("Step {i}: reading more."),
            tool_calls: vec![ToolCall::new(
                &id,
                "read_file",
                json!({"path": format!("src/f{i}.rs"), "start": 1, "end": 80}),
            )],
        }));
        messages.push(Message::tool_result(
            &id,
            "fn body() {}\n".repeat(160),
            false,
        ));
    }
    ChatRequest {
        messages,
        tools: (0..6)
            .map(|i| ToolSpec {
                name: format!("tool_{i}"),
                description: "A tool.".repeat(20),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            })
            .collect(),
        options: ChatOptions::default(),
    }
}

fn stats(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.9))
}

fn time(mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..20 {
        f();
    }
    let samples = (0..ITERATIONS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    stats(samples)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cpu}, {cores} cores available, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"src/a.rs\"}"}}
                ]}, "finish_reason": "tool_calls"}],
                "content": [{"type": "tool_use", "id": "c", "name": "read_file", "input": {"path": "src/a.rs"}}],
                "stop_reason": "tool_use",
                "usage": {"prompt_tokens": 9000, "completion_tokens": 20, "input_tokens": 9000, "output_tokens": 20},
            })))
            .mount(&server),
    );
    let base = format!("{}/v1", server.uri());
    let req = conversation(30);
    let dir = tempfile::tempdir().unwrap();
    let env = |_: &str| Some("sk-bench".to_string());

    println!("airlock-model adapter benchmark ({ITERATIONS} calls each)");
    println!("machine: {}", machine());
    println!(
        "request: {} messages, {} tools",
        req.messages.len(),
        req.tools.len()
    );
    println!("{:<52} {:>12} {:>12}", "", "median µs", "p90 µs");

    for kind in ["openai", "anthropic"] {
        let cassette = dir.path().join(format!("{kind}.jsonl"));
        let config = ModelConfig {
            api_key_env: Some("K".to_string()),
            base_url: Some(base.clone()),
            record_cassette: Some(cassette.clone()),
            ..ModelConfig::default()
        };
        let recorder = HttpModel::with_env(
            &ModelSpec::parse(&format!("{kind}:m")).unwrap(),
            &config,
            &env,
        )
        .unwrap();
        recorder.chat(&req).unwrap();
        let entry = read_cassette(&cassette).unwrap().remove(0);
        let body = serde_json::to_string(&entry.request.body).unwrap();
        println!("{kind}: request body {} bytes", body.len());

        let bare = reqwest::blocking::Client::new();
        let url = entry.request.url.clone();
        let (m, p) = time(|| {
            let r = bare
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .unwrap();
            let _: serde_json::Value = serde_json::from_str(&r.text().unwrap()).unwrap();
        });
        println!(
            "{:<52} {m:>12.0} {p:>12.0}",
            format!("{kind}: bare reqwest post (reference)")
        );

        let live_config = ModelConfig {
            record_cassette: None,
            ..config.clone()
        };
        let model = HttpModel::with_env(
            &ModelSpec::parse(&format!("{kind}:m")).unwrap(),
            &live_config,
            &env,
        )
        .unwrap();
        let (m, p) = time(|| {
            model.chat(&req).unwrap();
        });
        println!(
            "{:<52} {m:>12.0} {p:>12.0}",
            format!("{kind}: HttpModel::chat")
        );

        let line = std::fs::read_to_string(&cassette).unwrap();
        let many = dir.path().join(format!("{kind}-many.jsonl"));
        std::fs::write(&many, line.repeat(ITERATIONS + 20)).unwrap();
        let replay = ReplayModel::open(&many, &ModelConfig::default()).unwrap();
        let (m, p) = time(|| {
            replay.chat(&req).unwrap();
        });
        replay.finish().unwrap();
        println!(
            "{:<52} {m:>12.0} {p:>12.0}",
            format!("{kind}: ReplayModel::chat (encode+compare+decode)")
        );
    }

    let script = dir.path().join("script.jsonl");
    std::fs::write(
        &script,
        "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}\n"
            .repeat(ITERATIONS + 20),
    )
    .unwrap();
    let scripted = ScriptedModel::open(&script, &ModelConfig::default()).unwrap();
    let (m, p) = time(|| {
        scripted.chat(&req).unwrap();
    });
    println!("{:<52} {m:>12.0} {p:>12.0}", "ScriptedModel::chat");
    drop(server);
}
