//! The OpenAI chat-completions adapter against a local server.

use std::time::Duration;

use airlock_model::{
    AssistantMessage, ChatModel, ChatOptions, ChatRequest, Error, Message, ModelPrice, StopReason,
    ToolCall, ToolChoice, Usage,
};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::support::{self, Server, TEST_KEY, config, headers, model, simple_request};

fn completion(message: serde_json::Value, finish_reason: &str) -> serde_json::Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    })
}

fn tool_call_completion() -> serde_json::Value {
    completion(
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": "call_abc",
                "type": "function",
                "function": {"name": "search_repo", "arguments": "{\"query\":\"trailing newline\"}"},
            }],
        }),
        "tool_calls",
    )
}

#[test]
fn tool_call_round_trip_sends_the_documented_shape() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header(
                "authorization",
                format!("Bearer {TEST_KEY}").as_str(),
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(tool_call_completion()))
            .up_to_n_times(1)
            .expect(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({"role": "assistant", "content": "Found it in src/parse.rs."}),
                "stop",
            )))
            .expect(1),
    );
    let mut cfg = config(&server.base_url());
    cfg.prices
        .insert("gpt-test".to_string(), ModelPrice::new(2.0, 10.0));
    let m = model("openai:gpt-test", &cfg);
    assert_eq!(m.name(), "openai:gpt-test");

    let mut req = simple_request();
    let first = m.chat(&req).unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(
        first.message.tool_calls,
        vec![ToolCall::new(
            "call_abc",
            "search_repo",
            json!({"query": "trailing newline"})
        )]
    );
    assert_eq!(first.message.text, "");
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 30,
            ..Usage::default()
        }
    );
    let cost = first.cost_usd.unwrap();
    assert!(
        (cost - (120.0 * 2.0 + 30.0 * 10.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );

    req.messages.push(Message::Assistant(first.message.clone()));
    req.messages.push(Message::tool_result(
        "call_abc",
        "src/parse.rs:10: fn parse",
        false,
    ));
    req.messages
        .push(Message::tool_result("call_zzz", "no such file", true));
    let second = m.chat(&req).unwrap();
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    assert_eq!(
        second.message,
        AssistantMessage {
            text: "Found it in src/parse.rs.".to_string(),
            tool_calls: vec![]
        }
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let h = headers(&requests[0]);
    assert_eq!(h["content-type"], "application/json");
    let bodies = server.bodies();
    assert_eq!(
        bodies[1],
        json!({
            "model": "gpt-test",
            "max_completion_tokens": 256,
            "messages": [
                {"role": "system", "content": "You fix bugs."},
                {"role": "user", "content": "The parser drops trailing newlines."},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "search_repo", "arguments": "{\"query\":\"trailing newline\"}"},
                }]},
                {"role": "tool", "tool_call_id": "call_abc", "content": "src/parse.rs:10: fn parse"},
                {"role": "tool", "tool_call_id": "call_zzz", "content": "ERROR: no such file"},
            ],
            "tools": [{
                "type": "function",
                "function": {
                    "name": "search_repo",
                    "description": "Search the repository.",
                    "parameters": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                    },
                },
            }],
            "tool_choice": "auto",
        })
    );
    server.verify();
}

#[test]
fn options_map_to_openai_fields() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({"role": "assistant", "content": "ok"}),
                "stop",
            ))),
    );
    let cfg = config(&server.base_url());
    let m = model("openai:gpt-test", &cfg);
    let mut req = simple_request();
    req.options = ChatOptions {
        max_tokens: 99,
        temperature: Some(0.2),
        stop: vec!["END".to_string()],
        tool_choice: ToolChoice::Tool("search_repo".to_string()),
        stable_prefix: 0,
    };
    m.chat(&req).unwrap();
    req.options.tool_choice = ToolChoice::Required;
    m.chat(&req).unwrap();
    req.options.tool_choice = ToolChoice::None;
    m.chat(&req).unwrap();
    req.tools.clear();
    m.chat(&req).unwrap();

    let bodies = server.bodies();
    assert_eq!(bodies[0]["temperature"], json!(0.2));
    assert_eq!(bodies[0]["stop"], json!(["END"]));
    assert_eq!(bodies[0]["max_completion_tokens"], json!(99));
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "search_repo"}})
    );
    assert_eq!(bodies[1]["tool_choice"], json!("required"));
    assert_eq!(bodies[2]["tool_choice"], json!("none"));
    // No tools: neither `tools` nor `tool_choice` is sent.
    assert!(bodies[3].get("tools").is_none(), "{}", bodies[3]);
    assert!(bodies[3].get("tool_choice").is_none(), "{}", bodies[3]);
}

#[test]
fn compatible_servers_get_max_tokens_and_no_auth_without_a_key() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({"role": "assistant", "content": "hi"}),
                "stop",
            ))),
    );
    let mut cfg = config("http://unused.invalid");
    cfg.api_key_env = None;
    cfg.temperature = Some(0.7);
    cfg.extra_headers
        .insert("x-gateway-route".to_string(), "blue".to_string());
    let spec = format!("openai-compatible:{}/#llama-3", server.base_url());
    let m = model(&spec, &cfg);
    assert_eq!(
        m.name(),
        format!("openai-compatible:{}#llama-3", server.base_url())
    );
    m.chat(&simple_request()).unwrap();
    let requests = server.requests();
    let h = headers(&requests[0]);
    assert!(!h.contains_key("authorization"), "{h:?}");
    assert_eq!(h["x-gateway-route"], "blue");
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body["model"], "llama-3");
    assert_eq!(body["max_tokens"], 256);
    // The configured default applies when the request sets no temperature.
    assert_eq!(body["temperature"], json!(0.7));
    assert!(body.get("max_completion_tokens").is_none());
}

#[test]
fn rate_limit_with_retry_after_then_success() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "1")
                    .set_body_json(
                        json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
                    ),
            )
            .up_to_n_times(1)
            .expect(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(tool_call_completion()))
            .expect(1),
    );
    let m = model("openai:gpt-test", &config(&server.base_url()));
    let response = m.chat(&simple_request()).unwrap();
    assert_eq!(response.message.tool_calls.len(), 1);
    assert_eq!(server.requests().len(), 2);
    server.verify();
}

#[test]
fn server_errors_until_the_retry_budget_is_spent() {
    let server = Server::start();
    server.mount(Mock::given(method("POST")).respond_with(
        ResponseTemplate::new(503).set_body_json(
            json!({"error": {"message": "The server is overloaded", "type": "server_error"}}),
        ),
    ));
    let m = model("openai:gpt-test", &config(&server.base_url()));
    let err = m.chat(&simple_request()).unwrap_err();
    match &err {
        Error::Http {
            provider,
            status,
            message,
            attempts,
        } => {
            assert_eq!(provider, "openai");
            assert_eq!(*status, 503);
            assert_eq!(message, "server_error: The server is overloaded");
            assert_eq!(*attempts, 3);
        }
        other => panic!("expected Http, got {other:?}"),
    }
    assert!(err.is_transient());
    // max_retries = 2: one attempt and two retries.
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn client_errors_are_not_retried_and_carry_the_provider_message() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": {"message": "Invalid schema for function 'search_repo'", "type": "invalid_request_error"}
        }))),
    );
    let m = model("openai:gpt-test", &config(&server.base_url()));
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid_request_error: Invalid schema for function 'search_repo'"),
        "{err}"
    );
    assert!(!err.is_transient());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_slow_server_times_out_without_retrying() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST")).respond_with(
            ResponseTemplate::new(200)
                .set_body_json(tool_call_completion())
                .set_delay(Duration::from_secs(5)),
        ),
    );
    let mut cfg = config(&server.base_url());
    cfg.timeout_ms = 300;
    let m = model("openai:gpt-test", &cfg);
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                timeout_ms: 300,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn connection_failures_are_retried_then_reported() {
    let port = support::closed_port();
    let m = model(
        "openai:gpt-test",
        &config(&format!("http://127.0.0.1:{port}/v1")),
    );
    let err = m.chat(&simple_request()).unwrap_err();
    match &err {
        Error::Connection {
            attempts, message, ..
        } => {
            assert_eq!(*attempts, 3);
            assert!(!message.is_empty());
        }
        other => panic!("expected Connection, got {other:?}"),
    }
}

#[test]
fn malformed_tool_arguments_are_a_typed_error_and_round_trip_raw() {
    let server = Server::start();
    let raw = "{\"query\": \"trailing newl";
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({
                    "role": "assistant",
                    "content": "Let me search.",
                    "tool_calls": [{
                        "id": "call_bad",
                        "type": "function",
                        "function": {"name": "search_repo", "arguments": raw},
                    }],
                }),
                "tool_calls",
            )))
            .up_to_n_times(1),
    );
    server.mount(Mock::given(method("POST")).respond_with(
        ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "retrying"}),
            "stop",
        )),
    ));
    let m = model("openai:gpt-test", &config(&server.base_url()));
    let mut req = simple_request();
    let response = m.chat(&req).unwrap();
    assert_eq!(response.message.text, "Let me search.");
    let call = &response.message.tool_calls[0];
    assert_eq!(call.name, "search_repo");
    let bad = call.checked_arguments().unwrap_err();
    assert_eq!(bad.raw, raw);
    assert!(bad.to_string().contains("not valid JSON"), "{bad}");

    // The loop hands the error back; the raw text goes back to the provider unchanged.
    req.messages
        .push(Message::Assistant(response.message.clone()));
    req.messages
        .push(Message::tool_result("call_bad", bad.to_string(), true));
    m.chat(&req).unwrap();
    let bodies = server.bodies();
    assert_eq!(
        bodies[1]["messages"][2]["tool_calls"][0]["function"]["arguments"],
        json!(raw)
    );
    assert_eq!(bodies[1]["messages"][2]["content"], json!("Let me search."));
}

#[test]
fn empty_and_truncated_responses() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({"role": "assistant", "content": ""}),
                "stop",
            )))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({"role": "assistant", "content": "The fix is to"}),
                "length",
            )))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST")).respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"id": "x", "choices": []})),
        ),
    );
    let m = model("openai:gpt-test", &config(&server.base_url()));
    let req = simple_request();
    let err = m.chat(&req).unwrap_err();
    assert!(matches!(err, Error::EmptyResponse { .. }), "{err:?}");
    let truncated = m.chat(&req).unwrap();
    assert_eq!(truncated.stop_reason, StopReason::MaxTokens);
    assert_eq!(truncated.message.text, "The fix is to");
    let err = m.chat(&req).unwrap_err();
    assert!(
        matches!(&err, Error::MalformedResponse { detail, .. } if detail.contains("choices[0]")),
        "{err:?}"
    );
}

#[test]
fn ollama_spec_uses_the_openai_protocol_without_a_key() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!({"role": "assistant", "content": "", "tool_calls": [{
                    "id": "call_0", "type": "function",
                    "function": {"name": "search_repo", "arguments": {"query": "x"}},
                }]}),
                "stop",
            ))),
    );
    let mut cfg = config(&server.base_url());
    cfg.api_key_env = None;
    let m = model("ollama:qwen2.5-coder", &cfg);
    assert_eq!(m.name(), "ollama:qwen2.5-coder");
    let response = m
        .chat(&ChatRequest {
            messages: vec![Message::user("find x")],
            tools: vec![support::search_tool()],
            options: ChatOptions::default(),
        })
        .unwrap();
    // Ollama says "stop" even when it calls tools; arguments may arrive as an object.
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.message.tool_calls[0].arguments,
        json!({"query": "x"})
    );
    let h = headers(&server.requests()[0]);
    assert!(!h.contains_key("authorization"));
}
