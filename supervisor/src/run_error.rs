//! The errors that stop a run (`airlock run`, `airlock resume`, `airlock review`) before or
//! outside its loop, each naming what to fix.

use crate::agents::AgentError;
use crate::config::ConfigError;
use crate::github::GithubError;
use crate::issue::IssueError;
use crate::park::ParkError;
use crate::session::SessionError;
use crate::trajectory::TrajectoryError;
use crate::usage::ModelUsage;
use std::path::PathBuf;

/// Errors that stop `airlock run` before or outside the loop.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `airlock.toml` is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The issue file is unreadable or invalid.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// The GitHub issue could not be fetched.
    #[error(transparent)]
    Github(#[from] GithubError),
    /// The GitLab issue could not be fetched.
    #[error(transparent)]
    Gitlab(#[from] crate::gitlab::GitlabError),
    /// The command line lacks something this issue source needs.
    #[error("{0}")]
    Usage(String),
    /// The agent definition is missing or invalid.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// Mirroring, resolving or materialising the commit failed.
    #[error("checkout: {0}")]
    Checkout(#[from] airlock_checkout::CheckoutError),
    /// The write policy could not be built.
    #[error("policy: {0}")]
    Policy(#[from] airlock_policies::Error),
    /// The audit log could not be opened.
    #[error("audit log: {0}")]
    Audit(#[from] airlock_audit::Error),
    /// The model spec or its configuration is invalid.
    #[error("model: {0}")]
    Model(String),
    /// No broker is configured.
    #[error(
        "no broker: set [broker] socket or url in {config} (airlock run never opens a pull request itself)"
    )]
    NoBroker {
        /// The config file consulted.
        config: String,
    },
    /// The broker did not answer the run's first request (before the pin).
    #[error(
        "the broker at {endpoint} does not answer: start it (`airlock-broker serve --config \
         broker.toml`, on its host for a [broker] url) or fix [broker] socket or url in {config}; \
         {cause}"
    )]
    BrokerUnreachable {
        /// Where the configuration says the broker is.
        endpoint: String,
        /// The config file consulted.
        config: String,
        /// What the connection said.
        cause: String,
    },
    /// The broker answered, but does not know the run's repository.
    #[error(
        "the broker does not know the repository {repository:?}: add a \
         [repositories.\"{repository}\"] block to its broker.toml (`airlock init` prints one) \
         and restart it, or set [broker] repository in {config} to the name broker.toml uses"
    )]
    UnknownRepository {
        /// The name the run registers under.
        repository: String,
        /// The config file consulted.
        config: String,
    },
    /// The issue already has a queue item waiting for a human.
    #[error(
        "issue {issue_id} already has queue item {queue_id} ({status}, from run {run_id}): \
         decide it first (`airlock-broker show {queue_id}`), or pass --again to queue another"
    )]
    OpenItem {
        /// The issue.
        issue_id: String,
        /// The open item.
        queue_id: i64,
        /// Its status.
        status: String,
        /// The run that queued it.
        run_id: String,
    },
    /// The broker could not answer the run's check before the pin.
    #[error("the broker could not check the run before it starts: {message}")]
    BrokerCheck {
        /// The broker's message, or the protocol failure.
        message: String,
    },
    /// Indexing or another capability could not be set up.
    #[error("setting up {what}: {message}")]
    Setup {
        /// Which capability.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The run's records could not be written.
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    /// Writing the outcome file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The loop stopped on an error.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The broker could not say what a follow-up starts from.
    #[error("follow-up of queue item {queue_id}: {message}")]
    FollowUp {
        /// The queue item.
        queue_id: i64,
        /// The broker's answer or the connection's failure.
        message: String,
    },
    /// A parked run cannot be read, written or resumed.
    #[error(transparent)]
    Park(#[from] ParkError),
    /// A run whose model calls had begun stopped on `error`: what they used and cost, for the
    /// outcome document ([`RunError::split_usage`] takes it apart before the error leaves the
    /// runner).
    #[error("{error}")]
    Spent {
        /// What the run's model calls used and cost before it stopped.
        usage: ModelUsage,
        /// What stopped it.
        error: Box<RunError>,
    },
    /// The run stopped on an error after it began: its outcome document says so. What stopped
    /// it is said once, first (it is not also this error's source, which a printer of the
    /// cause chain would print a second time).
    #[error("{error} (run {run_id} failed; its outcome: {})", outcome.display())]
    Failed {
        /// The run.
        run_id: String,
        /// `<run_dir>/outcome.json`, written with `result: failed`.
        outcome: PathBuf,
        /// What stopped it.
        error: Box<RunError>,
    },
}

impl RunError {
    /// The error without the usage a [`RunError::Spent`] carries, and that usage.
    pub fn split_usage(self) -> (RunError, Option<ModelUsage>) {
        match self {
            RunError::Spent { usage, error } => (*error, Some(usage)),
            other => (other, None),
        }
    }
}
