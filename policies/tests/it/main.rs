#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! Integration tests of the policy gate: loading, paths, test recognition, detectors, digest.

mod digest_corpus;
mod git_digest;
mod loading;
mod paths;
mod recognition;
mod test_code;
mod weakening_gaps;
