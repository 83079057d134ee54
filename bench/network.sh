#!/usr/bin/env bash
# What the network modes cost: the start-up of a sandboxed command under each mode, and the
# egress proxy's own latency per HTTP request.
#
#   bench/network.sh [--runs N] [--requests N]
#
#   --runs N       timed start-ups of each mode, the modes in turn (default 30)
#   --requests N   HTTP requests per side for the proxy's latency (default 300)
#
# Start-up: `airlock sandbox run --network MODE -- /bin/true` from a running process, each mode
# in turn (none, loopback, proxy with one listed address), median and spread per mode.
# Proxy latency: a server on the host's 127.0.0.1 answers small GETs; a client inside the
# sandbox fetches it N times through the proxy (`--network proxy --allow 127.0.0.1:PORT`), and
# the same client on the host fetches it N times directly; each request opens a connection,
# as a proxied request does. The difference of the medians is the proxy's own cost per
# request (the sandbox's start-up is outside the timed loop).
#
# The cost of each mode on real suites is bench/real_suites.sh --network MODE.
# Needs python3. Builds target/release/airlock when it is missing (or set AIRLOCK=...).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=30
REQUESTS=300
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
        --requests) REQUESTS=${2:?--requests needs a number}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "network: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$RUNS$REQUESTS" in *[!0-9]*) echo "network: --runs and --requests take numbers" >&2; exit 2 ;; esac
AIRLOCK=${AIRLOCK:-target/release/airlock}
if [ ! -x "$AIRLOCK" ]; then
    echo "network: building $AIRLOCK" >&2
    cargo build --release --quiet --bin airlock
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

python3 - "$AIRLOCK" "$PY" "$RUNS" "$REQUESTS" <<'PY'
import http.server, os, statistics, subprocess, sys, threading, time

airlock, py, runs, requests = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
port = server.server_address[1]
threading.Thread(target=server.serve_forever, daemon=True).start()

modes = {
    "none": ["--network", "none"],
    "loopback": ["--network", "loopback"],
    "proxy": ["--network", "proxy", "--allow", f"127.0.0.1:{port}"],
}
times = {m: [] for m in modes}
for _ in range(2):
    for args in modes.values():
        subprocess.run([airlock, "sandbox", "run", *args, "--", "/bin/true"], check=True)
for _ in range(runs):
    for mode, args in modes.items():
        t0 = time.perf_counter()
        subprocess.run([airlock, "sandbox", "run", *args, "--", "/bin/true"], check=True)
        times[mode].append((time.perf_counter() - t0) * 1000)

client = f"""
import os, statistics, sys, time, urllib.request
# Loopback is in the sandbox's NO_PROXY; the server is on the host's loopback, through the proxy.
os.environ.pop('NO_PROXY', None); os.environ.pop('no_proxy', None)
handler = urllib.request.ProxyHandler({{'http': sys.argv[1]}} if sys.argv[1] else {{}})
opener = urllib.request.build_opener(handler)
url = 'http://127.0.0.1:{port}/'
for _ in range(10):
    opener.open(url).read()
lat = []
for _ in range({requests}):
    t0 = time.perf_counter(); opener.open(url).read(); lat.append((time.perf_counter() - t0) * 1e6)
print(statistics.median(lat), min(lat), max(lat))
"""
direct = subprocess.run([py, "-c", client, ""], check=True, capture_output=True, text=True,
                        env={"PATH": os.environ["PATH"]}).stdout.split()
# Inside, NO_PROXY names loopback: the client is handed the proxy explicitly.
proxied = subprocess.run(
    [airlock, "sandbox", "run", "--network", "proxy", "--allow", f"127.0.0.1:{port}", "--",
     "/bin/sh", "-c", f'exec {py} -c "$0" "$HTTP_PROXY"', client],
    check=True, capture_output=True, text=True).stdout.split()

commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(": ", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
print(f"machine: {os.cpu_count()} cores, {cpu}, kernel {os.uname().release}; airlock {commit}; "
      f"{runs} start-ups per mode in turn, {requests} requests per side")
print()
print("| mode | start-up median (ms) | min | max | vs none |")
print("| --- | --- | --- | --- | --- |")
base = statistics.median(times["none"])
for mode, t in times.items():
    m = statistics.median(t)
    print(f"| {mode} | {m:.2f} | {min(t):.2f} | {max(t):.2f} | {m - base:+.2f} ms |")
print()
print("| HTTP GET, new connection each | median (µs) | min | max |")
print("| --- | --- | --- | --- |")
print(f"| direct, on the host | {float(direct[0]):.0f} | {float(direct[1]):.0f} | {float(direct[2]):.0f} |")
print(f"| through the egress proxy, from the sandbox | {float(proxied[0]):.0f} | {float(proxied[1]):.0f} | {float(proxied[2]):.0f} |")
print(f"| the proxy's own cost per request | {float(proxied[0]) - float(direct[0]):+.0f} | | |")
PY
