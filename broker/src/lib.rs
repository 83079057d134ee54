//! airlock-broker: the only component that can turn a run's work into a pull request.
//!
//! It owns the broker side of `open_pr`: run registration, intake in the fixed order (schema,
//! policy, digest recomputation, the organisation's gates, witness run, queue), the approval queue and its approver
//! commands, and publication (commit on the pinned base in the broker's own clone, push, draft
//! pull request), and the claims workers hold on issues (one worker per issue, a lease, the
//! `airlock-claimed` label on the forge). Its state lives behind the [`store::Store`] trait (SQLite by default, PostgreSQL for a
//! `postgres://` `state_db`) and
//! survives a kill -9 with nothing lost or duplicated.
//!
//! It must never trust what a run tells it: the diff, every digest field and the test verdict are
//! recomputed from the broker's own clone, and tests run in the sandbox on fresh trees. It must
//! never hand its forge credentials to anyone, never take a test command from a run's arguments,
//! and never restate a schema or a path rule: those live in `airlock-schemas` and
//! `airlock-policies`.

pub mod approver;
pub mod attestation;
pub mod changes;
pub mod ci_checks;
pub mod claim_requests;
pub mod claims;
pub mod cli;
pub mod client;
pub mod config;
pub mod decisions;
pub mod error;
pub mod followups;
pub mod forge_gitlab;
pub mod forges;
pub mod gates;
pub mod intake;
pub mod issue_thread;
pub mod judging;
pub mod pr_text;
pub mod publish;
pub mod questions;
pub mod registration;
pub mod reported;
pub mod risk;
pub mod rules;
pub mod sandboxed;
pub mod screening;
pub mod server;
pub mod service;
pub mod signing;
pub mod store;
pub mod tls;
pub mod ui;
pub mod view;
pub mod witness;

pub use airlock_protocol::{BrokerReply, RunRegistration, TestRunner};
pub use airlock_schemas::{BrokerError, ErrorCode};
pub use client::BrokerClient;
pub use config::BrokerConfig;
pub use error::{Error, Result};
