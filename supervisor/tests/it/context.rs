//! What a run costs: the requests an Anthropic model is sent keep their prefix from turn to
//! turn (so the prompt cache serves it), `outcome.json` says what was cached and what it cost,
//! and old tool results are condensed in what the model is sent while the trajectory keeps them.

use crate::fixture::*;
use airlock_testkit::mockmodel::{MockModel, unmarked};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `airlock.toml` for a run against `mock` as `anthropic:claude-test`, priced, with `extra`
/// appended.
fn anthropic_config(fx: &Fixture, mock: &MockModel, extra: &str) -> PathBuf {
    let config = fx.config("max_turns = 12");
    let mut text = std::fs::read_to_string(&config).unwrap();
    // The key is any variable the test process has: the mock server ignores it, and setting
    // one would need `unsafe` in this edition.
    text.push_str(&format!(
        "\n[model]\nspec = \"anthropic:claude-test\"\n\
         [model.config]\nbase_url = \"{}\"\napi_key_env = \"CARGO_MANIFEST_DIR\"\n\
         [model.config.prices.claude-test]\ninput_per_mtok_usd = 3.0\noutput_per_mtok_usd = 15.0\n\
         {extra}\n",
        mock.base
    ));
    std::fs::write(&config, text).unwrap();
    config
}

fn run(fx: &Fixture, config: &Path) -> airlock_supervisor::runner::RunReport {
    let issue = fx.issue(ready_issue());
    fx.run(
        &issue,
        "anthropic:claude-test",
        config,
        &BrokerStub::default(),
    )
}

fn marks(v: &Value) -> usize {
    v.to_string().matches("\"cache_control\"").count()
}

pub fn turns_resend_a_byte_identical_prefix_and_the_run_reports_what_the_cache_saved() {
    let fx = Fixture::new();
    let mock = MockModel::start_anthropic(vec![
        call("search_repo", json!({"query": "add"})),
        call(
            "read_file",
            json!({"path": "calc/ops.py", "start_line": 1, "end_line": 10}),
        ),
        call("search_repo", json!({"query": "mul"})),
        final_turn(&outcome("escalate", 0.3)),
    ]);
    let config = anthropic_config(&fx, &mock, "");
    let report = run(&fx, &config);
    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 4);
    for (turn, body) in bodies.iter().enumerate() {
        // The system prompt (which covers the tools), the warm start, and at most two more.
        let n = marks(body);
        assert!((2..=4).contains(&n), "turn {}: {n} breakpoints", turn + 1);
        assert!(body["system"][0].get("cache_control").is_some());
        assert!(
            body["messages"][0]["content"][0]
                .get("cache_control")
                .is_some()
        );
    }
    for pair in bodies.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert_eq!(unmarked(&before["tools"]), unmarked(&after["tools"]));
        assert_eq!(unmarked(&before["system"]), unmarked(&after["system"]));
        // Everything the earlier request sent is, byte for byte, the start of the later one:
        // no clock, counter or budget left changed in between.
        let sent = before["messages"].as_array().unwrap();
        for (t, turn) in sent.iter().enumerate() {
            assert_eq!(unmarked(turn), unmarked(&after["messages"][t]), "turn {t}");
        }
        // And its last block is marked again where the later request reads it.
        let last = &sent[sent.len() - 1]["content"];
        let last_block = last.as_array().unwrap().len() - 1;
        assert!(
            after["messages"][sent.len() - 1]["content"][last_block]
                .get("cache_control")
                .is_some()
        );
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&report.outcome_path).unwrap()).unwrap();
    let usage = &doc["model_usage"];
    assert_eq!(usage["calls"], 4);
    let read = usage["cache_read_tokens"].as_u64().unwrap();
    let written = usage["cache_write_tokens"].as_u64().unwrap();
    let input = usage["input_tokens"].as_u64().unwrap();
    assert!(
        read > 0 && written > 0 && read + written <= input,
        "{usage}"
    );
    // Priced with the cached tokens at their own rates: less than every token at full price.
    let cost = usage["cost_usd"].as_f64().unwrap();
    let full = (input as f64 * 3.0 + usage["output_tokens"].as_f64().unwrap() * 15.0) / 1e6;
    assert!(cost > 0.0 && cost < full, "{cost} against {full}");
    assert_eq!(report.usage.cache_read_tokens, read);
    // The audit log's model calls carry the same figures, call by call, with their cost.
    let audit = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    let calls: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "model_call")
        .collect();
    assert_eq!(calls.len(), 4);
    let sum = |key: &str| -> u64 {
        calls
            .iter()
            .map(|c| c["payload"][key].as_u64().unwrap_or(0))
            .sum()
    };
    assert_eq!(sum("cache_read_tokens"), read);
    assert_eq!(sum("cache_write_tokens"), written);
    let logged: f64 = calls
        .iter()
        .map(|c| c["payload"]["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((logged - cost).abs() < 1e-9, "{logged} against {cost}");
}

pub fn old_results_are_condensed_for_the_model_and_kept_whole_in_the_trajectory() {
    let long: String = (1..=150)
        .map(|i| format!("def helper_{i}(value):\n    return value + {i}\n"))
        .collect();
    let fx = Fixture::with_files(&[("calc/helpers.py", long)]);
    let read = |start: u32| {
        call(
            "read_file",
            json!({"path": "calc/helpers.py", "start_line": start, "end_line": start + 99}),
        )
    };
    let mock = MockModel::start_anthropic(vec![
        read(1),
        read(101),
        read(201),
        call(
            "read_file",
            json!({"path": "calc/missing.py", "start_line": 1, "end_line": 5}),
        ),
        read(1),
        call("search_repo", json!({"query": "helper"})),
        final_turn(&outcome("escalate", 0.3)),
    ]);
    let config = anthropic_config(
        &fx,
        &mock,
        "[context]\ncondense_above_tokens = 2500\nkeep_recent_results = 2\n",
    );
    let report = run(&fx, &config);
    let bodies = mock.bodies();
    let last = bodies.last().unwrap().to_string();
    // The first read became a stub that says how to read it again; the error stayed whole.
    assert!(
        last.contains(r#"To see it again call read_file with path \"calc/helpers.py\", start_line 1, end_line 100."#),
        "{last}"
    );
    assert!(last.contains("calc/missing.py"), "the error result stays");
    // The last two results are whole: the second read of lines 1-100 and the search.
    assert!(last.contains("def helper_42(value)"));
    let entries = trajectory(&report);
    let condensed = kinds(&entries, "condensed");
    assert!(!condensed.is_empty());
    let first = &condensed[0];
    assert!(first["results"].as_u64().unwrap() >= 1);
    assert!(first["tokens_after"].as_u64() < first["tokens_before"].as_u64());
    // The trajectory has every result as the tool returned it.
    let results = kinds(&entries, "tool_result");
    assert!(
        results[0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("def helper_10(value)")
    );
    assert!(results.iter().all(|r| {
        !r["message"]["content"]
            .as_str()
            .unwrap()
            .starts_with("[elided")
    }));
    // Condensed in one block: once the prefix changed it stayed the same for the next request.
    let stubs: Vec<usize> = bodies
        .iter()
        .map(|b| b.to_string().matches("[elided").count())
        .collect();
    assert!(stubs.windows(2).all(|w| w[0] <= w[1]), "{stubs:?}");
}
