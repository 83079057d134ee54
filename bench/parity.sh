#!/usr/bin/env bash
# Parity of test environments on real projects: tests passing under airlock (with the
# configuration `airlock init` writes, unchanged) divided by tests passing directly, the
# project's own way. See bench/parity.py for what each side does.
#
#   bench/parity.sh [--projects LIST] [--work DIR] [--bin DIR] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/parity.py "$@"
