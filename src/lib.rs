//! The `airlock` operator CLI: argument parsing and dispatch to the library crates.
//!
//! It owns no product logic of its own; every subcommand calls into a library crate
//! (`airlock-sandbox`, `airlock-checkout`, `airlock-codegraph`, `airlock-audit`, ...) and maps
//! its typed errors to the documented exit codes.

pub mod cli;
