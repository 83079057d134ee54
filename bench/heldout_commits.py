#!/usr/bin/env python3
"""Held-out retrieval instances from a repository's fix commits, any language (issue 4).

`heldout_changelog.py` builds instances from Python projects' changelogs. This script checks the
other languages the engine claims (Rust, Go, Java, JavaScript/TypeScript) the same way, from
commit messages: for each non-merge commit whose subject says it fixes something and that
changes one or two non-test source files of the given extensions, the commit message (subject
and body, less a conventional-commit scope such as `fix(parser):` or `globset:`, pull-request
numbers and trailers) is the query, the commit's parent is `base_commit`, and the diff of those
source files is the gold `patch`. Documentation, CI, typo, lint, test and dependency commits are
skipped.

A commit message is written by the fixer and is usually shorter than an issue; it names code
more often than a changelog entry does. Treat the figures as a second opinion on a language,
not as SWE-bench scores. Nothing it writes may be committed (it is built from fetched
repositories).

    python3 bench/heldout_commits.py --mirror /work/.mirror/BurntSushi+ripgrep/repo \\
        --repo BurntSushi/ripgrep --ext rs > /tmp/heldout/ripgrep.jsonl
    target/release/airlock eval retrieval --instances /tmp/heldout/ripgrep.jsonl \\
        --mirrors /work/.mirror
"""

import argparse
import json
import re
import sys

from heldout_changelog import git, instance

SKIP_SUBJECT = re.compile(
    r"\b(typo|typos|doc|docs|readme|changelog|ci|lint|linter|clippy|fmt|format|formatting|"
    r"test|tests|bump|deps|dependency|dependencies|release|version|build|workflow|"
    r"spelling|grammar|warning|warnings|benchmark|example|examples)\b",
    re.I,
)
FIX_SUBJECT = re.compile(r"\b(fix|fixes|fixed|fixing|bug|bugfix|regression|crash|panic)\b", re.I)
SCOPE = re.compile(r"^\s*[\w./-]+(\([^)]*\))?!?:\s*")
TRAILER = re.compile(r"^\s*[\w-]+(-by|-authored-by)?:\s|^\s*(Fixes|Closes|Resolves|Ref|Refs|See)\b", re.I)
TEST_PART = re.compile(
    r"(^|/)(tests?|testing|testdata|__tests__|spec|specs|benches|examples?|fuzz|docs?)(/|$)"
    r"|_test\.go$|Test\.java$|Tests\.java$|(^|/)test_[^/]*$|\.(test|spec)\.[jt]sx?$",
    re.I,
)


def is_source(path, exts):
    return path.rsplit(".", 1)[-1] in exts and not TEST_PART.search(path)


def query_of(message):
    lines = message.strip().splitlines()
    if not lines:
        return ""
    subject = SCOPE.sub("", lines[0])
    body = [l for l in lines[1:] if not TRAILER.search(l)]
    text = "\n".join([subject, *body]).strip()
    text = re.sub(r"\s*\((#\d+[, ]*)+\)", "", text)
    return re.sub(r"\n{3,}", "\n\n", text)


def instances(mirror, repo, exts):
    log = git(mirror, "log", "--no-merges", "--format=%H %P")
    for line in log.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        commit, parent = parts
        message = git(mirror, "log", "-1", "--format=%B", commit)
        subject = message.strip().splitlines()[0] if message.strip() else ""
        if not FIX_SUBJECT.search(subject) or SKIP_SUBJECT.search(subject):
            continue
        files = git(mirror, "diff", "--name-only", "--diff-filter=M", parent, commit).split()
        gold = [f for f in files if is_source(f, exts)]
        if not 1 <= len(gold) <= 2:
            continue
        text = query_of(message)
        if not 30 <= len(text) <= 3000:
            continue
        yield instance(mirror, repo, commit, parent, text, gold)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", required=True, help="a clone (bare or not) of the repository")
    ap.add_argument("--repo", required=True, help="owner/name, as the instances name it")
    ap.add_argument("--ext", action="append", required=True, help="source extension (repeatable)")
    ap.add_argument("--limit", type=int, default=40, help="instances to write (default 40)")
    ap.add_argument("--step", type=int, default=1, help="keep every STEP-th candidate")
    ap.add_argument("--offset", type=int, default=0, help="first candidate kept (default 0)")
    args = ap.parse_args()
    found = []
    for inst in instances(args.mirror, args.repo, set(args.ext)):
        found.append(inst)
        if len(found) >= args.offset + args.step * args.limit:
            break
    chosen = found[args.offset :: args.step][: args.limit]
    for inst in chosen:
        print(json.dumps(inst))
    print(f"{len(chosen)} of {len(found)} candidates looked at written", file=sys.stderr)


if __name__ == "__main__":
    main()
