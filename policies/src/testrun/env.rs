//! The environment every test command runs in, the supervisor's runs and the broker's witness
//! alike: what the operator grants (read-only paths, variables, prepared directories shown
//! inside the tree) plus the variables airlock fixes. It travels in the run's registration, so
//! the two sides cannot be configured apart; the broker checks every path against its own
//! configuration before it grants one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Variables set in every test run on both sides, after the operator's (which may not name
/// them): no bytecode written into the tree and none read from it (Python looks for cached
/// bytecode only under `PYTHONPYCACHEPREFIX`, a path in the sandbox's read-only root that
/// nothing can create, so a `__pycache__/*.pyc` planted in the tree is never loaded),
/// CI-mode output, and a cargo target directory in the sandbox's private `/tmp` instead of
/// the tree.
pub const FIXED_TEST_ENV: [(&str, &str); 4] = [
    ("CI", "true"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONPYCACHEPREFIX", NO_BYTECODE_DIR),
    ("CARGO_TARGET_DIR", "/tmp/airlock-target"),
];

/// Where Python is told to keep its bytecode cache: a directory of the sandbox's read-only
/// root (a tmpfs holding only mount points) that does not exist and cannot be created.
pub const NO_BYTECODE_DIR: &str = "/.airlock-no-bytecode";

/// Where every test command sees the tree it runs on (the prepare command, the agent's runs,
/// the base inventory and the witness alike): one fixed path inside the sandbox, whatever the
/// tree's path on the host. Test ids that embed the path, and paths an install records (an
/// editable install's `.pth` file and finder, a console script), are then the same in every run
/// and on both sides.
pub const SANDBOX_TREE: &str = "/airlock/repo";

/// A prepared path shown read-only inside the tree at every test run (`node_modules` built by
/// `npm ci` in the prepare step).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeLink {
    /// The path inside the tree, relative, `/`-separated, without `..`.
    pub path: String,
    /// The host path shown there (inside the prepared environment directory).
    pub source: PathBuf,
}

/// The resolved test environment: absolute paths and final values, nothing left to expand.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestEnvironment {
    /// Host paths granted read-only at the same path (toolchains, a venv, the prepared
    /// environment directory).
    #[serde(default)]
    pub ro: Vec<PathBuf>,
    /// Variables set in the test command's environment (the operator's `env` and the values of
    /// `pass_env` as they were when the run started).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Prepared paths shown inside the tree.
    #[serde(default)]
    pub links: Vec<TreeLink>,
    /// The network of every test run (`[tests] network` and `allow`); `loopback` when absent
    /// (and left out when it is the default, so a registration reads as it did before).
    #[serde(
        default,
        skip_serializing_if = "crate::network::TestNetwork::is_default"
    )]
    pub network: crate::network::TestNetwork,
    /// Services started inside the sandbox before every test command (`[[tests.services]]`),
    /// on both sides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<TestService>,
}

/// A service a suite needs (a database server, a cache), started inside the test command's
/// own sandbox, behind its layers and on its private loopback, before the command, and
/// stopped after it: the same on the supervisor's runs and the broker's witness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestService {
    /// Its name, in errors.
    pub name: String,
    /// The argv that runs it in the foreground.
    pub command: Vec<String>,
    /// Variables for it and for the test command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Ready when a TCP connection to `127.0.0.1:PORT` succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_port: Option<u16>,
    /// Ready when this command exits 0 (instead of a port).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready_command: Vec<String>,
    /// How long it may take to become ready, in seconds.
    pub ready_timeout_secs: u64,
}

impl TestEnvironment {
    /// The variables of a test run: the operator's, then [`FIXED_TEST_ENV`].
    pub fn variables(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(k, _)| !is_fixed(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.extend(
            FIXED_TEST_ENV
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
        );
        out
    }

    /// Every host path the environment grants: the read-only roots and the link sources.
    pub fn granted_paths(&self) -> Vec<&std::path::Path> {
        self.ro
            .iter()
            .map(PathBuf::as_path)
            .chain(self.links.iter().map(|l| l.source.as_path()))
            .collect()
    }

    /// Check the shape: absolute paths without `..`, variable names that are names and not
    /// fixed ones, link paths relative and inside the tree. `Err` names the offending entry.
    pub fn validate(&self) -> Result<(), String> {
        for path in self.granted_paths() {
            if !path.is_absolute()
                || path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(format!(
                    "granted path {} must be absolute and contain no `..`",
                    path.display()
                ));
            }
        }
        for name in self.env.keys() {
            if !valid_env_name(name) {
                return Err(format!(
                    "{name:?} is not a variable name (letters, digits and `_`, not starting \
                     with a digit)"
                ));
            }
            if is_fixed(name) {
                return Err(format!(
                    "{name} is set by airlock in every test run and cannot be configured"
                ));
            }
        }
        for service in &self.services {
            if service.command.first().is_none_or(|p| p.is_empty()) {
                return Err(format!("service {:?} has no command", service.name));
            }
            if service.ready_port.is_some() != service.ready_command.is_empty() {
                return Err(format!(
                    "service {:?} needs exactly one readiness check: ready_port or \
                     ready_command",
                    service.name
                ));
            }
            if service.ready_port.is_some()
                && self.network.mode == crate::network::NetworkMode::None
            {
                return Err(format!(
                    "service {:?} is checked on a loopback port, but the tests' network is \
                     none: set network = \"loopback\" (the default) or \"proxy\"",
                    service.name
                ));
            }
            for name in service.env.keys() {
                if !valid_env_name(name) || is_fixed(name) {
                    return Err(format!(
                        "service {:?}: {name:?} is not a variable name that can be set",
                        service.name
                    ));
                }
            }
        }
        for link in &self.links {
            let p = std::path::Path::new(&link.path);
            if link.path.is_empty()
                || p.is_absolute()
                || p.components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(format!(
                    "link path {:?} must be relative to the tree, without `.` or `..`",
                    link.path
                ));
            }
        }
        Ok(())
    }
}

/// Whether `name` is one of [`FIXED_TEST_ENV`].
pub fn is_fixed(name: &str) -> bool {
    FIXED_TEST_ENV.iter().any(|(k, _)| *k == name)
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_variables_come_last_and_cannot_be_configured() {
        let mut env = TestEnvironment::default();
        env.env.insert("LANG".into(), "C.UTF-8".into());
        let vars = env.variables();
        assert_eq!(vars[0], ("LANG".to_string(), "C.UTF-8".to_string()));
        assert!(vars.iter().any(|(k, v)| k == "CI" && v == "true"));
        assert!(env.validate().is_ok());
        env.env.insert("CI".into(), "false".into());
        assert!(env.validate().unwrap_err().contains("set by airlock"));
    }

    #[test]
    fn bad_shapes_are_named() {
        let mut env = TestEnvironment::default();
        env.env.insert("1X".into(), String::new());
        assert!(env.validate().unwrap_err().contains("\"1X\""));
        let env = TestEnvironment {
            ro: vec![PathBuf::from("relative/dir")],
            ..TestEnvironment::default()
        };
        assert!(env.validate().unwrap_err().contains("relative/dir"));
        let env = TestEnvironment {
            links: vec![TreeLink {
                path: "../x".into(),
                source: PathBuf::from("/c/x"),
            }],
            ..TestEnvironment::default()
        };
        assert!(env.validate().unwrap_err().contains("../x"));
    }
}
