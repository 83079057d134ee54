//! The real implementations of the ports: the checkout's bounded reader, codegraph, the
//! sandbox, the broker (over its Unix socket or TLS, `crate::transport`), and the sandboxed
//! reader-worker process.

use crate::config::{PythonRecipe, TestsConfig};
use crate::delegate::{ReaderChannel, ReaderLauncher};
use crate::ports::{
    Baseline, BaselineError, Hit, PortResult, ReadOutcome, Retrieval, TestReport, TestRunner,
    ToolFailure, Worktree,
};
use crate::prepare::{self, PrepareRecord, tail};
use crate::recipe;
use crate::testenv::{self, Host, ResolvedTests};
use airlock_checkout::BoundedReader;
use airlock_policies::network::{BlockedAttempt, NetworkMode, TestNetwork};
use airlock_policies::testrun::{self, SANDBOX_TREE, TestInventory, TreeLink};
use airlock_reader::repo_tools::{CodegraphSearch, read_window};
use airlock_reader::{FromSupervisor, FromWorker};
use airlock_sandbox::{Captured, SandboxBuilder};
use std::cell::OnceCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Most bytes of test output handed to the model (the tail, where the verdict is).
pub const TEST_OUTPUT_TAIL_BYTES: usize = 8 * 1024;

mod broker;

pub use broker::{BrokerSocket, typed};

/// The worktree through `airlock-checkout`: every read and write goes through the bounded reader.
pub struct CheckoutWorktree {
    reader: BoundedReader,
    tracked: Vec<String>,
}

impl CheckoutWorktree {
    /// Open the worktree at `root`; `tracked` are the pinned commit's files (for the tree).
    pub fn open(root: &Path, tracked: Vec<String>) -> PortResult<Self> {
        let reader =
            BoundedReader::open(root).map_err(|e| ToolFailure::new("worktree", e.to_string()))?;
        Ok(CheckoutWorktree { reader, tracked })
    }
}

impl Worktree for CheckoutWorktree {
    fn root(&self) -> &Path {
        self.reader.root()
    }

    fn read_lines(&self, path: &str, start: usize, end: usize) -> PortResult<ReadOutcome> {
        read_window(&self.reader, path, start, end)
            .map_err(|(code, message)| ToolFailure::new(code, message))
    }

    fn read_for_edit(&self, path: &str) -> PortResult<String> {
        self.reader
            .read_for_edit(path)
            .map_err(|r| ToolFailure::new(r.code().as_str(), r.to_string()))
    }

    fn write(&self, path: &str, content: &str) -> PortResult<()> {
        self.reader
            .write(path, content.as_bytes())
            .map(|_| ())
            .map_err(|r| ToolFailure::new(r.code().as_str(), r.to_string()))
    }

    fn line_count(&self, path: &str) -> Option<usize> {
        self.reader
            .read(path, Some((1, 1)))
            .ok()
            .map(|o| o.line_count as usize)
    }

    fn file_tree(&self, query: &str, char_budget: usize) -> String {
        airlock_checkout::render_file_tree(
            &self.tracked,
            &airlock_checkout::FileTreeOptions {
                char_budget,
                query: Some(query),
            },
        )
    }
}

/// Retrieval through `airlock-codegraph` at the pinned commit.
pub struct CodegraphRetrieval {
    search: CodegraphSearch,
}

impl CodegraphRetrieval {
    /// Open and index (incrementally) the commit under the index named `index_key` (the
    /// mirror's, so that every run on the project shares one index).
    #[tracing::instrument(name = "index", skip_all, fields(commit))]
    pub fn open(repo: &Path, index_dir: &Path, index_key: &str, commit: &str) -> PortResult<Self> {
        let search = CodegraphSearch::open(repo, index_dir, Some(index_key), commit)
            .map_err(|e| ToolFailure::new("index", e))?;
        search.prepare().map_err(|e| ToolFailure::new("index", e))?;
        Ok(CodegraphRetrieval { search })
    }
}

impl Retrieval for CodegraphRetrieval {
    fn search(&self, query: &str, limit: usize) -> PortResult<Vec<Hit>> {
        self.search
            .search(query, limit)
            .map_err(|e| ToolFailure::new("search", e))
    }

    fn repo_map(&self, query: &str, token_budget: usize) -> PortResult<String> {
        self.search
            .repo_map(query, token_budget)
            .map_err(|e| ToolFailure::new("repo_map", e))
    }
}

/// The merged-pull-request memory through `airlock-codegraph`, built once at the pinned commit
/// from the mirror's history (and the forge records saved beside the index). When it could not
/// be built the run goes on without it: each search says why.
pub struct CodegraphHistory {
    index: Result<airlock_codegraph::history::HistoryIndex, String>,
}

impl CodegraphHistory {
    /// Build the memory of `mirror` at `commit` under the index named `index_key`.
    pub fn open(mirror: &Path, index_dir: &Path, index_key: &str, commit: &str) -> Self {
        let index = airlock_codegraph::history::HistoryIndex::build(
            mirror,
            index_dir,
            Some(index_key),
            commit,
        )
        .map_err(|e| e.to_string());
        CodegraphHistory { index }
    }
}

impl crate::ports::History for CodegraphHistory {
    fn search(&self, query: &str, limit: usize) -> PortResult<Vec<crate::ports::HistoryHit>> {
        match &self.index {
            Ok(index) => Ok(index.search(query, limit)),
            Err(e) => Err(ToolFailure::new(
                "history_unavailable",
                format!("the history of merged pull requests could not be read: {e}"),
            )),
        }
    }
}

/// Runs the test command in the sandbox over a copy-on-write overlay of the worktree mounted at
/// [`SANDBOX_TREE`]: the tests see the agent's edits, and whatever they write is
/// discarded, so it never enters the diff. The sandbox's network namespace has loopback only.
/// Every run gets the run's test environment (read-only grants, variables, prepared links),
/// built by [`TestRunner::baseline`] before the first run.
pub struct SandboxTestRunner {
    worktree: PathBuf,
    tests: TestsConfig,
    timeout: Duration,
    prepare_key: PrepareKey,
    resolved: OnceCell<ResolvedTests>,
}

/// What keys a prepared environment besides the configuration: the project and the pin.
#[derive(Debug, Clone)]
pub struct PrepareKey {
    /// The mirror's key (one per project, whatever the worktree).
    pub repo_key: String,
    /// The pinned commit.
    pub commit: String,
    /// The pinned commit's tracked files (the prepare inputs are matched among them).
    pub tracked: Vec<String>,
    /// `[paths] envs_dir`.
    pub envs_dir: PathBuf,
    /// When the pinned commit was committed (seconds since the epoch): what a recipe resolves
    /// "as of the pin" against.
    pub commit_time: Option<i64>,
    /// The newest tag reachable from the pin and the commits since (the mirror's `git
    /// describe --tags`): the version a build computed from git gives the pin.
    pub describe: Option<(String, usize)>,
}

impl SandboxTestRunner {
    /// A runner of `[tests]` over `worktree`.
    pub fn new(worktree: &Path, tests: TestsConfig, prepare_key: PrepareKey) -> Self {
        SandboxTestRunner {
            worktree: worktree.to_path_buf(),
            timeout: Duration::from_secs(tests.timeout_secs),
            tests,
            prepare_key,
            resolved: OnceCell::new(),
        }
    }

    /// Prepare (when configured) and resolve the environment, once.
    fn resolve(&self) -> Result<(&ResolvedTests, Option<PrepareRecord>), BaselineError> {
        if let Some(r) = self.resolved.get() {
            return Ok((r, None));
        }
        let host = Host::current();
        let mut record = None;
        let resolved = match &self.tests.prepare {
            None => testenv::resolve(&self.tests, &host, None)?,
            Some(prepare_cfg) => {
                let env_config = serde_json::json!({
                    "ro": self.tests.ro, "env": self.tests.env, "pass_env": self.tests.pass_env,
                })
                .to_string();
                let key = &self.prepare_key;
                let plan = prepare::plan(
                    prepare_cfg,
                    &env_config,
                    &key.repo_key,
                    &key.commit,
                    &self.worktree,
                    &key.tracked,
                    &key.envs_dir,
                )?;
                let env_dir = plan.env_dir();
                let mut resolved = testenv::resolve(&self.tests, &host, Some(&env_dir))?;
                let command = prepare_cfg
                    .command
                    .iter()
                    .enumerate()
                    .map(|(i, w)| {
                        testenv::expand(
                            w,
                            &format!("tests.prepare.command[{i}]"),
                            &host,
                            Some(&env_dir),
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                // An environment built earlier is reused as it is: the recipe's steps (which
                // ask the host's interpreters and pip) are worked out only to build one.
                let reuse = prepare_cfg.python.is_some() && prepare::built(&plan);
                let (mut steps, files, grant) = match &prepare_cfg.python {
                    Some(_) if reuse => {
                        let grant =
                            std::fs::read_to_string(env_dir.join(recipe::INTERPRETER_GRANT_FILE))
                                .ok()
                                .map(|t| PathBuf::from(t.trim()))
                                .filter(|p| p.is_absolute());
                        (Vec::new(), Vec::new(), grant)
                    }
                    Some(recipe) => recipe_steps(recipe, &host, &env_dir, key, &self.worktree)?,
                    None => (Vec::new(), Vec::new(), None),
                };
                // The interpreter chosen for this pin is visible to prepare and every test run
                // (its venv's python is a link to it).
                if let Some(prefix) = grant
                    && !resolved
                        .environment
                        .ro
                        .iter()
                        .any(|r| prefix.starts_with(r))
                {
                    resolved.environment.ro.push(prefix);
                }
                if !command.is_empty() {
                    steps.push(command);
                }
                let mut for_prepare = resolved.environment.clone();
                for_prepare.links.clear();
                for_prepare.services.clear();
                if prepare_cfg.python.is_some()
                    && !reuse
                    && let Some((tag, distance)) = &key.describe
                    && let Some(version) = recipe::scm_version(tag, *distance)
                {
                    // The worktree holds the pin alone: a version computed from git would be
                    // `0.1.dev1` there, and a test dependency that requires the project itself
                    // (pytest of iniconfig) would not install.
                    for name in ["SETUPTOOLS_SCM_PRETEND_VERSION", "PDM_BUILD_SCM_VERSION"] {
                        for_prepare
                            .env
                            .entry(name.to_string())
                            .or_insert_with(|| version.clone());
                    }
                }
                if prepare_cfg.python.is_some() && !reuse {
                    // The venv's own pip reaches the index the way the host's pip is
                    // configured to (its index URLs and certificate bundle), unless set here.
                    for (name, value) in airlock_egress::presets::pip_settings() {
                        if name == "PIP_CERT" {
                            let cert = PathBuf::from(&value);
                            if !cert.is_absolute() || cert.symlink_metadata().is_err() {
                                continue;
                            }
                            if !for_prepare.ro.iter().any(|r| cert.starts_with(r)) {
                                for_prepare.ro.push(cert);
                            }
                        }
                        for_prepare.env.entry(name).or_insert(value);
                    }
                }
                for (name, raw) in &prepare_cfg.env {
                    let value = testenv::expand(
                        raw,
                        &format!("tests.prepare.env.{name}"),
                        &host,
                        Some(&env_dir),
                    )?;
                    for_prepare.env.insert(name.clone(), value);
                }
                if let Some(first) = steps.first() {
                    let key = if prepare_cfg.python.is_some() {
                        "tests.prepare.python.interpreter"
                    } else {
                        "tests.prepare.command"
                    };
                    testenv::check_program(first, &for_prepare, key)?;
                }
                let network = testenv::prepare_network(prepare_cfg)?;
                let done = prepare::prepare(
                    &plan,
                    prepare_cfg,
                    &steps,
                    &files,
                    &for_prepare,
                    &network,
                    &self.worktree,
                )?;
                if reuse && !done.reused {
                    // Removed between the look and the lock: built from no recipe steps.
                    return Err(BaselineError::Sandbox(format!(
                        "the prepared environment {} was removed while this run started; run \
                         again to build it",
                        env_dir.display()
                    )));
                }
                // What the steps generated in the tree is shown where they made it.
                for path in &done.generated {
                    resolved.environment.links.push(TreeLink {
                        path: path.clone(),
                        source: testenv::links_dir(&env_dir).join(path),
                    });
                }
                record = Some(done);
                testenv::check_links(&resolved.environment)?;
                resolved
            }
        };
        testenv::check_program(&resolved.command, &resolved.environment, "tests.command")?;
        for (i, service) in resolved.environment.services.iter().enumerate() {
            let key = format!("tests.services[{i}].command");
            testenv::check_program(&service.command, &resolved.environment, &key)?;
            if !service.ready_command.is_empty() {
                let key = format!("tests.services[{i}].ready_command");
                testenv::check_program(&service.ready_command, &resolved.environment, &key)?;
            }
        }
        let _ = self.resolved.set(resolved);
        let resolved = self
            .resolved
            .get()
            .ok_or_else(|| BaselineError::Sandbox("the environment was not kept".into()))?;
        Ok((resolved, record))
    }

    /// Run `argv` with the environment and network of every test run; returns what it printed
    /// and what the egress proxy refused it.
    fn run_argv(
        &self,
        resolved: &ResolvedTests,
        argv: &[String],
    ) -> PortResult<(Captured, Vec<BlockedAttempt>)> {
        let (mut builder, proxy) =
            airlock_egress::with_network(SandboxBuilder::new(), &resolved.environment.network);
        builder = airlock_egress::with_services(builder, &resolved.environment.services);
        builder = builder.system_ro();
        for p in &resolved.environment.ro {
            builder = builder.ro(p);
        }
        for (name, value) in resolved.environment.variables() {
            builder = builder.env(name, value);
        }
        let at = Path::new(SANDBOX_TREE);
        builder = builder.overlay(&self.worktree, at);
        for link in &resolved.environment.links {
            builder = builder.ro_at(link.source.clone(), at.join(&link.path));
        }
        let captured = builder
            .cwd(at)
            .timeout(self.timeout)
            .run_captured(argv)
            // A service's failure quotes its output: escaped like every test output shown.
            .map_err(|e| ToolFailure::new("sandbox", shown_escaped(&e.to_string())))?;
        Ok((captured, proxy.map(|p| p.blocked()).unwrap_or_default()))
    }
}

/// Argvs run in turn, and files written into `{env}` first (name, content).
/// With the installation a chosen interpreter needs granted (outside the system directories).
type StepsAndFiles = (
    Vec<Vec<String>>,
    Vec<(String, String)>,
    Option<std::path::PathBuf>,
);

/// The steps of a `[tests.prepare.python]` recipe for this run, and the files prepare writes
/// into `{env}` first (the lockfile's constraints, the releases it resolved against).
fn recipe_steps(
    recipe: &PythonRecipe,
    host: &Host<'_>,
    env_dir: &Path,
    key: &PrepareKey,
    tree: &Path,
) -> Result<StepsAndFiles, BaselineError> {
    let mut files = Vec::new();
    let mut grant = None;
    let mut chosen_version = None;
    let interpreter = if recipe.interpreter == recipe::AUTO_INTERPRETER {
        let candidates = recipe::host_interpreters(host.home.as_deref());
        let requires = recipe::requires_python(tree);
        let (chosen, why) =
            recipe::choose_interpreter(&candidates, requires.as_deref(), key.commit_time).map_err(
                |problem| testenv::TestEnvError {
                    key: "tests.prepare.python.interpreter".into(),
                    problem,
                },
            )?;
        files.push((
            recipe::INTERPRETER_FILE.to_string(),
            format!("{why}: {}\n", chosen.executable.display()),
        ));
        if !recipe::in_system_dirs(&chosen.base_prefix) {
            grant = Some(chosen.base_prefix.clone());
            files.push((
                recipe::INTERPRETER_GRANT_FILE.to_string(),
                format!("{}\n", chosen.base_prefix.display()),
            ));
        }
        chosen_version = Some(chosen.version);
        chosen.executable.display().to_string()
    } else {
        testenv::expand(
            &recipe.interpreter,
            "tests.prepare.python.interpreter",
            host,
            Some(env_dir),
        )?
    };
    // The interpreter's version, asked on the host (isolated, no site), dates the releases.
    let version = chosen_version
        .or_else(|| recipe::ask_interpreter(Path::new(&interpreter)).map(|p| p.version));
    let mut constraints = None;
    if let Some(lock) = &recipe.lockfile {
        let problem = |p: String| testenv::TestEnvError {
            key: "tests.prepare.python.lockfile".into(),
            problem: p,
        };
        let text = std::fs::read_to_string(tree.join(lock)).map_err(|e| {
            problem(format!(
                "{lock} cannot be read at the pinned commit ({e}): fix the path or remove the key"
            ))
        })?;
        let name = lock.rsplit('/').next().unwrap_or(lock);
        let pins = recipe::lock_constraints(name, &text, version)
            .map_err(|e| problem(format!("{e}; fix the lockfile or remove the key")))?;
        files.push((recipe::CONSTRAINTS_FILE.to_string(), pins));
        constraints = Some(env_dir.join(recipe::CONSTRAINTS_FILE));
    }
    let mut resolution = recipe::resolution(recipe, key.commit_time, version);
    // An interpreter older than the newest pip runs on: its pip reads no group and no date.
    let legacy = match version {
        Some(v) if v < recipe::MODERN_PIP_PYTHON => {
            resolution.as_of = None;
            resolution.editable_as_of = None;
            resolution.why = format!(
                "today's releases: the pip Python {}.{} runs cannot resolve as of a date (Python \
                 {}.{} or newer can)",
                v.0,
                v.1,
                recipe::MODERN_PIP_PYTHON.0,
                recipe::MODERN_PIP_PYTHON.1
            );
            let groups = if recipe.groups.is_empty() {
                Vec::new()
            } else {
                let text = std::fs::read_to_string(tree.join("pyproject.toml")).unwrap_or_default();
                recipe::group_requirements(&text, &recipe.groups).map_err(|problem| {
                    testenv::TestEnvError {
                        key: "tests.prepare.python.groups".into(),
                        problem: format!("{problem} at the pinned commit"),
                    }
                })?
            };
            Some(groups)
        }
        _ => None,
    };
    files.push((
        recipe::RESOLUTION_FILE.to_string(),
        resolution.why.clone() + "\n",
    ));
    // Requirements files that install the project itself are passed as copies without it.
    let mut recipe = recipe.clone();
    if recipe.editable {
        let (passed, copies) = recipe::without_the_project(tree, &recipe.requirements, env_dir);
        recipe.requirements = passed;
        files.extend(copies);
    }
    let recipe = &recipe;
    Ok((
        recipe::steps_with(
            recipe,
            &interpreter,
            env_dir,
            &resolution,
            constraints.as_deref(),
            legacy.as_deref(),
        ),
        files,
        grant,
    ))
}

fn combined_output(captured: &Captured) -> String {
    let mut output = String::from_utf8_lossy(&captured.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&captured.stderr));
    output
}

impl TestRunner for SandboxTestRunner {
    fn baseline(&self) -> Result<Baseline, BaselineError> {
        let (resolved, prepare) = tracing::info_span!("prepare").in_scope(|| self.resolve())?;
        // The base inventory: the collection run (when the runner has one) and the full suite.
        let _inventory = tracing::info_span!("inventory").entered();
        let runner = self.tests.runner;
        let collected = match runner.collect_command(&resolved.command) {
            Some(argv) => {
                let (captured, _) = self
                    .run_argv(resolved, &argv)
                    .map_err(|e| BaselineError::Sandbox(e.message))?;
                testrun::parse_collection(runner, &combined_output(&captured)).map(|s| s.len())
            }
            None => None,
        };
        let started = std::time::Instant::now();
        let (captured, blocked) = self
            .run_argv(resolved, &resolved.command)
            .map_err(|e| BaselineError::Sandbox(e.message))?;
        let base_seconds = started.elapsed().as_secs_f64();
        let output = combined_output(&captured);
        let parsed = testrun::parse(runner, &output);
        let exit = if captured.summary.timed_out {
            None
        } else {
            captured.summary.exit_code
        };
        let inventory =
            TestInventory::from_base_run(runner, &parsed, exit, collected).map_err(|error| {
                BaselineError::Inventory {
                    error,
                    network: network_hint(&resolved.environment.network, &output, &blocked)
                        + &diagnosis_text(&output, exit.is_none(), self.tests.timeout_secs),
                    output: shown_escaped(&tail(&output, 4000)),
                }
            })?;
        let mut hints = Vec::new();
        if !inventory.failing().is_empty() {
            let network = network_hint(&resolved.environment.network, &output, &blocked);
            if let Some(sentence) = network.strip_prefix("; ") {
                hints.push(sentence.to_string());
            }
            hints.extend(testrun::hints(&output));
        }
        Ok(Baseline {
            environment: resolved.environment.clone(),
            command: resolved.command.clone(),
            inventory,
            prepare,
            base_seconds,
            blocked,
            hints,
        })
    }

    fn run(&self, selector: Option<&str>) -> PortResult<TestReport> {
        let (resolved, _) = self
            .resolve()
            .map_err(|e| ToolFailure::new("test_environment", e.to_string()))?;
        let mut argv = resolved.command.clone();
        if let Some(sel) = selector {
            argv.push(sel.to_string());
        }
        let (captured, blocked) = self.run_argv(resolved, &argv)?;
        let output = combined_output(&captured);
        Ok(TestReport {
            selector: selector.map(str::to_string),
            exit_code: captured.summary.exit_code,
            timed_out: captured.summary.timed_out,
            parsed: testrun::parse(self.tests.runner, &output),
            output: tail(&output, TEST_OUTPUT_TAIL_BYTES),
            blocked,
        })
    }
}

/// What an output says went wrong besides the network ([`testrun::hints`]), and a timeout, as
/// `; sentence` parts to append to an error.
fn diagnosis_text(output: &str, timed_out: bool, timeout_secs: u64) -> String {
    let mut out = String::new();
    if timed_out {
        out.push_str(&format!(
            "; it did not finish within [tests] timeout_secs = {timeout_secs}: raise it, or leave \
             the slowest tests out of tests.command"
        ));
    }
    for hint in testrun::hints(output) {
        out.push_str("; ");
        out.push_str(&hint);
    }
    out
}

/// What a base run's output says of its network, as a sentence naming the key to change:
/// sockets refused with `network = "none"`, hosts the egress proxy refused, or a name lookup
/// that failed where test runs have no resolver. Empty when the output says nothing of it.
pub fn network_hint(net: &TestNetwork, output: &str, blocked: &[BlockedAttempt]) -> String {
    let socket_refused = output.contains("Operation not permitted")
        && (output.contains("socket") || output.contains("PermissionError: [Errno 1]"));
    let lookup_failed = [
        "Name or service not known",
        "Temporary failure in name resolution",
        "nodename nor servname",
        "getaddrinfo failed",
        "EAI_AGAIN",
        "ENOTFOUND",
    ]
    .iter()
    .any(|m| output.contains(m));
    if !blocked.is_empty() {
        let hosts: Vec<String> = blocked.iter().map(BlockedAttempt::target).collect();
        return format!(
            "; the egress proxy refused {}: add what the tests need to [tests] allow",
            hosts.join(", ")
        );
    }
    match net.mode {
        NetworkMode::None if socket_refused => "; the output shows network sockets refused: \
             [tests] network = \"none\" allows none; \"loopback\" (the default) lets the \
             suite's own servers on 127.0.0.1 work"
            .into(),
        NetworkMode::Loopback if lookup_failed => "; the output shows a name lookup that failed: \
             with [tests] network = \"loopback\" only the suite's own loopback is reachable; a \
             test that needs a host needs network = \"proxy\" and the host in [tests] allow"
            .into(),
        _ => String::new(),
    }
}

/// Repository output made safe for the operator's terminal by the shared rule
/// ([`airlock_policies::terminal::escaped`]): control and invisible characters other than
/// newline and tab (escape sequences, carriage returns, bidi overrides) are shown as `\u{..}`.
fn shown_escaped(text: &str) -> String {
    airlock_policies::terminal::escaped(text).into_owned()
}

/// Where a reader worker finds its input FIFO inside the sandbox.
const READER_INPUT: &str = "/run/airlock/reader-input";

/// Starts `airlock reader-worker` in the sandbox: read-only over the worktree and the index,
/// no network, no credentials (the sandbox passes no environment but what it is told). The
/// worker writes protocol lines to stdout; the supervisor's messages reach it through a FIFO,
/// because the sandbox gives its child no stdin.
pub struct SandboxReaderLauncher {
    /// The `airlock` binary (re-executed as `airlock reader-worker`).
    pub exe: PathBuf,
    /// The worktree (mounted read-only).
    pub worktree: PathBuf,
    /// The codegraph index directory (mounted read-only).
    pub index_dir: PathBuf,
    /// The index's name in it (the mirror's key, as the supervisor indexed it).
    pub index_key: String,
    /// The pinned commit.
    pub commit: String,
    /// Scratch directory for the FIFO.
    pub scratch: PathBuf,
    /// Wall-clock limit of one worker.
    pub timeout: Duration,
}

struct SandboxChannel {
    to_worker: std::fs::File,
    from_worker: mpsc::Receiver<Result<String, String>>,
    done: Option<std::thread::JoinHandle<String>>,
    fifo_dir: PathBuf,
    timeout: Duration,
}

/// A `Write` that splits what the worker prints into lines and passes each on.
struct LineSink {
    buf: Vec<u8>,
    tx: mpsc::Sender<Result<String, String>>,
}

impl Write for LineSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if !text.is_empty() {
                // The receiver may be gone (the supervisor stopped listening); nothing to do.
                let _ = self.tx.send(Ok(text));
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ReaderLauncher for SandboxReaderLauncher {
    fn launch(
        &self,
        references: &[crate::delegate::ReferenceMount],
    ) -> PortResult<Box<dyn ReaderChannel>> {
        std::fs::create_dir_all(&self.scratch)?;
        let fifo_dir = tempfile::Builder::new()
            .prefix("reader-")
            .tempdir_in(&self.scratch)?
            .keep();
        let fifo = fifo_dir.join("in");
        let status = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("0644")
            .arg(&fifo)
            .status()
            .map_err(|e| ToolFailure::new("reader_start", format!("mkfifo: {e}")))?;
        if !status.success() {
            return Err(ToolFailure::new("reader_start", "mkfifo failed"));
        }
        // Opening read-write never blocks on a FIFO, and keeps the pipe open whatever the
        // worker does; the worker opens it read-only.
        let to_worker = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)?;
        let (tx, rx) = mpsc::channel();
        // The FIFO is granted on its own (a FIFO in a granted directory is never the host's),
        // read-only, at a path of the sandbox's own outside anything writable.
        let mut builder = SandboxBuilder::new()
            .system_ro()
            .ro(&self.exe)
            .ro(&self.worktree)
            .ro(&self.index_dir)
            .ro_at(&fifo, READER_INPUT)
            .cwd(&self.worktree)
            .timeout(self.timeout);
        // Each reference repository's materialised commit, read-only like the worktree.
        for mount in references {
            builder = builder.ro(&mount.root);
        }
        let mut argv: Vec<String> = vec![
            self.exe.display().to_string(),
            "reader-worker".into(),
            "--root".into(),
            self.worktree.display().to_string(),
            "--index-dir".into(),
            self.index_dir.display().to_string(),
            "--index-key".into(),
            self.index_key.clone(),
            "--commit".into(),
            self.commit.clone(),
            "--input".into(),
            READER_INPUT.into(),
        ];
        for mount in references {
            argv.push("--reference".into());
            argv.push(format!("{}={}", mount.slug, mount.root.display()));
        }
        let done = std::thread::spawn(move || {
            let mut sink = LineSink {
                buf: Vec::new(),
                tx: tx.clone(),
            };
            let mut stderr = Vec::new();
            let result = builder.run_streaming(&argv, &mut sink, &mut stderr);
            let description = match &result {
                Ok(summary) => format!(
                    "worker exited with {:?}{}",
                    summary.exit_code,
                    if summary.timed_out { ", timed out" } else { "" }
                ),
                Err(e) => format!("worker could not run: {e}"),
            };
            let err_text = String::from_utf8_lossy(&stderr).trim().to_string();
            let _ = tx.send(Err(if err_text.is_empty() {
                description.clone()
            } else {
                format!("{description}: {}", tail(&err_text, 2000))
            }));
            description
        });
        Ok(Box::new(SandboxChannel {
            to_worker,
            from_worker: rx,
            done: Some(done),
            fifo_dir,
            timeout: self.timeout,
        }))
    }
}

impl ReaderChannel for SandboxChannel {
    fn send(&mut self, msg: &FromSupervisor) -> PortResult<()> {
        let mut line = serde_json::to_string(msg)
            .map_err(|e| ToolFailure::new("reader_protocol", e.to_string()))?;
        line.push('\n');
        self.to_worker.write_all(line.as_bytes())?;
        self.to_worker.flush()?;
        Ok(())
    }

    fn recv(&mut self) -> PortResult<FromWorker> {
        match self.from_worker.recv_timeout(self.timeout) {
            Ok(Ok(line)) => serde_json::from_str(&line).map_err(|e| {
                ToolFailure::new("reader_protocol", format!("malformed worker line: {e}"))
            }),
            Ok(Err(ended)) => Err(ToolFailure::new("reader_ended", ended)),
            Err(_) => Err(ToolFailure::new(
                "reader_timeout",
                "the reader stopped answering",
            )),
        }
    }

    fn close(&mut self) -> String {
        let description = match self.done.take() {
            Some(handle) => handle
                .join()
                .unwrap_or_else(|_| "worker thread panicked".to_string()),
            None => "already closed".to_string(),
        };
        let _ = std::fs::remove_dir_all(&self.fifo_dir);
        description
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_output_is_shown_with_its_control_characters_escaped() {
        let shown = shown_escaped("ok\n\u{1b}[2Khidden\r\tend");
        assert_eq!(shown, "ok\n\\u{1b}[2Khidden\\u{d}\tend");
    }

    #[test]
    fn a_base_runs_network_trouble_names_the_key_to_change() {
        let net = |mode| TestNetwork {
            mode,
            ..TestNetwork::default()
        };
        let refused = "E   PermissionError: [Errno 1] Operation not permitted\n  socket.socket()";
        let hint = network_hint(&net(NetworkMode::None), refused, &[]);
        assert!(
            hint.contains("network = \"none\"") && hint.contains("loopback"),
            "{hint}"
        );
        assert_eq!(network_hint(&net(NetworkMode::Loopback), refused, &[]), "");
        let lookup = "socket.gaierror: [Errno -3] Temporary failure in name resolution";
        let hint = network_hint(&net(NetworkMode::Loopback), lookup, &[]);
        assert!(
            hint.contains("proxy") && hint.contains("[tests] allow"),
            "{hint}"
        );
        let blocked = [BlockedAttempt {
            host: "httpbin.example.org".into(),
            port: 443,
            reason: airlock_policies::network::BlockReason::NotAllowed,
        }];
        let hint = network_hint(&net(NetworkMode::Proxy), "", &blocked);
        assert!(
            hint.contains("httpbin.example.org:443") && hint.contains("[tests] allow"),
            "{hint}"
        );
        assert_eq!(
            network_hint(&net(NetworkMode::Loopback), "1 passed", &[]),
            ""
        );
    }
}
