//! The forge crate's integration tests: each forge implementation against its REST stand-in
//! from the test kit, checking the requests it sends as well as what it makes of the answers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod github;
mod gitlab;
mod gitlab_mr;
