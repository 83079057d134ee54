//! `airlock.toml`: the operator's per-repository configuration of a run.
//!
//! The file is operator input, never read from the checkout under work (repository text is
//! data). Every key has a default, so an empty file is valid; unknown keys are refused so a typo
//! cannot silently fall back to a default. Errors name the file and, for syntax and type errors,
//! the line and column.
//!
//! Each table's type, defaults and checks live in the submodule named after it; this module
//! holds the whole file's type, how it is found and read, and the order of the checks (the first
//! that fails is the one reported). Nothing here reads the rest of the supervisor but
//! `transport`'s endpoint types: the modules that act on the configuration import it, never the
//! other way round.

mod agent;
mod broker;
mod budgets;
mod github;
mod gitlab;
mod model;
mod paths;
mod python;
mod test_runs;

pub use agent::{
    AgentConfig, DEFAULT_REFERENCE_REPOS_DIR, DocsConfig, ReferenceReposConfig, WriteConfig,
    is_definition_path,
};
pub use broker::{BrokerConfig, DEFAULT_RECONNECT_SECS};
pub use budgets::{
    Budgets, ContextConfig, DEFAULT_MENTION_THRESHOLD, DEFAULT_PARK_MAX_AGE_SECS, HistoryConfig,
    TokenBudgets,
};
pub use github::{GithubConfig, QuestionsConfig, valid_project_key};
pub use gitlab::{GITLAB_COM_API, GitlabConfig};
pub use model::{ModelConfig, SecurityModelConfig};
pub use paths::PathsConfig;
pub use python::{AsOf, LOCKFILES, PythonRecipe, check_python_recipe};
pub use test_runs::{
    DEFAULT_PREPARE_ALLOW, ENV_DIR_PLACEHOLDER, PrepareConfig, SelectorStyle, ServiceConfig,
    TestsConfig,
};

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Errors loading or validating `airlock.toml`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not match the expected shape; `message` carries the
    /// line and column.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, which names the line, the column and the key.
        message: String,
    },
    /// A value is syntactically fine but out of bounds.
    #[error("invalid config {path}: `{key}` {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `budgets.max_turns`.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// Result alias for configuration loading.
pub type Result<T> = std::result::Result<T, ConfigError>;

/// A duration key of `airlock.toml`: a number of seconds (`timeout_secs = 600`) or a duration
/// in the one syntax of airlock's configuration (`timeout = "10m"`, `"1h 30m"`; see
/// [`airlock_audit::parse_duration`]).
#[derive(Deserialize)]
#[serde(untagged)]
enum Seconds {
    Number(u64),
    Text(String),
}

impl Seconds {
    fn secs<E: serde::de::Error>(self) -> std::result::Result<u64, E> {
        match self {
            Seconds::Number(n) => Ok(n),
            Seconds::Text(text) => airlock_audit::parse_duration(&text)
                .map(|d| d.as_secs())
                .map_err(E::custom),
        }
    }
}

fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    Seconds::deserialize(d)?.secs()
}

fn optional_seconds<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u64>, D::Error> {
    Option::<Seconds>::deserialize(d)?
        .map(Seconds::secs)
        .transpose()
}

/// A parser message whose quotation of the file (`4 | api_key = "..."`) keeps each quoted
/// line's key but not its value: a value put where it does not belong (a key under
/// `api_key =`) must not be echoed to a terminal or a log. The parser's own words (line,
/// column, the key or variant it refused) stay.
fn without_quoted_values(message: &str) -> String {
    message
        .lines()
        .map(|line| {
            let rest = line
                .trim_start()
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start();
            match (rest.strip_prefix('|'), line.find('=')) {
                (Some(_), Some(eq)) => format!("{} = (value not shown)", &line[..eq].trim_end()),
                _ => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

/// The variable naming `airlock.toml` when `--config` is not given.
pub const CONFIG_ENV: &str = "AIRLOCK_CONFIG";

/// Where a command's `airlock.toml` is: `--config`, else `$AIRLOCK_CONFIG`, else
/// `./airlock.toml` when it exists; `None` when none is given or found (the defaults apply).
pub fn discover(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let local = PathBuf::from("airlock.toml");
    local.is_file().then_some(local)
}

/// The whole of `airlock.toml`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[tests]`.
    pub tests: TestsConfig,
    /// `[write]`.
    pub write: WriteConfig,
    /// `[budgets]`.
    pub budgets: Budgets,
    /// `[model]`.
    pub model: ModelConfig,
    /// `[tokens]`.
    pub tokens: TokenBudgets,
    /// `[context]`.
    pub context: ContextConfig,
    /// `[broker]`.
    pub broker: BrokerConfig,
    /// `[paths]`.
    pub paths: PathsConfig,
    /// `[github]`.
    pub github: GithubConfig,
    /// `[gitlab]`.
    pub gitlab: GitlabConfig,
    /// `[history]`.
    pub history: HistoryConfig,
    /// `[security_model]`, when the operator configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_model: Option<SecurityModelConfig>,
    /// `[reference_repos]`.
    pub reference_repos: ReferenceReposConfig,
    /// `[agent]`.
    pub agent: AgentConfig,
    /// `[docs]`.
    pub docs: DocsConfig,
    /// `[questions]`.
    pub questions: QuestionsConfig,
}

impl Config {
    /// Load and validate a config file. Relative paths under `[paths]` and `[broker]` are
    /// resolved against the file's directory, so a run does not depend on the caller's cwd.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Config::parse(&text, path)?;
        // A bare file name has an empty parent; resolve against the absolute path so every
        // record path is absolute (the sandboxed reader and the broker see other cwds).
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let base = absolute.parent().unwrap_or(Path::new("."));
        config.resolve_relative_to(base);
        Ok(config)
    }

    /// Parse and validate config text; `origin` only names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_path_buf(),
            message: without_quoted_values(&e.to_string()),
        })?;
        config.validate(origin)?;
        Ok(config)
    }

    /// Make relative record paths absolute against `base`.
    pub fn resolve_relative_to(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        fix(&mut self.paths.runs_root);
        fix(&mut self.paths.audit_log);
        fix(&mut self.paths.cache_dir);
        fix(&mut self.paths.index_dir);
        fix(&mut self.paths.envs_dir);
        fix(&mut self.reference_repos.dir);
        let broker = &mut self.broker;
        for path in [
            &mut broker.socket,
            &mut broker.tls_ca,
            &mut broker.tls_cert,
            &mut broker.tls_key,
        ]
        .into_iter()
        .flatten()
        {
            fix(path);
        }
        let specs = self
            .agent
            .definition
            .iter_mut()
            .chain(self.agent.triggered.iter_mut());
        for spec in specs {
            if is_definition_path(spec) && Path::new(spec.as_str()).is_relative() {
                *spec = base.join(&*spec).display().to_string();
            }
        }
    }

    /// Every table's checks, in a fixed order: a file with several mistakes is refused for the
    /// same one each time.
    fn validate(&self, origin: &Path) -> Result<()> {
        let invalid = |key: &str, problem: &str| ConfigError::Invalid {
            path: origin.to_path_buf(),
            key: key.to_string(),
            problem: problem.to_string(),
        };
        if self.tests.command.is_empty() || self.tests.command[0].is_empty() {
            return Err(invalid("tests.command", "must name a program"));
        }
        self.broker.validate(&invalid)?;
        if self.tests.timeout_secs == 0 {
            return Err(invalid("tests.timeout_secs", "must be at least 1"));
        }
        self.github.validate(&invalid)?;
        self.gitlab.validate(&invalid)?;
        self.context.validate(&invalid)?;
        if self.github.max_comments == 0 {
            return Err(invalid("github.max_comments", "must be at least 1"));
        }
        self.history.validate(&invalid)?;
        if let Some(security) = &self.security_model {
            security.validate(&invalid)?;
        }
        self.tests.validate_environment(&invalid)?;
        self.docs.validate(&invalid)?;
        self.agent.validate(&invalid)?;
        self.budgets.validate(&invalid)?;
        self.tokens.validate(&invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::parse("", Path::new("airlock.toml")).unwrap();
        assert_eq!(c.budgets.max_turns, 40);
        assert_eq!(c.tests.selector_style, SelectorStyle::Dotted);
    }

    #[test]
    fn full_file_parses() {
        let text = r#"
[tests]
command = ["pytest", "-q", "-rA"]
runner = "pytest"
selector_style = "node-id"
timeout_secs = 60

[write]
allowlist = ["src/**", "tests/**"]

[budgets]
max_turns = 12
max_full_runs = 2

[model]
spec = "scripted:turns.jsonl"
[model.config]
temperature = 0

[broker]
socket = "broker.sock"
"#;
        let mut c = Config::parse(text, Path::new("airlock.toml")).unwrap();
        c.resolve_relative_to(Path::new("/etc/airlock"));
        assert_eq!(c.tests.command, vec!["pytest", "-q", "-rA"]);
        assert_eq!(c.budgets.max_turns, 12);
        assert_eq!(c.budgets.max_reads, 40);
        assert_eq!(
            c.broker.socket.clone().unwrap(),
            PathBuf::from("/etc/airlock/broker.sock")
        );
        assert_eq!(c.model.config.temperature, Some(0.0));
    }

    #[test]
    fn a_typo_in_the_model_settings_is_refused_at_load_naming_file_and_line() {
        let text = "[tests]\ncommand = [\"pytest\"]\n\n[model.config]\ntemprature = 0\n";
        let err = Config::parse(text, Path::new("/etc/airlock/airlock.toml")).unwrap_err();
        let said = err.to_string();
        assert!(said.contains("/etc/airlock/airlock.toml"), "{said}");
        assert!(said.contains("line 5"), "{said}");
        assert!(said.contains("temprature"), "{said}");
    }

    #[test]
    fn syntax_error_names_file_and_line() {
        let err = Config::parse(
            "[budgets]\nmax_turns = \"many\"\n",
            Path::new("/x/airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/x/airlock.toml"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn unknown_key_is_refused() {
        let err = Config::parse("[budgets]\nmax_turn = 3\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_turn"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn durations_are_seconds_or_the_one_duration_syntax() {
        let c = Config::parse(
            "[tests]\ntimeout = \"10m\"\n[broker]\nreply_timeout = \"1h 30m\"\nreconnect_secs = 90\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(c.tests.timeout_secs, 600);
        assert_eq!(c.broker.reply_timeout_secs, Some(5400));
        assert_eq!(c.broker.reconnect_secs, Some(90));
        let c = Config::parse("[tests]\ntimeout_secs = \"2m\"\n", Path::new("a.toml")).unwrap();
        assert_eq!(c.tests.timeout_secs, 120);
        let err = Config::parse("[tests]\ntimeout = \"ten minutes\"\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a.toml") && err.contains("ten minutes"),
            "{err}"
        );
    }
}
