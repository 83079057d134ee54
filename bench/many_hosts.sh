#!/usr/bin/env bash
# Beyond one machine (issue 33): issues per minute with 1, 2 and 4 `airlock worker` processes on
# one broker (PostgreSQL state, mutual TLS on loopback, scripted model, small repository), and
# the broker's own time per open_pr intake without the witness (SQLite and PostgreSQL, shared
# worktree and patch). Release builds; needs the machine's PostgreSQL (initdb, postgres).
# See broker/examples/worker_throughput.rs and broker/examples/intake_bench.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p airlock -p airlock-broker
timeout 1800 cargo run --release --quiet -p airlock-broker --example worker_throughput
timeout 1800 cargo run --release --quiet -p airlock-broker --example intake_bench
