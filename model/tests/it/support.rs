//! A wiremock server on 127.0.0.1 driven from plain (blocking) test code.

use std::collections::BTreeMap;

use airlock_model::{
    ChatOptions, ChatRequest, HttpModel, Message, ModelConfig, ModelSpec, RetryConfig, ToolSpec,
};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request};

pub const TEST_KEY: &str = "sk-test-9f8e7d6c5b4a-secret-key-value";
pub const KEY_ENV: &str = "AIRLOCK_TEST_MODEL_KEY";

/// The server is dropped before the runtime that serves it.
pub struct Server {
    pub server: MockServer,
    pub rt: tokio::runtime::Runtime,
}

impl Server {
    pub fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(MockServer::start());
        Server { server, rt }
    }

    pub fn mount(&self, mock: Mock) {
        self.rt.block_on(mock.mount(&self.server));
    }

    pub fn requests(&self) -> Vec<Request> {
        self.rt
            .block_on(self.server.received_requests())
            .unwrap_or_default()
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }

    pub fn verify(&self) {
        self.rt.block_on(self.server.verify());
    }

    /// The base URL with the `/v1` prefix both providers use.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }
}

/// A config pointing at `base_url` with quick retries and the test key.
pub fn config(base_url: &str) -> ModelConfig {
    ModelConfig {
        api_key_env: Some(KEY_ENV.to_string()),
        base_url: Some(base_url.to_string()),
        timeout_ms: 5_000,
        connect_timeout_ms: 2_000,
        retry: RetryConfig {
            max_retries: 2,
            base_delay_ms: 1,
            max_delay_ms: 50,
        },
        ..ModelConfig::default()
    }
}

pub fn env(var: &str) -> Option<String> {
    (var == KEY_ENV).then(|| TEST_KEY.to_string())
}

pub fn model(spec: &str, config: &ModelConfig) -> HttpModel {
    HttpModel::with_env(&ModelSpec::parse(spec).unwrap(), config, &env).unwrap()
}

pub fn search_tool() -> ToolSpec {
    ToolSpec {
        name: "search_repo".to_string(),
        description: "Search the repository.".to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        }),
    }
}

pub fn simple_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You fix bugs."),
            Message::user("The parser drops trailing newlines."),
        ],
        tools: vec![search_tool()],
        options: ChatOptions {
            max_tokens: 256,
            ..ChatOptions::default()
        },
    }
}

/// Lower-case header names and values of a received request.
pub fn headers(req: &Request) -> BTreeMap<String, String> {
    req.headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                v.to_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A 127.0.0.1 port nothing listens on.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}
