//! `airlock init`: a first `airlock.toml` for a repository, from what its working tree shows, and
//! the `[repositories."NAME"]` block of `broker.toml` that goes with it.
//!
//! Detection is a handful of plain rules, repeated in the header of every generated file
//! ([`DETECTION_RULES`]): `Cargo.toml` means `cargo test`, `go.mod` means `go test`, a
//! `package.json` naming vitest or jest means that runner, and a Python tree means pytest when it
//! is configured or imported, else unittest when it has test files. The toolchain is the one the
//! sandbox will find: a venv in the repository, else the host's, resolved to its real executable
//! and granted read-only when it lies outside the sandbox's system directories; a Python tree
//! gets the `[tests.prepare.python]` recipe (`python`), and what the project's CI files say is
//! read too (`ci`). What the host
//! offers is gathered once into [`HostFacts`], so the rules are tested on faked hosts; the output
//! depends only on the tree and those facts, and every list in it is sorted.
//!
//! This module never reads a network and never runs the repository's code: it asks `git` for the
//! tracked files and the `origin` URL (with `core.fsmonitor` off), `python3` and each
//! `python3.N` it finds (isolated, `-I`) and `go` where they live. It writes nothing but the one file it is asked to
//! ([`write_config`]), which must load with [`Config::parse`] first.

use crate::config::{
    AsOf, Budgets, Config, ConfigError, PathsConfig, PrepareConfig, PythonRecipe, SelectorStyle,
};
use crate::config::{ENV_DIR_PLACEHOLDER, TestsConfig};
use airlock_policies::testrun::TestRunner;
use airlock_policies::{Language, is_test_path, language_of};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod ci;
mod python;

use ci::{from_ci, read_ci};
use python::{configure_python, python_runner};
#[cfg(test)]
use python::{setup_cfg_extras, setup_py_extras};

/// The broker socket a generated file points at (the README's layout).
pub const DEFAULT_BROKER_SOCKET: &str = "/run/airlock/broker.sock";

/// How `init` recognises a project, as the generated file's header states it.
pub const DETECTION_RULES: &str = "\
How `airlock init` recognises a project (the first rule that matches wins):
  Cargo.toml -> cargo test; go.mod -> go test; package.json naming vitest or jest -> that runner;
  Python -> pytest when pytest.ini, [tool.pytest...] in pyproject.toml, [tool:pytest] in
  setup.cfg, [pytest] in tox.ini, a conftest.py or a test file importing pytest; else unittest
  when test files (test_*.py, *_test.py, tests.py) exist.
A Python environment is a venv prepare builds from what the project declares (extras, dependency
groups, requirements files, a lockfile), from a venv in the repository (.venv, venv), else the
interpreter each pin gets among the host's (auto) or the host's python3. A toolchain
outside the sandbox's system directories (/usr, /bin, /lib, ...) is granted read-only in `ro`,
since a test run sees nothing else of the host.";

/// Most files listed from a tree that is not a git work tree (the rest are not looked at).
const MAX_WALK_FILES: usize = 100_000;
/// Most bytes of one file read for a detection rule.
const MAX_READ_BYTES: u64 = 256 * 1024;
/// Most Python test files scanned for `import pytest`.
const MAX_SCANNED_TEST_FILES: usize = 200;
/// Directories never listed when walking a tree: dependencies and build output.
const SKIPPED_DIRS: [&str; 4] = ["node_modules", "target", "__pycache__", "vendor"];
/// Venv directories looked for at the top of the repository, in order.
const VENV_DIRS: [&str; 2] = [".venv", "venv"];

/// Errors writing the generated configuration.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The output file exists and `--force` was not given.
    #[error("{} already exists: pass --force to overwrite it", path.display())]
    Exists {
        /// The output file.
        path: PathBuf,
    },
    /// The output file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The generated text does not load as an `airlock.toml`; nothing was written.
    #[error(
        "the generated configuration does not load, so it was not written (a bug in airlock init): {0}"
    )]
    Generated(#[from] ConfigError),
}

/// Result alias of this module.
pub type Result<T> = std::result::Result<T, InitError>;

/// The interpreter `python3` runs on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonFacts {
    /// Its real executable (`sys.executable`, symlinks resolved).
    pub executable: PathBuf,
    /// `sys.prefix` (differs from `base_prefix` inside an activated venv).
    pub prefix: PathBuf,
    /// `sys.base_prefix`: the installation the standard library lives in.
    pub base_prefix: PathBuf,
}

/// The `go` toolchain on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFacts {
    /// Its real executable (symlinks resolved).
    pub executable: PathBuf,
    /// `go env GOROOT`.
    pub goroot: PathBuf,
}

/// What `init` needs to know of the host, gathered once by [`HostFacts::current`] and faked in
/// tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The operator's `$HOME`: what `~` means in `airlock.toml`.
    pub home: Option<PathBuf>,
    /// The interpreter `python3` runs, asked from the repository's directory (so pyenv honours
    /// its `.python-version`).
    pub python: Option<PythonFacts>,
    /// `node` on the operator's `PATH`, resolved to its real executable.
    pub node: Option<PathBuf>,
    /// `go` on the operator's `PATH`.
    pub go: Option<GoFacts>,
    /// Every CPython on the host (`python3.N` on `PATH`, in `/usr/bin`, under pyenv): with two
    /// or more, a Python recipe chooses among them per pin (`interpreter = "auto"`).
    pub pythons: Vec<crate::recipe::HostPython>,
    /// The directory of the host's PostgreSQL server binaries (`initdb`, `postgres`), for a
    /// service the project's CI starts.
    pub postgres_bin: Option<PathBuf>,
    /// The host's `redis-server`.
    pub redis_server: Option<PathBuf>,
    /// The absolute directory the generated `airlock.toml` is written to: its relative `[paths]`
    /// resolve against it.
    pub config_dir: PathBuf,
}

impl HostFacts {
    /// The facts of this host, for the repository at `repo` and a configuration written into
    /// `config_dir`. A tool that is missing or does not answer is `None`.
    pub fn current(repo: &Path, config_dir: &Path) -> HostFacts {
        let python = command_lines(
            Command::new("python3")
                .args([
                    "-I",
                    "-c",
                    "import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)",
                ])
                .current_dir(repo),
        )
        .and_then(|lines| match lines.as_slice() {
            [exe, prefix, base] if Path::new(exe).is_absolute() => Some(PythonFacts {
                executable: real_path(Path::new(exe)),
                prefix: PathBuf::from(prefix),
                base_prefix: PathBuf::from(base),
            }),
            _ => None,
        });
        let node = find_on_path("node").map(|p| real_path(&p));
        let go = find_on_path("go").and_then(|exe| {
            let goroot = command_lines(Command::new(&exe).args(["env", "GOROOT"]))?;
            let goroot = PathBuf::from(goroot.first()?);
            goroot.is_absolute().then(|| GoFacts {
                executable: real_path(&exe),
                goroot,
            })
        });
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        HostFacts {
            postgres_bin: crate::ci_files::postgres_bin(),
            redis_server: find_on_path("redis-server").map(|p| real_path(&p)),
            pythons: crate::recipe::host_interpreters(home.as_deref()),
            home,
            python,
            node,
            go,
            config_dir: config_dir.to_path_buf(),
        }
    }
}

/// The ecosystem a tree was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ecosystem {
    /// `Cargo.toml`.
    Rust,
    /// `go.mod`.
    Go,
    /// `package.json` naming vitest or jest.
    JavaScript,
    /// Python test files or pytest configuration.
    Python,
}

impl Ecosystem {
    /// A person's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Ecosystem::Rust => "Rust",
            Ecosystem::Go => "Go",
            Ecosystem::JavaScript => "JavaScript",
            Ecosystem::Python => "Python",
        }
    }
}

/// What [`detect`] found, and the configuration it proposes.
#[derive(Debug, Clone)]
pub struct Detected {
    /// The repository's working tree, absolute.
    pub repo: PathBuf,
    /// The default repository name: `owner/name` of a GitHub `origin`, else the directory's name.
    pub name: String,
    /// What the tree was recognised as; `None` when nothing was.
    pub ecosystem: Option<Ecosystem>,
    /// Why, one line per finding (written in the file's header).
    pub findings: Vec<String>,
    /// What the operator must check (written in the header and printed on stderr).
    pub warnings: Vec<String>,
    /// The proposed `[tests]` section.
    pub tests: TestsConfig,
    /// Extra comment lines above keys of `[tests]`, by dotted key (`tests.ro`,
    /// `tests.env.PYTHONPATH`, `tests.prepare.command`).
    pub comments: BTreeMap<String, Vec<String>>,
    /// The proposed `[write] allowlist`, sorted (empty: the policy's default).
    pub allowlist: Vec<String>,
    /// The operator's home, to expand `~` for `broker.toml` (which does not).
    pub home: Option<PathBuf>,
    /// The directory the file is written to ([`HostFacts::config_dir`]).
    pub config_dir: PathBuf,
}

impl Detected {
    /// Every host path the proposed configuration grants test runs read-only, absolute and sorted:
    /// `[tests] ro` with `~` expanded, and the prepared environments' directory.
    pub fn granted_paths(&self) -> Vec<String> {
        let mut out: BTreeSet<String> = self
            .tests
            .ro
            .iter()
            .map(|p| expand_home(p, self.home.as_deref()))
            .collect();
        out.insert(path_text(
            &self.config_dir.join(PathsConfig::default().envs_dir),
        ));
        out.into_iter().collect()
    }

    fn comment(&mut self, key: &str, line: impl Into<String>) {
        self.comments
            .entry(key.to_string())
            .or_default()
            .push(line.into());
    }
}

/// The files of a tree, as `/`-separated paths relative to its root.
struct Tree {
    root: PathBuf,
    files: BTreeSet<String>,
}

impl Tree {
    /// The tracked files of a git work tree, else every file found by walking it (dot-directories,
    /// venvs, dependencies and build output left out).
    fn list(root: &Path, warnings: &mut Vec<String>) -> Tree {
        let files = git_tracked_files(root).unwrap_or_else(|| walk(root, warnings));
        Tree {
            root: root.to_path_buf(),
            files,
        }
    }

    fn has(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    /// The text of a listed file (its first [`MAX_READ_BYTES`]), if it reads as UTF-8.
    fn read(&self, path: &str) -> Option<String> {
        use std::io::Read;
        let file = std::fs::File::open(self.root.join(path)).ok()?;
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES).read_to_end(&mut bytes).ok()?;
        String::from_utf8(bytes).ok()
    }

    fn contains(&self, path: &str, needle: &str) -> bool {
        self.has(path) && self.read(path).is_some_and(|t| t.contains(needle))
    }

    /// Files of `languages`.
    fn sources<'a>(&'a self, languages: &'a [Language]) -> impl Iterator<Item = &'a String> + 'a {
        self.files
            .iter()
            .filter(move |f| language_of(f).is_some_and(|l| languages.contains(&l)))
    }
}

/// Inspect the working tree at `repo` and propose its configuration. Never fails: what cannot
/// be read counts as absent, and what the operator must check is in [`Detected::warnings`].
pub fn detect(repo: &Path, host: &HostFacts) -> Detected {
    let repo = std::path::absolute(repo).unwrap_or_else(|_| repo.to_path_buf());
    let mut warnings = Vec::new();
    let tree = Tree::list(&repo, &mut warnings);
    let mut d = Detected {
        name: repository_name(&repo),
        repo,
        ecosystem: None,
        findings: Vec::new(),
        warnings,
        tests: TestsConfig::default(),
        comments: BTreeMap::new(),
        allowlist: Vec::new(),
        home: host.home.clone(),
        config_dir: host.config_dir.clone(),
    };

    let js = javascript_runner(&tree, &mut d);
    let python = python_runner(&tree);
    let mut candidates: Vec<(Ecosystem, String)> = Vec::new();
    if tree.has("Cargo.toml") {
        candidates.push((Ecosystem::Rust, "Cargo.toml".into()));
    }
    if tree.has("go.mod") {
        candidates.push((Ecosystem::Go, "go.mod".into()));
    }
    if let Some((runner, why)) = &js {
        candidates.push((Ecosystem::JavaScript, format!("{runner} ({why})")));
    }
    if let Some((runner, why)) = &python {
        candidates.push((Ecosystem::Python, format!("{runner} ({why})")));
    }
    let Some((ecosystem, why)) = candidates.first().cloned() else {
        d.warnings.push(
            "nothing was recognised (no Cargo.toml, go.mod, package.json naming vitest or jest, \
             nor Python tests): [tests] holds the default unittest command; set the command and \
             runner by hand"
                .into(),
        );
        return d;
    };
    d.ecosystem = Some(ecosystem);
    d.findings
        .push(format!("Recognised {}: {why}", ecosystem.name()));
    for (other, why) in candidates.iter().skip(1) {
        d.findings.push(format!(
            "Also found {}: {why} (airlock runs one test command; edit [tests] to choose it \
             instead)",
            other.name()
        ));
    }
    let ci = read_ci(&tree);
    match ecosystem {
        Ecosystem::Rust => configure_rust(&tree, host, &mut d),
        Ecosystem::Go => configure_go(host, &mut d),
        Ecosystem::JavaScript => {
            if let Some((runner, _)) = js {
                configure_javascript(&tree, host, runner, &mut d);
            }
        }
        Ecosystem::Python => {
            if let Some((runner, _)) = python {
                configure_python(&tree, host, runner, &ci.installs, &mut d);
            }
        }
    }
    d.allowlist = allowlist(&tree, ecosystem);
    from_ci(&tree, &ci, host, &mut d);
    d
}

fn configure_rust(tree: &Tree, host: &HostFacts, d: &mut Detected) {
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

fn configure_go(host: &HostFacts, d: &mut Detected) {
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
fn javascript_runner(tree: &Tree, d: &mut Detected) -> Option<(TestRunner, String)> {
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

fn configure_javascript(tree: &Tree, host: &HostFacts, runner: TestRunner, d: &mut Detected) {
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
fn allowlist(tree: &Tree, ecosystem: Ecosystem) -> Vec<String> {
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

/// Render the commented `airlock.toml` of `d`. It loads with [`Config::parse`] to exactly
/// `d.tests` and `d.allowlist`.
pub fn render_airlock_toml(d: &Detected) -> String {
    let mut o = Out::default();
    o.comment(&format!(
        "airlock.toml for {}, written by `airlock init` from the working tree at {}.",
        d.name,
        d.repo.display()
    ));
    o.comment(
        "It is operator input: airlock never reads it from a checkout, so keep it outside the \
         repository. Review each value; the line above every key says what it does.",
    );
    o.blank();
    for finding in &d.findings {
        o.comment(&format!("{finding}."));
    }
    for warning in &d.warnings {
        o.comment(&format!("Warning: {warning}."));
    }
    if !d.findings.is_empty() || !d.warnings.is_empty() {
        o.blank();
    }
    for line in DETECTION_RULES.lines() {
        o.comment(line);
    }
    o.blank();

    let t = &d.tests;
    o.line("[tests]");
    o.comment("The full-run command, as argv (no shell), run from the tree root; its program must be on the sandbox's PATH or under `ro`.");
    o.extra(d, "tests.command");
    o.key("command", &array(&t.command));
    o.comment("Reads the results and selects one test: pytest | unittest | cargo | go | jest | vitest (checked against the command).");
    o.key("runner", &quote(t.runner.name()));
    o.comment("How a run_tests selector is appended: dotted | node-id | append.");
    o.key("selector_style", &quote(t.selector_style.name()));
    o.comment("Wall-clock limit of one test run, in seconds.");
    o.key("timeout_secs", &t.timeout_secs.to_string());
    o.comment("Host paths every test run may read (each must exist; ~ is your HOME); nothing else of the host is visible but /usr, /bin, /sbin and /lib*.");
    o.extra(d, "tests.ro");
    o.key("ro", &array(&t.ro));
    o.comment("Your variables passed through when set, e.g. [\"LANG\"].");
    o.key("pass_env", &array(&t.pass_env));
    o.comment("The network of every test run and of the broker's witness: none | loopback (a private loopback, for the suite's own servers) | proxy (also the hosts in `allow`, through the egress proxy) | host.");
    o.key("network", &quote(&t.network.to_string()));
    o.blank();
    o.line("[tests.env]");
    o.comment("Variables of every test run; {env} is the prepared environment directory. CI, PYTHONDONTWRITEBYTECODE, PYTHONPYCACHEPREFIX and CARGO_TARGET_DIR are fixed by airlock.");
    o.vars(d, "tests.env", &t.env);
    for service in &t.services {
        o.blank();
        o.line("[[tests.services]]");
        o.comment(
            "A service started inside each test run's sandbox before the tests, stopped after.",
        );
        o.extra(d, &format!("tests.services.{}", service.name));
        o.key("name", &quote(&service.name));
        o.key("command", &array(&service.command));
        if let Some(port) = service.ready_port {
            o.comment("Ready when 127.0.0.1:PORT accepts a connection.");
            o.key("ready_port", &port.to_string());
        } else {
            o.comment("Ready when this command exits 0.");
            o.key("ready_command", &array(&service.ready_command));
        }
        o.key(
            "ready_timeout_secs",
            &service.ready_timeout_secs().to_string(),
        );
        o.line(&format!(
            "env = {{ {} }}",
            service
                .env
                .iter()
                .map(|(k, v)| format!("{} = {}", quote_key(k), quote(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(p) = &t.prepare {
        o.blank();
        o.line("[tests.prepare]");
        o.comment("Builds {env} once per repository, commit and content of `inputs`, in the sandbox with the network, on the pinned files only.");
        if p.python.is_some() {
            o.comment("More steps after the recipe below, as argv (no shell); {env} is the environment directory.");
        } else {
            o.comment("The command, as argv (no shell); {env} is the environment directory.");
        }
        o.extra(d, "tests.prepare.command");
        o.key("command", &array(&p.command));
        o.comment("Globs of tracked files whose content keys the environment.");
        o.extra(d, "tests.prepare.inputs");
        o.key("inputs", &array(&p.inputs));
        o.comment("Paths prepare creates in the tree, shown read-only in every test run.");
        o.extra(d, "tests.prepare.links");
        o.key("links", &array(&p.links));
        o.comment("Wall-clock limit of the prepare command, in seconds.");
        o.key("timeout_secs", &p.timeout_secs.to_string());
        if let Some(r) = &p.python {
            o.blank();
            o.line("[tests.prepare.python]");
            o.comment("airlock builds a virtualenv of its own in {env}/venv, brings its pip up to date and installs what follows.");
            o.extra(d, "tests.prepare.python");
            o.comment("The venv's base interpreter.");
            o.key("interpreter", &quote(&r.interpreter));
            o.comment("Install the project itself, editable: the files its build generates exist in every test run.");
            o.key("editable", if r.editable { "true" } else { "false" });
            o.comment("Its extras installed with it, its PEP 735 dependency groups, requirements files of the tree, and more packages.");
            o.key("extras", &array(&r.extras));
            o.key("groups", &array(&r.groups));
            o.key("requirements", &array(&r.requirements));
            o.key("packages", &array(&r.packages));
            o.comment("Packages installed each on its own after the rest; one that does not install is left out (said by doctor).");
            o.key("optional", &array(&r.optional));
            o.comment(
                "\"pin\": releases uploaded before the pinned commit only; \"latest\": today's.",
            );
            o.key(
                "as_of",
                &quote(match r.as_of {
                    AsOf::Pin => "pin",
                    AsOf::Latest => "latest",
                }),
            );
            match &r.lockfile {
                Some(lock) => {
                    o.comment("The lockfile whose pins constrain every install.");
                    o.key("lockfile", &quote(lock));
                }
                None => o.comment("lockfile = \"uv.lock\"  # or poetry.lock, Pipfile.lock, pylock.toml: its pins constrain every install"),
            }
        }
        if !p.env.is_empty() {
            o.blank();
            o.line("[tests.prepare.env]");
            o.comment("Variables of the prepare command only, over [tests.env].");
            o.vars(d, "tests.prepare.env", &p.env);
        }
    } else {
        o.blank();
        o.comment("No [tests.prepare]: there is nothing to install. Add one to install dependencies into {env} (keys: command, inputs, links, env, timeout_secs).");
    }
    o.blank();

    o.line("[write]");
    o.comment("Globs of the paths the agent may write; the refused classes (CI config, manifests, lockfiles, hooks, dot-directories) always win. Empty: the policy's default.");
    if let Some(e) = d.ecosystem {
        o.comment(&format!(
            "Suggested from the top-level directories holding {} files.",
            e.name()
        ));
    }
    o.key("allowlist", &array(&d.allowlist));
    o.blank();

    let b = Budgets::default();
    o.line("[budgets]");
    o.comment(
        "Limits that end a run as an escalation; the defaults are shown, uncomment to change.",
    );
    for (key, value, what) in [
        ("max_turns", b.max_turns, "model turns of the supervisor"),
        (
            "max_full_runs",
            b.max_full_runs,
            "test runs without a selector",
        ),
        (
            "max_reads",
            b.max_reads,
            "read_file calls of the supervisor",
        ),
        (
            "max_repair_prompts",
            b.max_repair_prompts,
            "repair prompts for an invalid final message",
        ),
        (
            "reader_max_reads",
            b.reader_max_reads,
            "upper bound of a reader worker's reads",
        ),
        (
            "reader_max_turns",
            b.reader_max_turns,
            "upper bound of a reader worker's turns",
        ),
        ("max_refusals", b.max_refusals, "write refusals tolerated"),
    ] {
        o.line(&format!("# {key} = {value}  # {what}"));
    }
    o.blank();

    o.line("[model]");
    o.comment("The model that drives the run (`airlock run --model` overrides it), for example:");
    o.line("# spec = \"anthropic:claude-sonnet-4-5\"");
    o.blank();

    o.line("[broker]");
    o.comment("The broker's Unix socket (`socket` in broker.toml).");
    o.key("socket", &quote(DEFAULT_BROKER_SOCKET));
    o.comment("This repository's key in broker.toml ([repositories.\"NAME\"], printed by `airlock init`).");
    o.key("repository", &quote(&d.name));
    o.blank();

    o.line("[github]");
    o.comment("For `airlock run --issue https://github.com/OWNER/REPO/issues/N` (or github:OWNER/REPO#N).");
    o.comment("The REST API base (GitHub Enterprise: https://HOST/api/v3).");
    o.line("# api_url = \"https://api.github.com\"");
    o.comment("The variable holding a read token (none is needed for a public repository).");
    o.line("# token_env = \"GITHUB_TOKEN\"");
    o.comment("GitHub issue N becomes issue id KEY-N (2 to 6 capital letters).");
    o.line("# project_key = \"ACME\"");
    o.comment("Include the issue's comments, each marked with its author.");
    o.line("# comments = false");
    o.blank();

    let paths = PathsConfig::default();
    o.line("[paths]");
    o.comment("Every record is kept in airlock's data directory unless set here ($AIRLOCK_HOME, else $XDG_DATA_HOME/airlock, else ~/.local/share/airlock); relative paths resolve against this file's directory.");
    o.comment("Each run writes <runs_root>/<run_id>/; must equal `runs_root` in broker.toml.");
    o.line(&format!(
        "# runs_root = {}",
        quote(&path_text(&paths.runs_root))
    ));
    o.comment("The hash-chained audit log every step is appended to (`airlock audit` reads it).");
    o.line(&format!(
        "# audit_log = {}",
        quote(&path_text(&paths.audit_log))
    ));
    o.comment("The repository mirror cache.");
    o.line(&format!(
        "# cache_dir = {}",
        quote(&path_text(&paths.cache_dir))
    ));
    o.comment("The retrieval index.");
    o.line(&format!(
        "# index_dir = {}",
        quote(&path_text(&paths.index_dir))
    ));
    o.comment(
        "Prepared test environments; broker.toml's `allow_ro` for this repository must include it.",
    );
    o.line(&format!(
        "# envs_dir = {}",
        quote(&path_text(&paths.envs_dir))
    ));
    o.text
}

/// Render the `[repositories."NAME"]` block of `broker.toml` for `d`, with every path the
/// generated `airlock.toml` grants under `allow_ro`.
pub fn render_broker_block(d: &Detected, name: &str) -> String {
    let paths = PathsConfig::default();
    let mut o = Out::default();
    o.comment(&format!(
        "For broker.toml: the repository at {} (written by `airlock init`).",
        d.repo.display()
    ));
    o.comment(&format!(
        "The broker's `runs_root` must be {} and its `socket` {}, as in the airlock.toml.",
        d.config_dir.join(&paths.runs_root).display(),
        DEFAULT_BROKER_SOCKET
    ));
    o.line(&format!("[repositories.{}]", quote(name)));
    o.comment("The broker's own clone (witness trees and approved commits are built from it); a clone owned by the broker's user is safer than your working tree.");
    o.key("clone", &quote(&path_text(&d.repo)));
    o.comment("The remote of the clone that approved branches are pushed to.");
    o.key("remote", &quote("origin"));
    if name.split('/').filter(|p| !p.is_empty()).count() != 2 {
        let repo = name.rsplit('/').next().unwrap_or(name);
        o.comment("`owner/name` on the forge, required because the key above is not of that form: replace OWNER.");
        o.key("forge_repo", &quote(&format!("OWNER/{repo}")));
    }
    o.comment("The variable holding the forge token; without it (or when empty) no draft pull request is opened:");
    o.line("# forge_token_env = \"AIRLOCK_FORGE_TOKEN\"");
    o.comment("Host paths its test runs may be granted read-only: airlock.toml's [tests] ro and its [paths] envs_dir.");
    o.line("allow_ro = [");
    for path in d.granted_paths() {
        o.line(&format!("    {},", quote(&path)));
    }
    o.line("]");
    o.text
}

/// Write `text` to `path` after checking it loads as an `airlock.toml`; an existing file is
/// refused unless `force`.
pub fn write_config(path: &Path, text: &str, force: bool) -> Result<()> {
    use std::io::Write;
    Config::parse(text, path)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            InitError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            InitError::Write {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| InitError::Write {
            path: path.to_path_buf(),
            source,
        })
}

/// `owner/name` of a GitHub remote URL (`https://github.com/o/n.git`, `git@github.com:o/n`,
/// `ssh://git@github.com/o/n`), `None` for any other URL.
pub fn github_slug(url: &str) -> Option<String> {
    let url = url.trim();
    let path = if let Some(rest) = url.strip_prefix("git@github.com:") {
        rest
    } else {
        let (_, rest) = url.split_once("://")?;
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next().unwrap_or(authority);
        let host = host.split(':').next().unwrap_or(host);
        if !(host.eq_ignore_ascii_case("github.com") || host.eq_ignore_ascii_case("www.github.com"))
        {
            return None;
        }
        path
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let parts: Vec<&str> = path.split('/').collect();
    let valid = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match parts.as_slice() {
        [owner, name] if valid(owner) && valid(name) => Some(format!("{owner}/{name}")),
        _ => None,
    }
}

/// `owner/name` of the GitHub `origin` of the git work tree at `repo`, else its directory's name.
fn repository_name(repo: &Path) -> String {
    if repo.join(".git").exists()
        && let Some(lines) = command_lines(
            Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["remote", "get-url", "origin"]),
        )
        && let Some(slug) = lines.first().and_then(|url| github_slug(url))
    {
        return slug;
    }
    let real = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    real.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repository".into())
}

/// The tracked files of the git work tree whose top is `root`; `None` when it is not one.
fn git_tracked_files(root: &Path) -> Option<BTreeSet<String>> {
    if !root.join(".git").exists() {
        return None;
    }
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["-c", "core.fsmonitor=false", "ls-files", "-z"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(
        output
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .filter_map(|p| std::str::from_utf8(p).ok())
            .map(String::from)
            .collect(),
    )
}

/// Every file under `root`, without following symlinks, leaving out dot-directories, venvs,
/// [`SKIPPED_DIRS`] and names that are not UTF-8; at most [`MAX_WALK_FILES`].
fn walk(root: &Path, warnings: &mut Vec<String>) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(String::from) else {
                continue;
            };
            let rel = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if name.starts_with('.')
                    || SKIPPED_DIRS.contains(&name.as_str())
                    || entry.path().join("pyvenv.cfg").exists()
                {
                    continue;
                }
                pending.push(rel);
            } else {
                if files.len() >= MAX_WALK_FILES {
                    warnings.push(format!(
                        "the tree has more than {MAX_WALK_FILES} files; only the first were \
                         looked at"
                    ));
                    return files;
                }
                files.insert(rel);
            }
        }
    }
    files
}

/// `home = ...` of a venv's `pyvenv.cfg`.
fn read_pyvenv_home(cfg: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cfg).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home")
            .then(|| PathBuf::from(value.trim()))
            .filter(|p| p.is_absolute())
    })
}

/// Whether the sandbox shows `path` without a grant.
fn under_system_dirs(path: &Path) -> bool {
    crate::recipe::in_system_dirs(path)
}

/// Whether looking `name` up on the sandbox's default `PATH` finds the executable `real`.
fn sandbox_path_finds(name: &str, real: &Path) -> bool {
    airlock_sandbox::DEFAULT_PATH.split(':').any(|dir| {
        Path::new(dir)
            .join(name)
            .canonicalize()
            .is_ok_and(|found| found == real)
    })
}

/// The first executable file `name` on the operator's `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The non-empty lines a command prints on success; `None` when it cannot run or fails.
fn command_lines(command: &mut Command) -> Option<Vec<String>> {
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
    )
}

fn real_path(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

fn prepare_timeout_secs() -> u64 {
    PrepareConfig::default().timeout().as_secs()
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `~` or a leading `~/` replaced by `home`, as `airlock.toml` reads it.
fn expand_home(value: &str, home: Option<&Path>) -> String {
    match home {
        Some(home) if value == "~" || value.starts_with("~/") => {
            format!("{}{}", home.display(), &value[1..])
        }
        _ => value.to_string(),
    }
}

fn has_glob_meta(text: &str) -> bool {
    text.contains(['*', '?', '[', ']', '{', '}', '\\', '!'])
}

/// A file name as a glob matching only itself.
fn glob_literal(path: &str) -> String {
    path.chars()
        .map(|c| {
            if "*?[]{}".contains(c) {
                format!("[{c}]")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn array(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The text being rendered.
#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }

    /// A comment line; a control character (a newline in a path) would end the comment, so it
    /// is shown as `?`.
    fn comment(&mut self, text: &str) {
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        if text.is_empty() {
            self.line("#");
        } else {
            self.line(&format!("# {text}"));
        }
    }

    fn key(&mut self, key: &str, value: &str) {
        self.line(&format!("{key} = {value}"));
    }

    /// The extra comment lines of `d` for `key`.
    fn extra(&mut self, d: &Detected, key: &str) {
        for line in d.comments.get(key).into_iter().flatten() {
            self.comment(line);
        }
    }

    /// One variable a line, each under its extra comments (names are valid bare keys: the
    /// config refuses others).
    fn vars(&mut self, d: &Detected, table: &str, vars: &BTreeMap<String, String>) {
        for (name, value) in vars {
            self.extra(d, &format!("{table}.{name}"));
            self.key(&quote_key(name), &quote(value));
        }
    }
}

/// A key, bare when it can be.
fn quote_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_string()
    } else {
        quote(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAKE_PYTHON: &str = "/opt/fakepy/3.11/bin/python3.11";
    const FAKE_PYTHON_PREFIX: &str = "/opt/fakepy/3.11";
    const FAKE_NODE: &str = "/opt/node-v20/bin/node";
    const FAKE_GO: &str = "/opt/go/bin/go";

    struct Fixture {
        repo: tempfile::TempDir,
        home: tempfile::TempDir,
    }

    impl Fixture {
        fn new(files: &[(&str, &str)]) -> Fixture {
            let repo = tempfile::tempdir().unwrap();
            for (path, text) in files {
                let path = repo.path().join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            let home = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(home.path().join(".cargo/bin")).unwrap();
            std::fs::create_dir_all(home.path().join(".rustup")).unwrap();
            Fixture { repo, home }
        }

        /// A host whose python3, node and go all live outside the system directories.
        fn host(&self) -> HostFacts {
            HostFacts {
                home: Some(self.home.path().to_path_buf()),
                python: Some(PythonFacts {
                    executable: FAKE_PYTHON.into(),
                    prefix: FAKE_PYTHON_PREFIX.into(),
                    base_prefix: FAKE_PYTHON_PREFIX.into(),
                }),
                node: Some(FAKE_NODE.into()),
                go: Some(GoFacts {
                    executable: FAKE_GO.into(),
                    goroot: "/opt/go".into(),
                }),
                config_dir: "/etc/airlock-test".into(),
                pythons: Vec::new(),
                postgres_bin: Some("/usr/lib/postgresql/15/bin".into()),
                redis_server: None,
            }
        }

        fn detect(&self) -> Detected {
            detect(self.repo.path(), &self.host())
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// The rendered file loads, and to exactly what was detected.
    fn assert_parses(d: &Detected) -> Config {
        let text = render_airlock_toml(d);
        let config = Config::parse(&text, Path::new("airlock.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.tests.command, d.tests.command, "{text}");
        assert_eq!(config.tests.runner, d.tests.runner);
        assert_eq!(config.tests.selector_style, d.tests.selector_style);
        assert_eq!(config.tests.ro, d.tests.ro);
        assert_eq!(config.tests.env, d.tests.env);
        assert_eq!(config.tests.pass_env, d.tests.pass_env);
        assert_eq!(config.write.allowlist, d.allowlist);
        assert_eq!(config.broker.repository.as_deref(), Some(d.name.as_str()));
        match (&config.tests.prepare, &d.tests.prepare) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                assert_eq!(a.command, b.command);
                assert_eq!(a.inputs, b.inputs);
                assert_eq!(a.links, b.links);
                assert_eq!(a.env, b.env);
                assert_eq!(a.timeout_secs, b.timeout_secs);
                assert_eq!(a.python, b.python);
                assert_eq!(d.tests.services, config.tests.services);
            }
            (a, b) => panic!("prepare {a:?} != {b:?}\n{text}"),
        }
        assert_eq!(text, render_airlock_toml(d), "rendering is deterministic");
        config
    }

    fn venv_command(rest: &[&str]) -> Vec<String> {
        let mut out = vec!["{env}/venv/bin/python".to_string()];
        out.extend(strings(rest));
        out
    }

    #[test]
    fn pytest_project_with_requirements() {
        let f = Fixture::new(&[
            ("conftest.py", ""),
            ("requirements.txt", "requests\n"),
            ("requirements-dev.txt", "pytest-mock\n"),
            ("requirements-docs.txt", "sphinx\n"),
            ("pyproject.toml", "[project]\nname = \"calc\"\n"),
            ("calc/__init__.py", ""),
            (
                "tests/test_calc.py",
                "def test_add():\n    assert 1 + 1 == 2\n",
            ),
            ("docs/index.md", ""),
        ]);
        let d = f.detect();
        assert_eq!(d.ecosystem, Some(Ecosystem::Python));
        assert_eq!(d.tests.runner, TestRunner::Pytest);
        assert_eq!(d.tests.selector_style, SelectorStyle::NodeId);
        assert_eq!(
            d.tests.command,
            venv_command(&["-m", "pytest", "-rA", "-p", "no:cacheprovider"])
        );
        assert_eq!(d.tests.ro, strings(&[FAKE_PYTHON_PREFIX]));
        let p = d.tests.prepare.as_ref().unwrap();
        assert!(p.command.is_empty());
        let r = p.python.as_ref().unwrap();
        assert_eq!(r.interpreter, FAKE_PYTHON);
        assert!(r.editable, "a [project] table is installable");
        assert_eq!(r.requirements, strings(&["requirements-dev.txt"]));
        assert_eq!(r.packages, strings(&["pytest"]));
        assert_eq!(r.as_of, AsOf::Pin);
        assert_eq!(r.lockfile, None);
        assert_eq!(
            p.inputs,
            strings(&["pyproject.toml", "requirements-dev.txt"])
        );
        assert!(p.links.is_empty());
        assert!(!d.tests.env.contains_key("PYTHONPATH"));
        assert_eq!(d.allowlist, strings(&["*.py", "calc/**", "tests/**"]));
        let text = render_airlock_toml(&d);
        assert!(text.contains("[tests.prepare.python]"), "{text}");
        assert!(text.contains("\nnetwork = \"loopback\"\n"), "{text}");
        assert!(text.contains("conftest.py"), "{text}");
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        assert_parses(&d);
    }

    #[test]
    fn dependency_groups_extras_and_the_lockfile_are_read_from_the_project() {
        let f = Fixture::new(&[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"flit_core\"]\n\n[project]\nname = \"fl\"\n\n\
                 [project.optional-dependencies]\ndocs = [\"sphinx\"]\nasync = [\"asgiref\"]\n\n\
                 [dependency-groups]\ndev = [\"ruff\", \"pre-commit\"]\ntests = [\"pytest\", \"asgiref\"]\n\
                 typing = [\"mypy\"]\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
            ),
            ("uv.lock", "version = 1\n"),
            ("src/fl/__init__.py", ""),
            ("tests/conftest.py", ""),
            ("examples/js/tests/conftest.py", ""),
            ("tests/test_fl.py", "def test_a():\n    pass\n"),
        ]);
        let d = f.detect();
        assert_eq!(d.tests.runner, TestRunner::Pytest);
        assert!(
            d.findings
                .iter()
                .any(|l| l.contains("[tool.pytest] in pyproject.toml")),
            "{:?}",
            d.findings
        );
        let p = d.tests.prepare.as_ref().unwrap();
        let r = p.python.as_ref().unwrap();
        assert!(r.editable);
        assert!(r.extras.is_empty(), "no extra is named for tests");
        assert_eq!(r.groups, strings(&["tests"]), "the tests group, not dev");
        assert!(r.packages.is_empty(), "the tests group names pytest");
        assert_eq!(r.lockfile.as_deref(), Some("uv.lock"));
        assert_eq!(p.inputs, strings(&["pyproject.toml", "uv.lock"]));
        assert!(
            !d.tests.env.contains_key("PYTHONPATH"),
            "an installed src layout needs no path"
        );
        let text = render_airlock_toml(&d);
        assert!(
            text.contains("Also declared, not installed (extras): async, docs."),
            "{text}"
        );
        assert!(
            text.contains("Also declared, not installed (dependency groups): dev, typing."),
            "{text}"
        );
        assert!(text.contains("lockfile = \"uv.lock\""), "{text}");
        assert_parses(&d);
    }

    #[test]
    fn unittest_project_without_requirements_gets_a_bare_venv() {
        let f = Fixture::new(&[
            (
                "src/shout/__init__.py",
                "def shout(s):\n    return s.upper()\n",
            ),
            (
                "tests/test_shout.py",
                "import unittest\n\nclass T(unittest.TestCase):\n    pass\n",
            ),
        ]);
        let d = f.detect();
        assert_eq!(d.tests.runner, TestRunner::Unittest);
        assert_eq!(d.tests.selector_style, SelectorStyle::Dotted);
        assert_eq!(d.tests.command, venv_command(&["-m", "unittest", "-v"]));
        assert_eq!(d.tests.ro, strings(&[FAKE_PYTHON_PREFIX]));
        let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
        assert!(!r.editable, "nothing makes it installable");
        assert!(r.packages.is_empty() && r.requirements.is_empty() && r.groups.is_empty());
        assert_eq!(d.tests.env["PYTHONPATH"], "src");
        assert_eq!(d.allowlist, strings(&["src/**", "tests/**"]));
        assert_parses(&d);
    }

    #[test]
    fn extras_declared_in_setup_cfg_or_setup_py_are_found() {
        assert_eq!(
            setup_cfg_extras(
                "[metadata]\nname = w\n\n[options.extras_require]\ntesting =\n    pytest\n    pytest-cov\ndocs =\n    sphinx\n\n[tool:pytest]\naddopts = --cov\n"
            ),
            strings(&["testing", "docs"])
        );
        assert_eq!(
            setup_py_extras(
                "setup(\n    extras_require={\n        'security': [],\n        \"socks\": ['PySocks>=1.5.6, !=1.5.7'],\n        'tests': {'a': 1},\n    },\n    name='x',\n)\n"
            ),
            strings(&["security", "socks", "tests"])
        );
        // Through a module-level name, with keys added after the mapping.
        assert_eq!(
            setup_py_extras(
                "EXTRAS_REQUIRE = {\n    'reco': ['simplejson'],\n    \"tests\": ['pytest'],\n}\nEXTRAS_REQUIRE['dev'] = EXTRAS_REQUIRE['tests'] + ['tox']\nsetup(name='m', project_urls={'Funding': 'x'}, extras_require=EXTRAS_REQUIRE)\n"
            ),
            strings(&["dev", "reco", "tests"])
        );
        let f = Fixture::new(&[
            (
                "setup.py",
                "from setuptools import setup\nsetup(name='w', extras_require={'testing': ['pytest-cov']})\n",
            ),
            ("setup.cfg", "[tool:pytest]\naddopts = --cov\n"),
            ("w/__init__.py", ""),
            ("tests/test_w.py", "def test_a():\n    pass\n"),
        ]);
        let d = f.detect();
        let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
        assert_eq!(r.extras, strings(&["testing"]));
        assert_parses(&d);
    }

    #[test]
    fn the_environment_is_what_the_projects_ci_installs_for_its_tests() {
        let f = Fixture::new(&[
            (
                "setup.py",
                "EXTRAS = {'reco': ['simplejson'], 'tests': ['pytest'], 'lint': ['flake8']}\nsetup(name='w', extras_require=EXTRAS)\n",
            ),
            ("w/__init__.py", ""),
            (
                "tests/test_w.py",
                "import pytest\ndef test_a():\n    pass\n",
            ),
            ("requirements-test.txt", "pytest\n"),
            (
                "requirements-ci.txt",
                "pytest\nhypothesis\n-r requirements-cov.txt\n",
            ),
            ("requirements-cov.txt", "coverage~=6.4\n"),
            (
                "tox.ini",
                "[tox]\nenvlist = py38, lint\n[testenv]\nextras = tests,reco\ndeps =\n    mock\n    coverage<5\n    -rrequirements-ci.txt\n    \
                 -rrequirements-missing.txt\ncommands = pytest {posargs}\n[testenv:lint]\nextras = lint\n",
            ),
        ]);
        let d = f.detect();
        let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
        assert_eq!(
            r.extras,
            strings(&["reco", "tests"]),
            "the lint job's extra is not the tests'"
        );
        assert_eq!(
            r.requirements,
            strings(&["requirements-ci.txt"]),
            "the CI's own file, not the name heuristic; a missing file is left out"
        );
        assert_eq!(
            r.optional,
            strings(&["mock"]),
            "pytest comes with the requirements file, and coverage is pinned by the file it \
             includes: the CI's own pins of them are left out"
        );
        assert!(r.packages.is_empty());
        assert!(
            d.findings
                .iter()
                .any(|l| l
                    .starts_with("The project's CI installs for its tests: extras reco, tests")),
            "{:?}",
            d.findings
        );
        assert_parses(&d);
    }

    #[test]
    fn a_server_the_tests_expect_is_proposed_without_ci_files() {
        assert_eq!(
            ci::service_signs(
                "import os\nhost = os.environ.get('PGHOST')\nURL = 'redis://localhost:6379/0'\n"
            ),
            [("postgres", 2), ("redis", 3)]
        );
        assert!(
            ci::service_signs("assert parse('postgres://user@db.example.com/x')\n").is_empty(),
            "a URL to another host is a parsing test, not a server"
        );
        let f = Fixture::new(&[
            (
                "pyproject.toml",
                "[project]\nname = 'drv'\n[build-system]\nrequires = ['hatchling']\n",
            ),
            ("src/drv/__init__.py", ""),
            (
                "test/conftest.py",
                "import os\nimport pytest\n\n@pytest.fixture\ndef kw():\n    return {'host': os.environ.get('PGHOST', 'localhost')}\n",
            ),
            ("test/test_q.py", "def test_a(kw):\n    pass\n"),
        ]);
        let d = f.detect();
        let names: Vec<&str> = d.tests.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["postgres"]);
        assert!(
            d.findings
                .iter()
                .any(|l| l == "The tests expect a postgres server (test/conftest.py:6)"),
            "{:?}",
            d.findings
        );
        assert_parses(&d);
    }

    #[test]
    fn the_projects_ci_gives_its_commands_pythons_and_services() {
        let f = Fixture::new(&[
            ("conftest.py", ""),
            ("tests/test_db.py", "def test_a():\n    pass\n"),
            (
                ".github/workflows/ci.yml",
                "jobs:\n  test:\n    strategy:\n      matrix:\n        python-version: ['3.10', '3.12']\n    \
                 env:\n      DATABASE_URL: postgres://app@localhost:5433/shop\n      SECRET: ${{ secrets.S }}\n    \
                 services:\n      db:\n        image: postgres:16\n        env:\n          POSTGRES_USER: app\n          \
                 POSTGRES_DB: shop\n        ports: ['5433:5432']\n      cache:\n        image: redis:7\n    \
                 steps:\n      - run: pytest -x tests\n",
            ),
        ]);
        let d = f.detect();
        assert!(
            d.findings
                .iter()
                .any(|l| l.contains("`pytest -x tests` (.github/workflows/ci.yml)")),
            "{:?}",
            d.findings
        );
        assert!(d.findings.iter().any(|l| l.contains("Python 3.10, 3.12")));
        assert_eq!(
            d.tests.services.len(),
            1,
            "redis has no binary on this host"
        );
        let pg = &d.tests.services[0];
        assert_eq!(pg.name, "postgres");
        assert!(
            pg.command[2].contains("/usr/lib/postgresql/15/bin/initdb"),
            "{:?}",
            pg.command
        );
        assert!(pg.command[2].contains("-U app") && pg.command[2].contains("-p 5433"));
        assert_eq!(pg.env["PGDATABASE"], "shop");
        assert_eq!(
            d.tests.env["DATABASE_URL"],
            "postgres://app@localhost:5433/shop"
        );
        assert!(!d.tests.env.contains_key("SECRET"));
        assert!(
            d.warnings.iter().any(|w| w.contains("redis:7")),
            "{:?}",
            d.warnings
        );
        let text = render_airlock_toml(&d);
        assert!(text.contains("[[tests.services]]"), "{text}");
        assert_parses(&d);
    }

    #[test]
    fn several_interpreters_on_the_host_are_chosen_among_per_pin() {
        let f = Fixture::new(&[
            (
                "pyproject.toml",
                "[project]\nname = \"p\"\nrequires-python = \">=3.8\"\n",
            ),
            ("tests/test_p.py", "def test_a():\n    pass\n"),
            ("conftest.py", ""),
        ]);
        let mut host = f.host();
        host.pythons = [(3, 9), (3, 12)]
            .map(|v: (u32, u32)| crate::recipe::HostPython {
                executable: format!("/opt/py/{}.{}/bin/python{}.{}", v.0, v.1, v.0, v.1).into(),
                base_prefix: format!("/opt/py/{}.{}", v.0, v.1).into(),
                version: v,
            })
            .to_vec();
        host.pythons.push(crate::recipe::HostPython {
            executable: "/usr/bin/python3.11".into(),
            base_prefix: "/usr".into(),
            version: (3, 11),
        });
        let d = detect(f.repo.path(), &host);
        let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
        assert_eq!(r.interpreter, crate::recipe::AUTO_INTERPRETER);
        for prefix in ["/opt/py/3.9", "/opt/py/3.12"] {
            assert!(d.tests.ro.contains(&prefix.to_string()), "{:?}", d.tests.ro);
        }
        assert!(!d.tests.ro.contains(&"/usr".to_string()));
        assert!(
            d.findings
                .iter()
                .any(|l| l.contains("Python 3.9, 3.12, 3.11")),
            "{:?}",
            d.findings
        );
        assert_parses(&d);
    }

    #[test]
    fn a_test_file_importing_pytest_means_pytest() {
        let f = Fixture::new(&[("test_x.py", "import pytest\n\ndef test_a():\n    pass\n")]);
        let d = f.detect();
        assert_eq!(d.tests.runner, TestRunner::Pytest);
        let p = d.tests.prepare.as_ref().unwrap();
        let r = p.python.as_ref().unwrap();
        assert_eq!(r.packages, strings(&["pytest"]));
        assert!(!r.editable);
        assert!(p.inputs.is_empty());
        assert_eq!(d.allowlist, strings(&["*.py"]));
        assert_parses(&d);
    }

    #[test]
    fn a_venv_in_the_repository_is_used_and_its_base_granted() {
        let f = Fixture::new(&[
            (".venv/bin/python", ""),
            (
                ".venv/pyvenv.cfg",
                "home = /opt/fakepy/3.11/bin\nversion = 3.11.7\n",
            ),
            (".venv/lib/python3.11/site-packages/x/test_x.py", ""),
            ("pkg/tests.py", "import unittest\n"),
        ]);
        let d = f.detect();
        let venv = f.repo.path().join(".venv");
        assert_eq!(d.tests.command, venv_command(&["-m", "unittest", "-v"]));
        let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
        assert_eq!(r.interpreter, venv.join("bin/python").display().to_string());
        let mut ro = vec![venv.display().to_string(), FAKE_PYTHON_PREFIX.to_string()];
        ro.sort();
        assert_eq!(d.tests.ro, ro);
        assert_eq!(d.allowlist, strings(&["pkg/**"]), "the venv is not source");
        assert_parses(&d);
    }

    #[test]
    fn cargo_crate_without_a_lockfile_keeps_the_one_prepare_resolves() {
        let f = Fixture::new(&[
            (
                "Cargo.toml",
                "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\n",
            ),
            ("src/lib.rs", "pub fn f() {}\n"),
            ("tests/it.rs", "#[test]\nfn t() {}\n"),
        ]);
        let d = f.detect();
        assert_eq!(d.ecosystem, Some(Ecosystem::Rust));
        assert_eq!(d.tests.runner, TestRunner::Cargo);
        assert_eq!(d.tests.selector_style, SelectorStyle::Append);
        assert_eq!(d.tests.command, strings(&["~/.cargo/bin/cargo", "test"]));
        assert_eq!(d.tests.ro, strings(&["~/.cargo", "~/.rustup"]));
        assert_eq!(d.tests.env["CARGO_HOME"], "{env}/cargo");
        assert_eq!(d.tests.env["RUSTUP_HOME"], "~/.rustup");
        assert_eq!(d.tests.env["CARGO_NET_OFFLINE"], "true");
        assert!(d.tests.env["PATH"].starts_with("~/.cargo/bin:"));
        let p = d.tests.prepare.as_ref().unwrap();
        assert_eq!(p.command, strings(&["~/.cargo/bin/cargo", "fetch"]));
        assert_eq!(p.env["CARGO_NET_OFFLINE"], "false");
        assert_eq!(
            p.inputs,
            strings(&["**/Cargo.toml", "Cargo.lock", "Cargo.toml"])
        );
        assert_eq!(p.links, strings(&["Cargo.lock"]));
        assert_eq!(d.allowlist, strings(&["src/**", "tests/**"]));
        assert_parses(&d);
    }

    #[test]
    fn cargo_crate_with_a_lockfile_links_nothing_and_missing_toolchains_are_named() {
        let f = Fixture::new(&[
            ("Cargo.toml", "[package]\nname = \"tiny\"\n"),
            ("Cargo.lock", "version = 3\n"),
            ("src/main.rs", "fn main() {}\n"),
        ]);
        std::fs::remove_dir_all(f.home.path().join(".rustup")).unwrap();
        let d = f.detect();
        assert!(d.tests.prepare.as_ref().unwrap().links.is_empty());
        assert_eq!(d.tests.ro, strings(&["~/.cargo"]));
        assert!(
            d.warnings.iter().any(|w| w.contains("~/.rustup")),
            "{:?}",
            d.warnings
        );
        assert_parses(&d);
    }

    #[test]
    fn package_json_with_vitest() {
        let f = Fixture::new(&[
            (
                "package.json",
                r#"{"name": "w", "devDependencies": {"vitest": "^1.6.0"}}"#,
            ),
            ("package-lock.json", "{}"),
            ("src/sum.ts", "export const sum = (a, b) => a + b;\n"),
            ("src/sum.test.ts", ""),
            ("vitest.config.ts", ""),
        ]);
        let d = f.detect();
        assert_eq!(d.ecosystem, Some(Ecosystem::JavaScript));
        assert_eq!(d.tests.runner, TestRunner::Vitest);
        assert_eq!(d.tests.selector_style, SelectorStyle::Append);
        assert_eq!(
            d.tests.command,
            strings(&[
                FAKE_NODE,
                "node_modules/vitest/vitest.mjs",
                "run",
                "--reporter=verbose"
            ])
        );
        assert_eq!(d.tests.ro, strings(&["/opt/node-v20"]));
        assert!(d.tests.env["PATH"].starts_with("/opt/node-v20/bin:"));
        let p = d.tests.prepare.as_ref().unwrap();
        assert_eq!(
            p.command,
            strings(&["/opt/node-v20/bin/npm", "ci", "--no-audit", "--no-fund"])
        );
        assert_eq!(p.inputs, strings(&["package-lock.json", "package.json"]));
        assert_eq!(p.links, strings(&["node_modules"]));
        assert_eq!(d.allowlist, strings(&["*.ts", "src/**"]));
        assert_parses(&d);
    }

    #[test]
    fn package_json_with_jest_and_no_lockfile() {
        let f = Fixture::new(&[
            (
                "package.json",
                r#"{"scripts": {"test": "jest"}, "devDependencies": {"jest": "^29"}}"#,
            ),
            ("lib/sum.js", ""),
            ("__tests__/sum.test.js", ""),
            ("node_modules/jest/bin/jest.js", ""),
        ]);
        let mut host = f.host();
        host.node = None;
        let d = detect(f.repo.path(), &host);
        assert_eq!(d.tests.runner, TestRunner::Jest);
        assert_eq!(
            d.tests.command,
            strings(&["node", "node_modules/jest/bin/jest.js", "--verbose"])
        );
        assert!(d.tests.ro.is_empty());
        let p = d.tests.prepare.as_ref().unwrap();
        assert_eq!(
            p.command,
            strings(&["npm", "install", "--no-audit", "--no-fund"])
        );
        assert_eq!(p.links, strings(&["node_modules"]));
        assert!(
            d.warnings.iter().any(|w| w.contains("node")),
            "{:?}",
            d.warnings
        );
        assert_eq!(d.allowlist, strings(&["__tests__/**", "lib/**"]));
        assert_parses(&d);
    }

    #[test]
    fn go_module() {
        let f = Fixture::new(&[
            ("go.mod", "module example.com/m\n\ngo 1.22\n"),
            ("go.sum", ""),
            ("main.go", "package main\n"),
            ("pkg/parse/parse_test.go", "package parse\n"),
        ]);
        let d = f.detect();
        assert_eq!(d.ecosystem, Some(Ecosystem::Go));
        assert_eq!(d.tests.runner, TestRunner::Go);
        assert_eq!(d.tests.selector_style, SelectorStyle::Append);
        assert_eq!(d.tests.command, strings(&[FAKE_GO, "test", "-v", "./..."]));
        assert_eq!(d.tests.ro, strings(&["/opt/go"]));
        assert_eq!(d.tests.env["GOMODCACHE"], "{env}/gomod");
        assert_eq!(d.tests.env["GOFLAGS"], "-mod=mod");
        assert_eq!(d.tests.env["GOCACHE"], "/tmp/gocache");
        assert_eq!(d.tests.env["GOPROXY"], "off");
        let p = d.tests.prepare.as_ref().unwrap();
        assert_eq!(p.command, strings(&[FAKE_GO, "mod", "download"]));
        assert_eq!(p.env["GOPROXY"], "", "prepare uses Go's default proxy");
        assert!(p.links.is_empty());
        assert_eq!(d.allowlist, strings(&["*.go", "pkg/**"]));
        let text = render_airlock_toml(&d);
        assert!(!text.contains("proxy.golang.org"), "{text}");
        assert_parses(&d);
    }

    #[test]
    fn an_empty_tree_gets_the_default_command_and_a_warning() {
        let f = Fixture::new(&[]);
        let d = f.detect();
        assert_eq!(d.ecosystem, None);
        assert_eq!(d.tests.command, TestsConfig::default().command);
        assert_eq!(d.tests.runner, TestRunner::Unittest);
        assert!(d.tests.prepare.is_none());
        assert!(d.allowlist.is_empty());
        assert!(
            d.warnings
                .iter()
                .any(|w| w.contains("nothing was recognised")),
            "{:?}",
            d.warnings
        );
        assert!(render_airlock_toml(&d).contains("nothing was recognised"));
        assert_parses(&d);
    }

    #[test]
    fn other_ecosystems_are_named_but_the_first_rule_wins() {
        let f = Fixture::new(&[
            ("Cargo.toml", "[package]\nname = \"x\"\n"),
            ("src/lib.rs", ""),
            ("python/tests/test_x.py", "import pytest\n"),
        ]);
        let d = f.detect();
        assert_eq!(d.ecosystem, Some(Ecosystem::Rust));
        assert!(
            d.findings
                .iter()
                .any(|l| l.contains("Also found Python: pytest")),
            "{:?}",
            d.findings
        );
        assert_parses(&d);
    }

    #[test]
    fn the_broker_block_allows_every_granted_path() {
        for f in [
            Fixture::new(&[("conftest.py", ""), ("requirements.txt", "")]),
            Fixture::new(&[("Cargo.toml", "[package]\nname = \"x\"\n")]),
            Fixture::new(&[(".venv/bin/python", ""), ("test_a.py", "")]),
        ] {
            let d = f.detect();
            let block = render_broker_block(&d, "acme/calc");
            let table: toml::Table =
                toml::from_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
            let repo = &table["repositories"]["acme/calc"];
            assert_eq!(repo["remote"].as_str(), Some("origin"));
            assert_eq!(
                repo["clone"].as_str(),
                Some(d.repo.display().to_string().as_str())
            );
            assert!(repo.get("forge_repo").is_none());
            assert!(block.contains("# forge_token_env = "), "{block}");
            let allowed: Vec<String> = repo["allow_ro"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            let config = assert_parses(&d);
            let home = f.home.path().display().to_string();
            let mut expected: Vec<String> = config
                .tests
                .ro
                .iter()
                .map(|p| p.replacen('~', &home, 1))
                .collect();
            expected.push(path_text(&PathsConfig::default().envs_dir));
            expected.sort();
            assert_eq!(allowed, expected, "{block}");
            assert!(allowed.iter().all(|p| Path::new(p).is_absolute()));
        }
    }

    #[test]
    fn a_name_that_is_not_owner_slash_name_gets_a_forge_repo_placeholder() {
        let f = Fixture::new(&[]);
        let block = render_broker_block(&f.detect(), "calc");
        let table: toml::Table = toml::from_str(&block).unwrap();
        assert_eq!(
            table["repositories"]["calc"]["forge_repo"].as_str(),
            Some("OWNER/calc")
        );
    }

    #[test]
    fn github_remotes_give_owner_and_name() {
        for url in [
            "https://github.com/acme/calc.git",
            "https://github.com/acme/calc",
            "https://x-access-token:secret@github.com/acme/calc.git",
            "git@github.com:acme/calc.git",
            "ssh://git@github.com/acme/calc.git",
            "ssh://git@github.com:22/acme/calc/",
        ] {
            assert_eq!(github_slug(url).as_deref(), Some("acme/calc"), "{url}");
        }
        for url in [
            "https://gitlab.com/acme/calc.git",
            "/srv/git/calc.git",
            "https://github.com/acme",
            "https://github.com/acme/calc/tree/main",
            "git@example.com:acme/calc.git",
        ] {
            assert_eq!(github_slug(url), None, "{url}");
        }
    }

    #[test]
    fn an_existing_file_is_kept_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("airlock.toml");
        std::fs::write(&path, "# mine\n").unwrap();
        let text = render_airlock_toml(&Fixture::new(&[]).detect());
        let err = write_config(&path, &text, false).unwrap_err();
        assert!(matches!(err, InitError::Exists { .. }), "{err}");
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
        write_config(&path, &text, true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let err = write_config(&dir.path().join("bad.toml"), "[tests]\nrunner = 1\n", true);
        assert!(matches!(err, Err(InitError::Generated(_))));
        assert!(!dir.path().join("bad.toml").exists());
    }

    #[test]
    fn strings_are_escaped_for_toml() {
        let t: toml::Table = toml::from_str(&format!("k = {}", quote("a\"b\\c\n\u{1}"))).unwrap();
        assert_eq!(t["k"].as_str(), Some("a\"b\\c\n\u{1}"));
        assert_eq!(
            glob_literal("requirements[dev].txt"),
            "requirements[[]dev[]].txt"
        );
    }
}
