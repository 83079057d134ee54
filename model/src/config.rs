//! Operator configuration for model adapters, deserialisable from TOML or JSON (the supervisor
//! embeds it in `airlock.toml` under its own table). Holds the *name* of the environment
//! variable with the API key, never the key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// How adapters connect, retry, price and record.
///
/// Every field has a default, so an empty table is a valid configuration:
///
/// ```toml
/// api_key_env = "OPENAI_API_KEY"      # optional; defaults per provider
/// base_url = "https://api.openai.com/v1"  # optional; defaults per provider
/// timeout_ms = 120000
/// connect_timeout_ms = 10000
/// extra_headers = { "OpenAI-Organization" = "org-123" }
/// record_cassette = "run.cassette.jsonl"  # optional
/// temperature = 0.0                       # optional default for requests without one
/// [retry]
/// max_retries = 4
/// base_delay_ms = 500
/// max_delay_ms = 30000
/// [budget]
/// max_calls = 200
/// max_tokens = 2000000
/// max_cost_usd = 5.0
/// [prices."gpt-4o"]
/// input_per_mtok_usd = 2.5
/// output_per_mtok_usd = 10.0
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Name of the environment variable holding the API key. Defaults: `OPENAI_API_KEY` for
    /// `openai:`, `ANTHROPIC_API_KEY` for `anthropic:`, none for `ollama:` and
    /// `openai-compatible:` (set it when the server wants a key).
    pub api_key_env: Option<String>,
    /// Overrides the provider's base URL (for `openai:`, `anthropic:`, `ollama:`; the URL in an
    /// `openai-compatible:` spec wins over this).
    pub base_url: Option<String>,
    /// Per-attempt timeout for a whole HTTP exchange, in milliseconds.
    pub timeout_ms: u64,
    /// Timeout for establishing a connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Extra headers sent with every request (for gateways). Names containing `auth`, `key`,
    /// `token`, `secret` or `cookie` are scrubbed from cassettes.
    pub extra_headers: BTreeMap<String, String>,
    /// Retry policy for transient failures.
    pub retry: RetryConfig,
    /// Per-run limits; see [`crate::Budget`].
    pub budget: BudgetLimits,
    /// Prices per model name, for cost accounting.
    pub prices: BTreeMap<String, ModelPrice>,
    /// Value of the `anthropic-version` header.
    pub anthropic_version: String,
    /// When set, HTTP adapters append every exchange to this cassette (JSONL).
    pub record_cassette: Option<PathBuf>,
    /// Sampling temperature for requests that do not set one (HTTP and replay models).
    pub temperature: Option<f32>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            api_key_env: None,
            base_url: None,
            timeout_ms: 120_000,
            connect_timeout_ms: 10_000,
            extra_headers: BTreeMap::new(),
            retry: RetryConfig::default(),
            budget: BudgetLimits::default(),
            prices: BTreeMap::new(),
            anthropic_version: "2023-06-01".to_string(),
            record_cassette: None,
            temperature: None,
        }
    }
}

impl ModelConfig {
    /// Parses a configuration from TOML text.
    pub fn from_toml_str(text: &str) -> crate::Result<Self> {
        toml::from_str(text).map_err(|e| crate::Error::Config(e.to_string()))
    }

    /// Parses a configuration from JSON text.
    pub fn from_json_str(text: &str) -> crate::Result<Self> {
        serde_json::from_str(text).map_err(|e| crate::Error::Config(e.to_string()))
    }

    /// The cost in US dollars of `usage` on `model`, when its price is configured.
    pub fn cost_usd(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.prices.get(model).map(|p| p.cost_usd(usage))
    }
}

/// Retry policy: exponential backoff with jitter on 429, 5xx and connection failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Retries after the first attempt (so `max_retries + 1` requests at most).
    pub max_retries: u32,
    /// Backoff before retry `n` (1-based) is `base_delay_ms * 2^(n-1)`, jittered to between
    /// half and all of that, capped at `max_delay_ms`.
    pub base_delay_ms: u64,
    /// Cap on any single sleep, including one asked for by `Retry-After`.
    pub max_delay_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 4,
            base_delay_ms: 500,
            max_delay_ms: 30_000,
        }
    }
}

/// Per-run limits on model use. `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetLimits {
    /// Most chat calls in a run.
    pub max_calls: Option<u64>,
    /// Most tokens (input plus output, summed over calls) in a run.
    pub max_tokens: Option<u64>,
    /// Most spend in US dollars in a run (only calls with a configured price count).
    pub max_cost_usd: Option<f64>,
}

/// What a model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Price of a million input tokens.
    pub input_per_mtok_usd: f64,
    /// Price of a million output tokens.
    pub output_per_mtok_usd: f64,
}

impl ModelPrice {
    /// The cost of `usage` at this price.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_mtok_usd
            + usage.output_tokens as f64 * self.output_per_mtok_usd)
            / 1_000_000.0
    }
}
