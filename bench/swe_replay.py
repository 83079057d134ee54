#!/usr/bin/env python3
"""Replay the gold patches of a SWE-bench-format file through `airlock run`, one instance at a time.

    bench/swe_replay.py --mirrors DIR [--instances FILE] [--only ID,ID] [--work DIR]
                        [--bin DIR] [--scope file|dir] [--instance-timeout S]
                        [--deadline-min M] [--table FILE]
    bench/swe_replay.py --mirrors DIR --self-test

Nothing in this script knows a project: the configuration of every instance is what
`airlock init` writes for the tree at base_commit, and the environment is what that
configuration's prepare builds (the Python recipe resolving releases as of the pinned commit).

For each instance of FILE (default ../shared/bench/swe-bench-lite-dev.jsonl, relative to the
repository root; any file in SWE-bench's format, FAIL_TO_PASS as a list or a JSON string):

1. A scratch source repository holding the project's base commits (fetched from the mirror in
   DIR; a mirror is found as DIR/owner+name/repo, as the `fetch` tool leaves it, or DIR/owner+name,
   DIR/owner/name, DIR/name, with or without .git). The broker gets its own bare clone of it.
   Blobs a mirror lacks (a snapshot leaves out large files) are taken from the project's own
   releases on the package index (its distribution name read at the commit; the newest release
   within 90 days, a year, two years of the commit; wheel, then sdist), when the blob id matches.
2. The test ids, in every form SWE-bench uses, become pytest node ids: `path::Class::name[param]`
   as given; bare names (sympy's `test_foo`) looked up in the modules test_patch touches;
   unittest's `test_foo (pkg.mod.Class)`, `test_foo (pkg.mod.Class.test_foo)` and
   `pkg.mod.Class.test_foo` with the module found from the tree's root or its test directories.
3. The replay is built outside airlock, in a scratch checkout at base_commit: the gold `patch`
   and the `test_patch` applied with git; the test file holding the FAIL_TO_PASS tests, as patched,
   becomes a NEW test file beside it (`airlock_` inserted after the first `_` of the stem, e.g.
   test_fields.py -> test_airlock_fields.py, commands_test.py -> commands_airlock_test.py),
   pruned to the FAIL_TO_PASS tests and what they use (the fixtures, helpers and constants they
   reference, every import): the broker accepts at most 400 inserted lines. The FAIL_TO_PASS ids
   are remapped to the new file. The diff digest is computed with `git diff --numstat`.
4. `airlock init --repo <that checkout>` writes the configuration. The replay changes only what
   is its own: the work directory's paths and broker, the scripted agent's budgets, the test
   timeout, and the scope of the full run (pytest only): --scope file (default) runs the test
   module and the new one (`-o testpaths=DIR -o python_files=A B`; where the FAIL_TO_PASS module
   is itself new in test_patch, the smallest test module beside it stands in for it at base);
   --scope dir their directory. A narrow run appends one node id to the same command.
   `airlock doctor --config` runs first only where a FAIL_TO_PASS id must be completed (SWE-bench
   cuts ids at a space) from the new module's collection, which needs the environment (of
   several parametrisations matching a cut id, one that fails at base, run directly in a base
   checkout, is claimed).
5. `airlock run --model scripted:script.json --json` with a scripted agent that replays the fix:
   write_file of the new test file; run_tests on one FAIL_TO_PASS test (must fail); edit_file of
   each hunk of the gold patch (write_file of the whole file when a hunk is not unique); run_tests
   on that test again (must pass); a full run; open_pr with the digest; the final outcome (pr,
   then an escalation the supervisor asks for when no open_pr was accepted).
6. The result is read from the run's trajectory and the broker's decision: environment built (and
   what init chose), base inventory (tests, failing), the FAIL_TO_PASS test failed at base /
   passed patched (the supervisor's narrow runs), PR queued (or the refusal, verbatim and short),
   wall time.

Prints progress on stderr and, at the end, the markdown table on stdout (also written to
WORK/table.md, and per-instance JSON to WORK/results.jsonl). Needs git, the release binaries
(cargo build --release -p airlock -p airlock-broker; --bin DIR to use copies elsewhere), the
host's interpreters (airlock chooses among them per pin) and the package index (prepare's
network).
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

BINS = None  # the directory of the airlock binaries (--bin)


def issue_prefix(repo):
    """The issue-id prefix (open_pr wants [A-Z]{2,6}-N), from the repository's name alone."""
    letters = re.sub(r"[^A-Za-z]", "", repo.split("/")[1]).upper()
    return (letters or "SWE")[:6].ljust(2, "X")


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


def test_defs(text):
    """{name: [class path]} of the test functions a module defines (methods under their classes)."""
    out = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out

    def walk(body, classes):
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, classes + [node.name])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(node.name, []).append(classes)
    walk(tree.body, [])
    return out


def normalize_id(test_id, tree, test_files):
    """A SWE-bench test id as a pytest node id (path::Class::name[param]). SWE-bench writes
    `path::name` (pytest), bare names (`test_foo`, sympy's runner), and unittest's forms
    (`test_foo (pkg.module.Class)`, `test_foo (pkg.module.Class.test_foo)`, `pkg.module.Class.test_foo`);
    a module given dotted is looked for from the tree's root and its test directories."""
    t = test_id.strip().splitlines()[0] if test_id.strip() else test_id
    if "::" in t:
        return t
    m = re.match(r"^([A-Za-z_][\w]*(?:\[.*\])?) \(([\w.]+)\)", t)
    if m or re.match(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*){2,}$", t):
        name, dotted = (m.group(1), m.group(2)) if m else (t.rsplit(".", 1)[1], t.rsplit(".", 1)[0])
        parts = dotted.split(".")
        if parts[-1] == name.split("[")[0]:
            parts = parts[:-1]
        roots = [""] + sorted({f.split("/")[0] + "/" for f in test_files if "/" in f})
        for k in range(len(parts), 0, -1):
            for root in roots:
                path = root + "/".join(parts[:k]) + ".py"
                if (tree / path).is_file():
                    return "::".join([path] + parts[k:] + [name])
        return t
    # A bare name: the test module of test_patch that defines it.
    bare = t.split("[")[0]
    for f in test_files:
        if f.endswith(".py") and (tree / f).is_file():
            defs = test_defs((tree / f).read_text(errors="replace"))
            if bare in defs:
                return "::".join([f] + defs[bare][0] + [t])
    return t


def patched_files(patch):
    return [m.group(1) for m in re.finditer(r"^diff --git a/(\S+) b/", patch, re.M)]


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
    given = inst["FAIL_TO_PASS"]
    if isinstance(given, str):
        given = json.loads(given)
    (scratch / "test.patch").write_text(inst["test_patch"])
    git(tree, "apply", "--whitespace=nowarn", str(scratch / "test.patch"))
    f2p = [normalize_id(t, tree, patched_files(inst["test_patch"])) for t in given]
    git(tree, "checkout", "-q", "--", ".")
    git(tree, "clean", "-fdq")
    if not all("::" in t for t in f2p):
        raise RuntimeError(f"test ids not understood: {[t for t in f2p if '::' not in t]}")
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
    module = new_path[:-3].replace("/", ".")
    new_ids_dotted = [".".join([module] + c + [n]) for t in f2p if t.startswith(test_path + "::")
                      for _, c, n, _ in [split_id(t)]]
    return {
        "ids_given": given, "new_ids_dotted": new_ids_dotted,
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


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {type(v)}")


def toml_dump(doc, prefix=""):
    """TOML text of a parsed document (tables, arrays of tables, scalars, arrays, inline maps)."""
    out = []
    scalars = {k: v for k, v in doc.items()
               if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))}
    for k, v in scalars.items():
        out.append(f"{json.dumps(k)} = {toml_value(v)}")
    for k, v in doc.items():
        key = f"{prefix}{json.dumps(k)}"
        if isinstance(v, dict):
            out.append(f"\n[{key}]")
            out.append(toml_dump(v, key + "."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                out.append(f"\n[[{key}]]")
                out.append(toml_dump(item, key + "."))
    return "\n".join(x for x in out if x)


def init_config(work, inst, replay, scope, timeout, scratch):
    """The configuration `airlock init` writes for the base tree, unchanged but for what the
    replay itself decides: where runs, environments and the broker live, the scope of the full
    run (pytest's testpaths) and the budgets of the scripted agent."""
    import tomllib
    tree = replay["tree"]
    git(tree, "checkout", "-q", "--", ".")
    git(tree, "clean", "-fdq")
    written = scratch / "airlock-init.toml"
    r = sh([str(BINS / "airlock"), "init", "--repo", str(tree), "--output", str(written), "--force"], check=False)
    (scratch / "init.out").write_text(r.stdout + "\n--- stderr\n" + r.stderr)
    if r.returncode != 0:
        raise RuntimeError("airlock init failed: " + short(r.stderr.strip()[-400:], 300))
    doc = tomllib.loads(written.read_text())
    tests = doc.setdefault("tests", {})
    paths, scope_kind = scope_paths(replay, scope)
    if tests.get("runner") == "pytest":
        if scope_kind.startswith("file"):
            # The directory, and only these modules' names in it: a module that does not exist
            # at base (the new one) is no error, where a missing testpaths entry is to pytest 6.
            tests["command"] = list(tests["command"]) + [
                "-o", "testpaths=" + (os.path.dirname(paths[0]) or "."),
                "-o", "python_files=" + " ".join(os.path.basename(p) for p in paths)]
        else:
            tests["command"] = list(tests["command"]) + ["-o", "testpaths=" + " ".join(paths)]
    else:
        scope_kind = "whole suite (runner " + str(tests.get("runner")) + ")"
        paths = ["."]
    tests["timeout_secs"] = timeout
    doc["budgets"] = {"max_turns": 40, "max_full_runs": 2}
    doc["broker"] = {"socket": str(work / "broker.sock"), "repository": inst["repo"]}
    doc["paths"] = {"runs_root": str(work / "runs"), "audit_log": str(work / "audit.jsonl"),
                    "cache_dir": str(work / "cache"), "index_dir": str(work / "index"),
                    "envs_dir": str(work / "envs")}
    text = (f"# bench/swe_replay.py for {inst['instance_id']}: what `airlock init` wrote ({written.name}),\n"
            "# with the replay's paths, broker, budgets and full-run scope.\n" + toml_dump(doc) + "\n")
    recipe = (tests.get("prepare") or {}).get("python") or {}
    how = ", ".join(f"{k} {v}" for k, v in (("extras", recipe.get("extras")), ("groups", recipe.get("groups")),
                                             ("requirements", recipe.get("requirements")),
                                             ("packages", recipe.get("packages"))) if v)
    return {"text": text, "runner": tests.get("runner"), "selector_style": tests.get("selector_style"),
            "ro": tests.get("ro", []), "scope_kind": scope_kind, "paths": paths,
            "recipe": (f"init: {tests.get('runner')}, interpreter {recipe.get('interpreter')}, as_of "
                       f"{recipe.get('as_of')}" + (f"; {how}" if how else "")) if recipe else
                      f"init: {tests.get('runner')}, no Python recipe"}


def _q(s):
    return "'" + s.replace("'", "'\\''") + "'"


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

def configure_instance(args, work, inst, src):
    """The replay (edits, new test file, digest) and the configuration `airlock init` writes,
    for one instance, before the broker starts (its allow_ro takes every ro path of these)."""
    iid = inst["instance_id"]
    scratch = work / "instances" / iid
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    t0 = time.monotonic()
    replay = build_replay(inst, src, scratch)
    cfg = init_config(work, inst, replay, args.scope, args.test_timeout, scratch)
    (scratch / "airlock.toml").write_text(cfg["text"])
    return {"replay": replay, "cfg": cfg, "scratch": scratch, "seconds": time.monotonic() - t0}


def run_instance(args, work, inst, src, bins, deadline, prep):
    iid = inst["instance_id"]
    t0 = time.monotonic()
    res = {"instance": iid, "env": None, "env_how": None, "inventory": None, "f2p_failed_base": None,
           "f2p_passed_patched": None, "pr": None, "notes": []}

    def remaining():
        return min(args.instance_timeout - (time.monotonic() - t0), deadline - time.monotonic())

    if isinstance(prep, str):
        res["pr"] = prep
        res["seconds"] = 0
        return res
    replay, cfg, scratch = prep["replay"], prep["cfg"], prep["scratch"]
    res["new_test"] = replay["new_path"]
    res["new_test_lines"] = replay["new_test_lines"]
    res["digest"] = replay["digest"]
    res["edits"] = [c["name"] for c in replay["source_calls"]]
    res["ids_given"] = replay["ids_given"]
    res["env_how"] = cfg["recipe"]
    res["scope"] = f"{cfg['scope_kind']}: " + " ".join(cfg["paths"])
    issue = {"id": f"{issue_prefix(inst['repo'])}-{iid.rsplit('-', 1)[1]}",
             "title": short(inst["problem_statement"].strip().splitlines()[0], 120) if inst["problem_statement"].strip() else iid,
             "body": inst["problem_statement"], "labels": ["bug", "ready-for-agent"]}
    (scratch / "issue.json").write_text(json.dumps(issue, indent=1))
    res["issue_id"] = issue["id"]
    config = scratch / "airlock.toml"
    claim, selector, doctor_err = choose_claim(res, replay, cfg, config, src, inst, bins, scratch, remaining)
    if doctor_err:
        res["env"] = "no"
        res["pr"] = "set-up failed: " + doctor_err
        res["seconds"] = time.monotonic() - t0
        return res
    script = make_script(inst, issue, replay, claim, selector)
    (scratch / "script.json").write_text(json.dumps(script, indent=1))
    before_runs = set(os.listdir(work / "runs"))
    try:
        r = sh([str(bins / "airlock"), "run", "--repo", str(src), "--commit", inst["base_commit"],
                "--issue", str(scratch / "issue.json"), "--model", "scripted:" + str(scratch / "script.json"),
                "--config", str(config), "--json"], check=False, timeout=max(30, remaining()))
        out, err, code = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, code = "killed at the instance time limit", None
        res["notes"].append(f"airlock run killed at the instance time limit ({args.instance_timeout:.0f} s)")
    (scratch / "run.json").write_text(out or "")
    (scratch / "run.stderr").write_text(err or "")
    res["exit_code"] = code
    fresh = sorted(d for d in set(os.listdir(work / "runs")) - before_runs if d.startswith(issue["id"] + "-"))
    res["run_dir_hint"] = fresh[-1] if fresh else None
    read_run(work, res, out, err, replay)
    if res.get("setup_failed") and "prepare" in res["setup_failed"]:
        res["env"] = "no"
        res["pr"] = "prepare failed: " + prepare_reason(err or res["setup_failed"])
    elif res.get("setup_failed") and not res.get("inventory"):
        res["env"] = "built, base run failed"
    else:
        res["env"] = "yes" if res.get("inventory") else "?"
    res["claim"], res["selector"] = claim, selector
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


def choose_claim(res, replay, cfg, config, src, inst, bins, scratch, remaining):
    """The claimed test: a complete id usable as one selector. SWE-bench cuts an id at its first
    space; such an id is completed from the new module's collection, which needs the environment
    (built by `airlock doctor`, reused by the run)."""
    new_ids = replay["new_ids"]
    if cfg["selector_style"] != "node-id":
        dotted = replay["new_ids_dotted"]
        return dotted[0], dotted[0], None
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
    r = sh([str(bins / "airlock"), "doctor", "--config", str(config), "--repo", str(src),
            "--commit", inst["base_commit"], "--json"], check=False, timeout=max(60, remaining()))
    (scratch / "doctor.out").write_text(r.stdout + "\n--- stderr\n" + r.stderr)
    if r.returncode != 0:
        return None, None, "doctor: " + short(r.stderr.strip()[-400:], 220)
    rep = json.loads(r.stdout)
    full = collect_ids(rep, replay, scratch)
    pref = [t for t in full if any(t.startswith(p) for p in new_ids)]
    if len(pref) > 1:
        # A cut id can match several parametrisations, some of which pass at base (sqlfluff-1517:
        # `[select` matches `[select id from tbl;-]`, which passes): those failing at base first.
        failing = failing_at_base(rep, replay, inst, src, scratch, pref)
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


def direct_env(rep, tree, scratch):
    """The prepared venv's python and the variables to run it directly on `tree` (outside the
    sandbox): the tree first on the path, since an editable install points at the sandbox's
    tree path."""
    env_dir = rep["baseline"]["prepare"]["env_dir"]
    pypath = [str(tree / "src")] if (tree / "src").is_dir() else []
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": ":".join(pypath + [str(tree)]),
           "HOME": str(scratch), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    return env_dir + "/venv/bin/python", env


def failing_at_base(rep, replay, inst, src, scratch, ids):
    """Which of ids (of the new module) fail at base_commit: the module run directly (not in the
    sandbox) in a base checkout holding the new test file, with the environment."""
    base = scratch / "base-tree"
    if base.exists():
        shutil.rmtree(base)
    sh(["git", "clone", "-q", "--shared", "--no-checkout", str(src), str(base)])
    git(base, "checkout", "-q", "--detach", inst["base_commit"])
    (base / replay["new_path"]).write_text(replay["new_content"])
    python, env = direct_env(rep, base, scratch)
    r = sh([python, "-m", "pytest", "-rA", "-p", "no:cacheprovider", replay["new_path"]],
           cwd=base, check=False, env=env, timeout=300)
    (scratch / "base-run.out").write_text(r.stdout + "\n--- stderr\n" + r.stderr)
    lines = [l for l in r.stdout.splitlines() if l.startswith(("FAILED ", "ERROR "))]
    return {t for t in ids for l in lines
            if l.split(" ", 1)[1] == t or l.split(" ", 1)[1].startswith(t + " - ")}


def collect_ids(rep, replay, scratch):
    """The new module's test ids, collected directly (not in the sandbox) with the environment."""
    tree = replay["tree"]
    git(tree, "checkout", "-q", "--", ".")
    (tree / replay["new_path"]).write_text(replay["new_content"])
    python, env = direct_env(rep, tree, scratch)
    r = sh([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
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
        if r.get("prepare_seconds") is not None:
            how += f", prepare {r['prepare_seconds']:.0f} s"
        env_s = f"{env} ({how})" if how else env
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {:.0f} |".format(
            r["instance"], env_s.replace("|", "\\|"), (r.get("scope") or "—").replace("|", "\\|"), inv_s,
            yesno(r.get("f2p_failed_base")), yesno(r.get("f2p_passed_patched")),
            (r.get("pr") or "—").replace("|", "\\|").replace("\n", " "), r.get("seconds") or 0))
    return "\n".join(rows)


def dist_name(src, commit):
    """The project's distribution name at a commit, from pyproject.toml, setup.cfg or setup.py."""
    import tomllib
    def show(path):
        r = git(src, "show", f"{commit}:{path}", check=False)
        return r.stdout if r.returncode == 0 else ""
    try:
        name = tomllib.loads(show("pyproject.toml") or "").get("project", {}).get("name")
    except tomllib.TOMLDecodeError:
        name = None
    if name:
        return name
    m = re.search(r"^\[metadata\][^\[]*?^name\s*=\s*(\S+)", show("setup.cfg"), re.M | re.S)
    if m:
        return m.group(1)
    setup_py = show("setup.py")
    m = re.search(r"\bname\s*=\s*['\"]([A-Za-z0-9_.-]+)['\"]", setup_py)
    if m:
        return m.group(1)
    # name=DISTNAME, with DISTNAME = "..." at module level.
    m = re.search(r"\bname\s*=\s*([A-Za-z_]\w*)\s*[,)\n]", setup_py)
    if m:
        v = re.search(r"^" + m.group(1) + r"\s*=\s*['\"]([A-Za-z0-9_.-]+)['\"]", setup_py, re.M)
        if v:
            return v.group(1)
    return None


def restore_blobs(work, src, commits):
    """Write into src the blobs of the base trees the mirror lacks, from the project's own
    releases on the package index: the newest release uploaded within 90 days, a year, two years
    of the commit (wheel, then sdist), each file taken only when its blob id matches."""
    import hashlib
    import tarfile
    import zipfile
    import datetime
    missing = {}
    for c in commits:
        for line in git(src, "ls-tree", "-r", "-l", c).stdout.splitlines():
            meta, path = line.split("\t", 1)
            parts = meta.split()
            if parts[1] == "blob" and (parts[3] == "BAD" or
                                       git(src, "cat-file", "-e", parts[2], check=False).returncode != 0):
                missing[parts[2]] = path
    if not missing:
        return 0, []
    dl = work / "dl"
    dl.mkdir(exist_ok=True)
    pipenv = work / "pip-venv"
    if not (pipenv / "bin" / "pip").is_file():
        sh([sys.executable, "-m", "venv", str(pipenv)])
        sh([str(pipenv / "bin" / "pip"), "install", "--quiet", "pip>=26"])
    restored = 0

    def take(name, data):
        nonlocal restored
        if not any(name.endswith("/" + os.path.basename(p)) for p in missing.values()):
            return
        oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if oid in missing:
            got = sh(["git", "-C", str(src), "hash-object", "-w", "--stdin"], input_bytes=data).stdout.strip()
            if got == oid:
                missing.pop(oid)
                restored += 1

    for c in commits:
        name = dist_name(src, c)
        when = datetime.datetime.fromisoformat(git(src, "log", "-1", "--format=%cI", c).stdout.strip())
        for days in (90, 365, 730):
            for only in (["--only-binary", ":all:"], ["--no-binary", ":all:"]):
                if not missing or not name:
                    break
                before = set(dl.iterdir())
                until = (when + datetime.timedelta(days=days)).astimezone(datetime.timezone.utc)
                sh([str(pipenv / "bin" / "pip"), "download", "--quiet", "--no-deps", *only,
                    "--uploaded-prior-to", until.strftime("%Y-%m-%dT%H:%M:%SZ"), "-d", str(dl), name], check=False)
                for arc in set(dl.iterdir()) - before:
                    if arc.suffix == ".whl" or arc.suffix == ".zip":
                        with zipfile.ZipFile(arc) as z:
                            for n in z.namelist():
                                take(n, z.read(n) if any(n.endswith("/" + os.path.basename(p))
                                                         for p in missing.values()) else b"")
                    elif arc.name.endswith((".tar.gz", ".tgz")):
                        with tarfile.open(arc) as t:
                            for m in t.getmembers():
                                if m.isfile() and any(m.name.endswith("/" + os.path.basename(p)) for p in missing.values()):
                                    take(m.name, t.extractfile(m).read())
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


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d)
        (tree / "tests" / "admin_views").mkdir(parents=True)
        (tree / "tests" / "admin_views" / "tests.py").write_text("class AdminViewBasicTest:\n    def test_x(self): pass\n")
        (tree / "sympy" / "core" / "tests").mkdir(parents=True)
        (tree / "sympy" / "core" / "tests" / "test_basic.py").write_text(
            "def test_subs():\n    pass\nclass TestK:\n    def test_k(self):\n        pass\n")
        files = ["tests/admin_views/tests.py", "sympy/core/tests/test_basic.py"]
        cases = {
            "a/b.py::C::t[x y]": "a/b.py::C::t[x y]",
            "test_x (admin_views.tests.AdminViewBasicTest)": "tests/admin_views/tests.py::AdminViewBasicTest::test_x",
            "test_x (admin_views.tests.AdminViewBasicTest.test_x)\nDocstring.":
                "tests/admin_views/tests.py::AdminViewBasicTest::test_x",
            "admin_views.tests.AdminViewBasicTest.test_x": "tests/admin_views/tests.py::AdminViewBasicTest::test_x",
            "test_subs": "sympy/core/tests/test_basic.py::test_subs",
            "test_k": "sympy/core/tests/test_basic.py::TestK::test_k",
            "sympy.core.tests.test_basic.test_subs": "sympy/core/tests/test_basic.py::test_subs",
        }
        for given, want in cases.items():
            got = normalize_id(given, tree, files)
            assert got == want, (given, got, want)
    assert issue_prefix("pvlib/pvlib-python") == "PVLIBP" and issue_prefix("a/x") == "XX"
    doc = {"tests": {"command": ["a", "b"], "env": {"A": "1"}, "services": [{"name": "pg", "env": {"X": "y"}}]}}
    import tomllib
    assert tomllib.loads(toml_dump(doc)) == doc, toml_dump(doc)
    print("swe_replay self-test: ok")


# --- main -------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", required=True, help="directory of the fetched mirrors")
    ap.add_argument("--instances", default=str(DEFAULT_INSTANCES))
    ap.add_argument("--only", default="", help="comma-separated instance ids (default: all)")
    ap.add_argument("--work", default="", help="work directory (default: a new /tmp/airlock-swe-replay.*)")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release"),
                    help="directory of airlock, airlock-broker, airlock-sandbox-helper")
    ap.add_argument("--scope", choices=["file", "dir"], default="file",
                    help="the full run: the F2P module and the new one (file), or their directory (dir)")
    ap.add_argument("--self-test", action="store_true", help="check the test-id conversions and exit")
    ap.add_argument("--instance-timeout", type=float, default=900, help="seconds per instance (default 900)")
    ap.add_argument("--test-timeout", type=int, default=600, help="[tests] timeout_secs (default 600)")
    ap.add_argument("--deadline-min", type=float, default=0, help="stop starting instances after M minutes")
    ap.add_argument("--table", default="", help="also write the markdown table to this file")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return

    global BINS
    bins = BINS = Path(args.bin).resolve()
    for b in ("airlock", "airlock-broker", "airlock-sandbox-helper"):
        if not (bins / b).is_file():
            sys.exit(f"swe_replay: {bins / b} is missing (cargo build --release -p airlock -p airlock-broker)")
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
        restored, lacking = restore_blobs(work, src, [i["base_commit"] for i in mine])
        srcs[repo] = src
        log(f"{repo}: mirror {mirror}, {len(mine)} base commit(s) in {src}"
            + (f"; {restored} missing blob(s) restored from the project's releases" if restored else "")
            + (f"; STILL MISSING: {', '.join(lacking)}" if lacking else ""))

    # Each instance's replay and configuration (airlock init), before the broker starts: its
    # allow_ro holds every read-only path those configurations grant.
    preps = {}
    for inst in instances:
        try:
            preps[inst["instance_id"]] = configure_instance(args, work, inst, srcs[inst["repo"]])
        except Exception as e:  # noqa: BLE001
            preps[inst["instance_id"]] = f"replay not built: {short(e, 300)}"
            log(f"{inst['instance_id']}: {preps[inst['instance_id']]}")
    ro_of = {}
    for inst in instances:
        p = preps[inst["instance_id"]]
        if not isinstance(p, str):
            ro_of.setdefault(inst["repo"], set()).update(p["cfg"]["ro"])
    repos_toml = "".join(
        f'\n[repositories."{repo}"]\nclone = {json.dumps(str(work / "clones" / (repo.replace("/", "+") + ".git")))}\n'
        f'remote = "origin"\nallow_ro = {json.dumps([str(work / "envs")] + sorted(ro_of.get(repo, ())))}\n'
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
                res = run_instance(args, work, inst, srcs[inst["repo"]], bins, deadline, preps[inst["instance_id"]])
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
        issue_id = r.get("issue_id") or (inst and f"{issue_prefix(inst['repo'])}-{r['instance'].rsplit('-', 1)[1]}")
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
