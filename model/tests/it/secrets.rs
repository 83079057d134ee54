//! The API key never reaches a cassette, an error message or a debug print.

use airlock_model::{ChatModel, ModelSpec, REDACTED, from_spec_with_env};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, ResponseTemplate};

use crate::support::{KEY_ENV, Server, TEST_KEY, config, env, simple_request};

#[test]
fn the_key_is_scrubbed_from_cassettes_and_errors() {
    for kind in ["openai", "anthropic"] {
        let server = Server::start();
        // A hostile or careless server echoes the key back, in a success and in an error.
        server.mount(
            Mock::given(method("POST"))
                .respond_with(ResponseTemplate::new(200).set_body_json(if kind == "openai" {
                    json!({"choices": [{"message": {"role": "assistant", "content": format!("your key is {TEST_KEY}")}, "finish_reason": "stop"}]})
                } else {
                    json!({"content": [{"type": "text", "text": format!("your key is {TEST_KEY}")}], "stop_reason": "end_turn"})
                }))
                .up_to_n_times(1),
        );
        server.mount(Mock::given(method("POST")).respond_with(
            ResponseTemplate::new(401).set_body_json(json!({
                "error": {"type": "authentication_error", "message": format!("Incorrect API key provided: {TEST_KEY}")}
            })),
        ));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let mut cfg = config(&server.base_url());
        cfg.record_cassette = Some(path.clone());
        cfg.extra_headers.insert(
            "x-gateway-token".to_string(),
            "gateway-secret-123".to_string(),
        );
        cfg.extra_headers
            .insert("x-forwarded-key".to_string(), TEST_KEY.to_string());
        cfg.extra_headers
            .insert("x-route".to_string(), "blue".to_string());
        let m = from_spec_with_env(&format!("{kind}:m"), &cfg, &env).unwrap();

        m.chat(&simple_request()).unwrap();
        let err = m.chat(&simple_request()).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains(TEST_KEY), "{text}");
        assert!(
            text.contains(&format!("Incorrect API key provided: {REDACTED}")),
            "{text}"
        );
        let debug = format!("{err:?}");
        assert!(!debug.contains(TEST_KEY), "{debug}");

        let cassette = std::fs::read_to_string(&path).unwrap();
        assert!(!cassette.contains(TEST_KEY), "{kind}: {cassette}");
        assert!(
            !cassette.contains("gateway-secret-123"),
            "{kind}: {cassette}"
        );
        assert!(
            cassette.contains("\"x-route\":\"blue\""),
            "{kind}: {cassette}"
        );
        let auth_header = if kind == "openai" {
            "authorization"
        } else {
            "x-api-key"
        };
        assert!(
            cassette.contains(&format!("\"{auth_header}\":\"{REDACTED}\"")),
            "{kind}: {cassette}"
        );

        // The server did receive the real key: scrubbing is on the record, not the wire.
        let received = server.requests();
        let sent = received[0]
            .headers
            .get(auth_header)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(sent.contains(TEST_KEY));
    }
}

#[test]
fn the_key_is_not_in_debug_output_or_connection_errors() {
    let port = crate::support::closed_port();
    let cfg = config(&format!("http://127.0.0.1:{port}/v1"));
    let m = airlock_model::HttpModel::with_env(&ModelSpec::parse("openai:m").unwrap(), &cfg, &env)
        .unwrap();
    let debug = format!("{m:?}");
    assert!(!debug.contains(TEST_KEY), "{debug}");
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(!format!("{err} {err:?}").contains(TEST_KEY));
    let _ = KEY_ENV;
}
