//! airlock-supervisor: the process that turns one issue on one pinned commit into one queued
//! pull request or an honest escalation.
//!
//! It owns the run: configuration (`airlock.toml`), the issue file, triage, the warm-start
//! message, the tool loop and its budgets, validation of the final message, the trajectory and
//! the audit events of every step; and the triggers that start runs without a person typing
//! `airlock run` (`triggers`: webhook, watch, batch, each claiming its issue through the
//! broker); and `review`, the same loop offered read-only tools and `submit_review` to review
//! a pull request. It must never hold forge credentials (only the broker does),
//! never write outside the write policy, never run tests outside the sandbox, and never restate
//! a schema or a path rule: contracts come from `airlock-schemas`, path rules from
//! `airlock-policies`.

pub mod adapters;
pub mod agents;
pub mod budget;
pub mod ci_files;
pub mod condense;
pub mod config;
pub mod delegate;
pub mod github;
pub mod gitlab;
pub mod init;
pub mod intake;
pub mod issue;
pub mod ledger;
pub mod outcome;
pub mod park;
pub mod ports;
pub mod prepare;
pub mod progress;
pub mod prompts;
pub mod questions;
pub mod recipe;
pub mod reference_repos;
pub mod review;
pub mod run_error;
pub mod runner;
pub mod second_opinion;
pub mod session;
pub mod setup;
pub mod testenv;
pub mod tool_name;
pub mod tools;
pub mod trajectory;
pub mod transport;
pub mod triage;
pub mod triggers;
pub mod usage;
pub mod warm_start;

pub use config::Config;
pub use issue::Issue;
pub use session::{Env, RunEnd, RunSpec, resume, run};

/// Exit code: a pull request is queued for a human.
pub const EXIT_PR_QUEUED: u8 = 0;
/// Exit code: an operational error (bad input, unreachable broker, failed model call).
pub const EXIT_ERROR: u8 = 2;
/// Exit code: the run ended as an escalation (by the model or by a budget).
pub const EXIT_ESCALATED: u8 = 3;
/// Exit code: triage found the issue not ready (needs-info or needs-triage); no model call.
pub const EXIT_NOT_READY: u8 = 4;
/// Exit code: a budget stopped the run and it is parked; `airlock resume RUN` continues it.
pub const EXIT_PARKED: u8 = 5;

impl RunEnd {
    /// The documented exit code of this end.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunEnd::NotReady(_) => EXIT_NOT_READY,
            RunEnd::Finished {
                pr_queued: true, ..
            } => EXIT_PR_QUEUED,
            RunEnd::Finished { .. } => EXIT_ESCALATED,
            RunEnd::Parked { .. } => EXIT_PARKED,
            RunEnd::Reviewed {
                queue_id: Some(_), ..
            } => EXIT_PR_QUEUED,
            RunEnd::Reviewed { .. } => EXIT_ESCALATED,
        }
    }
}
