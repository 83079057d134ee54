//! The scripted model: plays turns and checks what it is sent.

use airlock_model::{
    ChatModel, ChatRequest, Error, Message, ModelConfig, StopReason, ToolCall, from_spec,
};
use serde_json::json;

use crate::support::simple_request;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const SCRIPT_JSONL: &str = r#"{"text": "Searching.", "tool_calls": [{"name": "search_repo", "arguments": {"query": "parse"}}], "expect_tools": ["search_repo"], "expect_last_message_contains": "trailing newlines"}

{"tool_calls": [{"id": "r1", "name": "read_file", "raw_arguments": "{\"path\": "}], "expect_contains": ["fn parse", "src/parse.rs"], "usage": {"input_tokens": 7, "output_tokens": 3}}
{"text": "Done.", "expect_contains": "not valid JSON", "expect_tool_error": true}
"#;

fn play_through(model: &dyn ChatModel) {
    let mut req = simple_request();
    let t1 = model.chat(&req).unwrap();
    assert_eq!(t1.message.text, "Searching.");
    assert_eq!(t1.stop_reason, StopReason::ToolUse);
    assert_eq!(
        t1.message.tool_calls,
        vec![ToolCall::new(
            "call_1_1",
            "search_repo",
            json!({"query": "parse"})
        )]
    );
    assert!(t1.usage.input_tokens > 0 && t1.usage.output_tokens > 0);

    req.messages.push(Message::Assistant(t1.message));
    req.messages.push(Message::tool_result(
        "call_1_1",
        "src/parse.rs:10: fn parse(input: &str)",
        false,
    ));
    let t2 = model.chat(&req).unwrap();
    assert_eq!(t2.usage.input_tokens, 7);
    let call = &t2.message.tool_calls[0];
    assert_eq!(call.id, "r1");
    let bad = call.checked_arguments().unwrap_err();

    req.messages.push(Message::Assistant(t2.message.clone()));
    req.messages
        .push(Message::tool_result("r1", bad.to_string(), true));
    let t3 = model.chat(&req).unwrap();
    assert_eq!(t3.message.text, "Done.");
    assert_eq!(t3.stop_reason, StopReason::EndTurn);
    model.finish().unwrap();

    let err = model.chat(&req).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ScriptExhausted {
                call: 4,
                turns: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("ran out"), "{err}");
}

#[test]
fn plays_a_jsonl_script_and_checks_expectations() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "demo.jsonl", SCRIPT_JSONL);
    let model = from_spec(
        &format!("scripted:{}", path.display()),
        &ModelConfig::default(),
    )
    .unwrap();
    assert_eq!(model.name(), format!("scripted:{}", path.display()));
    play_through(model.as_ref());
}

#[test]
fn json_array_and_object_forms_play_the_same() {
    let turns: Vec<serde_json::Value> = SCRIPT_JSONL
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let array = write(
        &dir,
        "a.json",
        &serde_json::to_string_pretty(&turns).unwrap(),
    );
    let object = write(
        &dir,
        "o.json",
        &serde_json::to_string_pretty(&json!({"turns": turns})).unwrap(),
    );
    for path in [array, object] {
        let model = airlock_model::ScriptedModel::open(&path, &ModelConfig::default()).unwrap();
        play_through(&model);
    }
}

#[test]
fn a_failed_expectation_names_the_turn_and_what_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "s.jsonl",
        r#"{"tool_calls": [{"name": "search_repo", "arguments": {"query": "x"}}]}
{"text": "ok", "expect_contains": "fn parse"}
"#,
    );
    let model = airlock_model::ScriptedModel::open(&path, &ModelConfig::default()).unwrap();
    let mut req = simple_request();
    let t1 = model.chat(&req).unwrap();
    req.messages.push(Message::Assistant(t1.message));
    req.messages
        .push(Message::tool_result("call_1_1", "no matches", false));
    let err = model.chat(&req).unwrap_err();
    match &err {
        Error::ScriptAssertion {
            turn,
            expectation,
            actual,
            ..
        } => {
            assert_eq!(*turn, 2);
            assert!(expectation.contains("fn parse"), "{expectation}");
            assert!(actual.contains("no matches"), "{actual}");
        }
        other => panic!("expected ScriptAssertion, got {other:?}"),
    }
    assert!(err.to_string().contains("turn 2"), "{err}");
}

#[test]
fn expectations_about_missing_tool_results_and_tools_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "s.jsonl",
        r#"{"text": "a", "expect_contains": "x"}
{"text": "b", "expect_tools": ["open_pr"]}
{"text": "c", "expect_tool_error": false}
"#,
    );
    let model = airlock_model::ScriptedModel::open(&path, &ModelConfig::default()).unwrap();
    let err = model.chat(&simple_request()).unwrap_err();
    assert!(err.to_string().contains("no tool result"), "{err}");
    let err = model.chat(&simple_request()).unwrap_err();
    assert!(err.to_string().contains("\"open_pr\" is offered"), "{err}");
    let mut req = ChatRequest::default();
    req.messages.push(Message::tool_result("c", "boom", true));
    let err = model.chat(&req).unwrap_err();
    assert!(err.to_string().contains("is_error = false"), "{err}");
}

#[test]
fn unplayed_turns_fail_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "s.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n");
    let model = airlock_model::ScriptedModel::open(&path, &ModelConfig::default()).unwrap();
    model.chat(&simple_request()).unwrap();
    let err = model.finish().unwrap_err();
    assert!(err.to_string().contains("1 of 2 turns not played"), "{err}");
}

#[test]
fn bad_scripts_are_rejected_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{\"text\": \"a\"}\n{\"txet\": \"b\"}\n", "line 2"),
        ("", "no turns"),
        (
            "{\"tool_calls\": [{\"name\": \"t\", \"arguments\": {}, \"raw_arguments\": \"{\"}]}",
            "both `arguments` and `raw_arguments`",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = write(&dir, &format!("bad{i}.jsonl"), text);
        let err = airlock_model::ScriptedModel::open(&path, &ModelConfig::default()).unwrap_err();
        assert!(
            matches!(&err, Error::ScriptFormat { detail, .. } if detail.contains(needle)),
            "case {i}: {err:?}"
        );
    }
    let missing = dir.path().join("missing.jsonl");
    let err = airlock_model::ScriptedModel::open(&missing, &ModelConfig::default()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
}
