//! Fixtures: a Python project with a bug, the broker's clone and a bare remote, a run worktree
//! the "agent" edits, a `broker.toml`, and the real `airlock-broker serve` process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use airlock_broker::{BrokerClient, BrokerReply, RunRegistration, TestRunner};
use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_airlock-broker");

pub use airlock_testkit::{git, write};

pub const BUGGY_OPS: &str = "\
def clamp(x, lo, hi):
    \"\"\"Clamp x into [lo, hi].\"\"\"
    return max(lo, x)
";

pub const FIXED_OPS: &str = "\
def clamp(x, lo, hi):
    \"\"\"Clamp x into [lo, hi].\"\"\"
    return max(lo, min(x, hi))
";

pub const EXISTING_TEST: &str = "\
import unittest

from calc.ops import clamp


class TestClampLow(unittest.TestCase):
    def test_clamp_low(self):
        self.assertEqual(clamp(-5, 0, 3), 0)

    def test_identity(self):
        self.assertEqual(clamp(2, 0, 3), 2)
";

pub const NEW_TEST: &str = "\
import unittest

from calc.ops import clamp


class TestClampHigh(unittest.TestCase):
    def test_clamp_high(self):
        self.assertEqual(clamp(9, 0, 3), 3)
";

pub const NEW_TEST_NAME: &str = "tests.test_clamp_high.TestClampHigh.test_clamp_high";

/// Everything one test needs.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub origin: PathBuf,
    pub remote: PathBuf,
    pub runs: PathBuf,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub audit: PathBuf,
    pub db: PathBuf,
    pub pin: String,
    pub server: Option<Child>,
}

pub struct Options {
    pub queue_max_age: &'static str,
    pub forge: Option<(String, String)>,
    /// Top-level `broker.toml` lines added to the generated configuration.
    pub extra_config: String,
    /// Files of the pinned commit; the Python project when empty.
    pub files: Vec<(&'static str, String)>,
    /// `broker.toml` text appended after the repository's table (its gates).
    pub repository_tables: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            queue_max_age: "72h",
            forge: None,
            extra_config: String::new(),
            files: Vec::new(),
            repository_tables: String::new(),
        }
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with(Options::default())
    }

    pub fn with(opts: Options) -> Fixture {
        let dir = tempfile::Builder::new()
            .prefix("broker-it-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let root = dir.path().to_path_buf();
        let origin = root.join("origin");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "-b", "main"]);
        if opts.files.is_empty() {
            write(&origin, "calc/__init__.py", "");
            write(&origin, "calc/ops.py", BUGGY_OPS);
            write(&origin, "tests/__init__.py", "");
            write(&origin, "tests/test_ops.py", EXISTING_TEST);
            write(&origin, "README.md", "calc\n");
        }
        for (path, text) in &opts.files {
            write(&origin, path, text);
        }
        git(&origin, &["add", "-A"]);
        git(&origin, &["commit", "-q", "-m", "initial"]);
        let pin = git(&origin, &["rev-parse", "HEAD"]);
        let remote = root.join("remote.git");
        git(
            &root,
            &[
                "clone",
                "-q",
                "--bare",
                origin.to_str().unwrap(),
                remote.to_str().unwrap(),
            ],
        );
        let clone = root.join("broker-clone");
        git(
            &root,
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        let runs = root.join("runs");
        std::fs::create_dir_all(&runs).unwrap();
        let socket = root.join("broker.sock");
        let audit = root.join("audit.jsonl");
        let db = root.join("state/broker.db");
        let forge = match &opts.forge {
            Some((api, env)) => format!("forge_token_env = \"{env}\"\ngithub_api = \"{api}\"\n"),
            None => String::new(),
        };
        let config = root.join("broker.toml");
        std::fs::write(
            &config,
            format!(
                "socket = \"{}\"\nstate_db = \"{}\"\nruns_root = \"{}\"\naudit_log = \"{}\"\nwork_dir = \"{}\"\nqueue_max_age = \"{}\"\nwitness_timeout = \"300s\"\n{}\n[repositories.\"acme/calc\"]\nclone = \"{}\"\nremote = \"origin\"\n{forge}{}",
                socket.display(),
                db.display(),
                runs.display(),
                audit.display(),
                root.join("work").display(),
                opts.queue_max_age,
                opts.extra_config,
                clone.display(),
                opts.repository_tables,
            ),
        )
        .unwrap();
        Fixture {
            dir,
            origin,
            remote,
            runs,
            config,
            socket,
            audit,
            db,
            pin,
            server: None,
        }
    }

    /// A fresh worktree for a run: a clone at the pin.
    pub fn worktree(&self, run_id: &str) -> PathBuf {
        let wt = self.runs.join(run_id);
        git(
            &self.runs,
            &[
                "clone",
                "-q",
                self.origin.to_str().unwrap(),
                wt.to_str().unwrap(),
            ],
        );
        git(&wt, &["checkout", "-q", &self.pin]);
        wt
    }

    pub fn start(&mut self) {
        self.start_with_env(&[]);
    }

    pub fn start_with_env(&mut self, env: &[(&str, &str)]) {
        let mut cmd = Command::new(BIN);
        cmd.arg("--config")
            .arg(&self.config)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            assert!(Instant::now() < deadline, "broker did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How the running broker ended, if it has (for a failure message).
    pub fn server_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.server
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.server.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    pub fn client(&self) -> BrokerClient {
        BrokerClient::connect(&self.socket).unwrap()
    }

    pub fn registration(&self, run_id: &str, worktree: &Path) -> RunRegistration {
        RunRegistration {
            run_id: run_id.to_owned(),
            repository: "acme/calc".to_owned(),
            base_commit: self.pin.clone(),
            issue_id: "CALC-42".to_owned(),
            issue_number: None,
            worktree: worktree.display().to_string(),
            test_command: vec![
                "python3".into(),
                "-m".into(),
                "unittest".into(),
                "-v".into(),
            ],
            test_runner: TestRunner::Unittest,
            write_allowlist: vec!["calc/**".into(), "tests/**".into()],
            test_env: Default::default(),
            reconnect_secs: None,
            issue: None,
            follow_up_of: None,
            change: Default::default(),
            tree: Default::default(),
        }
    }

    /// Register a run and return its worktree.
    pub fn register(&self, run_id: &str) -> PathBuf {
        let wt = self.worktree(run_id);
        let reply = self
            .client()
            .register_run(&self.registration(run_id, &wt))
            .unwrap();
        assert_eq!(
            reply,
            BrokerReply::Registered {
                run_id: run_id.to_owned()
            }
        );
        wt
    }

    /// The approver CLI.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env("AIRLOCK_REVIEWER", "rev")
            .output()
            .unwrap()
    }

    pub fn audit_kinds(&self) -> Vec<(String, Value)> {
        let text = std::fs::read_to_string(&self.audit).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["kind"].as_str().unwrap().to_owned(), v["payload"].clone())
            })
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The agent's honest fix: the source change plus a new fail-to-pass test.
pub fn apply_fix(wt: &Path) {
    write(wt, "calc/ops.py", FIXED_OPS);
    write(wt, "tests/test_clamp_high.py", NEW_TEST);
}

/// Honest open_pr arguments for the worktree as it is now (digest from `airlock-policies`).
pub fn honest_args(fx: &Fixture, wt: &Path) -> Value {
    let report = airlock_policies::compute_digest(wt, &fx.pin).unwrap();
    let digest = serde_json::to_value(report.to_diff_digest()).unwrap();
    let scope = if report.test_files_added.is_empty() {
        "source-only"
    } else {
        "source-plus-new-tests"
    };
    json!({
        "issue_id": "CALC-42",
        "base_commit": fx.pin,
        "title": "fix: clamp respects the upper bound",
        "body": "clamp ignored hi. It now returns max(lo, min(x, hi)); the new test fails before and passes after.",
        "scope": scope,
        "diff_digest": digest,
        "test_evidence": {
            "before_selector": NEW_TEST_NAME,
            "before_failing_test": NEW_TEST_NAME,
            "after_full_run": "green",
            "witness_run": "green"
        },
        "confidence": 0.9
    })
}

pub use airlock_testkit::mockgithub::{MockForge, SeenRequest};

/// Run an honest submission to the queue; returns the queue id.
pub fn queue_honest(fx: &Fixture, run_id: &str) -> i64 {
    let wt = fx.register(run_id);
    apply_fix(&wt);
    let reply = fx.client().open_pr(run_id, honest_args(fx, &wt)).unwrap();
    match reply {
        BrokerReply::Queued { queue_id } => queue_id,
        other => panic!("expected queued, got {other:?}"),
    }
}

impl Fixture {
    /// The approver CLI with extra environment.
    pub fn cli_env(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = Command::new(BIN);
        cmd.arg("--config")
            .arg(&self.config)
            .args(args)
            .env("AIRLOCK_REVIEWER", "rev");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    pub fn remote_ref(&self, branch: &str) -> Option<String> {
        let out = airlock_testkit::git_output(
            &self.remote,
            &[
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Fixture {
    /// Push to `url` instead of the clone's `origin` (e.g. the smart-HTTP server's URL of
    /// `remote.git`, which serves the same bare repository).
    pub fn use_remote(&self, url: &str) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        assert!(text.contains("remote = \"origin\"\n"));
        std::fs::write(
            &self.config,
            text.replace("remote = \"origin\"\n", &format!("remote = \"{url}\"\n")),
        )
        .unwrap();
    }

    /// Register a run that names GitHub issue `issue_number` and return its worktree.
    pub fn register_numbered(&self, run_id: &str, issue_number: Option<u64>) -> PathBuf {
        let wt = self.worktree(run_id);
        let mut registration = self.registration(run_id, &wt);
        registration.issue_number = issue_number;
        let reply = self.client().register_run(&registration).unwrap();
        assert_eq!(
            reply,
            BrokerReply::Registered {
                run_id: run_id.to_owned()
            }
        );
        wt
    }
}

/// [`queue_honest`] for a run registered with a GitHub issue number.
pub fn queue_honest_numbered(fx: &Fixture, run_id: &str, issue_number: u64) -> i64 {
    let wt = fx.register_numbered(run_id, Some(issue_number));
    apply_fix(&wt);
    match fx.client().open_pr(run_id, honest_args(fx, &wt)).unwrap() {
        BrokerReply::Queued { queue_id } => queue_id,
        other => panic!("expected queued, got {other:?}"),
    }
}
