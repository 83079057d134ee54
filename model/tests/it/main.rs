#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! Integration tests for airlock-model: the adapters against a real HTTP server on 127.0.0.1,
//! the scripted model, cassettes and budgets.

mod anthropic;
mod budget;
mod caching;
mod cassette;
mod config;
mod invariants;
mod openai;
mod scripted;
mod secrets;
mod spec;
mod support;
