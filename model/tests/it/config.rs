//! `ModelConfig` from TOML and JSON.

use airlock_model::{BudgetLimits, ModelConfig, ModelPrice, RetryConfig};

#[test]
fn toml_with_every_section() {
    let cfg = ModelConfig::from_toml_str(
        r#"
api_key_env = "MY_KEY"
base_url = "http://127.0.0.1:8000/v1"
timeout_ms = 1000
temperature = 0
extra_headers = { "x-team" = "airlock" }
[retry]
max_retries = 1
base_delay_ms = 10
[budget]
max_calls = 50
max_cost_usd = 2.5
[prices."gpt-4o"]
input_per_mtok_usd = 2.5
output_per_mtok_usd = 10.0
"#,
    )
    .unwrap();
    assert_eq!(cfg.api_key_env.as_deref(), Some("MY_KEY"));
    assert_eq!(cfg.timeout_ms, 1000);
    assert_eq!(cfg.temperature, Some(0.0));
    assert_eq!(
        cfg.connect_timeout_ms,
        ModelConfig::default().connect_timeout_ms
    );
    assert_eq!(
        cfg.retry,
        RetryConfig {
            max_retries: 1,
            base_delay_ms: 10,
            max_delay_ms: RetryConfig::default().max_delay_ms
        }
    );
    assert_eq!(
        cfg.budget,
        BudgetLimits {
            max_calls: Some(50),
            max_tokens: None,
            max_cost_usd: Some(2.5)
        }
    );
    assert_eq!(
        cfg.prices["gpt-4o"],
        ModelPrice {
            input_per_mtok_usd: 2.5,
            output_per_mtok_usd: 10.0,
            cache_read_per_mtok_usd: None,
            cache_write_per_mtok_usd: None,
        }
    );
    assert_eq!(cfg.extra_headers["x-team"], "airlock");
}

#[test]
fn empty_config_is_the_default_and_unknown_fields_are_refused() {
    assert_eq!(
        ModelConfig::from_toml_str("").unwrap(),
        ModelConfig::default()
    );
    assert_eq!(
        ModelConfig::from_json_str("{}").unwrap(),
        ModelConfig::default()
    );
    let err = ModelConfig::from_toml_str("api_key = \"sk-123\"").unwrap_err();
    assert!(err.to_string().contains("unknown field `api_key`"), "{err}");
    let json = serde_json::to_string(&ModelConfig::default()).unwrap();
    assert_eq!(
        ModelConfig::from_json_str(&json).unwrap(),
        ModelConfig::default()
    );
}
