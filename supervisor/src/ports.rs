//! The capabilities a run uses, as small traits. The real implementations (in `adapters`) wrap
//! the product's crates; tests substitute doubles where the issue allows it (the broker) or
//! where a capability is not under test. The loop in `session` sees nothing else.

use airlock_policies::testrun::{ParsedRun, TestEnvironment, TestInventory};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// A bounded read, typed: its content and the figures the audit log records. Rendered for a
/// model only where it is shown to one (`airlock_reader::repo_tools::render_read`).
pub use airlock_checkout::ReadOutcome;
/// One search hit: path, line range, symbol, score and the file's test/vendored flags, as
/// codegraph ranks it. Rendered for a model only where it is shown to one.
pub use airlock_codegraph::Hit;
/// One merged pull request matched by the history search, with its score, as codegraph ranks
/// it. Rendered for a model only where it is shown to one (`tools::history`).
pub use airlock_codegraph::history::HistoryHit;
/// The broker's reply to a request, its own wire type.
pub use airlock_protocol::{BrokerReply, OpenPrReply, SubmitReviewReply};

/// A refusal or failure a tool hands back to the model as an error result (never a crash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// A short stable code, e.g. `not_found`, `policy_refused`.
    pub code: String,
    /// The message the model sees.
    pub message: String,
}

impl ToolFailure {
    /// A failure with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ToolFailure {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Outcome type of a port call.
pub type PortResult<T> = std::result::Result<T, ToolFailure>;

/// Zero-LLM retrieval over the pinned checkout (codegraph).
pub trait Retrieval {
    /// The top `limit` hits for `query`, best first.
    fn search(&self, query: &str, limit: usize) -> PortResult<Vec<Hit>>;
    /// The repository map within about `token_budget` tokens, personalised by `query`.
    fn repo_map(&self, query: &str, token_budget: usize) -> PortResult<String>;
}

/// The memory of merged pull requests up to the pinned commit (codegraph's history index).
pub trait History {
    /// The top `limit` merged pull requests for `query`, best first.
    fn search(&self, query: &str, limit: usize) -> PortResult<Vec<HistoryHit>>;
}

/// The worktree of the run: bounded reads, the file tree, and writes (the caller has already
/// checked the write policy).
pub trait Worktree {
    /// The worktree root.
    fn root(&self) -> &Path;
    /// Lines `start..=end` (1-based) of `path`, through the bounded reader.
    fn read_lines(&self, path: &str, start: usize, end: usize) -> PortResult<ReadOutcome>;
    /// The whole text of `path` for an exact-match edit, of any size the edit cap allows (the
    /// read cap bounds what a read returns, not what may be edited).
    fn read_for_edit(&self, path: &str) -> PortResult<String>;
    /// Write `content` to `path`, creating parent directories inside the worktree.
    fn write(&self, path: &str, content: &str) -> PortResult<()>;
    /// The number of lines of a regular text file, `None` when it does not exist or is refused.
    fn line_count(&self, path: &str) -> Option<usize>;
    /// The tracked file tree within `char_budget` characters, keeping the directories that
    /// match `query` expanded.
    fn file_tree(&self, query: &str, char_budget: usize) -> String;
}

/// One sandboxed test run's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestReport {
    /// The selector, `None` for a full run.
    pub selector: Option<String>,
    /// The exit code (`None` when killed).
    pub exit_code: Option<i32>,
    /// True when the run was stopped by its time limit.
    pub timed_out: bool,
    /// Combined output, tail-truncated to a bound.
    pub output: String,
    /// Per-test results parsed from the whole output (not only the tail).
    pub parsed: ParsedRun,
    /// What the egress proxy refused the run (with `[tests] network = "proxy"`), once per
    /// host and port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<airlock_policies::network::BlockedAttempt>,
}

impl TestReport {
    /// Exit code 0 and not timed out: the verdict of a narrow run. A full run is judged against
    /// the base inventory instead.
    pub fn exit_ok(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// What the test runner established before the model's first turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The environment every test run gets (sent to the broker at registration).
    pub environment: TestEnvironment,
    /// The resolved full-run command.
    pub command: Vec<String>,
    /// The tests the full command runs at the pin, and which fail there.
    pub inventory: TestInventory,
    /// The prepare step's record, when one is configured.
    pub prepare: Option<crate::prepare::PrepareRecord>,
    /// Seconds the base full run took.
    pub base_seconds: f64,
    /// What the egress proxy refused the base full run, once per host and port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<airlock_policies::network::BlockedAttempt>,
    /// When tests fail at base: what the output says went wrong, each naming the key to change
    /// (sockets refused, a host the proxy refused, a missing module or generated file, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
}

impl Baseline {
    /// The baseline of an agent that runs no tests (the reviewer): no command, no inventory.
    pub fn empty() -> Baseline {
        Baseline {
            environment: TestEnvironment::default(),
            command: Vec::new(),
            inventory: TestInventory {
                runner: airlock_policies::testrun::TestRunner::Pytest,
                tests: std::collections::BTreeMap::new(),
                collected: None,
                exit_code: None,
                runner_counts: std::collections::BTreeMap::new(),
                reasons: std::collections::BTreeMap::new(),
            },
            prepare: None,
            base_seconds: 0.0,
            blocked: Vec::new(),
            hints: Vec::new(),
        }
    }
}

/// Why the test set-up failed before the first model call (a config or prepare problem).
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// A `[tests]` setting cannot be used.
    #[error(transparent)]
    Config(#[from] crate::testenv::TestEnvError),
    /// Prepare failed.
    #[error(transparent)]
    Prepare(#[from] crate::prepare::PrepareError),
    /// The base inventory could not be taken; `output` is the end of what the command printed.
    #[error("the base test inventory: {error}{network}\n--- the end of its output ---\n{output}")]
    Inventory {
        /// Why.
        error: airlock_policies::testrun::InventoryError,
        /// What the output says of the network, with the key to change (empty when nothing).
        network: String,
        /// The last part of the base run's output (stdout then stderr).
        output: String,
    },
    /// The sandbox could not run the test command.
    #[error("the test command could not run in the sandbox: {0}")]
    Sandbox(String),
}

/// Runs the configured test command in the sandbox, on an overlay of the worktree.
pub trait TestRunner {
    /// Build the environment (prepare) and take the base inventory; called once, before the
    /// model's first turn, on the untouched worktree.
    fn baseline(&self) -> std::result::Result<Baseline, BaselineError>;
    /// Run with an optional (already checked) selector.
    fn run(&self, selector: Option<&str>) -> PortResult<TestReport>;
}

/// The registration of a run with the broker: the broker's own wire type, so the two sides
/// cannot disagree on a field.
pub use airlock_protocol::{IssueText, RunRegistration};

/// What a run reports with its `open_pr`, as data for the approver: the broker stores and
/// shows it, attributed to the run, and decides nothing on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    /// What the egress proxy refused the run's tests.
    pub network_blocked: Vec<airlock_policies::network::BlockedAttempt>,
    /// What the run's screening found and its readers reported, one per place.
    pub findings: Vec<airlock_protocol::ItemFinding>,
}

/// Where `open_pr` goes: the broker client in production, a stub in tests.
pub trait PrSink {
    /// Register the run before the loop starts.
    fn register_run(&mut self, run: &RunRegistration) -> PortResult<()>;
    /// Forward one `open_pr` call under `request_id`, the key that names this call of the run
    /// ([`airlock_protocol::open_pr_call_id`]): a resend of the call keeps it, another call never
    /// has it. The broker's typed reply (a reply line that is not one an `open_pr` gets is a
    /// failure).
    fn open_pr(
        &mut self,
        run_id: &str,
        request_id: &str,
        arguments: &Value,
        report: &RunReport,
    ) -> PortResult<OpenPrReply>;
    /// Add what the run learnt after its accepted `open_pr` (the model's own
    /// `injection_observed`) to its queued item (`report_findings`). A sink that does not speak
    /// to a broker refuses it.
    fn report_findings(
        &mut self,
        run_id: &str,
        findings: &[airlock_protocol::ItemFinding],
    ) -> PortResult<airlock_protocol::ReportFindingsReply> {
        Err(ToolFailure::new(
            "broker_protocol",
            format!(
                "this broker connection cannot take run {run_id}'s {} finding(s)",
                findings.len()
            ),
        ))
    }
    /// Forward a reviewer's review (`submit_review`); the broker's typed reply. A sink that
    /// does not speak to a broker refuses it.
    fn submit_review(
        &mut self,
        submission: &airlock_protocol::ReviewSubmission,
    ) -> PortResult<SubmitReviewReply> {
        Err(ToolFailure::new(
            "broker_protocol",
            format!(
                "this broker connection cannot take the review of {}",
                submission.pull
            ),
        ))
    }
}
