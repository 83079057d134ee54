//! Integration tests of airlock-audit at its public API: the chain, concurrent writers, torn
//! tails, queries and the injection detector.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod chain;
mod concurrency;
mod detector;
mod labelled;
mod queries;
mod triage;
