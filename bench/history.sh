#!/usr/bin/env bash
# Merged-pull-request memory benchmark (issue 30): how often the files of search_history's best
# match (hit@1) and of its top three (hit@3) include a file the fix edits, beside a baseline
# that ignores the query (the latest merged pull requests), on the SWE-bench Lite dev instances
# and on held-out fix commits of the mirrored projects. Each instance's memory holds only the
# pull requests merged before its base commit.
#
#   bench/history.sh [MIRRORS_DIR]   (default /work/.mirror; mirrors named <owner>+<name>)
#
# AIRLOCK names the binary (default target/release/airlock if built, else target/debug/airlock).
# The held-out instances are built from fetched repositories: never commit them.
set -euo pipefail
cd "$(dirname "$0")/.."
MIRRORS=${1:-/work/.mirror}
INSTANCES=${INSTANCES:-../shared/bench/swe-bench-lite-dev.jsonl}
[[ -f $INSTANCES ]] || INSTANCES=/work/shared/bench/swe-bench-lite-dev.jsonl
AIRLOCK=${AIRLOCK:-target/release/airlock}
[[ -x $AIRLOCK ]] || AIRLOCK=target/debug/airlock
HELDOUT=${HELDOUT:-pallets/flask psf/requests encode/httpx}
LIMIT=${LIMIT:-30}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); airlock $(git rev-parse --short HEAD), $AIRLOCK"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo
echo "== SWE-bench Lite dev: $(wc -l < "$INSTANCES") instances (the issue text is the query) =="
"$AIRLOCK" eval history --instances "$INSTANCES" --mirrors "$MIRRORS" --index-dir "$work/index" 2>/dev/null

for repo in $HELDOUT; do
  mirror=$MIRRORS/${repo/\//+}/repo
  [[ -d $mirror ]] || mirror=$MIRRORS/${repo/\//+}
  [[ -d $mirror ]] || { echo "no mirror of $repo under $MIRRORS: skipped"; continue; }
  out=$work/${repo/\//+}.jsonl
  python3 bench/heldout_commits.py --mirror "$mirror" --repo "$repo" --ext py --limit "$LIMIT" > "$out" 2>/dev/null
  echo
  echo "== held-out fix commits of $repo: $(wc -l < "$out") most recent (the commit message is the query) =="
  "$AIRLOCK" eval history --instances "$out" --mirrors "$MIRRORS" --index-dir "$work/index" 2>/dev/null
done
