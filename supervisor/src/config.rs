//! `airlock.toml`: the operator's per-repository configuration of a run.
//!
//! The file is operator input, never read from the checkout under work (repository text is
//! data). Every key has a default, so an empty file is valid; unknown keys are refused so a typo
//! cannot silently fall back to a default. Errors name the file and, for syntax and type errors,
//! the line and column.

use crate::transport::{BrokerEndpoint, EndpointError, TlsSettings};
use airlock_policies::network::NetworkMode;
use airlock_policies::testrun::{TestRunner, is_fixed, valid_env_name};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The placeholder that stands for the prepared environment directory in `[tests]` and
/// `[tests.prepare]` values.
pub const ENV_DIR_PLACEHOLDER: &str = "{env}";

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

/// How a `run_tests` selector is handed to the test command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelectorStyle {
    /// A dotted Python name (`package.tests.test_mod.TestCase.test_name`), appended as one
    /// argument (unittest, Django).
    Dotted,
    /// A pytest node id (`tests/test_mod.py::TestCase::test_name`), appended as one argument.
    NodeId,
    /// Any single argument that does not look like an option, appended as is.
    Append,
}

impl SelectorStyle {
    /// Check a model-supplied selector against this style; `Err` says why it is refused.
    /// A selector never starts with `-`, so a model cannot smuggle options into the command.
    pub fn check(self, selector: &str) -> std::result::Result<(), String> {
        if selector.is_empty() {
            return Err("the selector is empty; omit it for a full run".into());
        }
        if selector.starts_with('-') {
            return Err("a selector may not start with '-' (options are not selectors)".into());
        }
        if selector
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err("a selector is one name without whitespace".into());
        }
        let ok = match self {
            SelectorStyle::Dotted => selector.split('.').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !part.starts_with(|c: char| c.is_ascii_digit())
            }),
            SelectorStyle::NodeId => {
                let mut parts = selector.split("::");
                let path_ok = parts.next().is_some_and(|p| {
                    !p.is_empty() && !p.starts_with('/') && !p.split('/').any(|s| s == "..")
                });
                path_ok
                    && parts.all(|p| {
                        !p.is_empty()
                            && p.chars()
                                .all(|c| c.is_ascii_alphanumeric() || "_[]-.".contains(c))
                    })
            }
            SelectorStyle::Append => true,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "`{selector}` is not a valid {} selector",
                self.name()
            ))
        }
    }

    /// The configuration spelling of this style.
    pub fn name(self) -> &'static str {
        match self {
            SelectorStyle::Dotted => "dotted",
            SelectorStyle::NodeId => "node-id",
            SelectorStyle::Append => "append",
        }
    }
}

/// `[tests]`: how the repository's tests are run, and the environment they run in (the same for
/// the supervisor's runs and the broker's witness, which receives it at registration).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TestsConfig {
    /// The full-run command, as argv (no shell), run from the worktree root.
    pub command: Vec<String>,
    /// How a selector is appended for a narrow run.
    pub selector_style: SelectorStyle,
    /// The runner that reads results and lists the suite (`unittest`, `pytest`, `cargo`,
    /// `go`, `jest`, `vitest`); checked against `command` when the file loads.
    pub runner: TestRunner,
    /// Wall-clock limit of one test run, in seconds (also written `timeout = "10m"`).
    #[serde(alias = "timeout", deserialize_with = "seconds")]
    pub timeout_secs: u64,
    /// Host paths granted read-only to every test run (`~` is the operator's home): a venv, a
    /// toolchain outside `/usr` (`~/.cargo`, `~/.rustup`). Each must exist.
    pub ro: Vec<String>,
    /// Variables set in every test run; `{env}` in a value is the prepared environment
    /// directory.
    pub env: BTreeMap<String, String>,
    /// Variables passed from the operator's environment when set (`LANG`).
    pub pass_env: Vec<String>,
    /// The network of every test run, the base inventory's and the witness's: `loopback`
    /// (the default: the suite's own servers on 127.0.0.1 work, nothing else is reachable),
    /// `none`, `proxy` (loopback plus the egress proxy admitting `allow`) or `host`.
    pub network: NetworkMode,
    /// What the egress proxy admits with `network = "proxy"`: hosts, `*.domain`, IP literals,
    /// each with an optional `:PORT`, and the registry presets `@python`, `@node`, `@rust`,
    /// `@go` (read from each installer's configuration on this host).
    pub allow: Vec<String>,
    /// With the proxy, only `GET` and `HEAD` of plain HTTP pass.
    pub http_read_only: bool,
    /// How the test environment is built before the first test run, if it needs building.
    pub prepare: Option<PrepareConfig>,
    /// `[[tests.services]]`: services every test run needs (a database server), started
    /// inside its sandbox before the command and stopped after, on both sides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceConfig>,
}

/// One `[[tests.services]]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// Its name, in errors.
    pub name: String,
    /// The argv that runs it in the foreground (`~` and `{env}` expanded); its program must be
    /// visible in the sandbox, like the test command's.
    pub command: Vec<String>,
    /// Variables for it and for the test command (`DATABASE_URL`).
    pub env: BTreeMap<String, String>,
    /// Ready when a TCP connection to `127.0.0.1:PORT` succeeds.
    pub ready_port: Option<u16>,
    /// Ready when this argv exits 0 (instead of `ready_port`).
    pub ready_command: Vec<String>,
    /// How long it may take to become ready, in seconds (also `ready_timeout = "30s"`);
    /// 60 when unset.
    #[serde(alias = "ready_timeout", deserialize_with = "seconds")]
    pub ready_timeout_secs: u64,
}

impl ServiceConfig {
    /// The readiness timeout (60 s when unset).
    pub fn ready_timeout_secs(&self) -> u64 {
        if self.ready_timeout_secs == 0 {
            60
        } else {
            self.ready_timeout_secs
        }
    }
}

impl Default for TestsConfig {
    fn default() -> Self {
        TestsConfig {
            // `-v` makes unittest print one line per test, which the broker's witness grading
            // needs to see the claimed fail-to-pass test.
            command: vec![
                "python3".into(),
                "-m".into(),
                "unittest".into(),
                "-v".into(),
            ],
            selector_style: SelectorStyle::Dotted,
            runner: TestRunner::Unittest,
            timeout_secs: 600,
            ro: Vec::new(),
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            network: NetworkMode::Loopback,
            allow: Vec::new(),
            http_read_only: false,
            prepare: None,
            services: Vec::new(),
        }
    }
}

/// `[tests.prepare]`: a command that builds the test environment into its own directory
/// (`{env}`), run by the operator's process once per repository, pinned commit and content of
/// `inputs`, in the sandbox behind the egress proxy (its `network` and `allow`), on the pinned files only (never the
/// agent's changes), writing only to `{env}` and to a discarded copy of the tree.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrepareConfig {
    /// The command, as argv (no shell; use `["sh", "-c", "..."]` for several steps); `{env}` is
    /// the environment directory.
    pub command: Vec<String>,
    /// Files of the pinned tree whose content keys the environment (lockfiles, manifests);
    /// glob patterns relative to the tree root.
    pub inputs: Vec<String>,
    /// Paths the command creates inside the tree (`node_modules`) that every test run then sees
    /// read-only at the same place.
    pub links: Vec<String>,
    /// Variables for the prepare command only, over `[tests] env` (for example
    /// `CARGO_NET_OFFLINE = "false"` where the test runs are offline).
    pub env: BTreeMap<String, String>,
    /// Wall-clock limit, in seconds (also written `timeout = "30m"`).
    #[serde(alias = "timeout", deserialize_with = "seconds")]
    pub timeout_secs: u64,
    /// The network of the prepare command: `proxy` when unset (the egress proxy admitting
    /// `allow`), or `none`, `loopback`, `host` (the host's whole network, only if written).
    pub network: Option<NetworkMode>,
    /// What the egress proxy admits for the prepare command. Unset: every registry preset
    /// whose installer is configured on this host (`@python`, `@node`, `@rust`, `@go`).
    pub allow: Option<Vec<String>>,
    /// `[tests.prepare.python]`: the Python recipe. airlock builds an isolated virtualenv in
    /// `{env}/venv` the way the project declares it, before `command` (which may then be empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonRecipe>,
}

/// Which releases an environment is resolved from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AsOf {
    /// Only releases uploaded before the pinned commit was committed: a commit of 2021 gets
    /// the releases of 2021 (pip's `--uploaded-prior-to`).
    #[default]
    Pin,
    /// Today's releases.
    Latest,
}

/// `[tests.prepare.python]`: a virtualenv that sees only what is installed into it (never
/// the interpreter's own site-packages), with the project installed editable (the files its
/// build generates exist, and every test run sees them) and its test dependencies taken from
/// the project's own declarations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PythonRecipe {
    /// The venv's base interpreter: an absolute path (or `~/...`) granted to the sandbox, or a
    /// name the sandbox's `PATH` finds (`python3`).
    pub interpreter: String,
    /// Install the project itself, editable (`pip install -e .`); false installs only the
    /// dependencies listed below.
    pub editable: bool,
    /// The project's extras installed with it (`-e ".[test]"`); needs `editable`.
    pub extras: Vec<String>,
    /// PEP 735 dependency groups of `pyproject.toml` (`[dependency-groups]`).
    pub groups: Vec<String>,
    /// Requirements files of the tree (`-r`), pins and all.
    pub requirements: Vec<String>,
    /// More packages (`pytest`), as requirement specifiers.
    pub packages: Vec<String>,
    /// Packages some of the project's test runs add (its CI installs them, job by job), each
    /// installed on its own after the rest; one that does not install is left out and said in
    /// `{env}/optional-left-out.txt` (and by `doctor`), the environment kept.
    pub optional: Vec<String>,
    /// `pin` (the default): only releases uploaded before the pinned commit; `latest`: today's.
    pub as_of: AsOf,
    /// A lockfile of the tree whose pins constrain every install (`uv.lock`, `poetry.lock`,
    /// `Pipfile.lock`, `pylock.toml`); unset: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lockfile: Option<String>,
}

impl Default for PythonRecipe {
    fn default() -> Self {
        PythonRecipe {
            interpreter: "python3".into(),
            editable: true,
            extras: Vec::new(),
            groups: Vec::new(),
            requirements: Vec::new(),
            packages: Vec::new(),
            optional: Vec::new(),
            as_of: AsOf::Pin,
            lockfile: None,
        }
    }
}

/// The registry presets a prepare command's proxy admits when `[tests.prepare] allow` is
/// unset (each kept only where its installer is configured on the host).
pub const DEFAULT_PREPARE_ALLOW: [&str; 4] = ["@python", "@node", "@rust", "@go"];

/// `TABLE.allow` and `TABLE.http_read_only` configure the proxy, so they need
/// `TABLE.network = "proxy"`; each entry that is not a preset must parse.
fn check_allow(
    table: &str,
    mode: NetworkMode,
    allow: &[String],
    read_only: bool,
    invalid: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<()> {
    if mode != NetworkMode::Proxy && (!allow.is_empty() || read_only) {
        return Err(invalid(
            &format!("{table}.network"),
            &format!(
                "is {mode}, but {table}.allow or http_read_only configure the egress proxy; \
                 set {table}.network = \"proxy\" or remove them"
            ),
        ));
    }
    for (i, entry) in allow.iter().enumerate() {
        let key = format!("{table}.allow[{i}]");
        if entry.starts_with('@') {
            if !airlock_egress::presets::PRESETS.contains(&entry.as_str()) {
                return Err(invalid(
                    &key,
                    &format!("{entry:?} is not a preset: use @python, @node, @rust or @go"),
                ));
            }
        } else if let Err(e) = entry.parse::<airlock_policies::network::AllowEntry>() {
            return Err(invalid(&key, &e.to_string()));
        }
    }
    Ok(())
}

impl PrepareConfig {
    /// The prepare command's network mode (`proxy` when unset).
    pub fn network(&self) -> NetworkMode {
        self.network.unwrap_or(NetworkMode::Proxy)
    }

    /// The prepare time limit (30 minutes when unset).
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(if self.timeout_secs == 0 {
            1800
        } else {
            self.timeout_secs
        })
    }
}

/// `[write]`: where the agent may write; handed to `airlock-policies`, which owns the rules.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriteConfig {
    /// Glob patterns of writable paths; empty means the policy's default allowlist.
    pub allowlist: Vec<String>,
}

/// `[agent]`: which agent `airlock run` runs when `--agent` does not say.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// A built-in agent's name (`issue-fixer`, `docs-writer`) or the path of a definition
    /// file (relative to this file); the issue fixer when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// The other agents `airlock watch`, `airlock webhook` and `airlock batch --label` start,
    /// each by its definition's `[trigger]`: built-in names or definition files (relative to
    /// this file). The default agent is always started by the trigger label.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triggered: Vec<String>,
}

/// `[docs]`: the documentation the docs writer (any agent with `docs_dirs = true`) may write
/// besides `**/*.md`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DocsConfig {
    /// Documentation directories, relative to the repository root: every file below each is
    /// writable (the policy's refused classes still win).
    pub dirs: Vec<String>,
    /// The learnings file the docs writer keeps (durable facts about the repository for the
    /// next agent), relative to the repository root. It must not be a path the policy refuses
    /// (`AGENTS.md` is agent configuration): `docs/LEARNINGS.md`, say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learnings: Option<String>,
}

/// `[budgets]`: the limits of a run. `max_turns` and `max_full_runs` (like the model's own
/// budget) park the run when reached; the others end it as an escalation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budgets {
    /// Model turns of the supervisor (MAX_TURNS).
    pub max_turns: u32,
    /// Test runs without a selector (MAX_FULL_RUNS).
    pub max_full_runs: u32,
    /// `read_file` calls made by the supervisor itself.
    pub max_reads: u32,
    /// Repair prompts for an invalid final message before the run escalates.
    pub max_repair_prompts: u32,
    /// Upper bound on a reader worker's `max_reads`, whatever the model asks for.
    pub reader_max_reads: u32,
    /// Upper bound on a reader worker's `max_turns`, whatever the model asks for.
    pub reader_max_turns: u32,
    /// Write refusals tolerated before the run escalates (retrying a refused class counts).
    pub max_refusals: u32,
    /// How long a parked run (one stopped by `max_turns`, `max_full_runs` or the model's
    /// budget) waits for `airlock resume` before it expires and its worktree is removed
    /// (`park_max_age = "7d"`; a number is seconds).
    #[serde(alias = "park_max_age", deserialize_with = "seconds")]
    pub park_max_age_secs: u64,
}

/// How long a parked run waits for `airlock resume` unless `[budgets] park_max_age` says
/// otherwise: seven days.
pub const DEFAULT_PARK_MAX_AGE_SECS: u64 = 7 * 24 * 3600;

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_turns: 40,
            max_full_runs: 3,
            max_reads: 40,
            max_repair_prompts: 2,
            reader_max_reads: 40,
            reader_max_turns: 20,
            max_refusals: 3,
            park_max_age_secs: DEFAULT_PARK_MAX_AGE_SECS,
        }
    }
}

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

/// `[tokens]`: budgets of the warm-start message, in tokens (about four characters each).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenBudgets {
    /// The whole warm-start message.
    pub warm_start: usize,
    /// The repository map inside it.
    pub repo_map: usize,
    /// The file tree inside it.
    pub file_tree: usize,
    /// The codegraph candidate block inside it.
    pub candidates: usize,
    /// How many search candidates the warm start lists.
    pub candidate_count: usize,
}

impl Default for TokenBudgets {
    fn default() -> Self {
        TokenBudgets {
            warm_start: 8000,
            repo_map: 2000,
            file_tree: 1500,
            candidates: 1500,
            candidate_count: 8,
        }
    }
}

/// `[history]`: the memory of merged pull requests (`search_history` and the warm start's
/// mention of the best matches).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// The score (BM25 over the issue text) a merged pull request must reach to be mentioned
    /// in the warm start.
    pub mention_threshold: f64,
    /// How many pull requests the warm start mentions at most (0 to 2; 0 turns it off).
    pub mention_count: usize,
    /// With `[github] token_env` set and a GitHub issue, read merged pull requests from the
    /// forge's API too (title, description and files as GitHub has them).
    pub forge: bool,
    /// The most merged pull requests read from the forge per run (newest first); each new one
    /// costs one request for its files, and is kept beside the index for later runs.
    pub forge_max_pulls: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            mention_threshold: DEFAULT_MENTION_THRESHOLD,
            mention_count: 2,
            forge: true,
            forge_max_pulls: 100,
        }
    }
}

/// The default `[history] mention_threshold` (see docs/history.md for how it was chosen).
pub const DEFAULT_MENTION_THRESHOLD: f64 = 50.0;

/// `[context]`: how the conversation sent to the model is kept in bounds (`condense`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Above this many tokens (at four characters each) of conversation, old tool results are
    /// condensed to one-line stubs; 0 never condenses.
    pub condense_above_tokens: usize,
    /// The most recent tool results, which always stay whole.
    pub keep_recent_results: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            condense_above_tokens: 24_000,
            keep_recent_results: 4,
        }
    }
}

/// `[reference_repos]`: the operator's exemplar repositories (`crate::reference_repos`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReferenceReposConfig {
    /// The directory of one YAML file per reference repository; relative to the config file's
    /// directory (default `.airlock/reference-repos`). A missing directory means none.
    pub dir: PathBuf,
    /// The most files walked per repository for its structure.
    pub max_files: usize,
}

impl Default for ReferenceReposConfig {
    fn default() -> Self {
        ReferenceReposConfig {
            dir: PathBuf::from(crate::reference_repos::DEFAULT_DIR),
            max_files: airlock_codegraph::structure::DEFAULT_MAX_FILES,
        }
    }
}

/// `[broker]`: where the pull-request broker listens.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerConfig {
    /// The broker's Unix socket, on this host. One of `socket` and `url`.
    pub socket: Option<PathBuf>,
    /// The broker on another host: `tls://HOST:PORT` (or any form of
    /// [`BrokerEndpoint::parse`]). One of `socket` and `url`; `tls://` needs `tls_ca`,
    /// `tls_cert` and `tls_key`.
    pub url: Option<String>,
    /// The CA that signed the broker's certificate (PEM), with `url = "tls://..."`.
    pub tls_ca: Option<PathBuf>,
    /// This worker's client certificate (PEM), signed by the broker's `[tls] client_ca`.
    pub tls_cert: Option<PathBuf>,
    /// This worker's private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// The name the broker's certificate must carry; defaults to the host of `url`.
    pub tls_server_name: Option<String>,
    /// The repository's name in the broker's `broker.toml` (`[repositories."owner/name"]`);
    /// defaults to `--repo` as given.
    pub repository: Option<String>,
    /// How long to wait for the broker's answer to a request; its answer to `open_pr` comes
    /// after a witness that runs the test command four times. Defaults to
    /// [`BrokerConfig::reply_timeout`]'s `4 × tests.timeout_secs + 120`.
    #[serde(alias = "reply_timeout", deserialize_with = "optional_seconds")]
    pub reply_timeout_secs: Option<u64>,
    /// How long to keep reconnecting and resending an `open_pr` whose connection to the broker
    /// broke (a broker restart), with the same idempotency key. The broker is told this window
    /// at registration and abandons an intake it takes up again later, so the run's outcome
    /// and the queue agree. Defaults to [`DEFAULT_RECONNECT_SECS`].
    #[serde(alias = "reconnect", deserialize_with = "optional_seconds")]
    pub reconnect_secs: Option<u64>,
    /// How the broker gets the run's tree: `"shared"` (it reads the worktree: the broker
    /// runs on this host and the worktree lies under its runs root) or `"bytes"` (every
    /// `open_pr` carries the change as a git patch against the pin and the broker rebuilds the
    /// tree from its own clone: a broker on another host). Default: shared for a Unix socket,
    /// bytes for a network broker.
    #[serde(default)]
    pub tree: Option<airlock_protocol::TreeTransfer>,
}

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

/// `[github]`: issue intake from GitHub (`--issue https://github.com/OWNER/REPO/issues/N`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GithubConfig {
    /// The REST API base: `https://api.github.com`, or a GitHub Enterprise
    /// `https://HOST/api/v3`.
    pub api_url: String,
    /// The environment variable holding the token (a read-only scope is enough for a private
    /// repository); none is sent when absent. When named, it must be set.
    pub token_env: Option<String>,
    /// The issue id's prefix: GitHub issue N becomes `<project_key>-N` (2 to 6 capital
    /// letters, the `open_pr` pattern). Defaults to the repository name's first six letters,
    /// capitalised.
    pub project_key: Option<String>,
    /// Include the issue's comments in the text the run works from, each marked with its
    /// author.
    pub comments: bool,
    /// The most comments included when `comments` is on.
    pub max_comments: usize,
}

impl Default for GithubConfig {
    fn default() -> Self {
        GithubConfig {
            api_url: "https://api.github.com".to_owned(),
            token_env: None,
            project_key: None,
            comments: false,
            max_comments: 50,
        }
    }
}

impl GithubConfig {
    /// The issue-id prefix for issues of repository `repo`: `project_key`, else the repository
    /// name's letters capitalised (the first six; `GH` when it has fewer than two).
    pub fn project_key_for(&self, repo: &str) -> String {
        if let Some(key) = &self.project_key {
            return key.clone();
        }
        let letters: String = repo
            .chars()
            .filter(char::is_ascii_alphabetic)
            .take(6)
            .collect::<String>()
            .to_ascii_uppercase();
        if letters.len() < 2 {
            "GH".to_owned()
        } else {
            letters
        }
    }
}

impl SecurityModelConfig {
    fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
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

/// Whether `key` fits the issue-id prefix of the `open_pr` pattern (2 to 6 capital letters).
pub fn valid_project_key(key: &str) -> bool {
    (2..=6).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_uppercase())
}

/// The default `[broker] reconnect_secs`.
pub const DEFAULT_RECONNECT_SECS: u64 = 600;

impl BrokerConfig {
    /// Where the broker is: `socket`, or `url` with the `tls_*` files for `tls://`; `None`
    /// when neither is set. Setting both, a `tls://` url without its three files, or a `tls_*`
    /// key without a `tls://` url is an error naming the key.
    pub fn endpoint(&self) -> std::result::Result<Option<BrokerEndpoint>, EndpointError> {
        let tls_keys = [
            ("tls_ca", self.tls_ca.is_some()),
            ("tls_cert", self.tls_cert.is_some()),
            ("tls_key", self.tls_key.is_some()),
            ("tls_server_name", self.tls_server_name.is_some()),
        ];
        let endpoint = match (&self.socket, &self.url) {
            (Some(_), Some(_)) => {
                return Err(EndpointError::Config {
                    key: "url",
                    problem: "set either socket (the broker's Unix socket on this host) or url \
                              (tls://HOST:PORT, a broker on another host), not both"
                        .to_owned(),
                });
            }
            (None, None) => None,
            (Some(socket), None) => Some(BrokerEndpoint::Unix(socket.clone())),
            (None, Some(url)) => Some(BrokerEndpoint::parse(url)?),
        };
        match endpoint {
            Some(BrokerEndpoint::Tls(tls)) => {
                let (Some(ca), Some(cert), Some(key)) =
                    (&self.tls_ca, &self.tls_cert, &self.tls_key)
                else {
                    let missing: Vec<&str> = tls_keys[..3]
                        .iter()
                        .filter(|(_, set)| !set)
                        .map(|(name, _)| *name)
                        .collect();
                    return Err(EndpointError::Config {
                        key: missing.first().copied().unwrap_or("tls_ca"),
                        problem: format!(
                            "url = {:?} needs tls_ca (the CA of the broker's certificate), \
                             tls_cert and tls_key (this worker's certificate and key); missing: {}",
                            self.url.as_deref().unwrap_or_default(),
                            missing.join(", ")
                        ),
                    });
                };
                if let Some(name) = &self.tls_server_name
                    && rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
                {
                    return Err(EndpointError::Config {
                        key: "tls_server_name",
                        problem: format!("{name:?} is not a host name or an IP address"),
                    });
                }
                Ok(Some(BrokerEndpoint::Tls(tls).with_tls(TlsSettings {
                    ca: ca.clone(),
                    cert: cert.clone(),
                    key: key.clone(),
                    server_name: self.tls_server_name.clone(),
                })))
            }
            other => match tls_keys.iter().find(|(_, set)| *set) {
                Some((name, _)) => Err(EndpointError::Config {
                    key: name,
                    problem: "is only read with url = \"tls://HOST:PORT\" (a broker on another \
                              host); a Unix socket needs no certificate"
                        .to_owned(),
                }),
                None => Ok(other),
            },
        }
    }

    /// Point this configuration at the broker at `url` (`airlock worker --broker`): a Unix
    /// socket replaces `socket`, a `tls://` address replaces `url` and keeps the `tls_*` files.
    pub fn point_at(&mut self, url: &str) -> std::result::Result<(), EndpointError> {
        match BrokerEndpoint::parse(url)? {
            BrokerEndpoint::Unix(path) => {
                self.socket = Some(path);
                self.url = None;
            }
            BrokerEndpoint::Tls(_) => {
                self.socket = None;
                self.url = Some(url.to_owned());
            }
        }
        self.endpoint().map(|_| ())
    }

    /// How the broker gets the run's tree: `tree` when set; else shared (the broker reads the
    /// worktree) with a Unix socket on this host, bytes with a broker on another (`url`).
    pub fn tree_transfer(&self) -> airlock_protocol::TreeTransfer {
        self.tree.unwrap_or(if self.url.is_some() {
            airlock_protocol::TreeTransfer::Bytes
        } else {
            airlock_protocol::TreeTransfer::Shared
        })
    }

    /// The reconnect window in seconds.
    pub fn reconnect_secs(&self) -> u64 {
        self.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS)
    }

    /// The wait for one broker reply: `reply_timeout_secs`, else long enough for a witness of
    /// four test commands of `tests_timeout_secs` each.
    pub fn reply_timeout(&self, tests_timeout_secs: u64) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.reply_timeout_secs
                .unwrap_or_else(|| tests_timeout_secs.saturating_mul(4).saturating_add(120)),
        )
    }
}

/// `[paths]`: where the run's records go.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PathsConfig {
    /// Each run writes `<runs_root>/<run_id>/` (trajectory, outcome, worktree).
    pub runs_root: PathBuf,
    /// The audit log every step is appended to.
    pub audit_log: PathBuf,
    /// The checkout mirror cache.
    pub cache_dir: PathBuf,
    /// The codegraph index directory.
    pub index_dir: PathBuf,
    /// Where prepared test environments are kept, one directory per repository, commit and
    /// prepare inputs (the broker must allow it: `allow_ro` in `broker.toml`).
    pub envs_dir: PathBuf,
}

impl Default for PathsConfig {
    /// Everything under airlock's one data directory ([`airlock_audit::data_dir`]:
    /// `$AIRLOCK_HOME`, else `$XDG_DATA_HOME/airlock`, else `~/.local/share/airlock`), so that
    /// `airlock audit` finds a run's log without being told; `.airlock/` beside the file (or
    /// the working directory) when none can be derived.
    fn default() -> Self {
        let base = airlock_audit::data_dir().unwrap_or_else(|_| PathBuf::from(".airlock"));
        PathsConfig {
            runs_root: base.join("runs"),
            audit_log: base.join("audit.jsonl"),
            cache_dir: base.join("cache"),
            index_dir: base.join("index"),
            envs_dir: base.join("envs"),
        }
    }
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
            if crate::agents::is_path(spec) && Path::new(spec.as_str()).is_relative() {
                *spec = base.join(&*spec).display().to_string();
            }
        }
    }

    fn validate(&self, origin: &Path) -> Result<()> {
        let invalid = |key: &str, problem: &str| ConfigError::Invalid {
            path: origin.to_path_buf(),
            key: key.to_string(),
            problem: problem.to_string(),
        };
        if self.tests.command.is_empty() || self.tests.command[0].is_empty() {
            return Err(invalid("tests.command", "must name a program"));
        }
        self.broker.endpoint().map_err(|e| match e {
            EndpointError::Config { key, problem } => invalid(&format!("broker.{key}"), &problem),
            parse @ EndpointError::Parse { .. } => invalid("broker.url", &parse.to_string()),
        })?;
        if self.broker.reply_timeout_secs == Some(0) {
            return Err(invalid("broker.reply_timeout_secs", "must be at least 1"));
        }
        if self.tests.timeout_secs == 0 {
            return Err(invalid("tests.timeout_secs", "must be at least 1"));
        }
        if let Some(key) = &self.github.project_key
            && !valid_project_key(key)
        {
            return Err(invalid(
                "github.project_key",
                "must be 2 to 6 capital letters A-Z (issue ids are `KEY-123`)",
            ));
        }
        if let Some(var) = &self.github.token_env
            && !valid_env_name(var)
        {
            return Err(invalid(
                "github.token_env",
                "must name an environment variable (letters, digits and `_`), not hold a token",
            ));
        }
        let api = self.github.api_url.trim();
        if !(api.starts_with("https://") || api.starts_with("http://")) || api.contains('@') {
            return Err(invalid(
                "github.api_url",
                "must be an http(s) URL without credentials, e.g. https://api.github.com",
            ));
        }
        if self.context.keep_recent_results == 0 {
            return Err(invalid(
                "context.keep_recent_results",
                "must be at least 1 (the model must see the result it just asked for)",
            ));
        }
        if self.github.max_comments == 0 {
            return Err(invalid("github.max_comments", "must be at least 1"));
        }
        if !(self.history.mention_threshold.is_finite() && self.history.mention_threshold >= 0.0) {
            return Err(invalid(
                "history.mention_threshold",
                "must be a number at least 0 (a BM25 score; see docs/history.md)",
            ));
        }
        if self.history.mention_count > 2 {
            return Err(invalid(
                "history.mention_count",
                "must be 0, 1 or 2 (the warm start mentions the best one or two)",
            ));
        }
        if let Some(security) = &self.security_model {
            security.validate(&invalid)?;
        }
        self.tests
            .runner
            .check_command(&self.tests.command)
            .map_err(|why| invalid("tests.runner", &why))?;
        for name in self.tests.env.keys() {
            if !valid_env_name(name) {
                return Err(invalid(
                    &format!("tests.env.{name}"),
                    "is not a variable name (letters, digits and `_`, not starting with a digit)",
                ));
            }
            if is_fixed(name) {
                return Err(invalid(
                    &format!("tests.env.{name}"),
                    "is set by airlock in every test run (CI, PYTHONDONTWRITEBYTECODE, \
                     CARGO_TARGET_DIR) and cannot be configured",
                ));
            }
        }
        check_allow(
            "tests",
            self.tests.network,
            &self.tests.allow,
            self.tests.http_read_only,
            &invalid,
        )?;
        if let Some(p) = &self.tests.prepare
            && let Some(allow) = &p.allow
        {
            check_allow("tests.prepare", p.network(), allow, false, &invalid)?;
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, service) in self.tests.services.iter().enumerate() {
            let key = |k: &str| format!("tests.services[{i}].{k}");
            if service.name.trim().is_empty() || !names.insert(service.name.clone()) {
                return Err(invalid(
                    &key("name"),
                    "must name the service, once (it names it in errors)",
                ));
            }
            if service.command.first().is_none_or(|p| p.is_empty()) {
                return Err(invalid(&key("command"), "must name a program"));
            }
            match (service.ready_port, service.ready_command.is_empty()) {
                (Some(_), false) | (None, true) => {
                    return Err(invalid(
                        &key("ready_port"),
                        "give exactly one readiness check: ready_port (a loopback port) or ready_command",
                    ));
                }
                (Some(0), _) => return Err(invalid(&key("ready_port"), "must be 1 to 65535")),
                (Some(_), _) if self.tests.network == NetworkMode::None => {
                    return Err(invalid(
                        &key("ready_port"),
                        "is a loopback port, but [tests] network is \"none\": set it to \
                         \"loopback\" (the default) or \"proxy\"",
                    ));
                }
                _ => {}
            }
            for name in service.env.keys() {
                if !valid_env_name(name) || is_fixed(name) {
                    return Err(invalid(
                        &format!("tests.services[{i}].env.{name}"),
                        "is not a variable name that can be set",
                    ));
                }
            }
        }
        for name in &self.tests.pass_env {
            if !valid_env_name(name) || is_fixed(name) {
                return Err(invalid(
                    "tests.pass_env",
                    &format!("{name:?} is not a variable name that can be passed"),
                ));
            }
        }
        let uses_env_dir = self
            .tests
            .command
            .iter()
            .chain(self.tests.env.values())
            .chain(self.tests.ro.iter())
            .any(|v| v.contains(ENV_DIR_PLACEHOLDER));
        match &self.tests.prepare {
            Some(p) => {
                if (p.command.is_empty() && p.python.is_none())
                    || p.command.first().is_some_and(String::is_empty)
                {
                    return Err(invalid(
                        "tests.prepare.command",
                        "must name a program (or add a [tests.prepare.python] recipe)",
                    ));
                }
                if let Some(py) = &p.python {
                    crate::recipe::check(py).map_err(|(key, problem)| {
                        invalid(&format!("tests.prepare.python.{key}"), &problem)
                    })?;
                }
                for link in &p.links {
                    let path = Path::new(link);
                    if link.is_empty()
                        || path.is_absolute()
                        || path
                            .components()
                            .any(|c| !matches!(c, std::path::Component::Normal(_)))
                    {
                        return Err(invalid(
                            "tests.prepare.links",
                            &format!("{link:?} must be a path relative to the tree, without `..`"),
                        ));
                    }
                }
                for name in p.env.keys() {
                    if !valid_env_name(name) || is_fixed(name) {
                        return Err(invalid(
                            &format!("tests.prepare.env.{name}"),
                            "is not a variable name that can be set",
                        ));
                    }
                }
                for pattern in &p.inputs {
                    if globset::Glob::new(pattern).is_err() || pattern.starts_with('/') {
                        return Err(invalid(
                            "tests.prepare.inputs",
                            &format!("{pattern:?} is not a glob relative to the tree"),
                        ));
                    }
                }
            }
            None if uses_env_dir => {
                return Err(invalid(
                    "tests",
                    "uses {env} (the prepared environment directory) but has no \
                     [tests.prepare] command to build it",
                ));
            }
            None => {}
        }
        let repo_relative = |p: &str| {
            let path = Path::new(p);
            !p.is_empty()
                && !p.contains(['*', '?', '[', ']', '{', '}'])
                && path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
        };
        for dir in &self.docs.dirs {
            if !repo_relative(dir.trim_end_matches('/')) {
                return Err(invalid(
                    "docs.dirs",
                    &format!(
                        "{dir:?} must be a directory relative to the repository root, without `..` or glob characters (e.g. \"docs\")"
                    ),
                ));
            }
        }
        if let Some(learnings) = &self.docs.learnings
            && !repo_relative(learnings)
        {
            return Err(invalid(
                "docs.learnings",
                &format!(
                    "{learnings:?} must be a file path relative to the repository root, without `..` or glob characters (e.g. \"docs/LEARNINGS.md\")"
                ),
            ));
        }
        if let Some(definition) = &self.agent.definition
            && definition.trim().is_empty()
        {
            return Err(invalid(
                "agent.definition",
                "is empty; name a built-in agent (issue-fixer, docs-writer) or a definition file",
            ));
        }
        if self
            .agent
            .triggered
            .iter()
            .any(|spec| spec.trim().is_empty())
        {
            return Err(invalid(
                "agent.triggered",
                "lists an empty name; list built-in agents (docs-writer, pr-reviewer) or \
                 definition files",
            ));
        }
        let b = &self.budgets;
        for (key, value) in [
            ("budgets.max_turns", b.max_turns),
            ("budgets.max_full_runs", b.max_full_runs),
            ("budgets.max_reads", b.max_reads),
            ("budgets.reader_max_reads", b.reader_max_reads),
            ("budgets.reader_max_turns", b.reader_max_turns),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        let t = &self.tokens;
        for (key, value) in [
            ("tokens.warm_start", t.warm_start),
            ("tokens.repo_map", t.repo_map),
            ("tokens.file_tree", t.file_tree),
            ("tokens.candidates", t.candidates),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        if t.repo_map + t.file_tree + t.candidates > t.warm_start {
            return Err(invalid(
                "tokens.warm_start",
                "must be at least tokens.repo_map + tokens.file_tree + tokens.candidates",
            ));
        }
        Ok(())
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
    fn context_sets_condensation_and_refuses_unknown_keys_and_keeping_nothing() {
        let c = Config::parse("", Path::new("airlock.toml")).unwrap();
        assert_eq!(c.context, ContextConfig::default());
        let c = Config::parse(
            "[context]
condense_above_tokens = 0
keep_recent_results = 2
",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(c.context.condense_above_tokens, 0);
        assert_eq!(c.context.keep_recent_results, 2);
        let err = Config::parse(
            "[context]
condense_after = 100
",
            Path::new("airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `condense_after`"), "{err}");
        let err = Config::parse(
            "[context]
keep_recent_results = 0
",
            Path::new("airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("context.keep_recent_results"), "{err}");
    }

    #[test]
    fn the_broker_reply_wait_covers_a_witness_of_four_test_commands() {
        let c = Config::parse("[tests]\ntimeout_secs = 600\n", Path::new("airlock.toml")).unwrap();
        assert_eq!(
            c.broker.reply_timeout(c.tests.timeout_secs),
            std::time::Duration::from_secs(2520)
        );
        let c = Config::parse(
            "[broker]\nreply_timeout_secs = 90\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(
            c.broker.reply_timeout(c.tests.timeout_secs),
            std::time::Duration::from_secs(90)
        );
        let err = Config::parse(
            "[broker]\nreply_timeout_secs = 0\n",
            Path::new("airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("broker.reply_timeout_secs"), "{err}");
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
    fn the_broker_is_a_socket_or_a_tls_url_with_its_three_files() {
        let load = |broker: &str| {
            let mut c = Config::parse(&format!("[broker]\n{broker}"), Path::new("airlock.toml"))?;
            c.resolve_relative_to(Path::new("/etc/airlock"));
            Ok::<_, ConfigError>(c.broker.endpoint().unwrap())
        };
        assert_eq!(load("").unwrap(), None);
        assert_eq!(
            load("socket = \"b.sock\"\n").unwrap(),
            Some(BrokerEndpoint::Unix("/etc/airlock/b.sock".into()))
        );
        let tls = "url = \"tls://broker.internal:8643\"\ntls_ca = \"tls/ca.pem\"\n\
                   tls_cert = \"tls/w.pem\"\ntls_key = \"/keys/w.key\"\n";
        assert_eq!(
            load(tls).unwrap(),
            Some(BrokerEndpoint::Tls(crate::transport::TlsEndpoint {
                host: "broker.internal".to_owned(),
                port: 8643,
                settings: Some(TlsSettings {
                    ca: "/etc/airlock/tls/ca.pem".into(),
                    cert: "/etc/airlock/tls/w.pem".into(),
                    key: "/keys/w.key".into(),
                    server_name: None,
                }),
            }))
        );
        let named = load(&format!("{tls}tls_server_name = \"broker.acme.test\"\n")).unwrap();
        let Some(BrokerEndpoint::Tls(t)) = named else {
            panic!("{named:?}");
        };
        assert_eq!(
            t.settings.unwrap().server_name.as_deref(),
            Some("broker.acme.test")
        );
        for (text, needle) in [
            (
                format!("socket = \"b.sock\"\n{tls}"),
                "`broker.url` set either socket",
            ),
            (
                tls.replace("tls_ca = \"tls/ca.pem\"\n", ""),
                "`broker.tls_ca` url = \"tls://broker.internal:8643\" needs tls_ca",
            ),
            (
                tls.replace("tls_key = \"/keys/w.key\"\n", ""),
                "missing: tls_key",
            ),
            (
                "socket = \"b.sock\"\ntls_cert = \"w.pem\"\n".to_owned(),
                "`broker.tls_cert` is only read with url = \"tls://HOST:PORT\"",
            ),
            (
                "url = \"broker:8643\"\ntls_ca = \"ca.pem\"\n".to_owned(),
                "`broker.tls_ca` is only read with url",
            ),
            (
                "url = \"tcp://broker:8643\"\n".to_owned(),
                "\"tcp://broker:8643\" is not a broker address: unknown scheme (accepted: \
                 unix:/PATH, /PATH or tls://HOST:PORT)",
            ),
            (
                format!("{tls}tls_server_name = \"not a name\"\n"),
                "`broker.tls_server_name` \"not a name\" is not a host name",
            ),
        ] {
            let err = load(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn github_keys_are_checked() {
        let c = Config::parse(
            "[github]\napi_url = \"https://ghe.acme.test/api/v3\"\ntoken_env = \"GITHUB_TOKEN\"\nproject_key = \"ACME\"\ncomments = true\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(c.github.project_key_for("widgets"), "ACME");
        assert!(c.github.comments);
        let d = GithubConfig::default();
        assert_eq!(d.project_key_for("widgets"), "WIDGET");
        assert_eq!(d.project_key_for("go-x"), "GOX");
        assert_eq!(d.project_key_for("x1"), "GH");
        for (text, key) in [
            ("project_key = \"acme\"", "github.project_key"),
            ("project_key = \"ABCDEFG\"", "github.project_key"),
            ("token_env = \"ghp_abc-123\"", "github.token_env"),
            ("api_url = \"api.github.com\"", "github.api_url"),
            ("api_url = \"https://u:p@ghe/api/v3\"", "github.api_url"),
            ("max_comments = 0", "github.max_comments"),
        ] {
            let err = Config::parse(&format!("[github]\n{text}\n"), Path::new("a.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
    }

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
    fn zero_budget_is_refused_by_key() {
        let err = Config::parse("[budgets]\nmax_full_runs = 0\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("budgets.max_full_runs"), "{err}");
    }

    #[test]
    fn selectors_are_checked_per_style() {
        assert!(SelectorStyle::Dotted.check("tests.test_x.T.test_a").is_ok());
        assert!(SelectorStyle::Dotted.check("--help").is_err());
        assert!(SelectorStyle::Dotted.check("tests/test_x.py").is_err());
        assert!(
            SelectorStyle::NodeId
                .check("tests/test_x.py::T::test_a")
                .is_ok()
        );
        assert!(SelectorStyle::NodeId.check("../x.py::t").is_err());
        assert!(SelectorStyle::Append.check("a b").is_err());
    }

    #[test]
    fn a_misspelt_runner_is_refused_when_the_file_loads_naming_the_key_and_the_choices() {
        let err = Config::parse(
            "[tests]\ncommand = [\"python3\", \"-m\", \"pytest\"]\nrunner = \"pytset\"\n",
            Path::new("/x/airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/x/airlock.toml"), "{err}");
        assert!(err.contains("runner") && err.contains("pytset"), "{err}");
        assert!(err.contains("pytest") && err.contains("unittest"), "{err}");
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
