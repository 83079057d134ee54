//! Prompt caching: Anthropic's `cache_control` breakpoints, the cached token counts both
//! providers report, and what cached tokens cost.

use airlock_model::{
    Budget, ChatModel, ChatOptions, ChatRequest, Message, Metered, ModelPrice, ToolCall, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::support::{Server, config, model, search_tool};

fn anthropic_reply(usage: Value) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn", "usage": usage,
    })
}

fn serve_anthropic(usage: Value) -> Server {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(ResponseTemplate::new(200).set_body_json(anthropic_reply(usage))),
    );
    server
}

/// A conversation of `turns` tool turns after a system prompt and a warm start, each turn
/// answering with `parallel` tool results.
fn conversation(turns: usize, parallel: usize) -> ChatRequest {
    let mut messages = vec![
        Message::system("You fix bugs."),
        Message::user("warm start: the repository map and the issue"),
    ];
    for t in 0..turns {
        let calls: Vec<ToolCall> = (0..parallel)
            .map(|i| ToolCall::new(format!("t{t}_{i}"), "search_repo", json!({"query": "q"})))
            .collect();
        messages.push(Message::Assistant(airlock_model::AssistantMessage {
            text: String::new(),
            tool_calls: calls.clone(),
        }));
        for c in &calls {
            messages.push(Message::tool_result(
                &c.id,
                format!("result of {}", c.id),
                false,
            ));
        }
    }
    ChatRequest {
        messages,
        tools: vec![search_tool()],
        options: ChatOptions {
            stable_prefix: 2,
            ..ChatOptions::default()
        },
    }
}

/// `v` serialised without its `cache_control` marks.
fn unmarked(v: &Value) -> String {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("cache_control");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = v.clone();
    strip(&mut v);
    v.to_string()
}

/// Where the body's breakpoints are: `system`, `tools/N` or `messages/T/B`.
fn breakpoints(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(blocks) = body["system"].as_array() {
        for (i, b) in blocks.iter().enumerate() {
            if b.get("cache_control").is_some() {
                found.push(format!("system/{i}"));
            }
        }
    }
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if t.get("cache_control").is_some() {
            found.push(format!("tools/{i}"));
        }
    }
    for (t, turn) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in turn["content"].as_array().into_iter().flatten().enumerate() {
            if let Some(mark) = block.get("cache_control") {
                assert_eq!(mark, &json!({"type": "ephemeral"}));
                found.push(format!("messages/{t}/{b}"));
            }
        }
    }
    found
}

#[test]
fn breakpoints_mark_the_stable_prefix_the_previous_end_and_the_moving_end() {
    let server = serve_anthropic(json!({"input_tokens": 10, "output_tokens": 1}));
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    // Five parallel results in the last turn: the previous request's end is more blocks back
    // than a look-back would have to search, so it gets a mark of its own.
    m.chat(&conversation(3, 5)).unwrap();
    let body = &server.bodies()[0];
    assert_eq!(
        breakpoints(body),
        vec![
            "system/0",
            // The warm start (turn 0), the end of the previous request (turn 4: the results of
            // the second tool turn), the last result.
            "messages/0/0",
            "messages/4/4",
            "messages/6/4",
        ]
    );
    assert_eq!(body["system"][0]["text"], "You fix bugs.");
}

#[test]
fn never_more_than_four_breakpoints_and_none_repeated() {
    let server = serve_anthropic(json!({"input_tokens": 10, "output_tokens": 1}));
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    for (turns, parallel) in [(0, 1), (1, 1), (2, 3), (30, 2)] {
        m.chat(&conversation(turns, parallel)).unwrap();
    }
    let mut no_system = conversation(2, 1);
    no_system.messages.remove(0);
    no_system.options.stable_prefix = 1;
    m.chat(&no_system).unwrap();
    let bodies = server.bodies();
    for body in &bodies {
        let marks = breakpoints(body);
        assert!(!marks.is_empty() && marks.len() <= 4, "{marks:?}");
        let mut unique = marks.clone();
        unique.dedup();
        assert_eq!(unique, marks);
    }
    // The first turn: the warm start is both the stable prefix and the moving end.
    assert_eq!(breakpoints(&bodies[0]), vec!["system/0", "messages/0/0"]);
    // Without a system prompt the tools end the stable prefix.
    assert_eq!(
        breakpoints(&bodies[4]),
        vec!["tools/0", "messages/0/0", "messages/2/0", "messages/4/0"]
    );
}

#[test]
fn a_growing_conversation_keeps_its_bytes_up_to_the_previous_breakpoint() {
    let server = serve_anthropic(json!({"input_tokens": 10, "output_tokens": 1}));
    let m = model("anthropic:claude-test", &config(&server.base_url()));
    m.chat(&conversation(2, 2)).unwrap();
    m.chat(&conversation(3, 2)).unwrap();
    let bodies = server.bodies();
    // The previous request's last block is marked again in this one, where this request
    // reads the entry the previous one wrote; the marks are not part of the cached content,
    // and the content up to there is byte for byte the same.
    let last = bodies[0]["messages"].as_array().unwrap().len() - 1;
    let end = format!("messages/{last}/1");
    assert!(breakpoints(&bodies[0]).contains(&end));
    assert!(breakpoints(&bodies[1]).contains(&end));
    let (before, after) = (&bodies[0]["messages"], &bodies[1]["messages"]);
    for (t, turn) in before.as_array().unwrap().iter().enumerate() {
        assert_eq!(unmarked(turn), unmarked(&after[t]), "turn {t}");
    }
    assert_eq!(bodies[0]["system"], bodies[1]["system"]);
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"]);
}

#[test]
fn prompt_cache_off_sends_the_plain_shape() {
    let server = serve_anthropic(json!({"input_tokens": 10, "output_tokens": 1}));
    let mut cfg = config(&server.base_url());
    cfg.prompt_cache = false;
    let m = model("anthropic:claude-test", &cfg);
    m.chat(&conversation(3, 2)).unwrap();
    let body = &server.bodies()[0];
    assert_eq!(body["system"], json!("You fix bugs."));
    assert!(!body.to_string().contains("cache_control"), "{body}");
}

#[test]
fn anthropic_cache_counts_are_read_and_priced_at_the_provider_rates() {
    let server = serve_anthropic(json!({
        "input_tokens": 100,
        "cache_creation_input_tokens": 2_000,
        "cache_read_input_tokens": 10_000,
        "output_tokens": 50,
    }));
    let mut cfg = config(&server.base_url());
    cfg.prices
        .insert("claude-test".to_string(), ModelPrice::new(3.0, 15.0));
    let budget = Budget::unlimited();
    let m = Metered::new(
        Box::new(model("anthropic:claude-test", &cfg)) as Box<dyn ChatModel>,
        budget.clone(),
    );
    let r = m.chat(&conversation(1, 1)).unwrap();
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 12_100,
            output_tokens: 50,
            cache_read_tokens: 10_000,
            cache_write_tokens: 2_000,
        }
    );
    assert_eq!(r.usage.uncached_input_tokens(), 100);
    // Reads at a tenth of the input price, writes at a quarter more.
    let expected = (100.0 * 3.0 + 10_000.0 * 0.3 + 2_000.0 * 3.75 + 50.0 * 15.0) / 1e6;
    let cost = r.cost_usd.unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");

    m.chat(&conversation(1, 1)).unwrap();
    let totals = budget.totals();
    assert_eq!(totals.usage.cache_read_tokens, 20_000);
    assert_eq!(totals.usage.cache_write_tokens, 4_000);
    assert_eq!(totals.usage.input_tokens, 24_200);
    assert!((totals.cost_usd - 2.0 * expected).abs() < 1e-12);
    let per_model = &totals.per_model["anthropic:claude-test"];
    assert_eq!(per_model.usage.cache_read_tokens, 20_000);
}

#[test]
fn configured_cache_prices_win_over_the_provider_rates() {
    let server = serve_anthropic(json!({
        "input_tokens": 0,
        "cache_creation_input_tokens": 1_000_000,
        "cache_read_input_tokens": 1_000_000,
        "output_tokens": 0,
    }));
    let mut cfg = config(&server.base_url());
    cfg.prices.insert(
        "claude-test".to_string(),
        ModelPrice {
            input_per_mtok_usd: 3.0,
            output_per_mtok_usd: 15.0,
            cache_read_per_mtok_usd: Some(0.5),
            cache_write_per_mtok_usd: Some(6.0),
        },
    );
    let m = model("anthropic:claude-test", &cfg);
    let cost = m.chat(&conversation(0, 1)).unwrap().cost_usd.unwrap();
    assert!((cost - 6.5).abs() < 1e-9, "{cost}");
}

#[test]
fn openai_cached_tokens_are_read_and_priced_at_half() {
    let server = Server::start();
    server.mount(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "id": "c1", "object": "chat.completion", "model": "gpt-test",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 2_000, "completion_tokens": 10, "total_tokens": 2_010,
                          "prompt_tokens_details": {"cached_tokens": 1_536}},
            }))),
    );
    let mut cfg = config(&server.base_url());
    cfg.prices
        .insert("gpt-test".to_string(), ModelPrice::new(2.0, 8.0));
    let m = model("openai:gpt-test", &cfg);
    let r = m.chat(&conversation(1, 1)).unwrap();
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 2_000,
            output_tokens: 10,
            cache_read_tokens: 1_536,
            cache_write_tokens: 0,
        }
    );
    let expected = (464.0 * 2.0 + 1_536.0 * 1.0 + 10.0 * 8.0) / 1e6;
    let cost = r.cost_usd.unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    // OpenAI caches on its own: nothing is added to the request.
    assert!(!server.bodies()[0].to_string().contains("cache_control"));
}

#[test]
fn old_records_without_cache_fields_still_parse() {
    let usage: Usage = serde_json::from_str(r#"{"input_tokens": 5, "output_tokens": 2}"#).unwrap();
    assert_eq!(usage, Usage::new(5, 2));
    let price: ModelPrice =
        serde_json::from_str(r#"{"input_per_mtok_usd": 1.0, "output_per_mtok_usd": 2.0}"#).unwrap();
    assert_eq!(price, ModelPrice::new(1.0, 2.0));
}
