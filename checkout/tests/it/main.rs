#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! Integration tests of airlock-checkout over repositories and trees the tests create.

mod fixtures;
mod mirror;
mod read;
mod tree;
