#!/usr/bin/env bash
# A run's fixed start-up: `airlock demo` (four scenarios, real broker, scripted models) run
# ROUNDS times, each round the reference binaries first and then the ones under test, so both
# see the same machine. Prints, per binary, the demo's wall time and peak memory, and for each
# scenario's run the time from its audit record `run_started` to its first `model_call` (the
# call's own latency taken off: the scripted model answers in 0 ms), min / median / max.
#
#   bench/startup.sh REF_DIR [NEW_DIR] [ROUNDS]
#
# REF_DIR and NEW_DIR each hold `airlock` and `airlock-broker` (NEW_DIR defaults to
# target/release; build it with `cargo build --release -p airlock -p airlock-broker`). Keep a
# copy of the reference binaries before rebuilding. ROUNDS defaults to 5. Figures go to
# bench/README.md.
set -euo pipefail
ref="${1:?usage: bench/startup.sh REF_DIR [NEW_DIR] [ROUNDS]}"
new="${2:-$(cd "$(dirname "$0")/.." && pwd)/target/release}"
rounds="${3:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for side in ref new; do
    dir="$ref"
    [ "$side" = new ] && dir="$new"
    out="$work/$side-$round"
    /usr/bin/time -f "%e %M" -o "$out.time" "$dir/airlock" demo --workdir "$out" >"$out.log" 2>&1 ||
      { echo "$side round $round: airlock demo failed, see below"; tail -20 "$out.log"; exit 1; }
  done
done

python3 - "$work" "$rounds" "$ref" "$new" <<'PY'
import datetime, json, pathlib, statistics, sys

work, rounds, ref, new = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def ts(event):
    return datetime.datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))

def spread(values, unit, scale=1.0):
    v = sorted(x * scale for x in values)
    return f"{v[0]:.2f} / {statistics.median(v):.2f} / {v[-1]:.2f} {unit}"

for side, label in (("ref", ref), ("new", new)):
    walls, peaks, starts = [], [], {}
    for r in range(1, rounds + 1):
        wall, peak = (work / f"{side}-{r}.time").read_text().split()[-2:]
        walls.append(float(wall))
        peaks.append(int(peak))
        started = {}
        for line in (work / f"{side}-{r}" / "audit.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["kind"] == "run_started":
                started[e["run_id"]] = ts(e)
            elif e["kind"] == "model_call" and e["run_id"] in started:
                latency = e["payload"].get("latency_ms", 0) / 1000
                took = (ts(e) - started.pop(e["run_id"])).total_seconds() - latency
                issue = e["run_id"].split("-")[0] + "-" + e["run_id"].split("-")[1]
                starts.setdefault(issue, []).append(took)
    print(f"\n{side}: {label}")
    print(f"  airlock demo wall (min / median / max): {spread(walls, 's')}")
    print(f"  airlock demo peak memory, largest process: {spread(peaks, 'MiB', 1 / 1024)}")
    for issue, values in sorted(starts.items()):
        print(f"  {issue}: run_started -> first model request: {spread(values, 's')}")
PY
