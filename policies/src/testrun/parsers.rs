//! One parser per runner. Hand-written line matchers: each recognises the runner's per-test lines
//! and its closing summary, and nothing else.

use super::{ParsedRun, TestStatus};
use std::collections::BTreeMap;

/// `python -m unittest -v`: `name (module.Class.name) ... ok`, the `FAIL: ...` / `ERROR: ...`
/// headers of the failure report, and the `Ran N tests` / `OK` / `FAILED (...)` summary.
///
/// A test with a docstring (or its own `shortDescription`) is reported on two lines, its name
/// and then `description ... ok`. Tests generated from data often share one name
/// (`runTest (pkg.mod.Case.runTest)` for every row of a table): those are told apart by their
/// description, `pkg.mod.Case.runTest [description]`; a name reported once keeps its plain
/// form. One test reported twice with different statuses counts as the worst of them (a patch
/// can print its own `ok` lines).
pub(super) fn unittest(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    // (name, description) -> worst status.
    let mut seen: BTreeMap<(String, Option<String>), TestStatus> = BTreeMap::new();
    let mut add = |name: String, description: Option<&str>, status: TestStatus| {
        let description = description.map(str::trim).filter(|d| !d.is_empty());
        let entry = seen
            .entry((name, description.map(str::to_owned)))
            .or_insert(status);
        if status > *entry {
            *entry = status;
        }
    };
    // A name line whose `description ... status` line comes next.
    let mut pending: Option<String> = None;
    // A `FAIL:` / `ERROR:` header whose description line (if any) comes next.
    let mut header: Option<(String, TestStatus)> = None;
    // The traceback of a `FAIL:` / `ERROR:` block: its test, whether the `----` line under the
    // header was seen, and its last line so far (the exception: the reason).
    let mut traceback: Option<(String, bool, Option<String>)> = None;
    for line in output.lines() {
        let line = line.trim_end();
        if let Some((name, started, last)) = &mut traceback {
            let ends = line.starts_with("====")
                || line.starts_with("Ran ")
                || (*started && line.starts_with("----"));
            if ends {
                if let Some(reason) = last.take() {
                    run.reasons.entry(name.clone()).or_insert(reason);
                }
                traceback = None;
            } else if line.starts_with("----") {
                *started = true;
            } else if *started && !line.trim().is_empty() {
                *last = Some(line.trim().to_string());
            }
        }
        if line.starts_with("Ran ") && (line.contains(" test in ") || line.contains(" tests in ")) {
            run.summary_seen = true;
            if let Some(n) = line
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
            {
                run.counts.insert("ran".into(), n);
            }
            pending = None;
            continue;
        }
        if let Some((name, status)) = header.take() {
            if line.is_empty() || line.starts_with("----") || line.starts_with("====") {
                add(name, None, status);
            } else {
                add(name, Some(line), status);
                continue;
            }
        }
        let failure = [
            ("FAIL: ", TestStatus::Failed),
            ("ERROR: ", TestStatus::Error),
        ]
        .into_iter()
        .find_map(|(prefix, status)| {
            let name = unittest_name(line.strip_prefix(prefix)?)?;
            Some((name, status))
        });
        if let Some(failure) = failure {
            traceback = Some((failure.0.clone(), false, None));
            header = Some(failure);
            pending = None;
            continue;
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
            if let Some(status) = status {
                match pending.take() {
                    Some(name) => add(name, Some(head), status),
                    None => {
                        if let Some(name) = unittest_name(head) {
                            add(name, None, status);
                        }
                    }
                }
                continue;
            }
        }
        pending = unittest_name(line).filter(|_| !line.contains(" ... "));
    }
    if let Some((name, status)) = header {
        add(name, None, status);
    }
    let mut reports: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in seen.keys() {
        *reports.entry(name.as_str()).or_default() += 1;
    }
    for ((name, description), status) in &seen {
        if reports[name.as_str()] == 1 {
            run.record(name, *status);
        } else {
            let description = description.as_deref().unwrap_or("");
            run.record(&format!("{name} [{description}]"), *status);
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
            run.counts = pytest_counts(line);
            continue;
        }
        let status_of = |word: &str| match word {
            "PASSED" | "XPASS" => Some(TestStatus::Passed),
            "FAILED" => Some(TestStatus::Failed),
            "ERROR" => Some(TestStatus::Error),
            "SKIPPED" | "XFAIL" => Some(TestStatus::Skipped),
            _ => None,
        };
        // `-rA`: `PASSED node`, `FAILED node - message`.
        if let Some((first, rest)) = line.split_once(' ')
            && let Some(status) = status_of(first)
            && let Some(node) = pytest_node(rest.trim_start())
        {
            run.record(node, status);
            if matches!(status, TestStatus::Failed | TestStatus::Error)
                && let Some(message) = rest.trim_start()[node.len()..].strip_prefix(" - ")
                && !message.trim().is_empty()
            {
                run.reasons
                    .entry(node.trim().to_string())
                    .or_insert_with(|| message.trim().to_string());
            }
            continue;
        }
        // Verbose: `node PASSED [ 50%]`.
        let core = match line.rfind(" [") {
            Some(i) if line.ends_with("%]") => line[..i].trim_end(),
            _ => line,
        };
        if let Some((node, word)) = core.rsplit_once(' ')
            && let Some(status) = status_of(word)
            && let Some(node) = pytest_node(node.trim())
        {
            run.record(node, status);
        }
    }
    run
}

/// The counts of pytest's final line, `=== 3 passed, 15 skipped, 2 xfailed in 1.20s ===`, by
/// word (`error` and `errors` both counted as `errors`, `warning(s)` left out).
fn pytest_counts(line: &str) -> std::collections::BTreeMap<String, u64> {
    let inner = line.trim_matches(|c: char| c == '=' || c.is_whitespace());
    let body = inner.rsplit_once(" in ").map_or(inner, |(b, _)| b);
    let mut out = std::collections::BTreeMap::new();
    for part in body.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(word)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else {
            continue;
        };
        let word = match word {
            "error" | "errors" => "errors",
            "warning" | "warnings" => continue,
            w => w,
        };
        *out.entry(word.to_string()).or_insert(0) += n;
    }
    out
}

/// The node id at the start of `text`: `path::name`, with a parameter id in brackets that may
/// hold spaces (`test_a[a b]`), up to a following ` - message`.
fn pytest_node(text: &str) -> Option<&str> {
    let first_space = text.find(' ').unwrap_or(text.len());
    let head = &text[..first_space];
    if !head.contains("::") {
        return None;
    }
    let Some(open) = head.find('[') else {
        return Some(head);
    };
    if head.ends_with(']') && head[open..].matches('[').count() == head[open..].matches(']').count()
    {
        return Some(head);
    }
    // The parameter id runs on past spaces: to the `]` that ends the line or precedes ` - `.
    if text.ends_with(']') && !text.contains("] - ") {
        return Some(text);
    }
    let end = text.find("] - ")?;
    Some(&text[..=end])
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
///
/// jest prints a title alone, under its file's `PASS file` / `FAIL file` header and its
/// `describe` blocks (two spaces of indentation per level); a title alone is not unique (most
/// suites have many `works`), so jest tests are named as vitest names them:
/// `file > describe > title`.
pub(super) fn jest_vitest(output: &str) -> ParsedRun {
    let mut run = ParsedRun::default();
    // jest only: the current file and the open describe blocks (indentation, name).
    let mut file: Option<String> = None;
    let mut blocks: Vec<(usize, String)> = Vec::new();
    for line in output.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("Tests:") || trimmed.starts_with("Tests  ") {
            run.summary_seen = true;
            file = None;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        // `PASS file` (` PASS  file` on a terminal).
        if indent <= 1
            && let Some(rest) = trimmed
                .strip_prefix("PASS ")
                .or_else(|| trimmed.strip_prefix("FAIL "))
        {
            file = rest.split_whitespace().next().map(str::to_owned);
            blocks.clear();
            continue;
        }
        let mut chars = trimmed.chars();
        let Some(mark) = chars.next() else { continue };
        let status = match mark {
            '✓' | '√' => TestStatus::Passed,
            '✕' | '×' => TestStatus::Failed,
            '○' | '↓' => TestStatus::Skipped,
            _ => {
                // Inside a jest file's results, an indented line without a mark opens a
                // describe block; the failure details (`●` ...) end the list.
                if file.is_some() && indent >= 2 && mark != '●' {
                    blocks.retain(|(at, _)| *at < indent);
                    blocks.push((indent, trimmed.to_owned()));
                } else if mark == '●' {
                    file = None;
                }
                continue;
            }
        };
        let mut title = chars.as_str().trim();
        title = title.strip_prefix("skipped ").unwrap_or(title);
        title = strip_duration(title);
        match &file {
            Some(file) => {
                blocks.retain(|(at, _)| *at < indent);
                let mut name = file.clone();
                for (_, block) in &blocks {
                    name.push_str(" > ");
                    name.push_str(block);
                }
                name.push_str(" > ");
                name.push_str(title);
                run.record(&name, status);
            }
            None => run.record(title, status),
        }
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
