//! The `airlock` operator CLI: argument parsing and dispatch to the library crates.
//!
//! It owns no product logic of its own; every subcommand calls into a library crate
//! (`airlock-sandbox`, `airlock-checkout`, `airlock-codegraph`, `airlock-audit`, ...) and maps
//! its typed errors to the documented exit codes. Beside it, [`demo`] holds the one-command demo,
//! which drives the real binaries through their interfaces.

#[macro_use]
pub mod cli;
pub mod demo;
