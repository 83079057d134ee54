#!/usr/bin/env python3
"""Replay the gold patches of a SWE-bench Lite file through `airlock run`, one instance at a time.

    bench/swe_replay.py --mirrors DIR [--instances FILE] [--only ID,ID] [--work DIR]
                        [--bin DIR] [--scope auto|file|dir] [--instance-timeout S]
                        [--deadline-min M] [--table FILE]

For each instance of FILE (default ../shared/bench/swe-bench-lite-dev.jsonl, relative to the
repository root):

1. A scratch source repository holding the project's base commits (fetched from the mirror in
   DIR; a mirror is found as DIR/owner+name/repo, as the `fetch` tool leaves it, or DIR/owner+name,
   DIR/owner/name, DIR/name, with or without .git). The broker gets its own bare clone of it.
2. The replay is built outside airlock, in a scratch checkout at base_commit: the gold `patch`
   and the `test_patch` applied with git; the test file holding the FAIL_TO_PASS tests, as patched,
   becomes a NEW test file beside it (`airlock_` inserted after the first `_` of the stem, e.g.
   test_fields.py -> test_airlock_fields.py, commands_test.py -> commands_airlock_test.py),
   pruned to the FAIL_TO_PASS tests and what they use (the fixtures, helpers and constants they
   reference, every import): the broker accepts at most 400 inserted lines. The FAIL_TO_PASS ids
   are remapped to the new file. The diff digest is computed with `git diff --numstat`.
3. The environment is built by the run's own prepare (`pip install --target {env}/site` of the
   project's requirements files and of the project with its test extras, in the sandbox with
   network; the test runs get the interpreter's prefix and {env} read-only). When prepare fails,
   or the run ends without the FAIL_TO_PASS test passing patched (a dependency too new for the
   code shows as that), the instance is run again with the next environment: py3.11 as declared
   -> py3.11 with era caps (numpy<2, pandas<2.2, scipy<1.12, pytest<8, click<8.2) -> py3.9 with
   the caps (the SWE-bench harness's interpreter for these projects). `airlock doctor --config`
   runs first only where a FAIL_TO_PASS id must be completed (SWE-bench cuts ids at a space) from
   the new module's collection, which needs the environment (of several parametrisations matching
   a cut id, one that fails at base, run directly in a base checkout, is claimed).
4. `airlock run --model scripted:script.json --json` with a scripted agent that replays the fix:
   write_file of the new test file; run_tests on one FAIL_TO_PASS test (must fail); edit_file of
   each hunk of the gold patch (write_file of the whole file when a hunk is not unique); run_tests
   on that test again (must pass); a full run; open_pr with the digest; the final outcome (pr,
   then an escalation the supervisor asks for when no open_pr was accepted).
5. The result is read from the run's trajectory and the broker's decision: environment built (and
   how), base inventory (tests, failing), the FAIL_TO_PASS test failed at base / passed patched
   (the supervisor's narrow runs), PR queued (or the refusal, verbatim and short), wall time.

The test command is `python -m pytest -rA -p no:cacheprovider -o testpaths=...`: the "full" run
is scoped with pytest's testpaths (so that a narrow run, which appends one node id to the same
command, still runs one test). --scope file (default for sqlfluff and pvlib, whose directories
hold most of a slow suite): the original test module and the new one; --scope dir: the directory
holding them. Where the FAIL_TO_PASS module is itself new in test_patch, file scope takes the
smallest test module beside it instead of the original (a scope with no test at base gives no
base inventory).

Prints progress on stderr and, at the end, the markdown table on stdout (also written to
WORK/table.md, and per-instance JSON to WORK/results.jsonl). Needs git, the release binaries
(cargo build --release -p airlock -p airlock-broker; --bin DIR to use copies elsewhere), the
interpreters under ~/.pyenv/versions (3.11.7, 3.9.18) and PyPI (prepare's network).
"""

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INSTANCES = ROOT.parent / "shared" / "bench" / "swe-bench-lite-dev.jsonl"

PYTHONS = {
    "3.11": "/root/.pyenv/versions/3.11.7/bin/python3.11",
    "3.9": "/root/.pyenv/versions/3.9.18/bin/python3.9",
}
# Upper bounds of the era of these commits (2019-2023), for the fallback environments.
ERA_CAPS = ["numpy<2", "pandas<2.2", "scipy<1.12", "pytest<8", "click<8.2"]

# Per project: issue-id prefix (open_pr wants [A-Z]{2,6}-N), PYTHONPATH entries before the
# environment, what prepare installs besides requirements files, and the default scope.
PROJECTS = {
    "sqlfluff/sqlfluff": {
        "prefix": "SQLF", "src": ["src"], "reqs": ["requirements.txt"], "extras": "",
        "extra_pkgs": ["hypothesis"], "scope": "file",
    },
    "marshmallow-code/marshmallow": {
        "prefix": "MARSH", "src": ["src"], "reqs": [], "extras": "tests",
        # 2.x's tests import simplejson, which its setup.py lists under the "reco" extra.
        "extra_pkgs": ["simplejson"], "scope": "dir",
    },
    "pvlib/pvlib-python": {
        "prefix": "PVLIB", "src": [], "reqs": [], "extras": "test",
        "extra_pkgs": [], "scope": "file",
    },
    "pylint-dev/astroid": {
        "prefix": "ASTRO", "src": [], "reqs": ["requirements_test_min.txt"], "extras": "",
        "extra_pkgs": ["pytest"], "scope": "dir",
    },
    "pydicom/pydicom": {
        "prefix": "DICOM", "src": [], "reqs": [], "extras": "",
        "extra_pkgs": ["pytest"], "scope": "dir",
    },
}

SKIP_RE = re.compile(
    r"@pytest\.mark\.(skip|skipif|xfail)\b|\bpytest\.(skip|xfail|importorskip)\s*\(|"
    r"@unittest\.(skip|skipIf|skipUnless|expectedFailure)\b|\bself\.skipTest\s*\(|"
    r"\braise\s+(unittest\.)?SkipTest\b|@(skip|skipIf|skipUnless|expectedFailure)\b"
)
NODE_PART_RE = re.compile(r"^[A-Za-z0-9_\[\]\-.]+$")


def log(msg):
    print(f"swe_replay: {msg}", file=sys.stderr, flush=True)


def sh(args, cwd=None, check=True, timeout=None, env=None, input_bytes=None):
    if input_bytes is not None:
        r = subprocess.run(args, cwd=cwd, capture_output=True, timeout=timeout, env=env, input=input_bytes)
        r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    else:
        r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def git(repo, *args, **kw):
    return sh(["git", "-C", str(repo), *args], **kw)


def find_mirror(mirrors, repo):
    owner, name = repo.split("/")
    for cand in [f"{owner}+{name}/repo", f"{owner}+{name}", f"{owner}/{name}", name,
                 f"{owner}+{name}.git", f"{owner}/{name}.git", f"{name}.git"]:
        p = Path(mirrors) / cand
        if p.is_dir() and sh(["git", "-C", str(p), "rev-parse", "--git-dir"], check=False).returncode == 0:
            return p
    return None


# --- the replay: new test file, hunks, digest -------------------------------------------------

def new_test_name(path):
    d, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    if "_" in stem:
        i = stem.index("_")
        stem = stem[: i + 1] + "airlock_" + stem[i + 1:]
    else:
        stem = "test_airlock_" + stem
    return os.path.join(d, stem + ext) if d else stem + ext


def split_id(test_id):
    """'a/b.py::C::t[x]' -> ('a/b.py', ['C'], 't', '[x]')."""
    path, _, rest = test_id.partition("::")
    parts = rest.split("::")
    last = parts[-1]
    m = re.match(r"^([^\[]*)(\[.*)?$", last, re.S)
    return path, parts[:-1], m.group(1), m.group(2) or ""


def referenced_names(node):
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.Attribute):
            names.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", n.value):
                names.add(w)
    return names


def is_autouse(node):
    for d in getattr(node, "decorator_list", []):
        for n in ast.walk(d):
            if isinstance(n, ast.keyword) and n.arg == "autouse":
                return True
    return False


def defined_names(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        out = set()
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    out.add(n.id)
        return out
    return set()


ALWAYS_KEEP = {"pytestmark", "setup_module", "teardown_module", "setUpModule", "tearDownModule",
               "setup_function", "teardown_function", "__all__", "load_tests"}


def node_span(node):
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno


def prune_tests(source, wanted):
    """Keep the wanted tests ((classes tuple, name)) and what they reference; drop other tests
    and unreferenced top-level definitions. Returns the new source."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop = []  # (start, end) 1-based inclusive
    wanted_top = {name for (classes, name) in wanted if not classes}
    wanted_cls = {}
    for classes, name in wanted:
        if classes:
            wanted_cls.setdefault(classes[0], set()).add((tuple(classes[1:]), name))

    def prune_class(cls, want):
        # want: set of (nested classes tuple, name) inside cls
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                if ((), item.name) not in want:
                    drop.append(node_span(item))
            elif isinstance(item, ast.ClassDef):
                sub = {(c[1:], n) for (c, n) in want if c and c[0] == item.name}
                if sub:
                    prune_class(item, sub)
                elif any(isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)) and x.name.startswith("test")
                         for x in item.body):
                    drop.append(node_span(item))

    roots, candidates = [], {}
    for node in tree.body:
        names = defined_names(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if node.name in wanted_top:
                roots.append(node)
            else:
                drop.append(node_span(node))
            continue
        if isinstance(node, ast.ClassDef) and node.name in wanted_cls:
            prune_class(node, wanted_cls[node.name])
            roots.append(node)
            continue
        if names and not (names & ALWAYS_KEEP) and not is_autouse(node) and \
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)):
            candidates[id(node)] = (node, names)
            continue
        roots.append(node)
    # Fixpoint: a candidate is kept when a kept node references one of its names.
    kept_refs = set()
    for r in roots:
        kept_refs |= referenced_names(r)
    kept = set()
    changed = True
    while changed:
        changed = False
        for key, (node, names) in candidates.items():
            if key not in kept and names & kept_refs:
                kept.add(key)
                kept_refs |= referenced_names(node)
                changed = True
    for key, (node, names) in candidates.items():
        if key not in kept:
            drop.append(node_span(node))
    dead = set()
    for s, e in drop:
        # Comment lines directly above a dropped node go with it.
        while s > 1 and lines[s - 2].lstrip().startswith("#"):
            s -= 1
        dead.update(range(s, e + 1))
    out = [l for i, l in enumerate(lines, 1) if i not in dead]
    text = re.sub(r"\n{4,}", "\n\n\n", "".join(out))
    ast.parse(text)
    return text


def parse_hunks(patch):
    """{path: [(old_start, old_lines[], new_lines[])]} of a unified diff (text files)."""
    files, cur, hunk = {}, None, None
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            cur, hunk = None, None
        elif line.startswith("+++ "):
            p = line[4:].strip()
            cur = p[2:] if p.startswith("b/") else p
            files.setdefault(cur, [])
        elif line.startswith("@@") and cur is not None:
            m = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
            hunk = (int(m.group(1)), [], [])
            files[cur].append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            body = line[1:]
            if line[0] in (" ", "-"):
                hunk[1].append(body)
            if line[0] in (" ", "+"):
                hunk[2].append(body)
        elif line.startswith("\\"):
            pass
    return files


def edits_for(path, base_text, patched_text, hunks):
    """edit_file calls turning base_text into patched_text, or one write_file when a hunk's text
    is not unique even with more context."""
    cur = base_text
    calls = []
    for old_start, old, new in hunks:
        old_t, new_t = "".join(old), "".join(new)
        cur_lines = cur.splitlines(keepends=True)
        if cur.count(old_t) != 1 or not old_t:
            # Widen with the file's own lines around the hunk's position until unique.
            pos = None
            for i in range(len(cur_lines)):
                if "".join(cur_lines[i:i + len(old)]) == old_t:
                    if pos is None or abs(i + 1 - old_start) < abs(pos + 1 - old_start):
                        pos = i
            if pos is None:
                return None
            a, b = pos, pos + len(old)
            while "".join(cur_lines[a:b]).strip() == "" or cur.count("".join(cur_lines[a:b])) != 1:
                if a == 0 and b >= len(cur_lines):
                    return None
                a, b = max(0, a - 1), min(len(cur_lines), b + 1)
            pre, post = "".join(cur_lines[a:pos]), "".join(cur_lines[pos + len(old):b])
            old_t, new_t = pre + old_t + post, pre + new_t + post
        calls.append({"name": "edit_file", "arguments": {"path": path, "old_text": old_t, "new_text": new_t}})
        cur = cur.replace(old_t, new_t, 1)
    if cur != patched_text:
        return None
    return calls


def build_replay(inst, src, scratch):
    """The scripted agent's edits, the new test file, the remapped ids and the digest."""
    tree = scratch / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    git(src, "worktree", "prune", check=False)
    sh(["git", "clone", "-q", "--shared", "--no-checkout", str(src), str(tree)])
    git(tree, "checkout", "-q", "--detach", inst["base_commit"])
    git(tree, "config", "user.email", "bench@localhost")
    git(tree, "config", "user.name", "bench")
    f2p = inst["FAIL_TO_PASS"]
    test_path = split_id(f2p[0])[0]
    existed_at_base = (tree / test_path).is_file()
    sibling = None
    if not existed_at_base:
        d = (tree / test_path).parent
        suffix = "_test.py" if test_path.endswith("_test.py") else ".py"
        cands = sorted((p.stat().st_size, str(p.relative_to(tree))) for p in d.glob("*.py")
                       if p.name != "__init__.py" and p.name != "conftest.py"
                       and (p.name.startswith("test") or p.name.endswith("_test.py")) and p.name.endswith(suffix))
        sibling = cands[0][1] if cands else None
    (scratch / "test.patch").write_text(inst["test_patch"])
    (scratch / "gold.patch").write_text(inst["patch"])
    git(tree, "apply", "--whitespace=nowarn", str(scratch / "test.patch"))
    patched_test = (tree / test_path).read_text()
    git(tree, "checkout", "-q", "--", ".")
    git(tree, "clean", "-fdq")
    wanted = set()
    for t in f2p:
        p, classes, name, _ = split_id(t)
        if p == test_path:
            wanted.add((tuple(classes), name))
    pruned = prune_tests(patched_test, wanted)
    new_path = new_test_name(test_path)
    # Source edits: the gold patch, hunk by hunk.
    hunks = parse_hunks(inst["patch"])
    base_texts = {p: (tree / p).read_text() for p in hunks if (tree / p).is_file()}
    git(tree, "apply", "--whitespace=nowarn", str(scratch / "gold.patch"))
    calls = []
    for p, hs in hunks.items():
        patched = (tree / p).read_text()
        edit = edits_for(p, base_texts[p], patched, hs) if p in base_texts else None
        if edit is None:
            edit = [{"name": "write_file", "arguments": {"path": p, "content": patched}}]
        calls.extend(edit)
    (tree / new_path).write_text(pruned)
    git(tree, "add", "-A")
    numstat = git(tree, "diff", "--cached", "--numstat", inst["base_commit"]).stdout
    ins = dels = 0
    files = []
    for line in numstat.splitlines():
        a, d, f = line.split("\t", 2)
        ins += int(a)
        dels += int(d)
        files.append(f)
    skip_markers = sum(1 for l in pruned.splitlines()
                       if not l.strip().startswith("#") and SKIP_RE.search(l))
    digest = {"files_changed": sorted(files), "insertions": ins, "deletions": dels,
              "test_files_added": [new_path], "test_files_modified": [],
              "assertions_removed": 0, "skip_markers_added": skip_markers}
    new_ids = [new_path + t[len(test_path):] for t in f2p if t.startswith(test_path + "::")]
    return {
        "tree": tree, "test_path": test_path, "existed_at_base": existed_at_base, "sibling": sibling,
        "new_path": new_path, "new_content": pruned, "source_calls": calls,
        "digest": digest, "new_ids": new_ids,
        "new_test_lines": len(pruned.splitlines()),
    }


def valid_node_id(s):
    parts = s.split("::")
    if not parts[0] or parts[0].startswith("/") or ".." in parts[0].split("/"):
        return False
    return all(p and NODE_PART_RE.match(p) for p in parts[1:]) and not any(c.isspace() for c in s)


def balanced(s):
    return s.count("[") == s.count("]")


# --- configs ----------------------------------------------------------------------------------

def scope_paths(replay, scope):
    if scope == "file" and replay["existed_at_base"]:
        return [replay["test_path"], replay["new_path"]], "file"
    if scope == "file" and replay.get("sibling"):
        # The F2P module is new in test_patch: the smallest test module beside it stands in for
        # it at base (a scope with no test at base gives no inventory).
        return [replay["sibling"], replay["new_path"]], "file (sibling)"
    d = os.path.dirname(replay["test_path"]) or "."
    return [d], "dir"


def airlock_toml(work, inst, proj, replay, attempt, scope, timeout):
    py = PYTHONS[attempt["python"]]
    prefix = str(Path(py).resolve().parent.parent)
    paths, scope_kind = scope_paths(replay, scope)
    command = [py, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-p", "no:sugar",
               "-o", "testpaths=" + " ".join(paths)]
    pypath = ":".join(proj["src"] + ["{env}/site"])
    pkgs, pre = [], []
    for r in proj["reqs"]:
        if any(l.strip() in ("-e .", "-e.", ".") for l in (replay["tree"] / r).read_text().splitlines()
               if (replay["tree"] / r).is_file()):
            # The file installs the project editable, which --target cannot do and which
            # conflicts with the "." below: prepare installs a copy without that line.
            copy = "/tmp/airlock-" + r.replace("/", "_")
            pre.append(f"grep -v -E '^-e ?[.]$|^[.]$' {_q(r)} > {copy}")
            r = copy
        pkgs += ["-r", r]
    target = "." + (f"[{proj['extras']}]" if proj["extras"] else "")
    pkgs += proj["extra_pkgs"] + [target]
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
           "--target", "{env}/site"]
    if attempt["caps"]:
        # A constraints file written by prepare itself (its /tmp is its own).
        caps = "\\n".join(ERA_CAPS)
        pre.append(f"printf '{caps}\\n' > /tmp/airlock-caps.txt")
        pip += ["-c", "/tmp/airlock-caps.txt"]
    if pre:
        prepare = ["/bin/sh", "-c", " && ".join(pre + [" ".join(_q(a) for a in pip + pkgs)])]
    else:
        prepare = pip + pkgs
    toml = f"""# generated by bench/swe_replay.py for {inst['instance_id']} (environment {attempt['name']})
[tests]
command = {json.dumps(command)}
runner = "pytest"
selector_style = "node-id"
timeout_secs = {timeout}
ro = [{json.dumps(prefix)}]
env = {{ PYTHONPATH = {json.dumps(pypath)}, PATH = "/usr/local/bin:/usr/bin:/bin", LANG = "C.UTF-8" }}

[tests.prepare]
command = {json.dumps(prepare)}
inputs = ["setup.py", "setup.cfg", "pyproject.toml", "requirements*.txt"]
timeout_secs = 900

[budgets]
max_turns = 40
max_full_runs = 2

[broker]
socket = {json.dumps(str(work / 'broker.sock'))}
repository = {json.dumps(inst['repo'])}

[paths]
runs_root = {json.dumps(str(work / 'runs'))}
audit_log = {json.dumps(str(work / 'audit.jsonl'))}
cache_dir = {json.dumps(str(work / 'cache'))}
index_dir = {json.dumps(str(work / 'index'))}
envs_dir = {json.dumps(str(work / 'envs'))}
"""
    return toml, command, scope_kind, paths


def _q(s):
    return "'" + s.replace("'", "'\\''") + "'"


ATTEMPTS = [
    {"name": "py3.11", "python": "3.11", "caps": False},
    {"name": "py3.11+caps", "python": "3.11", "caps": True},
    {"name": "py3.9+caps", "python": "3.9", "caps": True},
]


def module_broken(inventory, test_path):
    """True when the base run shows the module as a whole broken (or absent)."""
    tests = inventory.get("tests", {})
    mod = {k: v for k, v in tests.items() if k.split("::")[0] == test_path}
    if not mod:
        return True
    bad = [k for k, v in mod.items() if v in ("failed", "error")]
    return len(bad) == len(mod)


def short(text, n=160):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --- one instance -----------------------------------------------------------------------------

def run_instance(args, work, inst, src, bins, deadline):
    iid = inst["instance_id"]
    proj = PROJECTS[inst["repo"]]
    scratch = work / "instances" / iid
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    t0 = time.monotonic()
    res = {"instance": iid, "env": None, "env_how": None, "inventory": None, "f2p_failed_base": None,
           "f2p_passed_patched": None, "pr": None, "notes": []}

    def remaining():
        return min(args.instance_timeout - (time.monotonic() - t0), deadline - time.monotonic())

    try:
        replay = build_replay(inst, src, scratch)
    except Exception as e:  # noqa: BLE001
        res["pr"] = f"replay not built: {short(e)}"
        res["seconds"] = time.monotonic() - t0
        return res
    res["new_test"] = replay["new_path"]
    res["new_test_lines"] = replay["new_test_lines"]
    res["digest"] = replay["digest"]
    res["edits"] = [c["name"] for c in replay["source_calls"]]
    scope = args.scope if args.scope != "auto" else proj["scope"]
    issue = {"id": f"{proj['prefix']}-{iid.rsplit('-', 1)[1]}",
             "title": short(inst["problem_statement"].strip().splitlines()[0], 120) if inst["problem_statement"].strip() else iid,
             "body": inst["problem_statement"], "labels": ["bug", "ready-for-agent"]}
    (scratch / "issue.json").write_text(json.dumps(issue, indent=1))
    res["issue_id"] = issue["id"]
    tried = []
    for attempt in ATTEMPTS:
        if remaining() < 90:
            res["notes"].append("instance time limit reached")
            break
        toml, command, scope_kind, paths = airlock_toml(work, inst, proj, replay, attempt, scope, args.test_timeout)
        cfg = scratch / f"airlock-{attempt['name']}.toml"
        cfg.write_text(toml)
        res["scope"] = f"{scope_kind}: " + " ".join(paths)
        claim, selector, doctor_err = choose_claim(res, replay, attempt, proj, cfg, src, inst, bins, scratch, remaining)
        if doctor_err:
            tried.append(f"{attempt['name']}: {doctor_err}")
            continue
        script = make_script(inst, issue, replay, claim, selector)
        (scratch / f"script-{attempt['name']}.json").write_text(json.dumps(script, indent=1))
        one = {"notes": []}
        before_runs = set(os.listdir(work / "runs"))
        try:
            r = sh([str(bins / "airlock"), "run", "--repo", str(src), "--commit", inst["base_commit"],
                    "--issue", str(scratch / "issue.json"),
                    "--model", "scripted:" + str(scratch / ('script-' + attempt['name'] + '.json')),
                    "--config", str(cfg), "--json"], check=False, timeout=max(30, remaining()))
            out, err, code = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err, code = "killed at the instance time limit", None
            one["notes"].append(f"airlock run killed at the instance time limit ({args.instance_timeout:.0f} s)")
        (scratch / f"run-{attempt['name']}.json").write_text(out or "")
        (scratch / f"run-{attempt['name']}.stderr").write_text(err or "")
        one["exit_code"] = code
        fresh = sorted(d for d in set(os.listdir(work / "runs")) - before_runs if d.startswith(issue["id"] + "-"))
        one["run_dir_hint"] = fresh[-1] if fresh else None
        read_run(work, one, out, err, replay)
        if one.get("setup_failed") and "prepare" in one["setup_failed"]:
            tried.append(f"{attempt['name']}: prepare failed: {prepare_reason(err or one['setup_failed'])}")
            continue
        if one.get("setup_failed") and not one.get("inventory"):
            # Prepare succeeded; the base run did not give an inventory.
            tried.append(f"{attempt['name']}: base run failed: {short(one['setup_failed'], 160)}")
            res.update({k: v for k, v in one.items() if k != "notes"})
            res["env"] = "built, base run failed"
            res["env_how"] = "; ".join(tried)
            continue
        broken = one.get("module_broken")
        res.update({k: v for k, v in one.items() if k != "notes"})
        res["notes"] += one["notes"]
        res["env"] = "yes" if one.get("inventory") else ("no" if one.get("setup_failed") else "?")
        res["env_how"] = attempt["name"] + (" (after " + "; ".join(tried) + ")" if tried else "")
        res["env_attempt"] = attempt["name"]
        res["claim"], res["selector"] = claim, selector
        if not one.get("f2p_passed_patched") and attempt is not ATTEMPTS[-1] and remaining() > 150:
            why = f"base run shows {replay['test_path']} broken as a whole" if broken else \
                "the F2P test did not pass patched"
            tried.append(f"{attempt['name']}: {why}")
            res["notes"].append(f"retrying: {tried[-1]}")
            continue
        break
    if res["env"] is None:
        res["env"] = "no"
        res["env_how"] = "; ".join(tried)
    res["env_tried"] = tried
    res["seconds"] = time.monotonic() - t0
    return res


def prepare_reason(text):
    """One line for a failed pip prepare: the package being built or fetched and pip's error."""
    lines = text.splitlines()
    err_i = next((i for i, l in enumerate(lines) if re.search(r"^\s*(ERROR|error):", l)
                  and "subprocess-exited-with-error" not in l), None)
    if err_i is None:
        return short(lines[-1] if lines else text, 160)
    what = next((m.group(1) for l in reversed(lines[:err_i])
                 for m in [re.search(r"(?:Collecting|Downloading|Building wheel for) (\S+)", l)] if m), "")
    why = next((l.strip() for l in lines[1:err_i] if re.search(r"\w*Error: ", l)
                and "subprocess-exited" not in l), lines[err_i].strip())
    return short((f"{what}: " if what else "") + why, 200)


def choose_claim(res, replay, attempt, proj, cfg, src, inst, bins, scratch, remaining):
    """The claimed test: a complete id usable as one selector. SWE-bench cuts an id at its first
    space; such an id is completed from the new module's collection, which needs the environment
    (built by `airlock doctor`, reused by the run)."""
    new_ids = replay["new_ids"]
    claim = next((t for t in new_ids if balanced(t) and valid_node_id(t)), None)
    if claim is not None:
        return claim, claim, None
    complete = [t for t in new_ids if balanced(t)]
    if complete:
        # A complete id the node-id selector style refuses (`/`, `+` in a parameter): the narrow
        # runs select the function; the claim (which the witness selects) is the full id.
        claim = complete[0]
        selector = claim.split("[")[0]
        res["notes"].append(f"{claim} is not a valid node-id selector; narrow runs use {selector}")
        return claim, selector, None
    r = sh([str(bins / "airlock"), "doctor", "--config", str(cfg), "--repo", str(src),
            "--commit", inst["base_commit"], "--json"], check=False, timeout=max(60, remaining()))
    (scratch / f"doctor-{attempt['name']}.out").write_text(r.stdout + "\n--- stderr\n" + r.stderr)
    if r.returncode != 0:
        return None, None, "doctor: " + short(r.stderr.strip()[-400:], 220)
    rep = json.loads(r.stdout)
    full = collect_ids(rep, attempt, proj, replay, scratch)
    pref = [t for t in full if any(t.startswith(p) for p in new_ids)]
    if len(pref) > 1:
        # A cut id can match several parametrisations, some of which pass at base (sqlfluff-1517:
        # `[select` matches `[select id from tbl;-]`, which passes): those failing at base first.
        failing = failing_at_base(rep, attempt, proj, replay, inst, src, scratch, pref)
        pref = [t for t in pref if t in failing] + [t for t in pref if t not in failing]
        res["notes"].append(f"{len(failing)} of the {len(pref)} parametrisations matching "
                            f"{new_ids[0]!r} fail at base (run outside airlock)")
    nospace = [t for t in pref if valid_node_id(t)]
    if nospace:
        claim = nospace[0]
        res["notes"].append(f"truncated id {new_ids[0]!r} completed to {claim!r} from the collection")
        return claim, claim, None
    claim = pref[0] if pref else new_ids[0]
    selector = claim.split("[")[0]
    res["notes"].append(f"truncated id {new_ids[0]!r}: every parametrisation has whitespace ({len(pref)} "
                        f"collected); claiming {claim!r}, narrow runs use {selector}")
    return claim, selector, None


def failing_at_base(rep, attempt, proj, replay, inst, src, scratch, ids):
    """Which of ids (of the new module) fail at base_commit: the module run directly (not in the
    sandbox) in a base checkout holding the new test file, with the environment."""
    env_dir = rep["baseline"]["prepare"]["env_dir"]
    base = scratch / "base-tree"
    if base.exists():
        shutil.rmtree(base)
    sh(["git", "clone", "-q", "--shared", "--no-checkout", str(src), str(base)])
    git(base, "checkout", "-q", "--detach", inst["base_commit"])
    (base / replay["new_path"]).write_text(replay["new_content"])
    pypath = ":".join([str(base / s) for s in proj["src"]] + [env_dir + "/site"])
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": pypath, "HOME": str(scratch),
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    r = sh([PYTHONS[attempt["python"]], "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-p", "no:sugar",
            replay["new_path"]], cwd=base, check=False, env=env, timeout=300)
    (scratch / f"base-run-{attempt['name']}.out").write_text(r.stdout + "\n--- stderr\n" + r.stderr)
    lines = [l for l in r.stdout.splitlines() if l.startswith(("FAILED ", "ERROR "))]
    return {t for t in ids for l in lines
            if l.split(" ", 1)[1] == t or l.split(" ", 1)[1].startswith(t + " - ")}


def collect_ids(rep, attempt, proj, replay, scratch):
    """The new module's test ids, collected directly (not in the sandbox) with the environment."""
    env_dir = rep["baseline"]["prepare"]["env_dir"]
    tree = replay["tree"]
    git(tree, "checkout", "-q", "--", ".")
    (tree / replay["new_path"]).write_text(replay["new_content"])
    pypath = ":".join([str(tree / s) for s in proj["src"]] + [env_dir + "/site"])
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": pypath, "HOME": str(scratch),
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = sh([PYTHONS[attempt["python"]], "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
            replay["new_path"]], cwd=tree, check=False, env=env, timeout=300)
    return [l.strip() for l in r.stdout.splitlines() if "::" in l]


def make_script(inst, issue, replay, claim, selector):
    turns = [
        {"text": "Adding the fail-to-pass tests as a new test file.",
         "tool_calls": [{"name": "write_file", "arguments": {"path": replay["new_path"], "content": replay["new_content"]}}]},
        {"tool_calls": [{"name": "run_tests", "arguments": {"selector": selector}}]},
    ]
    for c in replay["source_calls"]:
        turns.append({"tool_calls": [c]})
    turns += [
        {"tool_calls": [{"name": "run_tests", "arguments": {"selector": selector}}]},
        {"tool_calls": [{"name": "run_tests", "arguments": {}}]},
    ]
    d = replay["digest"]
    title = f"fix: {inst['instance_id']} (SWE-bench gold patch)"[:72]
    body = (f"Replays the SWE-bench Lite gold patch of {inst['instance_id']} on {inst['base_commit']}. "
            f"The fail-to-pass tests are added as {replay['new_path']}; {claim} fails before the change "
            f"and passes after it; the full run is green against the base inventory.")
    turns.append({"tool_calls": [{"name": "open_pr", "arguments": {
        "issue_id": issue["id"], "base_commit": inst["base_commit"], "title": title, "body": body[:3900],
        "scope": "source-plus-new-tests", "diff_digest": d,
        "test_evidence": {"before_selector": selector, "before_failing_test": claim,
                          "after_full_run": "green", "witness_run": "green"},
        "confidence": 0.9}}]})
    final = {"outcome": "pr", "summary": f"gold patch of {inst['instance_id']} replayed",
             "root_cause": "as fixed upstream by the gold patch", "files_changed": d["files_changed"],
             "tests_added": replay["new_ids"], "test_evidence": {"before": f"{claim} failed", "after": f"{claim} passed"},
             "also_noticed": [], "injection_observed": [], "confidence": 0.9}
    turns.append({"text": json.dumps(final)})
    esc = dict(final, outcome="escalate", summary="the replayed pull request was not queued", confidence=0.3)
    turns.append({"text": json.dumps(esc)})
    return turns


def read_run(work, res, out, err, replay):
    try:
        doc = json.loads(out)
    except (json.JSONDecodeError, TypeError):
        doc = {}
    res["result"] = doc.get("result")
    run_id = doc.get("run_id")
    if not run_id:
        # A run that failed before its outcome: the run directory it created.
        run_id = res.get("run_dir_hint")
    res["run_id"] = run_id
    traj = []
    if run_id and (work / "runs" / run_id / "trajectory.jsonl").is_file():
        for line in (work / "runs" / run_id / "trajectory.jsonl").read_text().splitlines():
            try:
                traj.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    base = next((r for r in traj if r.get("kind") == "test_baseline"), None)
    if base:
        inv = base["inventory"]
        failing = sorted(k for k, v in inv["tests"].items() if v in ("failed", "error"))
        res["inventory"] = {"tests": len(inv["tests"]), "failing": len(failing), "collected": inv.get("collected"),
                            "summary": base.get("summary"), "base_seconds": base.get("base_seconds"),
                            "failing_names": failing[:20]}
        prep = base.get("prepare") or {}
        res["prepare_seconds"] = prep.get("seconds")
        if replay["existed_at_base"]:
            res["module_broken"] = module_broken(inv, replay["test_path"])
        else:
            res["module_broken"] = bool(inv["tests"]) and len(failing) == len(inv["tests"])
    failed_setup = next((r for r in traj if r.get("kind") == "test_baseline_failed"), None)
    if not failed_setup and not base and (err or "").strip() and not doc:
        failed_setup = {"error": (err or "").strip()[-1500:]}
    if failed_setup:
        res["setup_failed"] = failed_setup.get("error") or ""
        res["pr"] = "set-up failed: " + short(failed_setup.get("error"), 200)
    # Tool results, in order, paired with their calls.
    calls = [r["call"] for r in traj if r.get("kind") == "tool_call"]
    results = [r["message"] for r in traj if r.get("kind") == "tool_result"]
    pairs = list(zip(calls, results))
    narrow = [(c, m) for c, m in pairs if c["name"] == "run_tests" and c.get("arguments", {}).get("selector")]
    full = [(c, m) for c, m in pairs if c["name"] == "run_tests" and not c.get("arguments", {}).get("selector")]
    writes = [(c, m) for c, m in pairs if c["name"] in ("write_file", "edit_file")]
    res["write_errors"] = [short(m.get("content"), 200) for c, m in writes if m.get("is_error")]

    def content(m):
        return m.get("content") or ""

    def names_failed(text):
        tail = text.split(" - ")[0]
        return (re.search(r"^(FAILED|ERROR) \S*" + re.escape(replay["new_path"]), text, re.M) is not None
                or "errors during collection" in text or "ERROR collecting" in tail)

    if narrow:
        t = content(narrow[0][1])
        res["f2p_failed_base"] = t.startswith("selected run: red") and names_failed(t)
        res["narrow_before"] = short(t.splitlines()[0] if t else "", 120)
    if len(narrow) > 1:
        t = content(narrow[1][1])
        res["f2p_passed_patched"] = t.startswith("selected run: green")
        res["narrow_after"] = short(t.splitlines()[0] if t else "", 120)
    if full:
        t = content(full[0][1])
        res["full_run"] = short("\n".join(t.splitlines()[:2]), 300)
    reply = next((r for r in traj if r.get("kind") == "open_pr_reply"), None)
    opr = [(c, m) for c, m in pairs if c["name"] == "open_pr"]
    if reply and reply.get("accepted"):
        body = reply.get("reply") or {}
        qid = find_key(body, "queue_id")
        res["pr"] = f"queued (#{qid})" if qid is not None else "queued"
    elif reply:
        body = reply.get("reply") or {}
        msg = find_key(body, "message") or find_key(body, "detail") or reply.get("error") or body
        res["pr"] = f"{reply.get('code') or 'refused'}: {short(msg, 300)}"
    elif opr:
        res["pr"] = short(content(opr[0][1]), 300)
    elif res["pr"] is None:
        res["pr"] = "no open_pr: " + short((err or "").strip().splitlines()[-1] if (err or "").strip() else doc.get("result"), 300)


def find_key(v, key):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == key and not isinstance(x, (dict, list)):
                return x
            f = find_key(x, key)
            if f is not None:
                return f
    elif isinstance(v, list):
        for x in v:
            f = find_key(x, key)
            if f is not None:
                return f
    return None


# --- the table --------------------------------------------------------------------------------

def yesno(v):
    return "—" if v is None else ("yes" if v else "**no**")


def table(results):
    rows = ["| instance | env built (how) | scope of the full run | base inventory: tests, failing at base | "
            "F2P failed at base | F2P passed patched | PR queued | time (s) |",
            "| --- | --- | --- | ---: | :---: | :---: | --- | ---: |"]
    for r in results:
        inv = r.get("inventory") or r.get("doctor_inventory")
        inv_s = f"{inv['tests']}, {inv['failing']}" if inv else "—"
        env = r.get("env") or "—"
        how = r.get("env_how") or ""
        if r.get("env_attempt"):
            # Condensed: the environment used, then why the earlier ones were not.
            how = r["env_attempt"] + "".join(f"; {short(t, 90)}" for t in r.get("env_tried", []))
        if r.get("prepare_seconds") is not None:
            how += f", prepare {r['prepare_seconds']:.0f} s"
        env_s = f"{env} ({how})" if how else env
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {:.0f} |".format(
            r["instance"], env_s.replace("|", "\\|"), (r.get("scope") or "—").replace("|", "\\|"), inv_s,
            yesno(r.get("f2p_failed_base")), yesno(r.get("f2p_passed_patched")),
            (r.get("pr") or "—").replace("|", "\\|").replace("\n", " "), r.get("seconds") or 0))
    return "\n".join(rows)


# Releases on PyPI that ship the data files a snapshot may lack (checked by blob id).
RELEASES = {"pvlib/pvlib-python": ["pvlib==0.9.5"], "pydicom/pydicom": ["pydicom==1.3.0"]}


def restore_blobs(work, src, repo, commits):
    """Write into src the blobs of the base trees the mirror lacks, from PyPI releases."""
    import hashlib
    import zipfile
    missing = {}
    for c in commits:
        for line in git(src, "ls-tree", "-r", "-l", c).stdout.splitlines():
            meta, path = line.split("\t", 1)
            parts = meta.split()
            if parts[1] == "blob" and parts[3] == "BAD":
                missing[parts[2]] = path
    if not missing:
        return 0, []
    dl = work / "dl"
    dl.mkdir(exist_ok=True)
    restored = 0
    for spec in RELEASES.get(repo, []):
        sh([PYTHONS["3.11"], "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
            "-d", str(dl), spec], check=False)
    for whl in dl.glob("*.whl"):
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                if not any(name.endswith("/" + os.path.basename(p)) for p in missing.values()):
                    continue
                data = z.read(name)
                oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
                if oid in missing:
                    got = sh(["git", "-C", str(src), "hash-object", "-w", "--stdin"], input_bytes=data).stdout.strip()
                    if got == oid:
                        missing.pop(oid)
                        restored += 1
    return restored, sorted(missing.values())


def queue_entries(bins, work):
    """{queue id: issue id} of the broker's queued entries."""
    queue = sh([str(bins / "airlock-broker"), "--config", str(work / "broker.toml"), "queue"], check=False).stdout
    queued = {}
    for line in queue.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 5 and cols[1] == "queued":
            queued[cols[0]] = cols[4]
    return queued


# --- main -------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", required=True, help="directory of the fetched mirrors")
    ap.add_argument("--instances", default=str(DEFAULT_INSTANCES))
    ap.add_argument("--only", default="", help="comma-separated instance ids (default: all)")
    ap.add_argument("--work", default="", help="work directory (default: a new /tmp/airlock-swe-replay.*)")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release"),
                    help="directory of airlock, airlock-broker, airlock-sandbox-helper")
    ap.add_argument("--scope", choices=["auto", "file", "dir"], default="auto")
    ap.add_argument("--instance-timeout", type=float, default=900, help="seconds per instance (default 900)")
    ap.add_argument("--test-timeout", type=int, default=600, help="[tests] timeout_secs (default 600)")
    ap.add_argument("--deadline-min", type=float, default=0, help="stop starting instances after M minutes")
    ap.add_argument("--table", default="", help="also write the markdown table to this file")
    args = ap.parse_args()

    bins = Path(args.bin).resolve()
    for b in ("airlock", "airlock-broker", "airlock-sandbox-helper"):
        if not (bins / b).is_file():
            sys.exit(f"swe_replay: {bins / b} is missing (cargo build --release -p airlock -p airlock-broker)")
    for v, py in PYTHONS.items():
        if not Path(py).is_file():
            log(f"warning: no Python {v} at {py} (fallback environments using it will fail)")
    instances = [json.loads(l) for l in open(args.instances) if l.strip()]
    if args.only:
        want = set(args.only.split(","))
        instances = [i for i in instances if i["instance_id"] in want]
    work = Path(args.work) if args.work else Path(sh(["mktemp", "-d", "/tmp/airlock-swe-replay.XXXXXX"]).stdout.strip())
    work.mkdir(parents=True, exist_ok=True)
    work = work.resolve()
    log(f"work directory {work}")
    for d in ("src", "clones", "runs", "envs", "cache", "index", "instances"):
        (work / d).mkdir(exist_ok=True)

    # Source repositories: a bare repository per project whose objects are the mirror's (an
    # alternate) and whose refs are the base commits; airlock clones it into its cache once. The
    # broker's clone is another such repository over the first. Blobs a mirror lacks (a snapshot
    # leaves out files of 4 MiB and more) are restored from the project's release on PyPI when
    # the same file is there with the same blob id.
    srcs = {}
    for repo in sorted({i["repo"] for i in instances}):
        mirror = find_mirror(args.mirrors, repo)
        if mirror is None:
            sys.exit(f"swe_replay: no mirror of {repo} under {args.mirrors}")
        mine = [i for i in instances if i["repo"] == repo]
        src = work / "src" / (repo.replace("/", "+") + ".git")
        clone = work / "clones" / (repo.replace("/", "+") + ".git")
        for repo_dir, lower in ((src, Path(git(mirror, "rev-parse", "--path-format=absolute", "--git-path", "objects").stdout.strip())),
                                (clone, src / "objects")):
            if not repo_dir.exists():
                git(work, "init", "-q", "--bare", str(repo_dir))
            (repo_dir / "objects" / "info" / "alternates").write_text(str(lower) + "\n")
            for i in mine:
                git(repo_dir, "update-ref", f"refs/heads/swe/{i['instance_id']}", i["base_commit"])
        restored, lacking = restore_blobs(work, src, repo, [i["base_commit"] for i in mine])
        srcs[repo] = src
        log(f"{repo}: mirror {mirror}, {len(mine)} base commit(s) in {src}"
            + (f"; {restored} missing blob(s) restored from PyPI" if restored else "")
            + (f"; STILL MISSING: {', '.join(lacking)}" if lacking else ""))

    prefixes = sorted({str(Path(p).resolve().parent.parent) for p in PYTHONS.values()})
    repos_toml = "".join(
        f'\n[repositories."{repo}"]\nclone = {json.dumps(str(work / "clones" / (repo.replace("/", "+") + ".git")))}\n'
        f'remote = "origin"\nallow_ro = {json.dumps([str(work / "envs")] + prefixes)}\n'
        for repo in srcs)
    (work / "broker.toml").write_text(f"""socket = {json.dumps(str(work / 'broker.sock'))}
state_db = {json.dumps(str(work / 'broker.db'))}
runs_root = {json.dumps(str(work / 'runs'))}
audit_log = {json.dumps(str(work / 'broker-audit.jsonl'))}
queue_max_age = "7d"
witness_timeout = "900s"
{repos_toml}""")
    sock = work / "broker.sock"
    if sock.exists():
        sock.unlink()
    broker_log = open(work / "broker.log", "a")
    broker = subprocess.Popen([str(bins / "airlock-broker"), "--config", str(work / "broker.toml"), "serve"],
                              stdin=subprocess.DEVNULL, stdout=broker_log, stderr=broker_log)
    for _ in range(300):
        if sock.exists() or broker.poll() is not None:
            break
        time.sleep(0.05)
    if not sock.exists():
        sys.exit(f"swe_replay: the broker did not start; see {work / 'broker.log'}")
    log(f"broker pid {broker.pid} on {sock}")

    started = time.monotonic()
    deadline = started + args.deadline_min * 60 if args.deadline_min else float("inf")
    results = []
    out_jsonl = open(work / "results.jsonl", "a")
    try:
        for n, inst in enumerate(instances, 1):
            if time.monotonic() > deadline:
                log(f"deadline reached: {len(instances) - n + 1} instance(s) not run")
                break
            log(f"[{n}/{len(instances)}] {inst['instance_id']}")
            queue_before = sorted(queue_entries(bins, work))
            try:
                res = run_instance(args, work, inst, srcs[inst["repo"]], bins, deadline)
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                res = {"instance": inst["instance_id"], "pr": f"bench error: {short(e, 300)}", "seconds": 0}
            # The queue before this run: an entry of the same issue queued by an earlier run in
            # this work directory is not this run's.
            res["queue_before"] = queue_before
            results.append(res)
            out_jsonl.write(json.dumps(res, default=str) + "\n")
            out_jsonl.flush()
            log(f"  -> env {res.get('env')} ({res.get('env_how')}); inventory {res.get('inventory')}; "
                f"F2P fail/pass {res.get('f2p_failed_base')}/{res.get('f2p_passed_patched')}; "
                f"{res.get('pr')}; {res.get('seconds', 0):.0f} s")
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(10)
        except subprocess.TimeoutExpired:
            broker.kill()
    # Reconcile with the broker's queue: a PR the broker queued after the supervisor stopped
    # waiting for its reply (see the README) is in the queue but not in the run's records.
    queued = queue_entries(bins, work)
    # Every instance this work directory has a result for, the latest run of each, in file order.
    latest = {}
    for line in open(work / "results.jsonl"):
        if line.strip():
            r = json.loads(line)
            latest[r["instance"]] = r
    instances_all = [json.loads(l) for l in open(args.instances) if l.strip()]
    order = [i["instance_id"] for i in instances_all]
    results = [latest[i] for i in order if i in latest]
    for r in results:
        inst = next((i for i in instances_all if i["instance_id"] == r["instance"]), None)
        issue_id = r.get("issue_id") or (inst and f"{PROJECTS[inst['repo']]['prefix']}-{r['instance'].rsplit('-', 1)[1]}")
        before = set(r.get("queue_before") or [])
        mine = [q for q, i in queued.items() if i == issue_id and q not in before]
        if mine and not str(r.get("pr", "")).startswith("queued"):
            r["pr"] = f"queued (#{mine[-1]}) by the broker after the supervisor gave up: {r.get('pr')}"
    t = table(results)
    (work / "table.md").write_text(t + "\n")
    if args.table:
        Path(args.table).write_text(t + "\n")
    print(t)
    log(f"{len(results)} instance(s) in {time.monotonic() - started:.0f} s; records in {work}")


if __name__ == "__main__":
    main()
