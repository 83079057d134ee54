//! Per-run metering: how many calls, tokens and dollars a run has spent, shared by every model
//! the run uses, and refusal of calls past the limits.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::{BudgetLimits, ChatModel, ChatRequest, ChatResponse, Error, Result, StopReason, Usage};

/// One metered call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The model's [`ChatModel::name`].
    pub model: String,
    /// Tokens billed.
    pub usage: Usage,
    /// Cost, when priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
}

/// Sums over a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunTotals {
    /// Calls made.
    pub calls: u64,
    /// Tokens, summed: input (cached read and written among them) and output.
    pub usage: Usage,
    /// Spend over priced calls, cached tokens at their own prices.
    pub cost_usd: f64,
    /// Calls whose model had no configured price (their cost is not in `cost_usd`).
    pub unpriced_calls: u64,
    /// The same sums per model name, sorted by name.
    pub per_model: BTreeMap<String, ModelTotals>,
}

/// Sums for one model within a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelTotals {
    /// Calls made.
    pub calls: u64,
    /// Tokens billed, summed.
    pub usage: Usage,
    /// Spend over priced calls.
    pub cost_usd: f64,
}

#[derive(Debug, Default)]
struct State {
    totals: RunTotals,
    records: Vec<CallRecord>,
}

/// A run's budget and meter. Cheap to clone; clones share the same counts, so the supervisor
/// and its reader workers can draw on one budget.
#[derive(Debug, Clone)]
pub struct Budget {
    limits: BudgetLimits,
    state: Arc<Mutex<State>>,
}

impl Budget {
    /// A budget with these limits and nothing spent.
    pub fn new(limits: BudgetLimits) -> Self {
        Budget {
            limits,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// A budget with these limits that has already spent `spent`: a parked run that is
    /// resumed keeps counting from where it stopped.
    pub fn with_spent(limits: BudgetLimits, spent: RunTotals) -> Self {
        Budget {
            limits,
            state: Arc::new(Mutex::new(State {
                totals: spent,
                records: Vec::new(),
            })),
        }
    }

    /// A budget that only meters.
    pub fn unlimited() -> Self {
        Budget::new(BudgetLimits::default())
    }

    /// The limits.
    pub fn limits(&self) -> &BudgetLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves counts that are still meaningful.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails with [`Error::BudgetExhausted`] when another call would exceed a limit.
    pub fn check(&self) -> Result<()> {
        let state = self.lock();
        let t = &state.totals;
        if let Some(max) = self.limits.max_calls
            && t.calls >= max
        {
            return Err(Error::BudgetExhausted {
                resource: "calls",
                used: t.calls.to_string(),
                limit: max.to_string(),
            });
        }
        if let Some(max) = self.limits.max_tokens
            && t.usage.total() >= max
        {
            return Err(Error::BudgetExhausted {
                resource: "tokens",
                used: t.usage.total().to_string(),
                limit: max.to_string(),
            });
        }
        if let Some(max) = self.limits.max_cost_usd
            && t.cost_usd >= max
        {
            return Err(Error::BudgetExhausted {
                resource: "cost_usd",
                used: format!("{:.6}", t.cost_usd),
                limit: format!("{max:.6}"),
            });
        }
        Ok(())
    }

    /// Adds a finished call to the meter.
    pub fn record(&self, model: &str, response: &ChatResponse) {
        let mut state = self.lock();
        let t = &mut state.totals;
        t.calls += 1;
        t.usage = t.usage.plus(&response.usage);
        match response.cost_usd {
            Some(c) => t.cost_usd += c,
            None => t.unpriced_calls += 1,
        }
        let m = t.per_model.entry(model.to_string()).or_default();
        m.calls += 1;
        m.usage = m.usage.plus(&response.usage);
        m.cost_usd += response.cost_usd.unwrap_or(0.0);
        state.records.push(CallRecord {
            model: model.to_string(),
            usage: response.usage,
            cost_usd: response.cost_usd,
            stop_reason: response.stop_reason.clone(),
        });
    }

    /// The run's sums so far.
    pub fn totals(&self) -> RunTotals {
        self.lock().totals.clone()
    }

    /// Every call metered so far, in order.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.lock().records.clone()
    }
}

/// A model whose calls are checked against and recorded in a [`Budget`].
pub struct Metered<M: ChatModel + ?Sized = dyn ChatModel> {
    budget: Budget,
    inner: Box<M>,
}

impl<M: ChatModel + ?Sized> Metered<M> {
    /// Meters `inner` against `budget`.
    pub fn new(inner: Box<M>, budget: Budget) -> Self {
        Metered { budget, inner }
    }

    /// The budget this model draws on.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }
}

impl<M: ChatModel + ?Sized> ChatModel for Metered<M> {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse> {
        self.budget.check()?;
        let response = self.inner.chat(req)?;
        self.budget.record(self.inner.name(), &response);
        Ok(response)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn finish(&self) -> Result<()> {
        self.inner.finish()
    }
}
