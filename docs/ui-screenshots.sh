#!/usr/bin/env bash
# Saves the README's screenshots of `airlock-broker ui` (docs/ui-queue.png, docs/ui-item.png,
# docs/ui-diff.png): the Chromium browser test, run with AIRLOCK_UI_SCREENSHOTS pointing here.
# Needs Debian's chromium and chromium-driver packages.
set -euo pipefail
cd "$(dirname "$0")/.."
AIRLOCK_UI_SCREENSHOTS="$PWD/docs" cargo test -p airlock-broker --test it -- ui_browser --nocapture
