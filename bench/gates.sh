#!/usr/bin/env bash
# The organisation's gates: a gate's cold start and per-call cost on a 40-file diff, beside the
# broker's open_pr intake without gates and with the three example gates (release build).
# Prints the figures and the machine; see broker/examples/gate_bench.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
timeout 1200 cargo run --release --quiet -p airlock-broker --example gate_bench
