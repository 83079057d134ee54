//! Fixtures: a small Python package in a git repository, a config, scripts for the scripted
//! model, a broker stub and an in-process reader launcher.

use airlock_reader::repo_tools::CheckoutTools;
use airlock_reader::{FromSupervisor, FromWorker};
use airlock_supervisor::delegate::{ReaderChannel, ReaderLauncher, ReferenceMount};
use airlock_supervisor::ports::{OpenPrReply, PortResult, PrSink, RunRegistration, ToolFailure};
use airlock_supervisor::runner::{self, Overrides, RunArgs, RunReport};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const OPS_PY: &str = "\"\"\"Arithmetic helpers.\"\"\"\n\n\ndef add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";

pub const TEST_OPS_PY: &str = "import unittest\n\nfrom calc.ops import mul\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub commit: String,
}

pub use airlock_testkit::git;

impl Fixture {
    /// A repository with `calc/ops.py` (add subtracts: the bug), a passing test of mul, a CI
    /// workflow and a lockfile.
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("calc-repo");
        let files: &[(&str, &str)] = &[
            ("calc/__init__.py", ""),
            ("calc/ops.py", OPS_PY),
            ("tests/__init__.py", ""),
            ("tests/test_ops.py", TEST_OPS_PY),
            (".github/workflows/ci.yml", "on: push\njobs: {}\n"),
            ("poetry.lock", "# lock\n"),
            ("README.md", "# calc\n\nSmall arithmetic helpers.\n"),
        ];
        let commit = airlock_testkit::git::repo_with(&repo, files);
        Fixture { dir, repo, commit }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write `airlock.toml` with the given extra TOML appended to `[budgets]`.
    pub fn config(&self, budgets: &str) -> PathBuf {
        self.config_with_tests("", budgets)
    }

    /// Write `airlock.toml` with `tests` appended to `[tests]` (keys, then sub-tables) and
    /// `budgets` to `[budgets]`.
    pub fn config_with_tests(&self, tests: &str, budgets: &str) -> PathBuf {
        let (keys, tables) = match tests.find("\n[") {
            Some(i) => (&tests[..i], &tests[i..]),
            None => (tests, ""),
        };
        let text = format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\nselector_style = \"dotted\"\ntimeout_secs = 120\n{keys}\n{tables}\n\n\
             [budgets]\n{budgets}\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n"
        );
        let p = self.path("airlock.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn issue(&self, json: Value) -> PathBuf {
        let p = self.path("issue.json");
        std::fs::write(&p, json.to_string()).unwrap();
        p
    }

    pub fn script(&self, turns: &[Value]) -> String {
        let p = self.path("script.jsonl");
        let text: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
        std::fs::write(&p, text.join("\n") + "\n").unwrap();
        format!("scripted:{}", p.display())
    }

    /// A repository like [`Fixture::new`] with `extra` files committed too.
    pub fn with_files(extra: &[(&str, String)]) -> Fixture {
        let fx = Fixture::new();
        for (path, text) in extra {
            airlock_testkit::write(&fx.repo, path, text);
        }
        let commit = airlock_testkit::git::commit_all(&fx.repo, "more files");
        Fixture { commit, ..fx }
    }

    /// Run with the broker stub and the in-process reader launcher.
    pub fn run(&self, issue: &Path, model: &str, config: &Path, broker: &BrokerStub) -> RunReport {
        self.try_run(issue, model, config, broker)
            .expect("run completes")
    }

    /// Like [`Fixture::run`], returning the error of a run that could not start.
    pub fn try_run(
        &self,
        issue: &Path,
        model: &str,
        config: &Path,
        broker: &BrokerStub,
    ) -> Result<RunReport, runner::RunError> {
        self.try_run_source(
            airlock_supervisor::github::IssueSource::File(issue.to_path_buf()),
            Some("main"),
            model,
            config,
            broker,
        )
    }

    /// Like [`Fixture::try_run`] for any issue source; `commit` `None` lets intake choose.
    pub fn try_run_source(
        &self,
        issue: airlock_supervisor::github::IssueSource,
        commit: Option<&str>,
        model: &str,
        config: &Path,
        broker: &BrokerStub,
    ) -> Result<RunReport, runner::RunError> {
        runner::run_issue(
            &RunArgs {
                repo: Some(self.repo.display().to_string()),
                commit: commit.map(str::to_owned),
                issue,
                model: Some(model.to_string()),
                agent: None,
                config: Some(config.to_path_buf()),
                exe: PathBuf::from("/nonexistent/airlock"),
                fetch: false,
                keep: false,
                progress: airlock_supervisor::progress::ProgressMode::Quiet,
            },
            Overrides {
                pr_sink: Some(Box::new(broker.clone())),
                readers: Some(Box::new(ThreadLauncher {
                    index_dir: self.path("index"),
                })),
                tests: None,
                broker: None,
                answer: None,
            },
        )
    }

    pub fn audit_kinds(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.path("audit.jsonl")).unwrap();
        text.lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }
}

pub fn trajectory(report: &RunReport) -> Vec<Value> {
    std::fs::read_to_string(&report.trajectory_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn kinds(entries: &[Value], kind: &str) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

pub fn ready_issue() -> Value {
    json!({
        "id": "CALC-7",
        "title": "add() returns the wrong result",
        "body": "Calling `calc.ops.add(2, 3)` returns -1; expected 5.",
        "labels": ["bug", "ready-for-agent"],
    })
}

pub fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": args}]})
}

pub fn outcome(kind: &str, confidence: f64) -> Value {
    json!({
        "outcome": kind,
        "summary": "summary",
        "root_cause": "add subtracts",
        "files_changed": [],
        "tests_added": [],
        "test_evidence": {"before": "", "after": ""},
        "also_noticed": [],
        "injection_observed": [],
        "confidence": confidence,
    })
}

pub fn final_turn(value: &Value) -> Value {
    json!({"text": value.to_string()})
}

/// A broker stub for tests only: registration always succeeds; open_pr keeps the broker's
/// rules of a run's calls: a request id already answered gets its stored reply (a resend), a
/// call after an accepted one is POLICY_VIOLATION `second_open_pr`, and otherwise the call is
/// validated against the open_pr contract (SCHEMA_INVALID when it fails) and queued.
#[derive(Clone, Default)]
pub struct BrokerStub {
    pub registered: Arc<Mutex<Vec<RunRegistration>>>,
    pub submitted: Arc<Mutex<Vec<Value>>>,
    /// What each open_pr reported beside its arguments.
    pub reports: Arc<Mutex<Vec<airlock_supervisor::ports::RunReport>>>,
    /// The request id of each open_pr, in order.
    pub request_ids: Arc<Mutex<Vec<String>>>,
    /// The reply given to each request id, by run.
    pub answered: Arc<Mutex<std::collections::BTreeMap<(String, String), OpenPrReply>>>,
    /// The queued items: (run id, queue id).
    pub queued: Arc<Mutex<Vec<(String, i64)>>>,
}

impl PrSink for BrokerStub {
    fn register_run(&mut self, run: &RunRegistration) -> PortResult<()> {
        self.registered.lock().unwrap().push(run.clone());
        Ok(())
    }

    fn open_pr(
        &mut self,
        run_id: &str,
        request_id: &str,
        arguments: &Value,
        report: &airlock_supervisor::ports::RunReport,
    ) -> PortResult<OpenPrReply> {
        self.submitted.lock().unwrap().push(arguments.clone());
        self.reports.lock().unwrap().push(report.clone());
        self.request_ids.lock().unwrap().push(request_id.to_owned());
        let key = (run_id.to_owned(), request_id.to_owned());
        if let Some(stored) = self.answered.lock().unwrap().get(&key) {
            return Ok(stored.clone());
        }
        let mut queued = self.queued.lock().unwrap();
        let reply = if queued.iter().any(|(run, _)| run == run_id) {
            OpenPrReply::Refused {
                error: airlock_schemas::BrokerError::policy_violation(
                    "second_open_pr",
                    "one_open_pr_per_run",
                    "this run already has an accepted open_pr",
                ),
            }
        } else {
            match airlock_schemas::from_value::<airlock_schemas::OpenPr>(arguments) {
                Ok(_) => {
                    queued.push((run_id.to_owned(), 1));
                    OpenPrReply::Queued { queue_id: 1 }
                }
                Err(e) => OpenPrReply::Refused {
                    error: airlock_schemas::BrokerError::schema_invalid(&e.violations()),
                },
            }
        };
        self.answered.lock().unwrap().insert(key, reply.clone());
        Ok(reply)
    }
}

/// Runs the reader worker loop on a thread over pipes (the sandboxed process launcher is
/// exercised by the root integration tests through the real binary).
pub struct ThreadLauncher {
    pub index_dir: PathBuf,
}

struct ThreadChannel {
    to_worker: std::io::PipeWriter,
    from_worker: BufReader<std::io::PipeReader>,
    handle: Option<std::thread::JoinHandle<String>>,
}

impl ReaderLauncher for ThreadLauncher {
    fn launch(&self, references: &[ReferenceMount]) -> PortResult<Box<dyn ReaderChannel>> {
        let (worker_out_r, worker_out_w) = std::io::pipe()?;
        let (worker_in_r, worker_in_w) = std::io::pipe()?;
        let index_dir = self.index_dir.clone();
        let references = references.to_vec();
        let handle = std::thread::spawn(move || {
            let mut input = BufReader::new(worker_in_r);
            // The brief names the commit and repo; the worktree is the current run's. Peek the
            // start message to learn nothing more than the tools need: the test's worktree is
            // found from the index directory's sibling `runs/` (one run per fixture).
            let runs = index_dir.parent().unwrap().join("runs");
            let run = std::fs::read_dir(&runs)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let root = run.join("worktree");
            let commit = git(&root, &["rev-parse", "HEAD"]);
            // The supervisor indexed the commit under its mirror's key: the one repository in
            // the index directory.
            let format = index_dir.join(format!("v{}", airlock_codegraph::store::FORMAT_VERSION));
            let keys: Vec<String> = std::fs::read_dir(&format)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(keys.len(), 1, "one index per fixture: {keys:?}");
            let mut tools =
                CheckoutTools::open(&root, &index_dir, Some(&keys[0]), &commit).unwrap();
            for mount in &references {
                tools = tools.with_reference(&mount.slug, &mount.root).unwrap();
            }
            match airlock_reader::run_worker(&mut input, worker_out_w, &tools) {
                Ok(()) => "worker finished".to_string(),
                Err(e) => format!("worker error: {e}"),
            }
        });
        Ok(Box::new(ThreadChannel {
            to_worker: worker_in_w,
            from_worker: BufReader::new(worker_out_r),
            handle: Some(handle),
        }))
    }
}

impl ReaderChannel for ThreadChannel {
    fn send(&mut self, msg: &FromSupervisor) -> PortResult<()> {
        let line = serde_json::to_string(msg).unwrap() + "\n";
        self.to_worker.write_all(line.as_bytes())?;
        Ok(())
    }

    fn recv(&mut self) -> PortResult<FromWorker> {
        let mut line = String::new();
        if self.from_worker.read_line(&mut line)? == 0 {
            return Err(ToolFailure::new("reader_ended", "worker closed its output"));
        }
        serde_json::from_str(line.trim())
            .map_err(|e| ToolFailure::new("reader_protocol", e.to_string()))
    }

    fn close(&mut self) -> String {
        self.handle
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}
