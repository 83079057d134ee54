//! `[tests]`, `[[tests.services]]` and `[tests.prepare]`: the command that runs the
//! repository's tests, the environment and network it runs in, the services it needs and how
//! that environment is built. `[tests.prepare.python]` is `super::python`'s.

use super::{ConfigError, PythonRecipe, Result, check_python_recipe, seconds};
use airlock_policies::network::NetworkMode;
use airlock_policies::testrun::{TestRunner, is_fixed, valid_env_name};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The placeholder that stands for the prepared environment directory in `[tests]` and
/// `[tests.prepare]` values.
pub const ENV_DIR_PLACEHOLDER: &str = "{env}";

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

impl TestsConfig {
    /// The checks of `[tests]` from its runner on: variables, network, services and prepare.
    /// The command and the timeout are checked first, by `Config`.
    pub(super) fn validate_environment(
        &self,
        invalid: &dyn Fn(&str, &str) -> ConfigError,
    ) -> Result<()> {
        self.runner
            .check_command(&self.command)
            .map_err(|why| invalid("tests.runner", &why))?;
        for name in self.env.keys() {
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
            self.network,
            &self.allow,
            self.http_read_only,
            invalid,
        )?;
        if let Some(p) = &self.prepare
            && let Some(allow) = &p.allow
        {
            check_allow("tests.prepare", p.network(), allow, false, invalid)?;
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, service) in self.services.iter().enumerate() {
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
                (Some(_), _) if self.network == NetworkMode::None => {
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
        for name in &self.pass_env {
            if !valid_env_name(name) || is_fixed(name) {
                return Err(invalid(
                    "tests.pass_env",
                    &format!("{name:?} is not a variable name that can be passed"),
                ));
            }
        }
        let uses_env_dir = self
            .command
            .iter()
            .chain(self.env.values())
            .chain(self.ro.iter())
            .any(|v| v.contains(ENV_DIR_PLACEHOLDER));
        match &self.prepare {
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
                    check_python_recipe(py).map_err(|(key, problem)| {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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
}
