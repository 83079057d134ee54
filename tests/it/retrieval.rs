//! End-to-end tests of the `airlock` retrieval commands (`index`, `search`, `map`, `eval`).

use std::path::Path;
use std::process::{Command, Output};

use airlock_testkit::{git, write};

/// A small repository: a parser package, a test, a README. Returns the first commit.
fn fixture(dir: &Path) -> String {
    airlock_testkit::git::init(dir);
    write(
        dir,
        "pkg/parser.py",
        "\"\"\"Parse configuration files.\"\"\"\n\n\nclass ConfigParser:\n    \"\"\"Reads ini-style configuration.\"\"\"\n\n    def parse_section(self, text):\n        return text.strip()\n",
    );
    write(
        dir,
        "pkg/render.py",
        "from pkg.parser import ConfigParser\n\n\ndef render_table(rows):\n    \"\"\"Render rows as an ASCII table.\"\"\"\n    return ConfigParser().parse_section(str(rows))\n",
    );
    write(
        dir,
        "tests/test_parser.py",
        "from pkg.parser import ConfigParser\n\n\ndef test_parse_section():\n    assert ConfigParser().parse_section(' a ') == 'a'\n",
    );
    write(
        dir,
        "README.md",
        "# pkg\n\nConfiguration parsing and table rendering.\n",
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "one"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn airlock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn index_reports_files_and_is_incremental() {
    let repo = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    let head = fixture(repo.path());
    let (r, i) = (
        repo.path().to_str().unwrap(),
        index.path().to_str().unwrap(),
    );
    let first: serde_json::Value =
        serde_json::from_str(&stdout(&airlock(&["index", r, "--index-dir", i, "--json"]))).unwrap();
    assert_eq!(first["commit"], head.as_str());
    assert_eq!(first["files"], 4);
    assert_eq!(first["structural"], 3);
    assert_eq!(first["blobs_new"], 4);

    write(
        repo.path(),
        "pkg/render.py",
        "def render_table(rows):\n    return rows\n",
    );
    git(repo.path(), &["commit", "-q", "-am", "two"]);
    let second: serde_json::Value = serde_json::from_str(&stdout(&airlock(&[
        "index",
        r,
        "--index-dir",
        i,
        "--json",
        "--commit",
        "main",
    ])))
    .unwrap();
    assert_eq!(second["blobs_new"], 1);
    assert_eq!(second["blobs_reused"], 3);

    let text = stdout(&airlock(&["index", r, "--index-dir", i, "--commit", &head]));
    assert!(text.contains(&format!("at {head}: 4 files")), "{text}");
}

#[test]
fn search_json_lists_hits_with_channel_ranks() {
    let repo = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let (r, i) = (
        repo.path().to_str().unwrap(),
        index.path().to_str().unwrap(),
    );
    let out = stdout(&airlock(&[
        "search",
        r,
        "ConfigParser.parse_section drops whitespace",
        "--json",
        "-k",
        "3",
        "--index-dir",
        i,
    ]));
    let hits: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0]["path"], "pkg/parser.py");
    assert_eq!(hits[0]["symbol_rank"], 1);
    assert_eq!(hits[0]["is_test"], false);
    let test_hit = hits
        .iter()
        .find(|h| h["path"] == "tests/test_parser.py")
        .unwrap();
    assert_eq!(test_hit["is_test"], true);
    for key in [
        "score",
        "lexical_rank",
        "structural_rank",
        "proximity_rank",
        "line_start",
        "line_end",
        "is_vendored",
    ] {
        assert!(hits[0].get(key).is_some(), "missing {key}");
    }
}

#[test]
fn search_text_output_is_deterministic() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let r = repo.path().to_str().unwrap();
    let run = || {
        let index = tempfile::tempdir().unwrap();
        stdout(&airlock(&[
            "search",
            r,
            "render an ascii table",
            "--index-dir",
            index.path().to_str().unwrap(),
        ]))
    };
    let first = run();
    assert_eq!(first, run());
    let top = first.lines().next().unwrap();
    assert!(top.starts_with("  1. pkg/render.py:"), "{first}");
}

#[test]
fn map_fits_the_token_budget() {
    let repo = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let (r, i) = (
        repo.path().to_str().unwrap(),
        index.path().to_str().unwrap(),
    );
    let full = stdout(&airlock(&["map", r, "--index-dir", i, "--tokens", "2000"]));
    assert!(full.contains("class ConfigParser"), "{full}");
    assert!(full.contains("def render_table(rows)"), "{full}");
    for tokens in [5usize, 20, 60] {
        let map = stdout(&airlock(&[
            "map",
            r,
            "--index-dir",
            i,
            "--tokens",
            &tokens.to_string(),
            "--query",
            "render_table",
        ]));
        assert!(map.chars().count().div_ceil(4) <= tokens, "{tokens}: {map}");
    }
    let small = stdout(&airlock(&[
        "map",
        r,
        "--index-dir",
        i,
        "--tokens",
        "20",
        "--query",
        "render_table",
    ]));
    assert!(small.starts_with("pkg/render.py:\n"), "{small}");
}

#[test]
fn a_url_is_mirrored_once_into_the_cache_and_then_reused() {
    let repo = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    let head = fixture(repo.path());
    let url = format!("file://{}", repo.path().display());
    let (c, i) = (
        cache.path().to_str().unwrap(),
        index.path().to_str().unwrap(),
    );
    let first = airlock(&["index", &url, "--cache-dir", c, "--index-dir", i, "--json"]);
    let stats: serde_json::Value = serde_json::from_str(&stdout(&first)).unwrap();
    assert_eq!(stats["commit"], head.as_str());
    assert_eq!(stats["files"], 4);
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(err.contains("airlock: mirrored "), "{err}");
    let mirrors: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".git"))
        .collect();
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");

    // A later commit in the source is not fetched: the mirror is reused as it is.
    write(repo.path(), "pkg/late.py", "def late():\n    pass\n");
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "late"]);
    let second = airlock(&[
        "search",
        &url,
        "ConfigParser parse_section",
        "--json",
        "--cache-dir",
        c,
        "--index-dir",
        i,
    ]);
    let hits: serde_json::Value = serde_json::from_str(&stdout(&second)).unwrap();
    assert_eq!(hits[0]["path"], "pkg/parser.py");
    assert!(
        hits.as_array()
            .unwrap()
            .iter()
            .all(|h| h["path"] != "pkg/late.py"),
        "{hits}"
    );
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!err.contains("mirrored"), "{err}");
    let map = stdout(&airlock(&["map", &url, "--cache-dir", c, "--index-dir", i]));
    assert!(map.contains("ConfigParser"), "{map}");

    // Neither a path nor a URL: the error says so.
    let out = airlock(&["index", "no/such/repo", "--cache-dir", c, "--index-dir", i]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no/such/repo") && err.contains("no such local path, and not a URL"),
        "{err}"
    );
}

#[test]
fn not_a_repository_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = airlock(&[
        "search",
        dir.path().to_str().unwrap(),
        "x",
        "--index-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open git repository"), "{err}");
}

#[test]
fn eval_retrieval_scores_instances_against_mirrors() {
    let mirrors = tempfile::tempdir().unwrap();
    let mirror = mirrors.path().join("acme+pkg");
    std::fs::create_dir_all(&mirror).unwrap();
    let head = fixture(&mirror);
    // The first patch changes line 8 of the parser (inside `parse_section`); the second only
    // names its file (no hunk, so its window is not checked).
    let instance = |id: &str, problem: &str, file: &str| {
        let hunk = if file == "pkg/parser.py" {
            "@@ -7,2 +7,2 @@ class ConfigParser:\n     def parse_section(self, text):\n-        return text.strip()\n+        return text.strip(' ')\n"
        } else {
            ""
        };
        serde_json::json!({
            "instance_id": id, "repo": "acme/pkg", "base_commit": head,
            "problem_statement": problem,
            "patch": format!("diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n{hunk}"),
            "hints_text": "",
        })
        .to_string()
    };
    let lines = [
        instance(
            "acme__pkg-1",
            "ConfigParser.parse_section keeps inner spaces",
            "pkg/parser.py",
        ),
        instance(
            "acme__pkg-2",
            "render_table output is not an ASCII table",
            "pkg/render.py",
        ),
        // A file without definitions is never in the repository map.
        instance(
            "acme__pkg-3",
            "The README should say what the package renders",
            "README.md",
        ),
    ];
    let file = mirrors.path().join("instances.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = stdout(&airlock(&[
        "eval",
        "retrieval",
        "--instances",
        file.to_str().unwrap(),
        "--mirrors",
        mirrors.path().to_str().unwrap(),
        "--json",
    ]));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["instances"], 3);
    for channel in ["lexical", "structural", "symbol", "proximity", "fused"] {
        assert!(
            report["channels"][channel]["recall_at_10"].is_number(),
            "{channel}"
        );
    }
    for i in 0..2 {
        assert_eq!(report["results"][i]["metrics"]["fused"]["recall_at_1"], 1.0);
    }
    assert_eq!(
        report["results"][0]["gold"],
        serde_json::json!(["pkg/parser.py"])
    );
    assert_eq!(report["windows_checked"], 1);
    assert_eq!(report["window_hit_rate"], 1.0);
    assert_eq!(report["results"][0]["windows_on_change"], 1);
    assert_eq!(report["results"][1]["windows_checked"], 0);
    assert_eq!(report["results"][0]["map_names_gold"], true);
    assert_eq!(report["results"][2]["map_names_gold"], false);
    assert!((report["map_hit_rate"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);

    let text = stdout(&airlock(&[
        "eval",
        "retrieval",
        "--instances",
        file.to_str().unwrap(),
        "--mirrors",
        mirrors.path().to_str().unwrap(),
        "--limit",
        "1",
    ]));
    assert!(text.contains("instances: 1"), "{text}");
    assert!(text.contains("fused"), "{text}");
    assert!(
        text.contains("line windows: 1.000 of the 1 gold files"),
        "{text}"
    );
    assert!(
        text.contains(
            "repository map: 1.000 of the 1 instances have a gold file in the map at 2000 tokens"
        ),
        "{text}"
    );

    let missing = airlock(&[
        "eval",
        "retrieval",
        "--instances",
        file.to_str().unwrap(),
        "--mirrors",
        "/nonexistent",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no mirror of acme/pkg"));
}

#[test]
fn queries_and_revisions_that_cannot_work_get_errors_that_say_why() {
    let repo = tempfile::tempdir().unwrap();
    let idx = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let r = repo.path().to_str().unwrap();
    let i = idx.path().to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["search", r, "!!! ### ???", "--index-dir", i],
            "no searchable terms",
        ),
        (
            &["search", r, "   ", "--index-dir", i],
            "no searchable terms",
        ),
        (&["search", r, "config", "-k", "0", "--index-dir", i], "-k"),
        (&["map", r, "--tokens", "0", "--index-dir", i], "--tokens"),
        (
            &[
                "search",
                r,
                "config",
                "--commit",
                "no-such-branch",
                "--index-dir",
                i,
            ],
            "no branch, tag or commit",
        ),
        (
            &[
                "search",
                r,
                "config",
                "--commit",
                "HEAD^{tree}",
                "--index-dir",
                i,
            ],
            "does not name a commit",
        ),
    ];
    for (args, needle) in cases {
        let out = airlock(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // An empty repository says so.
    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    let out = airlock(&["index", empty.path().to_str().unwrap(), "--index-dir", i]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no commits yet"), "{err}");
}

#[test]
fn a_reader_that_goes_away_ends_search_quietly() {
    let repo = tempfile::tempdir().unwrap();
    let idx = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "search",
            repo.path().to_str().unwrap(),
            "config parse load",
            "-k",
            "50",
            "--json",
            "--index-dir",
            idx.path().to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end at once: every write of the hits meets a closed pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("error"), "{err}");
    assert!(
        matches!(out.status.code(), Some(0 | 141)),
        "{:?}: {err}",
        out.status
    );
}
