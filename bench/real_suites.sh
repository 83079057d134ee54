#!/usr/bin/env bash
# What the sandbox costs on real test suites: each suite is a real public project taken from
# its registry at run time (the registry artefact ships its own tests), committed into a
# scratch git repository, its environment built into a separate directory, and its full test
# command timed side by side run directly and under
#   airlock sandbox run --overlay TREE:TREE --cwd TREE --ro ENV ... -- CMD
# (a copy-on-write overlay of the project tree, the environment read-only).
#
#   bench/real_suites.sh [--runs N] [--warmup N] [--suites LIST] [--network MODE] [--keep]
#
#   --runs N       timed runs of each mode, alternating direct / sandboxed (default 5)
#   --warmup N     untimed runs of each mode first (default 1)
#   --suites LIST  comma-separated subset of: six,idna,either,remeda,more-itertools (default all)
#   --network MODE the sandboxed runs' network: none (default), loopback or proxy (an egress
#                  proxy admitting one unused loopback port), to measure what each mode costs
#   --keep         keep the scratch directory (its path is printed)
#
# Prints a markdown table (medians, difference, overhead) and the machine on stdout; progress
# on stderr. Needs git, python3 with pip, cargo/rustc, node and npm, and the package
# registries (PyPI, crates.io, npm). Builds target/release/airlock when it is missing
# (or set AIRLOCK=/path/to/airlock).
#
# Fairness: both modes start from the same pristine committed tree. After every direct run
# the tree is reset (git clean -fdx, git checkout), so build products and caches written into
# the tree (target/, __pycache__/, the jest cache) never carry over; the sandbox's writes land
# in the overlay and are discarded. Both modes get the same environment variables and nothing
# else (`env -i` for the direct run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

RUNS=5
WARMUP=1
SUITES=six,idna,either,remeda,more-itertools
KEEP=0
NETWORK=none
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
        --warmup) WARMUP=${2:?--warmup needs a number}; shift 2 ;;
        --suites) SUITES=${2:?--suites needs a list}; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --network) NETWORK=${2:?--network needs none, loopback or proxy}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "real_suites: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$RUNS" in ''|*[!0-9]*|0) echo "real_suites: --runs must be a positive integer" >&2; exit 2 ;; esac
case "$WARMUP" in ''|*[!0-9]*) echo "real_suites: --warmup must be a non-negative integer" >&2; exit 2 ;; esac

die() { echo "real_suites: error: $*" >&2; exit 1; }
case "$NETWORK" in
    none|loopback) NETARGS=(--network "$NETWORK") ;;
    proxy) NETARGS=(--network proxy --allow 127.0.0.1:9) ;;
    *) echo "real_suites: --network must be none, loopback or proxy" >&2; exit 2 ;;
esac
log() { echo "real_suites: $*" >&2; }
for c in git python3 cargo rustc node npm; do
    command -v "$c" >/dev/null 2>&1 || die "'$c' is not on the PATH"
done

# Versions pinned: the artefacts and the runners the figures are for.
SIX_VER=1.17.0
IDNA_VER=3.10
MORE_ITERTOOLS_VER=11.2.1
PYTEST_VER=9.2.0
EITHER_VER=1.19.0
REMEDA_VER=1.0.0
JS_DEVDEPS='{"jest": "26.6.3", "ts-jest": "26.5.6", "typescript": "4.9.5", "@types/jest": "26.0.24"}'

AIRLOCK=${AIRLOCK:-$ROOT/target/release/airlock}
if [ ! -x "$AIRLOCK" ]; then
    log "building airlock (release; a few minutes)..."
    cargo build --release --quiet --bin airlock --bin airlock-sandbox-helper \
        || die "cargo build --release failed"
    AIRLOCK=$ROOT/target/release/airlock
fi
"$AIRLOCK" sandbox run -- /bin/true >/dev/null 2>&1 \
    || die "'$AIRLOCK sandbox run -- /bin/true' fails on this host (see 'airlock doctor')"

SCRATCH=$(mktemp -d /tmp/airlock-real-suites.XXXXXX)
cleanup() {
    if [ "$KEEP" = 1 ]; then log "scratch kept in $SCRATCH"; else rm -rf "$SCRATCH"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$SCRATCH/dl" "$SCRATCH/logs"
: > "$SCRATCH/results.tsv"

# The real interpreter, not a pyenv shim: the sandbox runs it by path, with its prefix
# read-only when that lies outside the system directories.
PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
PY_PREFIX=$(python3 -c 'import os, sys; print(os.path.realpath(sys.base_prefix))')
RO_PY=()
case "$PY_PREFIX" in /usr|/usr/*) ;; *) RO_PY=(--ro "$PY_PREFIX") ;; esac
# The toolchain's own cargo/rustc/rustdoc (no rustup proxy, so no RUSTUP_HOME or HOME needed).
SYSROOT=$(rustc --print sysroot)
[ -x "$SYSROOT/bin/cargo" ] || die "no cargo in the toolchain at $SYSROOT/bin"
RO_RUST=()
case "$SYSROOT" in /usr|/usr/*) ;; *) RO_RUST=(--ro "$SYSROOT") ;; esac
NODE=$(readlink -f "$(command -v node)")
RO_NODE=()
case "$NODE" in /usr/*) ;; *) RO_NODE=(--ro "$(dirname "$(dirname "$NODE")")") ;; esac

# commit_tree DIR NAME: make DIR a git repository holding exactly the artefact's files
# (-f: artefacts ship .gitignore files that ignore e.g. Cargo.lock).
commit_tree() {
    git -C "$1" init -q
    git -C "$1" add -A -f .
    git -C "$1" -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false \
        commit -q -m "$2 as published"
}
# reset_tree DIR: back to the committed state, every untracked or ignored file gone.
reset_tree() {
    git -C "$1" checkout -q -- .
    git -C "$1" clean -fdxq
}

# fetch_sdist NAME VERSION DEST: a PyPI source distribution, unpacked into DEST.
fetch_sdist() {
    local name=$1 ver=$2 dest=$3 d=$SCRATCH/dl/$1
    mkdir -p "$d"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$d" "$name==$ver" >"$SCRATCH/logs/pip-download-$name.log" 2>&1 \
        || { tail -20 "$SCRATCH/logs/pip-download-$name.log" >&2; die "pip download $name==$ver failed"; }
    local sdist
    sdist=$(find "$d" -maxdepth 1 -name '*.tar.gz' | head -1)
    [ -n "$sdist" ] || die "pip download $name==$ver left no .tar.gz in $d"
    mkdir -p "$dest"
    tar -xzf "$sdist" -C "$dest" --strip-components=1
}

# fetch_crate NAME VERSION DEST: the .crate exactly as crates.io serves it, unpacked into DEST
# (fetched through a throwaway project that depends on it).
fetch_crate() {
    local name=$1 ver=$2 dest=$3 p=$SCRATCH/dl/crate-$1
    mkdir -p "$p/src"
    printf '[package]\nname = "fetch-%s"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n' \
        "$name" "$name" "$ver" > "$p/Cargo.toml"
    echo 'fn main() {}' > "$p/src/main.rs"
    (cd "$p" && env CARGO_HOME="$p/home" cargo fetch --quiet) >"$SCRATCH/logs/fetch-$name.log" 2>&1 \
        || { tail -20 "$SCRATCH/logs/fetch-$name.log" >&2; die "cargo fetch of $name $ver failed"; }
    local crate
    crate=$(find "$p/home/registry/cache" -name "$name-$ver.crate" | head -1)
    [ -n "$crate" ] || die "no $name-$ver.crate in $p/home/registry/cache"
    mkdir -p "$dest"
    tar -xzf "$crate" -C "$dest" --strip-components=1
}

# fetch_npm NAME VERSION DEST: the npm tarball (npm pack), unpacked into DEST.
fetch_npm() {
    local name=$1 ver=$2 dest=$3 d=$SCRATCH/dl/npm-$1 tgz
    mkdir -p "$d"
    tgz=$(cd "$d" && npm pack --silent "$name@$ver" 2>"$SCRATCH/logs/npm-pack-$name.log" | tail -1) \
        || { cat "$SCRATCH/logs/npm-pack-$name.log" >&2; die "npm pack $name@$ver failed"; }
    [ -f "$d/$tgz" ] || die "npm pack $name@$ver left no tarball"
    mkdir -p "$dest"
    tar -xzf "$d/$tgz" -C "$dest" --strip-components=1
}

# Per suite, prepare_X sets: TREE, RUNNER, CMD (array), VARS (NAME=VALUE array), RO (array).
PY_ENV=$SCRATCH/env-py
ensure_pytest() {
    [ -d "$PY_ENV/site/pytest" ] && return
    log "  pip install --target $PY_ENV/site pytest==$PYTEST_VER"
    "$PY" -m pip install --quiet --disable-pip-version-check --target "$PY_ENV/site" "pytest==$PYTEST_VER" \
        >"$SCRATCH/logs/pip-install.log" 2>&1 \
        || { tail -20 "$SCRATCH/logs/pip-install.log" >&2; die "pip install pytest failed"; }
}

prepare_six() {
    TREE=$SCRATCH/six-$SIX_VER
    fetch_sdist six "$SIX_VER" "$TREE"
    ensure_pytest
    RUNNER=pytest
    CMD=("$PY" -m pytest -rA -p no:cacheprovider)
    VARS=(PATH=/usr/bin:/bin PYTHONPATH="$PY_ENV/site")
    RO=(--ro "$PY_ENV" "${RO_PY[@]}")
}
prepare_idna() {
    TREE=$SCRATCH/idna-$IDNA_VER
    fetch_sdist idna "$IDNA_VER" "$TREE"
    RUNNER=unittest
    CMD=("$PY" -m unittest -v)
    VARS=(PATH=/usr/bin:/bin)
    RO=("${RO_PY[@]}")
}
prepare_more-itertools() {
    TREE=$SCRATCH/more-itertools-$MORE_ITERTOOLS_VER
    fetch_sdist more-itertools "$MORE_ITERTOOLS_VER" "$TREE"
    RUNNER=unittest
    CMD=("$PY" -m unittest -v)
    VARS=(PATH=/usr/bin:/bin)
    RO=("${RO_PY[@]}")
}
prepare_either() {
    TREE=$SCRATCH/either-$EITHER_VER
    local env=$SCRATCH/env-either
    fetch_crate either "$EITHER_VER" "$TREE"
    log "  CARGO_HOME=$env/cargo cargo fetch (the crate's own Cargo.lock)"
    (cd "$TREE" && env CARGO_HOME="$env/cargo" cargo fetch --quiet) >"$SCRATCH/logs/fetch-either-deps.log" 2>&1 \
        || { tail -20 "$SCRATCH/logs/fetch-either-deps.log" >&2; die "cargo fetch in the either tree failed"; }
    RUNNER=cargo
    CMD=("$SYSROOT/bin/cargo" test)
    VARS=(PATH="$SYSROOT/bin:/usr/bin:/bin" CARGO_HOME="$env/cargo" CARGO_NET_OFFLINE=true CARGO_TERM_COLOR=never)
    RO=(--ro "$env" "${RO_RUST[@]}")
}
prepare_remeda() {
    # node_modules lives beside the tree (ENV = $js/node_modules): Node's and jest's lookup
    # walks up from the tree and finds it, and nothing is added to the tree.
    local js=$SCRATCH/js
    TREE=$js/remeda-$REMEDA_VER
    fetch_npm remeda "$REMEDA_VER" "$TREE"
    printf '{"private": true, "devDependencies": %s}\n' "$JS_DEVDEPS" > "$js/package.json"
    log "  npm install (jest, ts-jest, typescript, @types/jest) into $js/node_modules"
    (cd "$js" && npm install --silent --no-audit --no-fund --ignore-scripts) >"$SCRATCH/logs/npm-install.log" 2>&1 \
        || { tail -20 "$SCRATCH/logs/npm-install.log" >&2; die "npm install of the jest toolchain failed"; }
    RUNNER=jest
    CMD=("$NODE" "$js/node_modules/jest/bin/jest.js" --ci --verbose --cacheDirectory="$TREE/.jest-cache")
    VARS=(PATH=/usr/bin:/bin)
    RO=(--ro "$js/node_modules" "${RO_NODE[@]}")
}

# The timer: wall time (monotonic clock) and CPU time (user + sys of the whole process tree,
# getrusage RUSAGE_CHILDREN) of one command, its output to a file. The same for both modes, so
# the sandboxed figures include airlock's own set-up.
cat > "$SCRATCH/timer.py" <<'PY'
import resource, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
with open(out, "wb") as f:
    t0 = time.monotonic_ns()
    rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    t1 = time.monotonic_ns()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(t1 - t0, int((ru.ru_utime + ru.ru_stime) * 1e9), rc)
PY

# run_mode MODE LOG: one run of the suite's full test command; prints "WALL_NS CPU_NS".
run_mode() {
    local mode=$1 out=$2 res wall cpu rc
    local envargs=() v
    for v in "${VARS[@]}"; do envargs+=(--env "$v"); done
    if [ "$mode" = direct ]; then
        res=$(cd "$TREE" && "$PY" "$SCRATCH/timer.py" "$out" env -i "${VARS[@]}" "${CMD[@]}")
    else
        res=$("$PY" "$SCRATCH/timer.py" "$out" "$AIRLOCK" sandbox run --timeout 1800 --memory 8192 \
            "${NETARGS[@]}" --overlay "$TREE:$TREE" --cwd "$TREE" "${RO[@]}" "${envargs[@]}" -- "${CMD[@]}")
    fi
    read -r wall cpu rc <<< "$res"
    if [ "${rc:-}" != 0 ]; then
        tail -30 "$out" >&2
        die "$SUITE ($mode) exited ${rc:-?}; full output in $out (rerun with --keep to look at it)"
    fi
    if [ "$mode" = direct ]; then
        reset_tree "$TREE"
    elif [ -n "$(git -C "$TREE" status --porcelain --ignored)" ]; then
        die "$SUITE: the sandboxed run changed the lower tree $TREE (the overlay leaked)"
    fi
    echo "$wall $cpu"
}

# count_tests RUNNER LOG: how many tests the run reports (passed + failed + skipped).
count_tests() {
    python3 - "$1" "$2" <<'PY'
import re, sys
runner, text = sys.argv[1], open(sys.argv[2], errors="replace").read()
n = 0
if runner == "pytest":
    m = re.findall(r"=+ (.*) in [0-9.]+s", text)
    if m:
        n = sum(int(k) for k in re.findall(r"(\d+) (?:passed|failed|skipped|errors?|xfailed|xpassed)", m[-1]))
elif runner == "unittest":
    m = re.findall(r"^Ran (\d+) tests?", text, re.M)
    n = int(m[-1]) if m else 0
elif runner == "cargo":
    for p, f, i in re.findall(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text, re.M):
        n += int(p) + int(f) + int(i)
elif runner == "jest":
    m = re.findall(r"^Tests:\s+(.*) total", text, re.M)
    n = int(re.findall(r"(\d+)$", m[-1].strip())[0]) if m else 0
print(n)
PY
}

IFS=, read -r -a SUITE_LIST <<< "$SUITES"
LOAD_START=$(cut -d" " -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
for SUITE in "${SUITE_LIST[@]}"; do
    case "$SUITE" in six|idna|either|remeda|more-itertools) ;;
        *) die "unknown suite '$SUITE' (six, idna, either, remeda, more-itertools)" ;; esac
done

for SUITE in "${SUITE_LIST[@]}"; do
    log "$SUITE: obtaining it from its registry and building its environment"
    "prepare_$SUITE"
    commit_tree "$TREE" "$SUITE"
    [ -z "$(git -C "$TREE" status --porcelain --ignored)" ] || die "$SUITE: tree not clean after commit"
    for ((i = 0; i < WARMUP; i++)); do
        log "$SUITE: warm-up $((i + 1))/$WARMUP"
        run_mode direct "$SCRATCH/logs/$SUITE-warm-direct.log" >/dev/null
        run_mode sandbox "$SCRATCH/logs/$SUITE-warm-sandbox.log" >/dev/null
    done
    d_times=() s_times=() d_cpu=() s_cpu=()
    for ((i = 1; i <= RUNS; i++)); do
        read -r d dc <<< "$(run_mode direct "$SCRATCH/logs/$SUITE-direct.log")"
        read -r s sc <<< "$(run_mode sandbox "$SCRATCH/logs/$SUITE-sandbox.log")"
        [ -n "${d:-}" ] && [ -n "${s:-}" ] || die "$SUITE: run $i failed (see above)"
        d_times+=("$d"); s_times+=("$s"); d_cpu+=("$dc"); s_cpu+=("$sc")
        log "$SUITE: run $i/$RUNS  direct $(awk "BEGIN{printf \"%.2f\", $d/1e9}") s  sandboxed $(awk "BEGIN{printf \"%.2f\", $s/1e9}") s"
    done
    n_d=$(count_tests "$RUNNER" "$SCRATCH/logs/$SUITE-direct.log")
    n_s=$(count_tests "$RUNNER" "$SCRATCH/logs/$SUITE-sandbox.log")
    [ "$n_d" = "$n_s" ] || die "$SUITE: $n_d tests ran directly but $n_s in the sandbox"
    [ "$n_d" -gt 0 ] || die "$SUITE: no test counted in $SCRATCH/logs/$SUITE-direct.log"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SUITE" "$RUNNER" "$n_d" "${d_times[*]}" "${s_times[*]}" \
        "${d_cpu[*]}" "${s_cpu[*]}" >> "$SCRATCH/results.tsv"
done

CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
LOAD_END=$(cut -d" " -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
python3 - "$SCRATCH/results.tsv" "$RUNS" "$WARMUP" "$(nproc)" "${CPU:-unknown}" "$(uname -r)" "$(uname -m)" "$COMMIT" "$LOAD_START" "$LOAD_END" "$NETWORK" <<'PY'
import statistics, sys
path, runs, warmup, nproc, cpu, kernel, arch, commit, load0, load1, network = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
print(f"machine: {nproc} cores, {cpu}, kernel {kernel} ({arch}); airlock {commit}; "
      f"sandboxed with --network {network}; "
      f"median of {runs} runs per mode, alternating direct/sandboxed, after {warmup} warm-up run(s) each; "
      f"load average {load0} at the start, {load1} at the end")
print()
print("| suite | runner | tests | direct (s) | sandboxed (s) | difference (s) | overhead | CPU direct (s) | CPU sandboxed (s) | CPU overhead |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
details = []
for suite, runner, tests, d, s, dc, sc in rows:
    d, s, dc, sc = ([int(x) / 1e9 for x in v.split()] for v in (d, s, dc, sc))
    md, ms = statistics.median(d), statistics.median(s)
    mdc, msc = statistics.median(dc), statistics.median(sc)
    print(f"| {suite} | {runner} | {tests} | {md:.2f} | {ms:.2f} | {ms - md:+.2f} | {100 * (ms - md) / md:+.1f}% "
          f"| {mdc:.2f} | {msc:.2f} | {100 * (msc - mdc) / mdc:+.1f}% |")
    details.append(f"- {suite}: direct " + " ".join(f"{x:.2f}" for x in d)
                   + "; sandboxed " + " ".join(f"{x:.2f}" for x in s))
print()
print("every run, wall (s):")
print("\n".join(details))
PY
