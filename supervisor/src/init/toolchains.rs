//! `airlock init` for Rust, Go and JavaScript trees: the test command and runner, the toolchain
//! the sandbox must be granted, and the `[tests.prepare]` that fetches the dependencies; and the
//! `[write]` allowlist proposed from where a tree's sources live. (A Python tree is `python`'s.)

use super::host::{HostFacts, sandbox_path_finds, under_system_dirs};
use super::proposal::{Detected, Ecosystem, path_text};
use super::tree::{SKIPPED_DIRS, Tree, VENV_DIRS, has_glob_meta};
use crate::config::{ENV_DIR_PLACEHOLDER, PrepareConfig, SelectorStyle};
use airlock_policies::Language;
use airlock_policies::testrun::TestRunner;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub(super) fn configure_rust(tree: &Tree, host: &HostFacts, d: &mut Detected) {
    const CARGO: &str = "~/.cargo/bin/cargo";
    let exists = |dir: &str| {
        host.home
            .as_ref()
            .is_some_and(|h| h.join(dir).symlink_metadata().is_ok())
    };
    d.tests.command = vec![CARGO.into(), "test".into()];
    d.tests.runner = TestRunner::Cargo;
    d.tests.selector_style = SelectorStyle::Append;
    for dir in [".cargo", ".rustup"] {
        if exists(dir) {
            d.tests.ro.push(format!("~/{dir}"));
        } else {
            d.warnings.push(format!(
                "~/{dir} was not found: grant the directories of your Rust toolchain in [tests] \
                 ro and fix the cargo path in the commands"
            ));
            d.comment(
                "tests.ro",
                format!("~/{dir} was not found on this host: grant your toolchain's directories."),
            );
        }
    }
    if !d.tests.ro.is_empty() {
        d.comment("tests.ro", "rustup's toolchains and the cargo proxy.");
    }
    d.tests.env = [
        ("CARGO_HOME", format!("{ENV_DIR_PLACEHOLDER}/cargo")),
        ("CARGO_NET_OFFLINE", "true".into()),
        (
            "PATH",
            format!("~/.cargo/bin:{}", airlock_sandbox::DEFAULT_PATH),
        ),
        ("RUSTUP_HOME", "~/.rustup".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    d.comment(
        "tests.env.CARGO_HOME",
        "The crates `cargo fetch` downloaded in prepare.",
    );
    d.comment(
        "tests.env.CARGO_NET_OFFLINE",
        "Test runs have no network; everything was fetched in prepare.",
    );
    d.comment("tests.env.PATH", "The cargo proxy runs `rustc` from PATH.");
    let lock_tracked = tree.has("Cargo.lock");
    let mut links = Vec::new();
    if lock_tracked {
        d.findings
            .push("Cargo.lock is tracked: test runs use it as it is".into());
    } else {
        links.push("Cargo.lock".to_string());
        d.comment(
            "tests.prepare.links",
            "The repository tracks no Cargo.lock: the one `cargo fetch` resolves is kept for \
             every test run.",
        );
    }
    d.tests.prepare = Some(PrepareConfig {
        command: vec![CARGO.into(), "fetch".into()],
        inputs: ["**/Cargo.toml", "Cargo.lock", "Cargo.toml"]
            .map(String::from)
            .to_vec(),
        links,
        env: [("CARGO_NET_OFFLINE".to_string(), "false".to_string())].into(),
        timeout_secs: prepare_timeout_secs(),
        ..PrepareConfig::default()
    });
    d.comment(
        "tests.prepare.command",
        "Downloads every dependency into {env}/cargo (CARGO_HOME).",
    );
}

pub(super) fn configure_go(host: &HostFacts, d: &mut Detected) {
    let go = match &host.go {
        Some(go) if sandbox_path_finds("go", &go.executable) => "go".to_string(),
        Some(go) => {
            if !under_system_dirs(&go.goroot) {
                d.tests.ro.push(path_text(&go.goroot));
                d.comment(
                    "tests.ro",
                    "GOROOT: the go toolchain lies outside the sandbox's system directories.",
                );
            }
            path_text(&go.executable)
        }
        None => {
            d.warnings.push(
                "go was not found on this host: the commands use `go` from the sandbox's PATH; \
                 grant your GOROOT in [tests] ro and use its bin/go if it lives elsewhere"
                    .into(),
            );
            "go".to_string()
        }
    };
    d.tests.command = vec![go.clone(), "test".into(), "-v".into(), "./...".into()];
    d.tests.runner = TestRunner::Go;
    d.tests.selector_style = SelectorStyle::Append;
    d.comment("tests.command", "-v names every test's result.");
    d.tests.env = [
        ("GOCACHE", "/tmp/gocache"),
        ("GOFLAGS", "-mod=mod"),
        ("GOMODCACHE", "{env}/gomod"),
        ("GOPROXY", "off"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    d.comment(
        "tests.env.GOCACHE",
        "The build cache, in the sandbox's private /tmp.",
    );
    d.comment(
        "tests.env.GOMODCACHE",
        "The modules `go mod download` fetched in prepare.",
    );
    d.comment(
        "tests.env.GOPROXY",
        "Test runs have no network; every module was fetched in prepare.",
    );
    d.tests.prepare = Some(PrepareConfig {
        command: vec![go, "mod".into(), "download".into()],
        inputs: vec!["go.mod".into(), "go.sum".into()],
        // Empty means Go's own default proxy; without it prepare would inherit the test runs'
        // GOPROXY=off and download nothing.
        env: [("GOPROXY".to_string(), String::new())].into(),
        timeout_secs: prepare_timeout_secs(),
        ..PrepareConfig::default()
    });
    d.comment(
        "tests.prepare.env.GOPROXY",
        "Empty: Go's default proxy for the download (the test runs' GOPROXY is off).",
    );
}

/// The parts of `package.json` detection reads.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PackageJson {
    dependencies: BTreeMap<String, serde::de::IgnoredAny>,
    #[serde(rename = "devDependencies")]
    dev_dependencies: BTreeMap<String, serde::de::IgnoredAny>,
    jest: Option<serde::de::IgnoredAny>,
}

/// vitest or jest, and why; `None` without a `package.json` naming one.
pub(super) fn javascript_runner(tree: &Tree, d: &mut Detected) -> Option<(TestRunner, String)> {
    if !tree.has("package.json") {
        return None;
    }
    let text = tree.read("package.json").unwrap_or_default();
    let package: PackageJson = match serde_json::from_str(&text) {
        Ok(p) => p,
        Err(e) => {
            d.warnings.push(format!(
                "package.json is not valid JSON ({e}): it was ignored"
            ));
            return None;
        }
    };
    let depends = |name: &str| {
        package.dependencies.contains_key(name) || package.dev_dependencies.contains_key(name)
    };
    if depends("vitest") {
        return Some((TestRunner::Vitest, "package.json depends on vitest".into()));
    }
    if depends("jest") {
        return Some((TestRunner::Jest, "package.json depends on jest".into()));
    }
    if package.jest.is_some() {
        return Some((TestRunner::Jest, "package.json has a jest key".into()));
    }
    if let Some(config) = tree
        .files
        .iter()
        .find(|f| !f.contains('/') && f.starts_with("jest.config."))
    {
        return Some((TestRunner::Jest, config.clone()));
    }
    d.findings.push(
        "package.json names neither vitest nor jest: no JavaScript test command is configured"
            .into(),
    );
    None
}

pub(super) fn configure_javascript(
    tree: &Tree,
    host: &HostFacts,
    runner: TestRunner,
    d: &mut Detected,
) {
    let (node, npm) = match &host.node {
        Some(node) if sandbox_path_finds("node", node) => ("node".to_string(), "npm".to_string()),
        Some(node) => {
            let bin = node.parent().unwrap_or(Path::new("/"));
            let prefix = if bin.ends_with("bin") {
                bin.parent().unwrap_or(bin)
            } else {
                bin
            };
            if !under_system_dirs(prefix) {
                d.tests.ro.push(path_text(prefix));
                d.comment(
                    "tests.ro",
                    "node's installation: it lies outside the sandbox's system directories.",
                );
            }
            d.tests.env.insert(
                "PATH".into(),
                format!("{}:{}", path_text(bin), airlock_sandbox::DEFAULT_PATH),
            );
            d.comment(
                "tests.env.PATH",
                "node's bin directory first: npm and the runners start `node` from PATH.",
            );
            (path_text(node), path_text(&bin.join("npm")))
        }
        None => {
            d.warnings.push(
                "node was not found on this host: the commands use `node` and `npm` from the \
                 sandbox's PATH; grant your node installation in [tests] ro if it lives \
                 elsewhere"
                    .into(),
            );
            ("node".to_string(), "npm".to_string())
        }
    };
    d.tests.command = match runner {
        TestRunner::Vitest => vec![
            node,
            "node_modules/vitest/vitest.mjs".into(),
            "run".into(),
            "--reporter=verbose".into(),
        ],
        _ => vec![
            node,
            "node_modules/jest/bin/jest.js".into(),
            "--verbose".into(),
        ],
    };
    d.comment(
        "tests.command",
        "The runner from node_modules (prepared by npm); the verbose reporter names every test's \
         result.",
    );
    d.tests.runner = runner;
    d.tests.selector_style = SelectorStyle::Append;
    let install = if tree.has("package-lock.json") {
        "ci"
    } else {
        "install"
    };
    d.tests.prepare = Some(PrepareConfig {
        command: vec![npm, install.into(), "--no-audit".into(), "--no-fund".into()],
        inputs: vec!["package-lock.json".into(), "package.json".into()],
        links: vec!["node_modules".into()],
        timeout_secs: prepare_timeout_secs(),
        ..PrepareConfig::default()
    });
    d.comment(
        "tests.prepare.command",
        if install == "ci" {
            "Installs exactly what package-lock.json pins."
        } else {
            "No package-lock.json: installs what package.json asks for."
        },
    );
    d.comment(
        "tests.prepare.links",
        "node_modules, as prepare built it, is shown read-only in every test run.",
    );
}

/// The top-level directories holding source files of `ecosystem` (`dir/**`), and `*.ext` for
/// its files at the top level; sorted.
pub(super) fn allowlist(tree: &Tree, ecosystem: Ecosystem) -> Vec<String> {
    let languages: &[Language] = match ecosystem {
        Ecosystem::Rust => &[Language::Rust],
        Ecosystem::Go => &[Language::Go],
        Ecosystem::JavaScript => &[Language::Javascript, Language::Typescript],
        Ecosystem::Python => &[Language::Python],
    };
    let mut out = BTreeSet::new();
    for file in tree.sources(languages) {
        match file.split_once('/') {
            Some((dir, _)) => {
                if !dir.starts_with('.')
                    && !SKIPPED_DIRS.contains(&dir)
                    && !VENV_DIRS.contains(&dir)
                    && !has_glob_meta(dir)
                {
                    out.insert(format!("{dir}/**"));
                }
            }
            None => {
                if let Some((_, ext)) = file.rsplit_once('.')
                    && !file.starts_with('.')
                    && !has_glob_meta(ext)
                {
                    out.insert(format!("*.{ext}"));
                }
            }
        }
    }
    out.into_iter().collect()
}

pub(super) fn prepare_timeout_secs() -> u64 {
    PrepareConfig::default().timeout().as_secs()
}
