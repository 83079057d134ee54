#!/usr/bin/env python3
"""Parity of test environments: real projects nobody here tuned for, their suites run directly
the project's own way and under airlock with the configuration `airlock init` writes, unchanged.

    bench/parity.sh [--projects LIST] [--work DIR] [--bin DIR] [--keep]

Each project is a release (pinned below, so the figures can be repeated) taken from its registry at run time (an sdist, an npm
tarball or a crate that ships its tests), committed into a scratch git repository. For each:

- directly, the project's own way, in a fresh environment on the host (no sandbox):
  Python: a fresh venv of the interpreter airlock chose for the pin, then `uv sync --frozen` of
  its test groups when it keeps a `uv.lock`
  (its lockfile, as its CI uses it), else `pip install -e ".[test extras]"` with its test
  dependency groups and requirements files, plus its tox environment's deps, plus pytest; the
  services `init` proposed started on the host the same way; then the test command `init` wrote
  (`pytest -rA`, or `unittest -v` where the project uses unittest) with that venv's python.
  JavaScript: `npm install`, then the test command `init` proposes. Rust: `cargo test`.
- under airlock: `airlock init --repo REPO` into an empty directory, then
  `airlock doctor --config airlock.toml --repo REPO --json` with that file as written (prepare
  in the sandbox behind the egress proxy, then the base full run in the sandbox).

The figure is tests passing under airlock divided by tests passing directly (each suite's own
count: pytest's summary line, jest's `Tests:` line, cargo's `test result:` lines; airlock's
base inventory). The time columns are the direct suite run against the base full run in the
sandbox (prepare excluded on both sides). Rust doctests are counted on neither side (airlock
counts them through the exit code, not by name). The scratch repository carries the release's
tag, as the project's own repository does. A fix a user has to find by hand is not applied: the
configuration is used exactly as `init` writes it.

Prints progress on stderr and the markdown table on stdout (also WORK/table.md, per-project JSON
in WORK/results.jsonl). Needs git, python3 with pip and venv, node and npm, cargo, the package
registries, go and setpriv for those projects, PostgreSQL's server binaries, and the release binary (target/release/airlock, built when missing; or --bin DIR).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Real projects at their current releases: (ecosystem, name, what the suite exercises). No
# setting per project: each is taken as its registry serves it.
PROJECTS = [
    ("python", "flask", "3.1.3", "web framework; a dependency group and a uv.lock pin of pytest"),
    ("python", "attrs", "26.1.0", "dependency groups, uv.lock, a version from hatch-vcs"),
    ("python", "waitress", "3.0.2", "an HTTP server whose tests start live servers on loopback; extras in setup.cfg"),
    ("python", "httplib2", "0.32.1", "an HTTP client whose tests start fixture servers on loopback"),
    ("python", "iniconfig", "2.3.1", "a version from git that its own test runner requires"),
    ("python", "more-itertools", "11.2.1", "a pure library with a large suite"),
    ("javascript", "remeda", "1.0.0", "jest with TypeScript from devDependencies"),
    ("rust", "either", "1.19.0", "a crate with dependencies for its tests"),
    ("python", "pg8000", "1.31.6", "a PostgreSQL driver whose tests connect to a server (the libpq variables)"),
    ("go", "golang-github-google-go-cmp-dev", "0.5.9-1", "a Go module (Debian ships Go sources with their tests)"),
]

# The interpreter `airlock init`'s configuration chose for the last project (its
# `{env}/interpreter.txt`); the direct run uses the same one, so both sides run one Python.
CHOSEN_PYTHON = None

TEST_NAMES = re.compile(r"^(test|tests|testing|test-.*|tests-.*)$", re.I)


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def run(cmd, cwd=None, env=None, timeout=3600, check=True):
    started = time.monotonic()
    p = subprocess.run(
        cmd, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, errors="replace"
    )
    took = time.monotonic() - started
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p, took


def only(directory, suffix):
    found = [p for p in Path(directory).iterdir() if p.name.endswith(suffix)]
    if len(found) != 1:
        raise RuntimeError(f"expected one {suffix} in {directory}, found {found}")
    return found[0]


def untar(archive, into):
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as t:
        t.extractall(into, filter="data")
    entries = list(into.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def fetch(ecosystem, name, version, work):
    dl = work / "dl" / name
    shutil.rmtree(dl, ignore_errors=True)
    dl.mkdir(parents=True)
    if ecosystem == "python":
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "-d", dl, f"{name}=={version}"])
        archive = only(dl, ".tar.gz")
    elif ecosystem == "javascript":
        run(["npm", "pack", "--silent", f"{name}@{version}"], cwd=dl)
        archive = only(dl, ".tgz")
    elif ecosystem == "go":
        # Debian's archive is this machine's registry of Go sources: a -dev package holds the
        # module's tree (tests included) under /usr/share/gocode/src.
        run(["apt-get", "download", "-q", f"{name}={version}"], cwd=dl)
        archive = only(dl, ".deb")
        run(["dpkg-deb", "-x", archive, dl / "deb"])
        mods = sorted((dl / "deb" / "usr/share/gocode/src").rglob("go.mod"), key=lambda p: len(p.parts))
        if not mods:
            raise RuntimeError(f"{archive.name} holds no go.mod")
        src = mods[0].parent
    else:
        p = dl / "fetch"
        (p / "src").mkdir(parents=True)
        (p / "Cargo.toml").write_text(
            f'[package]\nname = "fetch-{name}"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n{name} = "={version}"\n'
        )
        (p / "src/main.rs").write_text("fn main() {}\n")
        env = dict(os.environ, CARGO_HOME=str(p / "home"))
        env.pop("CARGO_TARGET_DIR", None)
        run(["cargo", "fetch", "--quiet"], cwd=p, env=env)
        cache = next((p / "home/registry/cache").iterdir())
        archive = next(c for c in cache.iterdir() if re.fullmatch(rf"{re.escape(name)}-\d.*\.crate", c.name))
    if ecosystem != "go":
        src = untar(archive, dl / "src")
    repo = work / "repos" / name
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(src, repo, symlinks=True)
    git = ["git", "-c", "user.name=parity", "-c", "user.email=parity@example.invalid"]
    run(git + ["init", "-q", "-b", "main"], cwd=repo)
    run(git + ["add", "-A", "-f"], cwd=repo)
    run(git + ["commit", "-q", "-m", f"{archive.name} as the registry serves it"], cwd=repo)
    # The release's tag, as the project's own repository has it (a version computed from git
    # reads it, on both sides).
    version = re.search(r"[-_](\d[^-_]*?)(-\d+)?(_\w+)?(\.tar\.gz|\.tgz|\.crate|\.deb)$", archive.name)
    if version:
        run(git + ["tag", "v" + version.group(1)], cwd=repo)
    return repo, archive.name


def counts_pytest(output):
    for line in reversed(output.splitlines()):
        line = line.strip("= ")
        if re.match(r"^\d+ (passed|failed|error)", line) and " in " in line:
            return {w: int(n) for n, w in re.findall(r"(\d+) (\w+)", line)}
    return {}


def direct_python(repo, work, toml):
    venv = work / "venvs" / repo.name
    shutil.rmtree(venv, ignore_errors=True)
    base = CHOSEN_PYTHON if CHOSEN_PYTHON and Path(CHOSEN_PYTHON).exists() else sys.executable
    run([base, "-m", "venv", venv])
    py = str(venv / "bin/python")
    run([py, "-m", "pip", "install", "--quiet", "pip>=26"])
    try:
        import tomllib

        project = tomllib.loads((repo / "pyproject.toml").read_text()) if (repo / "pyproject.toml").exists() else {}
    except Exception:  # noqa: BLE001 - a pyproject that does not parse counts as none
        project = {}
    groups = [g for g in project.get("dependency-groups", {}) if TEST_NAMES.match(g)]
    declared = list(project.get("project", {}).get("optional-dependencies", {}))
    if (repo / "setup.cfg").exists():
        import configparser

        cfg = configparser.ConfigParser()
        try:
            cfg.read(repo / "setup.cfg")
            if cfg.has_section("options.extras_require"):
                declared += list(cfg["options.extras_require"])
        except configparser.Error:
            pass
    extras = [e for e in declared if TEST_NAMES.match(e)]
    how = []
    if (repo / "uv.lock").exists():
        run([py, "-m", "pip", "install", "--quiet", "uv"])
        env = dict(os.environ, UV_PROJECT_ENVIRONMENT=str(venv), VIRTUAL_ENV=str(venv))
        cmd = [str(venv / "bin/uv"), "sync", "--native-tls", "--frozen", "--no-default-groups", "--python", py]
        for g in groups:
            cmd += ["--group", g]
        for e in extras:
            cmd += ["--extra", e]
        run(cmd, cwd=repo, env=env)
        how.append("uv sync --frozen " + " ".join(f"--group {g}" for g in groups))
    else:
        spec = "." + (f"[{','.join(extras)}]" if extras else "")
        cmd = [py, "-m", "pip", "install", "--quiet", "-e", spec]
        for g in groups:
            cmd += ["--group", g]
        reqs = sorted(
            str(p.relative_to(repo))
            for p in list(repo.glob("*requirements*.txt")) + list(repo.glob("requirements/*.txt"))
            if re.search(r"test|dev", p.name) and not re.search(r"doc|lint|typing|mypy", p.name)
        )
        for r in reqs:
            cmd += ["-r", r]
        run(cmd, cwd=repo)
        how.append(" ".join(cmd[4:]))
    # What the project's tox environment installs besides (its own way of running the suite):
    # `[testenv] deps` of tox.ini, or `deps` of `[tool.tox.env_run_base]` in pyproject.toml.
    tox_deps = list(project.get("tool", {}).get("tox", {}).get("env_run_base", {}).get("deps", []))
    if (repo / "tox.ini").exists():
        import configparser

        ini = configparser.ConfigParser(interpolation=None)
        try:
            ini.read(repo / "tox.ini")
            if ini.has_option("testenv", "deps"):
                tox_deps += [l.strip() for l in ini["testenv"]["deps"].splitlines()
                             if l.strip() and ":" not in l.split()[0] and "{" not in l]
        except configparser.Error:
            pass
    if tox_deps:
        run([py, "-m", "pip", "install", "--quiet", *tox_deps], cwd=repo)
        how.append("tox deps: " + " ".join(tox_deps))
    run([py, "-m", "pip", "install", "--quiet", "pytest"])
    # The same test command as under airlock (the runner init chose: pytest, or unittest where
    # the project uses it), with this venv's python.
    command = json.loads(re.search(r"^command = (\[.*\])$", toml, re.M).group(1))
    command = [py] + command[1:]
    if "pytest" not in command:
        run([py, "-m", "pip", "uninstall", "--quiet", "-y", "pytest"], check=False)
    procs, service_env = start_services(toml, work)
    try:
        p, took = run(command, cwd=repo, check=False, env=dict(os.environ, **service_env))
    finally:
        stop_services(procs)
    text = p.stdout + p.stderr
    # Counted as airlock counts them: the tests pytest's `-rA` names PASSED, unittest's `-v`
    # names `... ok` (a summary line's count can differ, e.g. with subtests).
    if "unittest" in command:
        # unittest's own count: run, less what did not pass (names can repeat across
        # descriptions, so lines are not counted).
        ran = re.search(r"^Ran (\d+) tests?", text, re.M)
        if not ran:
            return 0, took, "; ".join(how), text[-1500:]
        not_passed = sum(
            int(n)
            for n in re.findall(
                r"(?:failures|errors|skipped|expected failures|unexpected successes)=(\d+)", text
            )
        )
        return int(ran.group(1)) - not_passed, took, "; ".join(how) + "; " + " ".join(command[1:]), text[-1500:]
    else:
        passed = {l.split(" ", 1)[1].split(" - ")[0] for l in text.splitlines() if l.startswith("PASSED ")}
    names = work / "names"
    names.mkdir(exist_ok=True)
    (names / f"{repo.name}.direct.txt").write_text("".join(f"{t}\n" for t in sorted(passed)))
    return len(passed), took, "; ".join(how) + "; " + " ".join(command[1:]), text[-1500:]


def start_services(toml, work):
    """The `[[tests.services]]` init wrote, started on the host for the direct run as the sandbox
    starts them: each as an unprivileged user (PostgreSQL refuses root), its /tmp a directory of
    its own, then its readiness check. Returns (processes, variables for the tests)."""
    import tomllib

    services = tomllib.loads(toml).get("tests", {}).get("services", [])
    procs, env = [], {}
    for svc in services:
        tmp = Path(tempfile.mkdtemp(prefix=f"parity-{svc['name']}-"))
        os.chmod(tmp, 0o777)
        def local(argv):
            return [a.replace("/tmp/", f"{tmp}/").replace("-k /tmp", f"-k {tmp}") for a in argv]
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        senv = dict(os.environ, HOME=str(tmp), TMPDIR=str(tmp), **svc.get("env", {}))
        procs.append(subprocess.Popen(as_nobody + local(svc["command"]), env=senv, cwd=tmp,
                                      stdout=subprocess.DEVNULL, stderr=open(tmp / "log", "w")))
        ready = svc.get("ready_command") or []
        port = svc.get("ready_port")
        deadline = time.monotonic() + svc.get("ready_timeout_secs", 60)
        while time.monotonic() < deadline:
            if ready:
                if subprocess.run(as_nobody + local(ready), env=senv, cwd=tmp, capture_output=True).returncode == 0:
                    break
            elif port:
                import socket
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    pass
            time.sleep(0.5)
        else:
            raise RuntimeError(f"service {svc['name']} never became ready: {(tmp / 'log').read_text()[-800:]}")
        env.update(svc.get("env", {}))
    return procs, env


def stop_services(procs):
    for p in procs:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


def direct_go(repo, command):
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOCACHE=str(repo.parent / ".gocache"))
    cmd = ["go"] + command[1:]
    p, took = run(cmd, cwd=repo, env=env, check=False)
    text = p.stdout + p.stderr
    passed = {l.strip().split()[2] for l in text.splitlines() if l.strip().startswith("--- PASS: ")}
    return len(passed), took, " ".join(cmd) + " (names counted once, as airlock counts them)", text[-1500:]


def direct_javascript(repo, command):
    run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=repo)
    p, took = run(command, cwd=repo, check=False)
    text = p.stdout + p.stderr
    m = re.search(r"^Tests:.*?(\d+) passed", text, re.M)
    return (int(m.group(1)) if m else 0), took, "npm install; " + " ".join(command), text[-1500:]


def direct_rust(repo):
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    # Doctests are left out on both sides: airlock counts them through the exit code, not by
    # name (their names are line numbers, which any edit above them shifts).
    cmd = ["cargo", "test", "--lib", "--bins", "--tests"]
    run(cmd + ["--no-run", "--quiet"], cwd=repo, env=env)
    p, took = run(cmd, cwd=repo, env=env, check=False)
    text = p.stdout + p.stderr
    passed = sum(int(n) for n in re.findall(r"test result: \w+\. (\d+) passed", text))
    return passed, took, " ".join(cmd) + " (doctests not counted)", text[-1500:]


def under_airlock(airlock, repo, work):
    cfg = work / "configs" / repo.name
    shutil.rmtree(cfg, ignore_errors=True)
    cfg.mkdir(parents=True)
    env = dict(os.environ, AIRLOCK_HOME=str(work / "airlock-home"))
    run([airlock, "init", "--repo", repo], cwd=cfg, env=env)
    p, _ = run([airlock, "doctor", "--config", "airlock.toml", "--repo", repo, "--json"], cwd=cfg, env=env, check=False)
    if p.returncode != 0:
        return None, None, (p.stdout + p.stderr)[-3000:], (cfg / "airlock.toml").read_text()
    report = json.loads(p.stdout)
    tests = report["baseline"]["inventory"]["tests"]
    passed = sum(1 for s in tests.values() if s == "passed")
    names = work / "names"
    names.mkdir(exist_ok=True)
    (names / f"{repo.name}.airlock.txt").write_text(
        "".join(f"{t}\t{s}\n" for t, s in sorted(tests.items())))
    # The interpreter airlock chose for the pin: the direct run uses the same one.
    global CHOSEN_PYTHON
    CHOSEN_PYTHON = None
    env_dir = (report["baseline"].get("prepare") or {}).get("env_dir")
    if env_dir and (Path(env_dir) / "interpreter.txt").exists():
        CHOSEN_PYTHON = (Path(env_dir) / "interpreter.txt").read_text().strip().rsplit(": ", 1)[-1]
    return passed, report["baseline"]["base_seconds"], "", (cfg / "airlock.toml").read_text()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", default=",".join(p[1] for p in PROJECTS))
    ap.add_argument("--work", type=Path)
    ap.add_argument("--bin", type=Path, default=ROOT / "target/release")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    airlock = args.bin / "airlock"
    if not airlock.exists():
        log("building target/release/airlock")
        run(["cargo", "build", "--release", "--quiet", "-p", "airlock"], cwd=ROOT)
    work = args.work or Path(tempfile.mkdtemp(prefix="airlock-parity-"))
    work.mkdir(parents=True, exist_ok=True)
    wanted = args.projects.split(",")
    rows = []
    for ecosystem, name, version, what in PROJECTS:
        if name not in wanted:
            continue
        log(f"== {name} ({ecosystem})")
        row = {"project": name, "ecosystem": ecosystem, "what": what}
        try:
            repo, artefact = fetch(ecosystem, name, version, work)
            row["artefact"] = artefact
            a_passed, a_secs, a_error, toml = under_airlock(str(airlock), repo, work)
            row.update(airlock_passed=a_passed, airlock_secs=a_secs, airlock_error=a_error)
            if ecosystem == "python":
                d = direct_python(repo, work, toml)
            elif ecosystem == "javascript":
                command = json.loads(re.search(r"^command = (\[.*\])$", toml, re.M).group(1))
                d = direct_javascript(repo, command)
            elif ecosystem == "go":
                command = json.loads(re.search(r"^command = (\[.*\])$", toml, re.M).group(1))
                d = direct_go(repo, command)
            else:
                d = direct_rust(repo)
            row.update(direct_passed=d[0], direct_secs=d[1], direct_how=d[2], direct_tail=d[3])
        except Exception as e:  # noqa: BLE001 - one project's failure is its row
            row["error"] = str(e)[-2000:]
        rows.append(row)
        log(json.dumps({k: v for k, v in row.items() if not k.endswith("tail")})[:600])
    with open(work / "results.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    lines = [
        "| project | artefact | passing directly | passing under airlock | parity | direct run s | sandboxed base run s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r or r.get("airlock_passed") is None:
            why = (r.get("error") or r.get("airlock_error") or "").strip().splitlines()
            lines.append(f"| {r['project']} | {r.get('artefact', '')} | {r.get('direct_passed', '')} | failed: {why[-1][:120] if why else ''} | | | |")
            continue
        parity = 100.0 * r["airlock_passed"] / r["direct_passed"] if r["direct_passed"] else float("nan")
        lines.append(
            f"| {r['project']} | {r['artefact']} | {r['direct_passed']} | {r['airlock_passed']} | {parity:.1f}% "
            f"| {r['direct_secs']:.1f} | {r['airlock_secs']:.1f} |"
        )
    table = "\n".join(lines) + "\n"
    (work / "table.md").write_text(table)
    print(table)
    log(f"work directory: {work}")
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
