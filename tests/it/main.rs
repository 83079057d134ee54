//! End-to-end tests of the `airlock` binary: every module runs the real binary as an operator would.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod agents;
mod architecture;
mod audit;
mod cli;
mod demo;
mod deploy;
mod e2e;
mod first_run;
mod follow_up;
mod gates;
mod github;
mod gitlab;
mod history;
mod judge;
mod many_hosts;
mod park;
mod preflight;
mod questions;
mod real_projects;
mod reference_repos;
mod retrieval;
mod review;
mod run;
mod sandbox;
mod scripted_model_doc;
mod setup;
mod tls;
mod triage;
mod triggers;
