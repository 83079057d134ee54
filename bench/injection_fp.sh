#!/usr/bin/env bash
# False-positive rate of the injection detector on ordinary source of real, well-known projects.
#
# Scans, when present on this machine: the Python standard library (and the site-packages next
# to it), the Rust crates under ~/.cargo/registry/src, npm's own JavaScript under node's
# lib/node_modules, and the HEAD tree of every bare git mirror under $FP_MIRRORS
# (default /work/.mirror/*/repo). Prints per-corpus and total figures; the target is fewer than
# 1 flagged source file per 1,000. Pass --list to print every flagged line for review.
#
#   bench/injection_fp.sh [--list]
set -euo pipefail
cd "$(dirname "$0")/.."
list=""
[ "${1:-}" = "--list" ] && list="--list"
bin=${AIRLOCK_BIN:-target/debug/airlock}
[ -x "$bin" ] || cargo build -q -p airlock
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

roots=()
for py in python3.11 python3; do
  if command -v "$py" >/dev/null 2>&1; then
    roots+=("$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')")
    break
  fi
done
[ -d "$HOME/.cargo/registry/src" ] && roots+=("$HOME/.cargo/registry/src")
if command -v node >/dev/null 2>&1; then
  nm="$(dirname "$(readlink -f "$(command -v node)")")/../lib/node_modules"
  [ -d "$nm" ] && roots+=("$(readlink -f "$nm")")
fi
for repo in "${FP_MIRRORS:-/work/.mirror}"/*/repo; do
  [ -d "$repo" ] || continue
  name=$(basename "$(dirname "$repo")")
  mkdir -p "$work/$name"
  # Mirrors may lack their largest blobs: leave those files out of the archive.
  excludes=()
  while IFS= read -r path; do
    excludes+=(":(exclude)$path")
  done < <(git --git-dir "$repo" ls-tree -r HEAD | awk '$2 == "blob" {print $3 "\t" $4}' \
    | while IFS=$'\t' read -r oid path; do
        git --git-dir "$repo" cat-file -e "$oid" 2>/dev/null || echo "$path"
      done)
  git --git-dir "$repo" archive HEAD -- . "${excludes[@]}" | tar -x -C "$work/$name"
  roots+=("$work/$name")
done

echo "machine: $(uname -srm), $(nproc) cpus; detector: $("$bin" --version)"
total_scanned=0
total_flagged=0
for r in "${roots[@]}"; do
  out=$("$bin" audit fp-scan "$r" $list || true)
  echo "$out"
  s=$(echo "$out" | sed -n 's/^source files: \([0-9]*\) scanned, \([0-9]*\) flagged.*/\1 \2/p')
  total_scanned=$((total_scanned + ${s%% *}))
  total_flagged=$((total_flagged + ${s##* }))
done
echo
awk -v s="$total_scanned" -v f="$total_flagged" 'BEGIN {
  printf "TOTAL source files: %d scanned, %d flagged, %.3f per 1,000 (target < 1)\n", s, f, (s ? f * 1000 / s : 0)
}'
