//! What a run's model calls (the supervisor's and its readers') used and cost.

/// What a run's model calls (the supervisor's and its readers') used and cost: `outcome.json`'s
/// `model_usage`, the trajectory's `model_usage` entry and the last lines of `airlock run`.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ModelUsage {
    /// Model calls made.
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Of the prompt tokens, those read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Of the prompt tokens, those written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Dollars spent on calls whose model has a configured price, cached tokens at their own
    /// prices.
    pub cost_usd: f64,
    /// Calls whose model has no configured price (their cost is not in `cost_usd`).
    pub unpriced_calls: u64,
}

impl From<&airlock_model::RunTotals> for ModelUsage {
    fn from(t: &airlock_model::RunTotals) -> Self {
        ModelUsage {
            calls: t.calls,
            input_tokens: t.usage.input_tokens,
            cache_read_tokens: t.usage.cache_read_tokens,
            cache_write_tokens: t.usage.cache_write_tokens,
            output_tokens: t.usage.output_tokens,
            cost_usd: t.cost_usd,
            unpriced_calls: t.unpriced_calls,
        }
    }
}
