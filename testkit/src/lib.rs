//! Test support for airlock's integration tests, one crate that every crate's tests use as a
//! dev-dependency (it is never a dependency of product code; `tests/it/architecture.rs` checks).
//!
//! - [`git`]: fixture repositories built with the `git` command under an isolated
//!   configuration, fixed identity and fixed dates, so commit ids repeat from run to run.
//! - [`bin`]: where the workspace's built binaries are.
//! - [`githttp`]: a real `git http-backend` behind Basic authentication on 127.0.0.1.
//! - [`mockgithub`]: a GitHub REST stand-in for issues and draft pull requests.
//! - [`mockgitlab`]: a GitLab REST v4 stand-in for issues, notes, labels and draft merge
//!   requests.
//! - [`mockmodel`]: an OpenAI-compatible chat-completions server that plays scripted turns.
//! - [`tls`]: a CA, broker and worker certificates (and a stranger's) for the TLS transport.
//! - [`pg`]: a throwaway PostgreSQL server (`initdb` and `postgres` from the machine's
//!   PostgreSQL, as the `postgres` user when the tests run as root).
//!
//! Test code: a failed step panics with what failed, which is how a test reports it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod bin;
pub mod git;
pub mod githttp;
mod http;
pub mod mockgithub;
pub mod mockgitlab;
pub mod mockmodel;
pub mod pg;
pub mod tls;
pub mod wat;

pub use git::{Repo, git, git_output, write};
pub use pg::PgServer;
