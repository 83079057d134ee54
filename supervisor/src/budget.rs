//! The budgets a run can run out of and be parked on, with how `airlock.toml` and
//! `airlock resume` name each.

use serde::{Deserialize, Serialize};

/// The budget that stopped a parked run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParkedOn {
    /// `[budgets] max_turns`.
    MaxTurns,
    /// `[budgets] max_full_runs`.
    MaxFullRuns,
    /// The model's `max_calls`.
    ModelCalls,
    /// The model's `max_tokens`.
    ModelTokens,
    /// The model's `max_cost_usd`.
    ModelCost,
}

impl ParkedOn {
    /// The model budget's resource (`calls`, `tokens`, `cost_usd`, as
    /// [`airlock_model::Error::BudgetExhausted`] names it).
    pub fn from_model_resource(resource: &str) -> ParkedOn {
        match resource {
            "calls" => ParkedOn::ModelCalls,
            "tokens" => ParkedOn::ModelTokens,
            _ => ParkedOn::ModelCost,
        }
    }

    /// Whether the model's own budget stopped the run (no closing call is possible then).
    pub fn is_model_budget(self) -> bool {
        matches!(
            self,
            ParkedOn::ModelCalls | ParkedOn::ModelTokens | ParkedOn::ModelCost
        )
    }

    /// The budget's name, as `airlock.toml` spells it.
    pub fn label(self) -> &'static str {
        match self {
            ParkedOn::MaxTurns => "max_turns",
            ParkedOn::MaxFullRuns => "max_full_runs",
            ParkedOn::ModelCalls => "the model's max_calls",
            ParkedOn::ModelTokens => "the model's max_tokens",
            ParkedOn::ModelCost => "the model's max_cost_usd",
        }
    }

    /// The `airlock resume` flag that raises it.
    pub fn flag(self) -> &'static str {
        match self {
            ParkedOn::MaxTurns => "--add-turns N",
            ParkedOn::MaxFullRuns => "--add-full-runs N",
            ParkedOn::ModelCalls => "--add-calls N",
            ParkedOn::ModelTokens => "--add-tokens N",
            ParkedOn::ModelCost => "--add-usd X",
        }
    }
}
