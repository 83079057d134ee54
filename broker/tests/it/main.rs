//! End-to-end tests of the `airlock-broker` binary over repositories the tests create.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod approval;
mod approvers;
mod attacks;
mod ci_checks;
mod claims;
mod cli;
mod crash;
mod findings;
mod follow_up;
mod gates;
mod gitlab;
mod harness;
mod intake;
mod invariants;
mod preflight;
mod publication;
mod push_http;
mod questions;
mod remote;
mod rust;
mod signing;
mod store_suite;
mod terminal;
mod tls;
mod ui;
mod ui_browser;
mod witness_attacks;
