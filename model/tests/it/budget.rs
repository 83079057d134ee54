//! Per-run budgets and accounting, shared across models.

use airlock_model::{
    Budget, BudgetLimits, ChatModel, Error, Metered, ModelConfig, ModelPrice, ScriptedModel,
};

use crate::support::simple_request;

fn scripted(
    dir: &tempfile::TempDir,
    name: &str,
    turns: usize,
    config: &ModelConfig,
) -> Box<dyn ChatModel> {
    let path = dir.path().join(name);
    let line = "{\"text\": \"ok\", \"usage\": {\"input_tokens\": 1000, \"output_tokens\": 100}}\n";
    std::fs::write(&path, line.repeat(turns)).unwrap();
    Box::new(ScriptedModel::open(&path, config).unwrap())
}

#[test]
fn call_budget_is_shared_between_models() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(BudgetLimits {
        max_calls: Some(3),
        ..BudgetLimits::default()
    });
    let cfg = ModelConfig::default();
    let a = Metered::new(scripted(&dir, "a.jsonl", 5, &cfg), budget.clone());
    let b = Metered::new(scripted(&dir, "b.jsonl", 5, &cfg), budget.clone());
    a.chat(&simple_request()).unwrap();
    b.chat(&simple_request()).unwrap();
    a.chat(&simple_request()).unwrap();
    let err = b.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::BudgetExhausted {
                resource: "calls",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("used 3 of 3"), "{err}");
    let totals = budget.totals();
    assert_eq!(totals.calls, 3);
    assert_eq!(totals.usage.input_tokens, 3000);
    assert_eq!(totals.per_model.len(), 2);
    assert_eq!(budget.calls().len(), 3);
}

#[test]
fn token_and_cost_budgets_and_accounting() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ModelConfig::default();
    cfg.prices
        .insert("scripted".to_string(), ModelPrice::new(3.0, 15.0));
    let budget = Budget::new(BudgetLimits {
        max_tokens: Some(2000),
        ..BudgetLimits::default()
    });
    let m = Metered::new(scripted(&dir, "t.jsonl", 5, &cfg), budget.clone());
    let r = m.chat(&simple_request()).unwrap();
    let expected = (1000.0 * 3.0 + 100.0 * 15.0) / 1e6;
    assert!((r.cost_usd.unwrap() - expected).abs() < 1e-12);
    m.chat(&simple_request()).unwrap();
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::BudgetExhausted {
                resource: "tokens",
                ..
            }
        ),
        "{err:?}"
    );
    let totals = budget.totals();
    assert_eq!(totals.usage.total(), 2200);
    assert!((totals.cost_usd - 2.0 * expected).abs() < 1e-12);
    assert_eq!(totals.unpriced_calls, 0);

    let cost_budget = Budget::new(BudgetLimits {
        max_cost_usd: Some(0.005),
        ..BudgetLimits::default()
    });
    let m = Metered::new(scripted(&dir, "c.jsonl", 5, &cfg), cost_budget.clone());
    // The limit is checked before each call: 0.0045 spent is under 0.005, so a second call
    // runs; at 0.009 the third is refused.
    m.chat(&simple_request()).unwrap();
    m.chat(&simple_request()).unwrap();
    let err = m.chat(&simple_request()).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::BudgetExhausted {
                resource: "cost_usd",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn unpriced_calls_are_counted_not_guessed() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::unlimited();
    let m = Metered::new(
        scripted(&dir, "u.jsonl", 2, &ModelConfig::default()),
        budget.clone(),
    );
    let r = m.chat(&simple_request()).unwrap();
    assert_eq!(r.cost_usd, None);
    let totals = budget.totals();
    assert_eq!(totals.unpriced_calls, 1);
    assert_eq!(totals.cost_usd, 0.0);
}
