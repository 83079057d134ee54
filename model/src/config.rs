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
/// prompt_cache = true                    # cache breakpoints in Anthropic requests
/// [prices."gpt-4o"]
/// input_per_mtok_usd = 2.5
/// output_per_mtok_usd = 10.0
/// cache_read_per_mtok_usd = 1.25          # optional; defaults per provider
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
    /// Whether Anthropic requests carry `cache_control` breakpoints (on the stable prefix and
    /// the moving end of the conversation). OpenAI caches prefixes on its own either way.
    pub prompt_cache: bool,
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
            prompt_cache: true,
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

    /// The cost in US dollars of `usage` on `model`, when its price is configured; cached
    /// tokens without a configured price are billed at the provider's `rates`.
    pub fn cost_usd(&self, model: &str, usage: &Usage, rates: CacheRates) -> Option<f64> {
        self.prices.get(model).map(|p| p.cost_usd(usage, rates))
    }
}

/// What a provider bills for cached prompt tokens, as multiples of its input price: the
/// default for a [`ModelPrice`] that names no cache prices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheRates {
    /// A token read from the cache.
    pub read: f64,
    /// A token written to the cache.
    pub write: f64,
}

impl CacheRates {
    /// Anthropic: a cache read costs a tenth of the input price, a (five-minute) cache write
    /// a quarter more than it.
    pub const ANTHROPIC: CacheRates = CacheRates {
        read: 0.1,
        write: 1.25,
    };
    /// OpenAI: a cached prompt token costs half the input price (the gpt-4o family; newer
    /// models discount more: configure their price), and writing the cache is free.
    pub const OPENAI: CacheRates = CacheRates {
        read: 0.5,
        write: 1.0,
    };
    /// No discount and no surcharge (scripted models, which have no provider).
    pub const UNDISCOUNTED: CacheRates = CacheRates {
        read: 1.0,
        write: 1.0,
    };
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
    /// Price of a million input tokens read from the prompt cache; when absent, the input
    /// price times the provider's [`CacheRates::read`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok_usd: Option<f64>,
    /// Price of a million input tokens written to the prompt cache; when absent, the input
    /// price times the provider's [`CacheRates::write`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok_usd: Option<f64>,
}

impl ModelPrice {
    /// Input and output prices, cache prices left to the provider's defaults.
    pub fn new(input_per_mtok_usd: f64, output_per_mtok_usd: f64) -> Self {
        ModelPrice {
            input_per_mtok_usd,
            output_per_mtok_usd,
            cache_read_per_mtok_usd: None,
            cache_write_per_mtok_usd: None,
        }
    }

    /// The cost of `usage` at this price, cached tokens at their own prices (`rates` where
    /// none is configured).
    pub fn cost_usd(&self, usage: &Usage, rates: CacheRates) -> f64 {
        let read = self
            .cache_read_per_mtok_usd
            .unwrap_or(self.input_per_mtok_usd * rates.read);
        let write = self
            .cache_write_per_mtok_usd
            .unwrap_or(self.input_per_mtok_usd * rates.write);
        (usage.uncached_input_tokens() as f64 * self.input_per_mtok_usd
            + usage.cache_read_tokens as f64 * read
            + usage.cache_write_tokens as f64 * write
            + usage.output_tokens as f64 * self.output_per_mtok_usd)
            / 1_000_000.0
    }
}
