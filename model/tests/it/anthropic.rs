//! The Anthropic Messages adapter against a local server.

use std::time::Duration;

use airlock_model::{
    ChatModel, ChatOptions, Error, Message, StopReason, ToolCall, ToolChoice, Usage,
};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::support::{Server, TEST_KEY, config, headers, model, simple_request};

fn message(content: serde_json::Value, stop_reason: &str) -> serde_json::Value {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 200, "output_tokens": 50},
    })
}

fn tool_use_message() -> serde_json::Value {
    message(
        json!([
            {"type": "text", "text": "I'll search for the parser."},
            {"type": "tool_use", "id": "toolu_01", "name": "search_repo", "input": {"query": "parser"}},
        ]),
        "tool_use",
    )
}

#[test]
fn tool_use_round_trip_sends_the_documented_shape() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", TEST_KEY))
            .and(header("anthropic-version", "2023-06-01"))
            .respond_with(ResponseTemplate::new(200).set_body_json(tool_use_message()))
            .up_to_n_times(1)
            .expect(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(ResponseTemplate::new(200).set_body_json(message(
                json!([{"type": "text", "text": "The bug is in parse()."}]),
                "end_turn",
            )))
            .expect(1),
    );
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    assert_eq!(m.name(), "anthropic:claude-test");
    let mut req = simple_request();
    req.messages.insert(1, Message::system("Be brief."));
    let first = m.chat(&req).unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(first.message.text, "I'll search for the parser.");
    assert_eq!(
        first.message.tool_calls,
        vec![ToolCall::new(
            "toolu_01",
            "search_repo",
            json!({"query": "parser"})
        )]
    );
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: 200,
            output_tokens: 50,
            ..Usage::default()
        }
    );
    assert_eq!(first.cost_usd, None);

    req.messages.push(Message::Assistant(first.message.clone()));
    req.messages
        .push(Message::tool_result("toolu_01", "src/parse.rs:3", false));
    req.messages
        .push(Message::tool_result("toolu_02", "denied", true));
    req.messages.push(Message::user("Keep going."));
    let second = m.chat(&req).unwrap();
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    assert_eq!(second.message.text, "The bug is in parse().");

    let requests = server.requests();
    let h = headers(&requests[1]);
    assert_eq!(h["content-type"], "application/json");
    assert!(!h.contains_key("authorization"), "{h:?}");
    let bodies = server.bodies();
    assert_eq!(
        bodies[1],
        json!({
            "model": "claude-test",
            "max_tokens": 256,
            // Cache breakpoints: the system prompt, where the previous request ended, the end.
            "system": [{"type": "text", "text": "You fix bugs.\n\nBe brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "The parser drops trailing newlines.", "cache_control": {"type": "ephemeral"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "I'll search for the parser."},
                    {"type": "tool_use", "id": "toolu_01", "name": "search_repo", "input": {"query": "parser"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "src/parse.rs:3"},
                    {"type": "tool_result", "tool_use_id": "toolu_02", "content": "denied", "is_error": true},
                    {"type": "text", "text": "Keep going.", "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            "tools": [{
                "name": "search_repo",
                "description": "Search the repository.",
                "input_schema": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            }],
            "tool_choice": {"type": "auto"},
        })
    );
    server.verify();
}

#[test]
fn options_map_to_anthropic_fields() {
    let server = Server::start();
    server.mount(Mock::given(method("POST")).respond_with(
        ResponseTemplate::new(200).set_body_json(message(
            json!([{"type": "text", "text": "ok"}]),
            "stop_sequence",
        )),
    ));
    let mut cfg = config(&server.base_url());
    cfg.anthropic_version = "2099-01-01".to_string();
    let m = model("anthropic:claude-test", &cfg);
    let mut req = simple_request();
    req.options = ChatOptions {
        max_tokens: 77,
        temperature: Some(0.0),
        stop: vec!["</answer>".to_string()],
        tool_choice: ToolChoice::Tool("search_repo".to_string()),
        stable_prefix: 0,
    };
    let r = m.chat(&req).unwrap();
    assert_eq!(r.stop_reason, StopReason::StopSequence);
    req.options.tool_choice = ToolChoice::Required;
    m.chat(&req).unwrap();
    req.options.tool_choice = ToolChoice::None;
    m.chat(&req).unwrap();

    let requests = server.requests();
    assert_eq!(headers(&requests[0])["anthropic-version"], "2099-01-01");
    let bodies = server.bodies();
    assert_eq!(bodies[0]["max_tokens"], json!(77));
    assert_eq!(bodies[0]["temperature"], json!(0.0));
    assert_eq!(bodies[0]["stop_sequences"], json!(["</answer>"]));
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "tool", "name": "search_repo"})
    );
    assert_eq!(bodies[1]["tool_choice"], json!({"type": "any"}));
    assert_eq!(bodies[2]["tool_choice"], json!({"type": "none"}));
}

#[test]
fn a_reply_with_several_content_blocks() {
    let server = Server::start();
    server.mount(Mock::given(method("POST")).respond_with(
        ResponseTemplate::new(200).set_body_json(message(
            json!([
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "First, the tree."},
                {"type": "tool_use", "id": "toolu_a", "name": "list_tree", "input": {}},
                {"type": "text", "text": "Then the file."},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "src/lib.rs"}},
            ]),
            "tool_use",
        )),
    ));
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    let r = m.chat(&simple_request()).unwrap();
    assert_eq!(r.message.text, "First, the tree.\n\nThen the file.");
    assert_eq!(
        r.message.tool_calls,
        vec![
            ToolCall::new("toolu_a", "list_tree", json!({})),
            ToolCall::new("toolu_b", "read_file", json!({"path": "src/lib.rs"})),
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[test]
fn overloaded_with_retry_after_then_success() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "2")
                    .set_body_json(json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})),
            )
            .up_to_n_times(1)
            .expect(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(tool_use_message()))
            .expect(1),
    );
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    let r = m.chat(&simple_request()).unwrap();
    assert_eq!(r.message.tool_calls[0].id, "toolu_01");
    server.verify();
}

#[test]
fn server_errors_until_the_retry_budget_is_spent() {
    let server = Server::start();
    server.mount(Mock::given(method("POST")).respond_with(
        ResponseTemplate::new(529).set_body_json(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ));
    let mut cfg = config(&server.base_url());
    cfg.retry.max_retries = 3;
    let m = model("anthropic:claude-test", &cfg);
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(&err, Error::Http { status: 529, attempts: 4, message, .. } if message == "overloaded_error: Overloaded"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn a_slow_server_times_out() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST")).respond_with(
            ResponseTemplate::new(200)
                .set_body_json(tool_use_message())
                .set_delay(Duration::from_secs(5)),
        ),
    );
    let mut cfg = config(&server.base_url());
    cfg.timeout_ms = 250;
    let m = model("anthropic:claude-test", &cfg);
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                timeout_ms: 250,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("timed out"), "{err}");
}

#[test]
fn malformed_tool_input_is_a_typed_error() {
    let server = Server::start();
    server.mount(Mock::given(method("POST")).respond_with(
        ResponseTemplate::new(200).set_body_json(message(
            json!([
                {"type": "tool_use", "id": "toolu_s", "name": "search_repo", "input": "{\"query\": \"par"},
                {"type": "tool_use", "id": "toolu_n", "name": "search_repo", "input": [1, 2]},
                {"type": "tool_use", "id": "toolu_j", "name": "search_repo", "input": "{\"query\": \"ok\"}"},
            ]),
            "tool_use",
        )),
    ));
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    let r = m.chat(&simple_request()).unwrap();
    let calls = &r.message.tool_calls;
    let bad = calls[0].checked_arguments().unwrap_err();
    assert_eq!(bad.raw, "{\"query\": \"par");
    let bad = calls[1].checked_arguments().unwrap_err();
    assert!(bad.error.contains("not a JSON object"), "{bad}");
    assert_eq!(
        calls[2].checked_arguments().unwrap(),
        &json!({"query": "ok"})
    );
}

#[test]
fn empty_and_truncated_replies() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(message(json!([]), "end_turn")))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(message(
                json!([{"type": "tool_use", "id": "toolu_t", "name": "search_repo", "input": {}}]),
                "max_tokens",
            )))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_string("<html>gateway</html>")),
    );
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(&err, Error::EmptyResponse { stop_reason, .. } if stop_reason == "end_turn"),
        "{err:?}"
    );
    let truncated = m.chat(&simple_request()).unwrap();
    assert_eq!(truncated.stop_reason, StopReason::MaxTokens);
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(matches!(err, Error::MalformedResponse { .. }), "{err:?}");
}

#[test]
fn missing_key_names_the_variable() {
    let mut cfg = config("http://127.0.0.1:9/v1");
    cfg.api_key_env = Some("AIRLOCK_TEST_UNSET_VARIABLE".to_string());
    let err = airlock_model::HttpModel::with_env(
        &airlock_model::ModelSpec::parse("anthropic:claude-test").unwrap(),
        &cfg,
        &|_| None,
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::MissingApiKey { env_var } if env_var == "AIRLOCK_TEST_UNSET_VARIABLE"),
        "{err:?}"
    );
    // Default variable per provider.
    cfg.api_key_env = None;
    let err = airlock_model::from_spec_with_env("anthropic:claude-test", &cfg, &|_| None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    let err = airlock_model::from_spec_with_env("openai:gpt-test", &cfg, &|_| None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
}
