//! Integration tests of airlock-codegraph over small repositories the tests create.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod channels;
mod eval;
mod extract;
mod fixture;
mod fulltext;
mod history;
mod incremental;
mod map;
mod rank;
mod tokenizer;
mod window;
