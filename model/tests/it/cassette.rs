//! Recording through the real client and strict replay.

use airlock_model::{
    ChatModel, Error, Message, ModelConfig, RecordedResponse, ReplayModel, StopReason, from_spec,
    read_cassette,
};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, ResponseTemplate};

use crate::support::{Server, TEST_KEY, config, model, simple_request};

fn openai_reply(content: serde_json::Value) -> serde_json::Value {
    json!({
        "id": "chatcmpl-1",
        "choices": [{"index": 0, "message": content, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    })
}

/// Records a two-call conversation plus a refused call; returns the cassette path.
fn record(dir: &std::path::Path, spec_kind: &str) -> std::path::PathBuf {
    let server = Server::start();
    let (first, second, refused) = if spec_kind == "anthropic" {
        (
            json!({"content": [{"type": "tool_use", "id": "toolu_1", "name": "search_repo", "input": {"query": "q"}}],
                   "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
            json!({"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 20, "output_tokens": 2}}),
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "too long"}}),
        )
    } else {
        (
            openai_reply(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "search_repo", "arguments": "{\"query\":\"q\"}"}}
            ]})),
            openai_reply(json!({"role": "assistant", "content": "done"})),
            json!({"error": {"message": "too long", "type": "invalid_request_error"}}),
        )
    };
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_string("flaky"))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(first))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(second))
            .up_to_n_times(1),
    );
    server.mount(
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(400).set_body_json(refused)),
    );
    let path = dir.join(format!("{spec_kind}.cassette.jsonl"));
    let mut cfg = config(&server.base_url());
    cfg.record_cassette = Some(path.clone());
    let m = model(&format!("{spec_kind}:model-x"), &cfg);
    for (i, req) in conversation().iter().enumerate() {
        let result = m.chat(req);
        if i < 2 {
            result.unwrap();
        } else {
            assert!(matches!(result, Err(Error::Http { status: 400, .. })));
        }
    }
    path
}

fn conversation() -> Vec<airlock_model::ChatRequest> {
    let first = simple_request();
    let mut second = first.clone();
    second
        .messages
        .push(Message::Assistant(airlock_model::AssistantMessage {
            text: String::new(),
            tool_calls: vec![airlock_model::ToolCall::new(
                "toolu_1",
                "search_repo",
                json!({"query": "q"}),
            )],
        }));
    second
        .messages
        .push(Message::tool_result("toolu_1", "found", false));
    let mut third = second.clone();
    third.messages.push(Message::assistant_text("done"));
    third.messages.push(Message::user("again"));
    vec![first, second, third]
}

#[test]
fn record_then_replay_strictly_in_order() {
    for kind in ["openai", "anthropic"] {
        let dir = tempfile::tempdir().unwrap();
        let path = record(dir.path(), kind);
        let entries = read_cassette(&path).unwrap();
        // The retried 500 collapses into the call's final exchange.
        assert_eq!(entries.len(), 3, "{kind}");
        assert_eq!(entries[0].provider, kind);
        assert_eq!(entries[0].model, "model-x");
        assert!(matches!(
            entries[2].response,
            RecordedResponse::Http { status: 400, .. }
        ));

        let replay = from_spec(
            &format!("replay:{}", path.display()),
            &ModelConfig::default(),
        )
        .unwrap();
        assert_eq!(replay.name(), format!("replay:{}", path.display()));
        let reqs = conversation();
        let first = replay.chat(&reqs[0]).unwrap();
        assert_eq!(first.stop_reason, StopReason::ToolUse, "{kind}");
        assert_eq!(first.message.tool_calls[0].arguments, json!({"query": "q"}));
        assert_eq!(first.usage.input_tokens, 10);
        let second = replay.chat(&reqs[1]).unwrap();
        assert_eq!(second.message.text, "done");
        let err = replay.chat(&reqs[2]).unwrap_err();
        assert!(
            matches!(&err, Error::Http { status: 400, message, .. } if message == "invalid_request_error: too long"),
            "{err:?}"
        );
        replay.finish().unwrap();
        let err = replay.chat(&reqs[0]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::CassetteExhausted {
                    call: 4,
                    entries: 3,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn replay_fails_when_a_request_differs() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "openai");
    let replay = ReplayModel::open(&path, &ModelConfig::default()).unwrap();
    let mut req = simple_request();
    req.messages[1] = Message::user("A different issue.");
    let err = replay.chat(&req).unwrap_err();
    match &err {
        Error::CassetteMismatch { index, detail, .. } => {
            assert_eq!(*index, 1);
            assert!(detail.starts_with("/messages/1/content"), "{detail}");
            assert!(detail.contains("A different issue."), "{detail}");
        }
        other => panic!("expected CassetteMismatch, got {other:?}"),
    }
}

#[test]
fn replay_fails_when_entries_are_left_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "anthropic");
    let replay = ReplayModel::open(&path, &ModelConfig::default()).unwrap();
    replay.chat(&conversation()[0]).unwrap();
    assert_eq!(replay.remaining(), 2);
    let err = replay.finish().unwrap_err();
    assert!(
        matches!(
            err,
            Error::CassetteUnconsumed {
                remaining: 2,
                entries: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("2 of 3"), "{err}");
}

#[test]
fn recorded_timeouts_replay_as_timeouts() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST")).respond_with(
            ResponseTemplate::new(200)
                .set_body_json(openai_reply(
                    json!({"role": "assistant", "content": "late"}),
                ))
                .set_delay(std::time::Duration::from_secs(5)),
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeout.jsonl");
    let mut cfg = config(&server.base_url());
    cfg.timeout_ms = 200;
    cfg.record_cassette = Some(path.clone());
    let m = model("openai:model-x", &cfg);
    assert!(matches!(
        m.chat(&simple_request()),
        Err(Error::Timeout { .. })
    ));
    let replay = ReplayModel::open(&path, &ModelConfig::default()).unwrap();
    let err = replay.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                timeout_ms: 200,
                ..
            }
        ),
        "{err:?}"
    );
    replay.finish().unwrap();
}

#[test]
fn malformed_cassettes_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(&path, "\n{\"provider\": 1}\n").unwrap();
    let err = ReplayModel::open(&path, &ModelConfig::default()).unwrap_err();
    assert!(
        matches!(&err, Error::CassetteFormat { detail, .. } if detail.starts_with("line 2")),
        "{err:?}"
    );
    let _ = TEST_KEY;
}
