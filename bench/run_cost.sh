#!/usr/bin/env bash
# What a run costs: a 40-turn scripted run of the real supervisor loop on a generated
# 2,000-file repository against the testkit's Anthropic-protocol model server (it counts
# tokens and simulates the provider's prompt cache), with caching and condensation on and off;
# then 8 such runs in sequence and 8 in parallel (wall time, peak memory). Figures go to
# bench/README.md. PROFILE=debug for a debug build (much slower harness).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${PROFILE:-release}"
flag=()
[ "$profile" = release ] && flag=(--release)
cargo build "${flag[@]}" -p airlock-supervisor --example run_cost
bin="target/$profile/examples/run_cost"
"$bin" cost
"$bin" sequence 8
"$bin" parallel 8
