//! The factory that turns a model spec string into a [`ChatModel`]: the top of the crate, the
//! one place that knows every kind of model (`http`, `cassette`'s replay, `scripted`).

use crate::cassette::ReplayModel;
use crate::http::HttpModel;
use crate::scripted::ScriptedModel;
use crate::spec::ModelSpec;
use crate::{ChatModel, ModelConfig, Result};

/// Checks what can be checked of a spec before anything else runs, calling no model: it parses,
/// the API key variable its kind reads is set, and a script or cassette reads as one. The
/// parsed spec on success; the same errors [`from_spec`] would give.
pub fn check_spec(spec: &str, config: &ModelConfig) -> Result<ModelSpec> {
    check_spec_with_env(spec, config, &|var| std::env::var(var).ok())
}

/// As [`check_spec`], looking environment variables up with `env`.
pub fn check_spec_with_env(
    spec: &str,
    config: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelSpec> {
    let parsed = ModelSpec::parse(spec)?;
    match &parsed {
        ModelSpec::Scripted { path } => {
            ScriptedModel::open(path, config)?;
        }
        // Read, not opened as a model: a replay dropped unplayed warns about its entries.
        ModelSpec::Replay { path } => {
            crate::cassette::read_cassette(path)?;
        }
        _ => {
            HttpModel::with_env(&parsed, config, env)?;
        }
    }
    Ok(parsed)
}

/// Builds the model a spec names. HTTP adapters read their API key now (failing early if the
/// variable is missing) and record to `config.record_cassette` when it is set. The result is
/// not metered: wrap it in [`crate::Metered`] with the run's [`crate::Budget`].
pub fn from_spec(spec: &str, config: &ModelConfig) -> Result<Box<dyn ChatModel>> {
    from_spec_with_env(spec, config, &|var| std::env::var(var).ok())
}

/// As [`from_spec`], looking environment variables (the API key) up with `env`.
pub fn from_spec_with_env(
    spec: &str,
    config: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn ChatModel>> {
    let parsed = ModelSpec::parse(spec)?;
    Ok(match &parsed {
        ModelSpec::Scripted { path } => Box::new(ScriptedModel::open(path, config)?),
        ModelSpec::Replay { path } => Box::new(ReplayModel::open(path, config)?),
        _ => Box::new(HttpModel::with_env(&parsed, config, env)?),
    })
}
