//! `[tests.prepare]`: building the test environment once per repository, pinned commit and
//! content of the prepare inputs, outside the agent's reach.
//!
//! The command runs in the sandbox with the network of `[tests.prepare]` (by default behind the
//! egress proxy, admitting the registries the host's installers are configured for), on a copy-on-write view of the pristine worktree (the pinned files only: it runs
//! before the agent's first turn), writing only to the environment directory (`{env}`) and to
//! that view, of which only the configured `links` are kept. For a root caller the command
//! writes `{env}` as the sandbox's host identity (the directory is handed over to it before
//! the run) and the environment and the links are taken back afterwards, so that later runs,
//! which get them read-only, read them as the caller's. Its output and exit status are
//! recorded in `prepare.json` beside the environment; a later run with the same key reuses the
//! environment without running anything. A lock serialises runs that prepare the same key.

use crate::config::PrepareConfig;
use crate::testenv::links_dir;
use airlock_policies::network::{BlockedAttempt, TestNetwork};
use airlock_policies::testrun::{SANDBOX_TREE, TestEnvironment};
use airlock_sandbox::SandboxBuilder;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Most bytes of prepare output kept in the record and in errors (the tail).
pub const PREPARE_OUTPUT_KEEP: usize = 16 * 1024;

/// Why the environment could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The command exited non-zero or was killed.
    #[error(
        "tests.prepare.command `{command}` {how}; fix it in airlock.toml (its output follows)\n{output}"
    )]
    Failed {
        /// The command line.
        command: String,
        /// `exited with 1`, `timed out after 1800 s`.
        how: String,
        /// The tail of its output.
        output: String,
    },
    /// The sandbox refused or failed to run the command.
    #[error("tests.prepare.command could not run in the sandbox: {0}")]
    Sandbox(String),
    /// A configured link was not created by the command.
    #[error(
        "tests.prepare.links: the prepare command did not create `{0}` in the tree; fix the command or the link"
    )]
    LinkMissing(String),
    /// The environment directory could not be written.
    #[error("preparing the test environment in {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An input file could not be read.
    #[error("tests.prepare.inputs: {0}")]
    Inputs(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PrepareError + '_ {
    move |source| PrepareError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What prepare did, as recorded in `prepare.json` and the trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrepareRecord {
    /// The key (a digest of repository, commit, configuration and input contents).
    pub key: String,
    /// The environment directory (`{env}`).
    pub env_dir: PathBuf,
    /// The command as run.
    pub command: Vec<String>,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// The tail of its output.
    pub output: String,
    /// Wall-clock seconds it took.
    pub seconds: f64,
    /// The input files that keyed it, with their digests.
    pub inputs: Vec<(String, String)>,
    /// True when this run reused an environment prepared earlier.
    #[serde(default)]
    pub reused: bool,
    /// The network it ran with (`proxy`, unless `[tests.prepare] network` says otherwise).
    #[serde(default)]
    pub network: TestNetwork,
    /// What the egress proxy refused it, once per host and port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedAttempt>,
    /// Every step run, in order: the recipe's (`[tests.prepare.python]`), then `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Vec<String>>,
    /// What the steps created in the tree (an editable install's version file and
    /// `.egg-info`, a compiled extension), kept beside the environment and shown read-only at
    /// the same place in every test run: the top-most new paths, relative.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<String>,
}

/// Where one prepared environment lives.
#[derive(Debug, Clone)]
pub struct PreparePlan {
    /// The key.
    pub key: String,
    /// `<envs_dir>/<key>`.
    pub root: PathBuf,
    /// The input files and their digests.
    pub inputs: Vec<(String, String)>,
}

impl PreparePlan {
    /// The environment directory (`{env}`).
    pub fn env_dir(&self) -> PathBuf {
        self.root.join("env")
    }
}

/// Compute the key of the environment for this repository (`repo_key`, the mirror's), `commit`,
/// prepare configuration and the content of the inputs among `tracked` files of `tree`.
pub fn plan(
    config: &PrepareConfig,
    environment_config: &str,
    repo_key: &str,
    commit: &str,
    tree: &Path,
    tracked: &[String],
    envs_dir: &Path,
) -> Result<PreparePlan, PrepareError> {
    let mut builder = globset::GlobSetBuilder::new();
    for pattern in &config.inputs {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| PrepareError::Inputs(format!("{pattern:?}: {e}")))?;
        builder.add(glob);
    }
    let set = builder
        .build()
        .map_err(|e| PrepareError::Inputs(e.to_string()))?;
    let mut inputs = Vec::new();
    for path in tracked.iter().filter(|p| set.is_match(p.as_str())) {
        let bytes = std::fs::read(tree.join(path))
            .map_err(|e| PrepareError::Inputs(format!("{path}: {e}")))?;
        inputs.push((path.clone(), airlock_audit::sha256_hex(&bytes)));
    }
    inputs.sort();
    let keyed = serde_json::json!({
        "repository": repo_key,
        "commit": commit,
        "prepare": config,
        "environment": environment_config,
        "inputs": inputs,
    });
    let key = airlock_audit::sha256_hex(keyed.to_string().as_bytes())[..24].to_string();
    Ok(PreparePlan {
        root: envs_dir.join(&key),
        key,
        inputs,
    })
}

/// Whether the environment of `plan` was built already (a successful `prepare.json`): then
/// [`prepare`] reuses it without running anything, and the steps need not be worked out.
pub fn built(plan: &PreparePlan) -> bool {
    std::fs::read_to_string(plan.root.join("prepare.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<PrepareRecord>(&text).ok())
        .is_some_and(|record| record.exit_code == Some(0))
}

/// Most paths kept of what the steps created in the tree ([`PrepareRecord::generated`]); the
/// rest are dropped with the scratch copy (an install does not scatter more).
pub const MAX_GENERATED: usize = 256;

/// The pins of yanked releases a pip install needed, in `{env}`.
pub const YANKED_FILE: &str = "yanked-pins.txt";

/// Most yanked releases pinned for one environment.
const MAX_YANKED_PINS: usize = 8;

fn is_pip_install(step: &[String]) -> bool {
    step.windows(2).any(|w| w[0] == "pip" && w[1] == "install")
}

/// `step`, when it is a pip install and there are pins of yanked releases, with `-c` of them.
fn with_constraints(step: &[String], yanked: &[String], env_dir: &Path) -> Vec<String> {
    let mut step = step.to_vec();
    if !yanked.is_empty()
        && let Some(at) = step
            .windows(2)
            .position(|w| w[0] == "pip" && w[1] == "install")
    {
        step.splice(
            at + 2..at + 2,
            [
                "-c".to_string(),
                env_dir.join(YANKED_FILE).display().to_string(),
            ],
        );
    }
    step
}

/// Build (or reuse) the environment of `plan` by running `steps` (already expanded) in turn over
/// `tree` (seen at [`SANDBOX_TREE`]) in the sandbox with the prepare network, granted
/// `environment`'s read-only paths and variables. `files` are written into `{env}` first
/// (name, content). Each step gets a `TMPDIR` on disk beside the environment (removed after),
/// unless the variables set one.
pub fn prepare(
    plan: &PreparePlan,
    config: &PrepareConfig,
    steps: &[Vec<String>],
    files: &[(String, String)],
    environment: &TestEnvironment,
    network: &TestNetwork,
    tree: &Path,
) -> Result<PrepareRecord, PrepareError> {
    std::fs::create_dir_all(&plan.root).map_err(io(&plan.root))?;
    let lock_path = plan.root.join("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    lock.lock().map_err(io(&lock_path))?;
    let record_path = plan.root.join("prepare.json");
    if let Ok(text) = std::fs::read_to_string(&record_path)
        && let Ok(mut record) = serde_json::from_str::<PrepareRecord>(&text)
        && record.exit_code == Some(0)
    {
        record.reused = true;
        return Ok(record);
    }
    let env_dir = plan.env_dir();
    let links = links_dir(&env_dir);
    let scratch = plan.root.join("scratch");
    let tmp = plan.root.join("tmp");
    for dir in [&env_dir, &links, &scratch, &tmp] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(io(dir))?;
        }
    }
    for dir in [&env_dir, &links, &tmp] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    for (name, content) in files {
        let path = env_dir.join(name);
        std::fs::write(&path, content).map_err(io(&path))?;
    }
    // The command writes `{env}` as the sandbox's host identity (not root, for a root caller);
    // once it is done, the environment is taken back, so later runs read it as the caller's.
    let identity =
        airlock_sandbox::host_identity().map_err(|e| PrepareError::Sandbox(e.to_string()))?;
    for dir in [&env_dir, &tmp] {
        identity
            .hand_over(dir)
            .map_err(|e| PrepareError::Sandbox(e.to_string()))?;
    }
    // Installs unpack and build in TMPDIR: on disk beside the environment, not in the
    // sandbox's small private /tmp.
    let mut variables = environment.variables();
    if !variables.iter().any(|(name, _)| name == "TMPDIR") {
        variables.push(("TMPDIR".into(), tmp.display().to_string()));
    }

    let started = Instant::now();
    let mut output = String::new();
    let mut blocked: Vec<BlockedAttempt> = Vec::new();
    let mut exit_code = Some(0);
    let mut failed_step = None;
    let mut yanked: Vec<String> = Vec::new();
    let mut steps: Vec<Vec<String>> = steps.to_vec();
    let mut legacy_editable = false;
    let mut i = 0;
    while i < steps.len() {
        // A pip install runs with the pins of yanked releases found so far (see below).
        let step = &with_constraints(&steps[i], &yanked, &env_dir);
        let (mut builder, proxy) = airlock_egress::with_network(SandboxBuilder::new(), network);
        builder = builder
            .system_ro()
            .timeout(config.timeout().saturating_sub(started.elapsed()))
            .memory_mb(4096)
            .max_procs(1024);
        for path in environment.ro.iter().filter(|p| **p != env_dir) {
            builder = builder.ro(path.clone());
        }
        for (name, value) in &variables {
            builder = builder.env(name, value);
        }
        let captured = builder
            .rw(&env_dir)
            .rw(&tmp)
            .overlay_keep(tree, SANDBOX_TREE, &scratch)
            .cwd(SANDBOX_TREE)
            .run_captured(step)
            .map_err(|e| PrepareError::Sandbox(e.to_string()))?;
        if steps.len() > 1 {
            output.push_str(&format!("$ {}\n", step.join(" ")));
        }
        output.push_str(&String::from_utf8_lossy(&captured.stdout));
        output.push_str(&String::from_utf8_lossy(&captured.stderr));
        for attempt in proxy.map(|p| p.blocked()).unwrap_or_default() {
            if !blocked.iter().any(|b| b.target() == attempt.target()) {
                blocked.push(attempt);
            }
        }
        exit_code = if captured.summary.timed_out {
            None
        } else {
            captured.summary.exit_code
        };
        if exit_code != Some(0) {
            // A release yanked after the date resolved against is the only one that fits:
            // pip takes a yanked release only when pinned, so the step runs again with it
            // pinned (a few times at most).
            if let Some(pin) = crate::recipe::yanked_pin(&String::from_utf8_lossy(&captured.stderr))
                && is_pip_install(&steps[i])
                && yanked.len() < MAX_YANKED_PINS
                && !yanked.contains(&pin)
            {
                output.push_str(&format!(
                    "airlock: only yanked releases fit; running the install again with {pin} \
                     pinned (pip takes a yanked release only when pinned)\n"
                ));
                yanked.push(pin);
                let path = env_dir.join(YANKED_FILE);
                std::fs::write(&path, yanked.join("\n") + "\n").map_err(io(&path))?;
                continue;
            }
            // The project's build backend cannot build an editable wheel (one the project
            // pins): the legacy editable install, once.
            let stderr = String::from_utf8_lossy(&captured.stderr);
            if !legacy_editable
                && stderr.contains(crate::recipe::NO_EDITABLE_HOOK)
                && let Some(fallback) = crate::recipe::legacy_editable_steps(
                    &steps[i],
                    &crate::recipe::build_requires(tree),
                )
            {
                legacy_editable = true;
                output.push_str(&format!(
                    "airlock: the project's build backend builds no editable wheel; installing \
                     it the legacy way instead ({} and `setup.py develop`)\n",
                    crate::recipe::LEGACY_EDITABLE_PIP
                ));
                steps.splice(i..i + 1, fallback);
                continue;
            }
            failed_step = Some(i);
            break;
        }
        i += 1;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let seconds = started.elapsed().as_secs_f64();
    let output = tail(&output, PREPARE_OUTPUT_KEEP);
    let mut record = PrepareRecord {
        key: plan.key.clone(),
        env_dir: env_dir.clone(),
        command: config.command.clone(),
        exit_code,
        output,
        seconds,
        inputs: plan.inputs.clone(),
        reused: false,
        network: network.clone(),
        blocked,
        steps: steps.to_vec(),
        generated: Vec::new(),
    };
    let failed_path = plan.root.join("prepare-failed.json");
    if let Some(step) = failed_step {
        let command = &steps[step];
        let _ = std::fs::write(
            &failed_path,
            serde_json::to_string_pretty(&record).unwrap_or_default(),
        );
        let _ = std::fs::remove_dir_all(&scratch);
        // Nothing half-built stays in the cache.
        let _ = std::fs::remove_dir_all(&env_dir);
        let _ = std::fs::remove_dir_all(&links);
        let how = match record.exit_code {
            None => format!("timed out after {} s", config.timeout().as_secs()),
            Some(code) => format!("exited with {code}"),
        };
        let mut output = record.output;
        for hint in airlock_policies::testrun::hints(&output) {
            output.push_str(&format!("\nairlock: {hint}"));
        }
        for attempt in &record.blocked {
            output.push_str(&format!(
                "\nairlock: the prepare command tried {}, which the egress proxy refused ({}); \
                 if it is needed, add it to [tests.prepare] allow",
                attempt.target(),
                attempt.reason
            ));
        }
        // Repository and registry text, shown to the operator: escaped by the shared rule.
        return Err(PrepareError::Failed {
            command: airlock_policies::terminal::escaped_line(&command.join(" ")).into_owned(),
            how,
            output: airlock_policies::terminal::escaped(&output).into_owned(),
        });
    }
    let upper = scratch.join("upper");
    for link in &config.links {
        let from = upper.join(link);
        if from.symlink_metadata().is_err() {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(PrepareError::LinkMissing(link.clone()));
        }
        let to = links.join(link);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::rename(&from, &to).map_err(io(&to))?;
    }
    // What else the steps created in the tree is kept too: the files a build generates.
    for path in created_paths(&upper, tree, MAX_GENERATED) {
        let to = links.join(&path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::rename(upper.join(&path), &to).map_err(io(&to))?;
        record.generated.push(path);
    }
    for dir in [&env_dir, &links] {
        identity
            .take_back(dir)
            .map_err(|e| PrepareError::Sandbox(e.to_string()))?;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(&failed_path);
    let tmp = plan.root.join("prepare.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(&record).unwrap_or_default() + "\n",
    )
    .map_err(io(&tmp))?;
    std::fs::rename(&tmp, &record_path).map_err(io(&record_path))?;
    Ok(record)
}

/// The top-most paths of an overlay's upper directory `upper` that do not exist in its lower
/// `tree`: what was created, not what was changed (a changed tracked file is not kept) nor
/// removed (whiteouts are character devices and are skipped). Directories that exist in both
/// are descended into; only regular files, directories and symlinks are listed; at most `max`,
/// sorted; `__pycache__` directories are never kept.
pub fn created_paths(upper: &Path, tree: &Path, max: usize) -> Vec<String> {
    fn walk(upper: &Path, tree: &Path, rel: &Path, max: usize, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(upper.join(rel)) else {
            return;
        };
        let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for name in names {
            if out.len() >= max {
                return;
            }
            let rel = rel.join(&name);
            let Ok(meta) = std::fs::symlink_metadata(upper.join(&rel)) else {
                continue;
            };
            let kind = meta.file_type();
            if !(kind.is_file() || kind.is_dir() || kind.is_symlink()) || name == "__pycache__" {
                continue;
            }
            match std::fs::symlink_metadata(tree.join(&rel)) {
                Err(_) => {
                    if let Some(text) = rel.to_str() {
                        out.push(text.to_string());
                    }
                }
                Ok(lower) if lower.is_dir() && kind.is_dir() => walk(upper, tree, &rel, max, out),
                Ok(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(upper, tree, Path::new(""), max, &mut out);
    out
}

/// The last `max` bytes of `text` (on a character boundary), saying how much was cut: how
/// prepare's output is kept, and test output too (`crate::adapters`).
pub(crate) fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[... {} earlier bytes cut]\n{}", start, &text[start..])
}
