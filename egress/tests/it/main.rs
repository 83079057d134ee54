//! airlock-egress integration tests: the proxy on real loopback sockets.
mod proxy;
