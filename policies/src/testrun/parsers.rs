//! One parser per runner. Hand-written line matchers: each recognises the runner's per-test lines
//! and its closing summary, and nothing else.

use super::{ParsedRun, TestStatus};

/// `python -m unittest -v`: `name (module.Class.name) ... ok`, the `FAIL: ...` / `ERROR: ...`
/// headers of the failure report, and the `Ran N tests` / `OK` / `FAILED (...)` summary.
pub(super) fn unittest(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    for line in output.lines() {
        let line = line.trim_end();
        if line.starts_with("Ran ") && (line.contains(" test in ") || line.contains(" tests in ")) {
            run.summary_seen = true;
            continue;
        }
        for (prefix, status) in [
            ("FAIL: ", TestStatus::Failed),
            ("ERROR: ", TestStatus::Error),
        ] {
            if let Some(rest) = line.strip_prefix(prefix)
                && let Some(name) = unittest_name(rest)
            {
                run.record(&name, status);
            }
        }
        if let Some((head, tail)) = line.rsplit_once(" ... ") {
            let status = match tail.trim() {
                "ok" => Some(TestStatus::Passed),
                "FAIL" | "unexpected success" => Some(TestStatus::Failed),
                "ERROR" => Some(TestStatus::Error),
                t if t.starts_with("skipped") || t == "expected failure" => {
                    Some(TestStatus::Skipped)
                }
                _ => None,
            };
            if let (Some(status), Some(name)) = (status, unittest_name(head)) {
                run.record(&name, status);
            }
        }
    }
    run
}

/// `test_x (pkg.mod.Class.test_x)` (3.11+) or `test_x (pkg.mod.Class)` (older) -> the dotted name.
fn unittest_name(text: &str) -> Option<String> {
    let text = text.trim();
    let open = text.find(" (")?;
    let method = &text[..open];
    let rest = &text[open + 2..];
    let close = rest.find(')')?;
    let qual = &rest[..close];
    // A module that failed to import is reported as a test of `unittest.loader._FailedTest`.
    if let Some(module) = qual.strip_prefix("unittest.loader._FailedTest.") {
        return (!module.is_empty()).then(|| module.to_owned());
    }
    if method.is_empty() || method.contains(' ') || qual.is_empty() || qual.contains(' ') {
        return None;
    }
    if qual.ends_with(&format!(".{method}")) || qual == method {
        Some(qual.to_owned())
    } else {
        Some(format!("{qual}.{method}"))
    }
}

/// pytest: `-rA` summary lines (`PASSED node`, `FAILED node - msg`, `ERROR node`), verbose lines
/// (`node PASSED [ 50%]`), and the closing `==== 1 failed, 2 passed in 0.1s ====` line.
pub(super) fn pytest(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    for line in output.lines() {
        let line = line.trim_end();
        if line.starts_with('=')
            && line.ends_with('=')
            && (line.contains(" passed")
                || line.contains(" failed")
                || line.contains(" error")
                || line.contains(" skipped")
                || line.contains("no tests ran"))
            && line.contains(" in ")
        {
            run.summary_seen = true;
            continue;
        }
        let status_of = |word: &str| match word {
            "PASSED" | "XPASS" => Some(TestStatus::Passed),
            "FAILED" => Some(TestStatus::Failed),
            "ERROR" => Some(TestStatus::Error),
            "SKIPPED" | "XFAIL" => Some(TestStatus::Skipped),
            _ => None,
        };
        let mut words = line.split_whitespace();
        let (Some(first), second) = (words.next(), words.next()) else {
            continue;
        };
        if let (Some(status), Some(node)) = (status_of(first), second)
            && node.contains("::")
        {
            run.record(node, status);
        } else if let (true, Some(word)) = (first.contains("::"), second)
            && let Some(status) = status_of(word)
        {
            run.record(first, status);
        }
    }
    run
}

/// `cargo test`: `test path::name ... ok|FAILED|ignored` and `test result: ...`.
pub(super) fn cargo(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    for line in output.lines() {
        let line = line.trim_end();
        if line.starts_with("test result: ") {
            run.summary_seen = true;
            continue;
        }
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some((name, tail)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        let status = match tail.trim() {
            "ok" => TestStatus::Passed,
            "FAILED" => TestStatus::Failed,
            t if t.starts_with("ignored") => TestStatus::Skipped,
            _ => continue,
        };
        if !name.contains(' ') {
            run.record(name, status);
        }
    }
    run
}

/// `go test -v`: `--- PASS: TestX (0.00s)` (and FAIL, SKIP; subtests indented), with the package
/// lines `ok  pkg 0.1s` / `FAIL pkg` / `PASS` / `FAIL` as the summary.
pub(super) fn go(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    for line in output.lines() {
        let trimmed = line.trim();
        if trimmed == "PASS"
            || trimmed == "FAIL"
            || line.starts_with("ok  \t")
            || line.starts_with("ok \t")
            || line.starts_with("FAIL\t")
        {
            run.summary_seen = true;
            continue;
        }
        for (prefix, status) in [
            ("--- PASS: ", TestStatus::Passed),
            ("--- FAIL: ", TestStatus::Failed),
            ("--- SKIP: ", TestStatus::Skipped),
        ] {
            if let Some(rest) = trimmed.strip_prefix(prefix)
                && let Some(name) = rest.split_whitespace().next()
            {
                run.record(name, status);
            }
        }
    }
    run
}

/// jest `--verbose` (`✓ title (3 ms)`, `✕ title`, `○ skipped title`) and vitest's verbose reporter
/// (`✓ file > suite > title 2ms`, `× ...`, `↓ ...`), with `Tests:` / `Tests  ` as the summary.
pub(super) fn jest_vitest(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    for line in output.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("Tests:") || trimmed.starts_with("Tests  ") {
            run.summary_seen = true;
            continue;
        }
        let mut chars = trimmed.chars();
        let Some(mark) = chars.next() else { continue };
        let status = match mark {
            '✓' | '√' => TestStatus::Passed,
            '✕' | '×' => TestStatus::Failed,
            '○' | '↓' => TestStatus::Skipped,
            _ => continue,
        };
        let mut title = chars.as_str().trim();
        title = title.strip_prefix("skipped ").unwrap_or(title);
        title = strip_duration(title);
        run.record(title, status);
    }
    run
}

/// Drop a trailing duration: ` (3 ms)`, ` 12ms`, ` [12.00ms]`.
fn strip_duration(title: &str) -> &str {
    let t = title.trim_end();
    if (t.ends_with("ms)") || t.ends_with(" s)"))
        && let Some(i) = t.rfind(" (")
    {
        return &t[..i];
    }
    if let Some((head, last)) = t.rsplit_once(' ')
        && last.ends_with("ms")
        && last[..last.len() - 2]
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
        && last.len() > 2
    {
        return head;
    }
    t
}
