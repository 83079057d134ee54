#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! airlock-egress integration tests: the proxy on real loopback sockets.
mod proxy;
