#!/usr/bin/env bash
# Benchmark of the sandbox (issue 2): spawn overhead against bubblewrap, overlay set-up
# against a full copy. Prints its figures side by side and the machine it ran on.
#
#   bench/sandbox.sh            # from the repository root; run as root (as CI does)
#
# Needs: bubblewrap (the reference) and hyperfine (installed with apt-get when missing and
# possible; without hyperfine a plain loop measures the medians).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-100}
FILES=${FILES:-10000}

apt_install() {
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq >/dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 || true
    fi
}
command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
command -v hyperfine >/dev/null 2>&1 || apt_install hyperfine
command -v bwrap >/dev/null 2>&1 || { echo "bench: bubblewrap (bwrap) is required as the reference" >&2; exit 1; }

echo "building airlock (release)..." >&2
cargo build --release --quiet --bin airlock --bin airlock-sandbox-helper
cargo build --release --quiet -p airlock-sandbox --example spawn --example run_once
AIRLOCK=$PWD/target/release/airlock
TRUE=$(command -v true)

WORK=$(mktemp -d /tmp/airlock-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# Median wall time in milliseconds of a command, over $RUNS runs.
median_ms() {
    if command -v hyperfine >/dev/null 2>&1; then
        local prep=()
        [ -n "${PREPARE:-}" ] && prep=(--prepare "$PREPARE")
        hyperfine -N --warmup "${WARMUP:-10}" --runs "$RUNS" "${prep[@]}" --export-json "$WORK/h.json" -- "$*" \
            >"$WORK/h.log" 2>&1 || { cat "$WORK/h.log" >&2; echo nan; return; }
        python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["results"][0]["median"]*1000))' "$WORK/h.json"
    else
        local i t0 t1
        : > "$WORK/times"
        for ((i = 0; i < RUNS; i++)); do
            [ -n "${PREPARE:-}" ] && $PREPARE
            t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
            echo $(( (t1 - t0) )) >> "$WORK/times"
        done
        sort -n "$WORK/times" | awk '{a[NR]=$1} END {printf "%.2f\n", a[int((NR+1)/2)]/1e6}'
    fi
}

echo "machine: $(nproc) cores, kernel $(uname -r), $(uname -m); $(bwrap --version 2>/dev/null); $(hyperfine --version 2>/dev/null || echo 'no hyperfine: shell loop')"
echo

# bubblewrap given the same world airlock builds by default: the system directories read-only,
# fresh /proc, minimal /dev, private /tmp, all capabilities dropped, uid 1000, empty environment.
bwrap_same=(bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --uid 1000 --gid 1000)
for p in /usr /bin /sbin /lib /lib64 /etc/ld.so.cache /etc/ld.so.conf /etc/alternatives; do
    if [ -L "$p" ]; then bwrap_same+=(--symlink "$(readlink "$p")" "$p")
    elif [ -e "$p" ]; then bwrap_same+=(--ro-bind "$p" "$p"); fi
done
bwrap_same+=(--proc /proc --dev /dev --tmpfs /tmp --clearenv)

plain=$(median_ms "$TRUE")
bwrap_ms=$(median_ms bwrap --unshare-all --ro-bind / / "$TRUE")
bwrap_same_ms=$(median_ms "${bwrap_same[@]}" "$TRUE")
airlock_ms=$(median_ms "$AIRLOCK" sandbox run -- "$TRUE")
small_ms=$(median_ms target/release/examples/run_once "$TRUE")
read -r lib_ms lib_mean < <(target/release/examples/spawn "$RUNS")
echo "spawn of \`true\` (median of $RUNS runs, ms):"
printf '  %-58s %8s\n' "plain" "$plain"
printf '  %-58s %8s\n' "bwrap --unshare-all --ro-bind / / true (the reference)" "$bwrap_ms"
printf '  %-58s %8s\n' "bwrap, airlock's default world (see bwrap_same)" "$bwrap_same_ms"
printf '  %-58s %8s\n' "airlock sandbox run -- true (every layer; a CLI process)" "$airlock_ms"
printf '  %-58s %8s\n' "the same run from a small binary (examples/run_once.rs)" "$small_ms"
printf '  %-58s %8s\n' "SandboxBuilder::run_captured from a running process" "$lib_ms"
python3 - "$plain" "$bwrap_ms" "$airlock_ms" "$lib_ms" <<'PY'
import sys
plain, bw, al, lib = map(float, sys.argv[1:])
verdict = lambda v: "no worse than" if v <= bw - plain else "WORSE than"
print(f"  overhead over plain: bwrap {bw - plain:.2f} ms; airlock CLI {al - plain:.2f} ms "
      f"({verdict(al - plain)} bwrap); library {lib:.2f} ms ({verdict(lib)} bwrap)")
PY
echo

# A generated tree of $FILES files (100 directories).
TREE=$WORK/tree
mkdir -p "$TREE"
python3 - "$TREE" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i % 100:03d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:05d}.txt"), "w") as f:
        f.write(f"file {i}\n" * 8)
PY
with_overlay=$(median_ms "$AIRLOCK" sandbox run --overlay "$TREE:/work/tree" -- "$TRUE")
RUNS_CP=${RUNS_CP:-20}
copy_ms=$(RUNS=$RUNS_CP WARMUP=1 PREPARE="rm -rf $WORK/copy" median_ms cp -a "$TREE" "$WORK/copy")
overlay_setup=$(python3 -c "print('%.2f' % (float('$with_overlay') - float('$airlock_ms')))")
echo "copy-on-write tree of $FILES files (median, ms):"
printf '  %-58s %8s\n' "airlock sandbox run --overlay TREE:/work/tree -- true" "$with_overlay"
printf '  %-58s %8s\n' "overlay set-up (the above minus a run without overlay)" "$overlay_setup"
printf '  %-58s %8s\n' "cp -a TREE (a full copy; median of $RUNS_CP)" "$copy_ms"
python3 - "$overlay_setup" <<'PY'
import sys
v = float(sys.argv[1])
print(f"  overlay set-up target < 20 ms: {'met' if v < 20 else 'NOT met'}")
PY
