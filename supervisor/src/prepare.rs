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

use crate::adapters::tail;
use crate::config::PrepareConfig;
use crate::testenv::links_dir;
use airlock_policies::network::{BlockedAttempt, TestNetwork};
use airlock_policies::testrun::TestEnvironment;
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

/// Build (or reuse) the environment of `plan` by running `command` (already expanded) over
/// `tree` in the sandbox with network, granted `environment`'s read-only paths and variables.
pub fn prepare(
    plan: &PreparePlan,
    config: &PrepareConfig,
    command: &[String],
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
    for dir in [&env_dir, &links, &scratch] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(io(dir))?;
        }
    }
    std::fs::create_dir_all(&env_dir).map_err(io(&env_dir))?;
    std::fs::create_dir_all(&links).map_err(io(&links))?;
    // The command writes `{env}` as the sandbox's host identity (not root, for a root caller);
    // once it is done, the environment is taken back, so later runs read it as the caller's.
    let identity =
        airlock_sandbox::host_identity().map_err(|e| PrepareError::Sandbox(e.to_string()))?;
    identity
        .hand_over(&env_dir)
        .map_err(|e| PrepareError::Sandbox(e.to_string()))?;

    let (mut builder, proxy) = airlock_egress::with_network(SandboxBuilder::new(), network);
    builder = builder
        .system_ro()
        .timeout(config.timeout())
        .memory_mb(4096)
        .max_procs(1024);
    for path in environment.ro.iter().filter(|p| **p != env_dir) {
        builder = builder.ro(path.clone());
    }
    for (name, value) in environment.variables() {
        builder = builder.env(name, value);
    }
    let started = Instant::now();
    let captured = builder
        .rw(&env_dir)
        .overlay_keep(tree, tree, &scratch)
        .cwd(tree)
        .run_captured(command)
        .map_err(|e| PrepareError::Sandbox(e.to_string()))?;
    let seconds = started.elapsed().as_secs_f64();
    let mut output = String::from_utf8_lossy(&captured.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&captured.stderr));
    let output = tail(&output, PREPARE_OUTPUT_KEEP);
    let record = PrepareRecord {
        key: plan.key.clone(),
        env_dir: env_dir.clone(),
        command: command.to_vec(),
        exit_code: if captured.summary.timed_out {
            None
        } else {
            captured.summary.exit_code
        },
        output,
        seconds,
        inputs: plan.inputs.clone(),
        reused: false,
        network: network.clone(),
        blocked: proxy.map(|p| p.blocked()).unwrap_or_default(),
    };
    let failed_path = plan.root.join("prepare-failed.json");
    if record.exit_code != Some(0) {
        let _ = std::fs::write(
            &failed_path,
            serde_json::to_string_pretty(&record).unwrap_or_default(),
        );
        let _ = std::fs::remove_dir_all(&scratch);
        let how = match record.exit_code {
            None => format!("timed out after {} s", config.timeout().as_secs()),
            Some(code) => format!("exited with {code}"),
        };
        let mut output = record.output;
        for attempt in &record.blocked {
            output.push_str(&format!(
                "\nairlock: the prepare command tried {}, which the egress proxy refused ({}); \
                 if it is needed, add it to [tests.prepare] allow",
                attempt.target(),
                attempt.reason
            ));
        }
        return Err(PrepareError::Failed {
            command: command.join(" "),
            how,
            output,
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
