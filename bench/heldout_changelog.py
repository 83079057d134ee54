#!/usr/bin/env python3
"""Held-out retrieval instances from a repository's changelog (issue 4): a measurement aid.

The dev set (`../shared/bench/swe-bench-lite-dev.jsonl`) has 22 instances, and the retrieval
weights were chosen on it. To see whether a change generalises, this script writes more
SWE-bench-style instances from repositories the weights never saw: for each non-merge commit
that adds changelog text and changes one or two non-test Python files under the source
directory, the added changelog text is the query (`problem_statement`), the commit's parent
is `base_commit`, and the diff of those source files is the gold `patch`. Release headings and
version bumps are skipped; reStructuredText roles (`:py:meth:`x``, `:issue:`12``) become plain
code spans.

A changelog entry is written by the person who fixed the bug, after the fix, so it is shorter
than an issue and names code less often (the symbol channel finds less), and a gold file the
commit creates cannot be found at its parent (as in SWE-bench, it still counts); treat the
figures as a second opinion, not as SWE-bench scores. Nothing it writes may be committed (it is built
from fetched repositories).

    # mirrors as the README says (the `fetch` tool puts them under /work/.mirror/<owner>+<name>)
    python3 bench/heldout_changelog.py --mirror /work/.mirror/pytest-dev+pytest/repo \\
        --preset pytest > /tmp/heldout/pytest.jsonl
    python3 bench/heldout_changelog.py --mirror /work/.mirror/sphinx-doc+sphinx/repo \\
        --preset sphinx > /tmp/heldout/sphinx.jsonl
    python3 bench/heldout_changelog.py --mirror /work/.mirror/pydata+xarray/repo \\
        --preset xarray > /tmp/heldout/xarray.jsonl
    # a second, disjoint sample of each: --offset 1 (pytest), 4 (sphinx), 3 (xarray)
    target/release/airlock eval retrieval --instances /tmp/heldout/pytest.jsonl \\
        --mirrors /work/.mirror
"""

import argparse
import json
import re
import subprocess
import sys

# name: (repository, changelog path regex, git pathspecs of the changelog, source prefix,
#        default step)
PRESETS = {
    "pytest": ("pytest-dev/pytest", r"^changelog/.*bugfix", ["changelog"], "src/", 3),
    "sphinx": ("sphinx-doc/sphinx", r"^CHANGES", ["CHANGES", "CHANGES.rst"], "sphinx/", 8),
    "xarray": ("pydata/xarray", r"whats-new", ["doc/whats-new.rst"], "xarray/", 6),
}


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, text=True, errors="replace", check=True
    ).stdout


def is_source(path, prefix):
    name = path.rsplit("/", 1)[-1]
    return (
        path.endswith(".py")
        and path.startswith(prefix)
        and "/test" not in path
        and not name.startswith("test")
        and name != "conftest.py"
    )


def instance(mirror, repo, commit, parent, text, gold):
    """One SWE-bench-style instance: `text` is the query, the diff of `gold` the patch."""
    return {
        "instance_id": f"{repo.replace('/', '__')}-{commit[:10]}",
        "repo": repo,
        "base_commit": parent,
        "problem_statement": text,
        "patch": git(mirror, "diff", parent, commit, "--", *gold),
    }


def clean(text):
    text = re.sub(r"(:[a-z]+)+:`~?([^`]*)`", r"`\2`", text)
    return re.sub(r"^\s*[-*]\s*", "", text, flags=re.M)


def instances(mirror, repo, changelog_re, pathspecs, prefix):
    pattern = re.compile(changelog_re)
    log = git(mirror, "log", "--no-merges", "--format=%H %P", "--", *pathspecs)
    for line in log.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        commit, parent = parts
        files = git(mirror, "diff", "--name-only", parent, commit).split()
        logs = [f for f in files if pattern.search(f)]
        gold = [f for f in files if is_source(f, prefix)]
        if not logs or not 1 <= len(gold) <= 2:
            continue
        diff = git(mirror, "diff", parent, commit, "--", *logs)
        added = [
            l[1:] for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")
        ]
        text = clean("\n".join(a for a in added if a.strip()))
        if not 60 <= len(text) <= 3000 or re.match(r"\s*(Release|Version|v?\d+\.\d+)", text):
            continue
        yield instance(mirror, repo, commit, parent, text, gold)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", required=True, help="a clone (bare or not) of the repository")
    ap.add_argument("--preset", choices=sorted(PRESETS), required=True)
    ap.add_argument("--limit", type=int, default=40, help="instances to write (default 40)")
    ap.add_argument("--step", type=int, help="keep every STEP-th candidate (preset default)")
    ap.add_argument("--offset", type=int, default=0, help="first candidate kept (default 0)")
    args = ap.parse_args()
    repo, changelog_re, pathspecs, prefix, step = PRESETS[args.preset]
    found = list(instances(args.mirror, repo, changelog_re, pathspecs, prefix))
    chosen = found[args.offset :: args.step or step][: args.limit]
    for inst in chosen:
        print(json.dumps(inst))
    print(f"{len(chosen)} of {len(found)} candidates written", file=sys.stderr)


if __name__ == "__main__":
    main()
