//! `[model]` and `[security_model]`: the model that drives the run, and the optional second
//! opinion on injection findings.

use super::{ConfigError, Result, seconds};
use airlock_policies::testrun::valid_env_name;
use serde::{Deserialize, Serialize};

/// `[model]`: which model drives the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Model spec (e.g. `scripted:/path/turns.jsonl`); `--model` overrides it.
    pub spec: Option<String>,
    /// Model-specific settings (`[model.config]`), typed when the file is read, so a typo in
    /// them is an error naming the file and line before anything is pinned.
    pub config: airlock_model::ModelConfig,
}

/// `[security_model]`: an optional second opinion on injection findings. An OpenAI-compatible
/// chat-completions endpoint (a local guard model served by Ollama or vLLM, or a hosted one) is
/// asked about flagged and borderline spans only, within a budget; its verdict is recorded
/// beside the rules' finding and never replaces it. The key, when the endpoint wants one, is
/// read from the variable `api_key_env` names: never written here, never logged.
///
/// ```toml
/// [security_model]
/// base_url = "http://127.0.0.1:11434/v1"
/// model = "llama-guard3"
/// api_key_env = "GUARD_API_KEY"   # optional
/// timeout = "30s"                 # per call; a call that takes longer is recorded as failed
/// max_calls = 20                  # per run
/// max_tokens = 40000              # per run, optional
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityModelConfig {
    /// The endpoint's base URL, up to `/v1` (requests go to `{base_url}/chat/completions`).
    pub base_url: String,
    /// The model name the endpoint serves.
    pub model: String,
    /// The environment variable holding the endpoint's API key; none is sent when absent. When
    /// named, it must be set.
    pub api_key_env: Option<String>,
    /// Per-call limit, in seconds (also written `timeout = "30s"`).
    #[serde(alias = "timeout", deserialize_with = "seconds")]
    pub timeout_secs: u64,
    /// Most calls in one run.
    pub max_calls: u64,
    /// Most tokens (prompt plus completion, summed) in one run; a call starts only while fewer
    /// have been used.
    pub max_tokens: Option<u64>,
}

impl Default for SecurityModelConfig {
    fn default() -> Self {
        SecurityModelConfig {
            base_url: String::new(),
            model: String::new(),
            api_key_env: None,
            timeout_secs: 30,
            max_calls: 20,
            max_tokens: None,
        }
    }
}

impl SecurityModelConfig {
    /// The endpoint, model and key variable are well formed and every limit is at least 1.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        let url = self.base_url.trim();
        if url.is_empty() {
            return Err(invalid(
                "security_model.base_url",
                "is required: the endpoint's OpenAI-compatible base URL, e.g. \
                 http://127.0.0.1:11434/v1 (or remove [security_model])",
            ));
        }
        if !(url.starts_with("https://") || url.starts_with("http://"))
            || url.contains(['@', '?', '#'])
            || url.chars().any(char::is_whitespace)
        {
            return Err(invalid(
                "security_model.base_url",
                "must be an http(s) URL without credentials, query or fragment, e.g. \
                 http://127.0.0.1:11434/v1 (a key goes in the variable api_key_env names)",
            ));
        }
        if self.model.trim().is_empty() || self.model.chars().any(char::is_whitespace) {
            return Err(invalid(
                "security_model.model",
                "is required: the model name the endpoint serves, e.g. llama-guard3",
            ));
        }
        if let Some(var) = &self.api_key_env
            && !valid_env_name(var)
        {
            return Err(invalid(
                "security_model.api_key_env",
                "must name an environment variable (letters, digits and `_`), not hold a key",
            ));
        }
        if self.timeout_secs == 0 {
            return Err(invalid("security_model.timeout_secs", "must be at least 1"));
        }
        if self.max_calls == 0 {
            return Err(invalid(
                "security_model.max_calls",
                "must be at least 1 (remove [security_model] to ask no security model)",
            ));
        }
        if self.max_tokens == Some(0) {
            return Err(invalid(
                "security_model.max_tokens",
                "must be at least 1 (omit it for no token limit)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn the_security_model_section_is_optional_and_checked_by_key() {
        let c = Config::parse("", Path::new("a.toml")).unwrap();
        assert_eq!(c.security_model, None);
        let c = Config::parse(
            "[security_model]\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama-guard3\"\napi_key_env = \"GUARD_KEY\"\ntimeout = \"5s\"\nmax_calls = 3\nmax_tokens = 900\n",
            Path::new("a.toml"),
        )
        .unwrap();
        let s = c.security_model.unwrap();
        assert_eq!(
            (s.timeout_secs, s.max_calls, s.max_tokens),
            (5, 3, Some(900))
        );
        assert_eq!(s.api_key_env.as_deref(), Some("GUARD_KEY"));
        let ok = "base_url = \"http://127.0.0.1:1/v1\"\nmodel = \"guard\"\n";
        for (text, key, hint) in [
            (
                "model = \"guard\"",
                "security_model.base_url",
                "is required",
            ),
            (
                "base_url = \"127.0.0.1:1\"\nmodel = \"g\"",
                "security_model.base_url",
                "http(s)",
            ),
            (
                "base_url = \"https://u:sk-x@h/v1\"\nmodel = \"g\"",
                "security_model.base_url",
                "without credentials",
            ),
            (
                "base_url = \"https://h/v1?key=sk-x\"\nmodel = \"g\"",
                "security_model.base_url",
                "query",
            ),
            (
                "base_url = \"http://h/v1\"",
                "security_model.model",
                "is required",
            ),
            (
                &format!("{ok}api_key_env = \"sk-abc-123\""),
                "security_model.api_key_env",
                "not hold a key",
            ),
            (
                &format!("{ok}timeout_secs = 0"),
                "security_model.timeout_secs",
                "at least 1",
            ),
            (
                &format!("{ok}max_calls = 0"),
                "security_model.max_calls",
                "remove [security_model]",
            ),
            (
                &format!("{ok}max_tokens = 0"),
                "security_model.max_tokens",
                "at least 1",
            ),
        ] {
            let err = Config::parse(&format!("[security_model]\n{text}\n"), Path::new("a.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key) && err.contains(hint), "{text}: {err}");
        }
        let err = Config::parse(
            &format!("[security_model]\n{ok}api_key = \"sk-secret\"\n"),
            Path::new("a.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("api_key") && err.contains("line 4"), "{err}");
        assert!(
            !err.contains("sk-secret"),
            "the refused value is not echoed: {err}"
        );
    }
}
