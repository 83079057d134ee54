//! The broker's wire protocol: one JSON object per line over the Unix socket, one reply line per
//! request. The open_pr arguments travel as raw JSON so the approver sees them byte for byte.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use airlock_schemas::BrokerError;

pub use airlock_policies::testrun::{TestEnvironment, TestRunner};

/// What a supervisor tells the broker about a run when the run starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRegistration {
    /// The run's id (unique per broker).
    pub run_id: String,
    /// Repository name as configured in `broker.toml`.
    pub repository: String,
    /// The pinned base commit, 40 lower-case hex digits.
    pub base_commit: String,
    /// The issue the run works on: an `open_pr` must name it. Required at registration (the
    /// default only reads registrations stored before the field existed).
    #[serde(default)]
    pub issue_id: String,
    /// The GitHub issue number the issue id stands for (`ACME-123` taken from GitHub issue
    /// 123), when intake knows one: the draft pull request then says `Closes #N`. Optional, so
    /// supervisors that do not send it still register.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_number: Option<u64>,
    /// The run's worktree; must lie under the configured runs root.
    pub worktree: String,
    /// The operator's full-suite test command (argv), run with the tree as working directory.
    pub test_command: Vec<String>,
    /// How that command selects one test and reports results.
    pub test_runner: TestRunner,
    /// The run's write allowlist (glob patterns, interpreted by `airlock-policies`).
    pub write_allowlist: Vec<String>,
    /// The environment of every test command (read-only grants, variables, prepared links);
    /// each granted path must be allowed by `broker.toml`.
    #[serde(default)]
    pub test_env: TestEnvironment,
    /// How long, in seconds, the supervisor keeps reconnecting and resending an `open_pr` whose
    /// connection broke (a broker restart). An intake cut short by a crash and taken up again
    /// later than this after the request arrived is abandoned, not queued: the supervisor has
    /// given up by then, and the run's outcome and the queue must agree. Absent:
    /// [`DEFAULT_RECONNECT_SECS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_secs: Option<u64>,
    /// The issue as the supervisor read it, shown to the approver by `airlock-broker show`
    /// (escaped: it is repository text). Absent in registrations from supervisors that predate
    /// it; the broker never acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueText>,
}

/// The text of the issue a run works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueText {
    /// One-line title.
    pub title: String,
    /// Free-text body.
    #[serde(default)]
    pub body: String,
}

/// The reconnect window of a registration that does not state one, in seconds.
pub const DEFAULT_RECONNECT_SECS: u64 = 600;

impl RunRegistration {
    /// The run's reconnect window in seconds.
    pub fn reconnect_window(&self) -> u64 {
        self.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS)
    }
}

/// One request line. `op` is `register_run`, `open_pr` or `decision`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The operation.
    pub op: String,
    /// For `register_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunRegistration>,
    /// For `open_pr` and `decision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// For `open_pr`: the idempotency key; a retried request with the same key gets the
    /// stored reply instead of a second intake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// For `open_pr`: the tool-call arguments exactly as the model produced them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Box<RawValue>>,
}

/// One reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BrokerReply {
    /// The run is registered (or was already registered with identical details).
    Registered {
        /// The run.
        run_id: String,
    },
    /// open_pr passed every check and waits for a human.
    Queued {
        /// Queue item id, as `airlock-broker show` takes it.
        queue_id: i64,
    },
    /// No decision yet on the run's queued pull request.
    Pending {
        /// Queue item id.
        queue_id: i64,
    },
    /// Approved and published.
    Approved {
        /// Queue item id.
        queue_id: i64,
        /// The pushed branch, `airlock/<issue-id>`.
        branch: String,
        /// The commit that was pushed.
        commit: String,
        /// The draft pull request, when a forge token is configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pr_url: Option<String>,
    },
    /// Refused under the open_pr error contract.
    Refused {
        /// The refusal: code, retryability and what the code returns.
        error: BrokerError,
    },
    /// The broker could not do its job (not a verdict on the submission).
    Failed {
        /// What went wrong.
        message: String,
    },
}
