//! Structured reports: the JUnit XML file a runner writes at the end of a run, where it can
//! write one (pytest's `--junitxml`), read back and required to agree with the exit code and
//! with the per-test results parsed from the output. A report is written by the runner after
//! the last test, so a process that prints a fake transcript and leaves with `os._exit(0)`
//! leaves no report; one that survives to the end cannot make the runner's report disagree
//! with what it printed without the disagreement showing.
//!
//! Of the runners airlock reads, pytest (`--junitxml=PATH`) and vitest (`--reporter=junit`
//! with `--outputFile.junit=PATH`) write JUnit XML by themselves; only pytest's is asked for
//! (see [`TestRunner::with_report`]). cargo test (stable), go test, jest (only through the
//! third-party `jest-junit` reporter) and unittest have no report built in: their witness
//! steps are graded from the output and the exit code alone.

use super::{ParsedRun, TestRunner, TestStatus};
use std::collections::BTreeMap;

/// The file beside the report the witness writes before a unittest command: a JSON list of
/// the tree's paths the change touched outside its test files (empty on a pinned tree). The
/// reporter's guard reads it before any test runs.
pub const GUARD_CHANGED_SOURCE: &str = "changed-source.json";

/// The program `python -m unittest` is replaced by for a witness command: what
/// `unittest/__main__.py` does (`unittest.main(module=None)`, the arguments after the report
/// path), with a result class that notes each test's worst outcome and, once the run has
/// finished, writes them as JUnit XML (`classname` the test id up to its last `.`, `name` the
/// rest) to the path given as its first argument, then exits as `unittest` would. A process
/// that leaves before the run finishes (`os._exit`) leaves no report.
///
/// Its guard, in the process that ran the tests, snapshots `unittest.TestCase`'s functions
/// (and their code) before any test module is imported; after the run it reports, as
/// `airlock-guard-violation` properties of the report, every framework function that is not
/// its own any more, every test whose module (or defining class's module) was not loaded from
/// its own file (a hollow module put into `sys.modules`), and every test whose code comes from
/// a source file the change touched ([`GUARD_CHANGED_SOURCE`]). An `airlock-guard` property
/// says the checks ran. In-process checks bind only code that does not forge code objects'
/// file names; the broker's screening of the change is the other line.
pub const UNITTEST_REPORTER: &str = r#"import os, sys, unittest, inspect, json
def quoteattr(s):
    # xml.sax.saxutils' quoteattr, always double-quoted: that module imports urllib and
    # http.client, a third of this program's start-up, to escape a few characters.
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("\n", "&#10;"), ("\r", "&#13;"), ("\t", "&#9;")):
        s = s.replace(a, b)
    return '"' + s + '"'
# `-m` puts the working directory itself first on the path, `-c` puts "" (which follows a
# test's chdir): as `-m` does.
if sys.path and sys.path[0] == "":
    sys.path[0] = os.getcwd()
_report = sys.argv.pop(1)
sys.argv[0] = "python -m unittest"
# The guard's snapshot, taken before any test module is imported.
_real, _unwrap, _rel, _sep = os.path.realpath, inspect.unwrap, os.path.relpath, os.sep
_TC = unittest.TestCase
_pristine = {n: (v, getattr(v, "__code__", None)) for n, v in vars(_TC).items() if callable(v)}
_failure_exc = _TC.failureException
_tree = _real(os.getcwd())
try:
    with open(os.path.join(os.path.dirname(_report), "changed-source.json"), encoding="utf-8") as _g:
        _changed = {_real(os.path.join(_tree, p)) for p in json.load(_g)}
except (OSError, ValueError):
    _changed = set()
_cases = {}
_seen = {}
def _note(test, rank):
    # Named as the output parser names it: a module that failed to import by the module, a
    # class or module fixture's error (`setUpClass (pkg.mod.C)`) by `pkg.mod.C.setUpClass`.
    key = test.id()
    if key.startswith("unittest.loader._FailedTest."):
        key = key[len("unittest.loader._FailedTest."):]
    head, sep, qual = key.partition(" (")
    if sep and qual.endswith(")") and " " not in head:
        qual = qual[:-1]
        key = qual if qual == head or qual.endswith("." + head) else qual + "." + head
    _seen[key] = max(_seen.get(key, 0), rank)
    if isinstance(test, _TC):
        _cases.setdefault(key, test)
def _guard():
    bad = []
    now = vars(_TC)
    for n, (v, code) in sorted(_pristine.items()):
        w = now.get(n)
        if w is not v or getattr(w, "__code__", None) is not code:
            bad.append("unittest.TestCase.%s is not the framework's own" % n)
    if _TC.failureException is not _failure_exc:
        bad.append("unittest.TestCase.failureException is not the framework's own")
    for key, test in sorted(_cases.items()):
        cls = type(test)
        name = getattr(test, "_testMethodName", "")
        owner = next((k for k in cls.__mro__ if name in vars(k)), cls)
        for modname in sorted({cls.__module__, owner.__module__}):
            f = getattr(sys.modules.get(modname), "__file__", None)
            if not f:
                bad.append("%s: module %s was not loaded from a file" % (key, modname))
                continue
            rf = _real(f)
            own = _sep + _sep.join(modname.split("."))
            if rf.startswith(_tree + _sep) and not (rf.endswith(own + ".py") or rf.endswith(own + _sep + "__init__.py")):
                bad.append("%s: module %s was loaded from %s, not its own file" % (key, modname, _rel(rf, _tree)))
        fn = vars(owner).get(name)
        try:
            fn = _unwrap(fn)
        except ValueError:
            pass
        code = getattr(fn, "__code__", None)
        if code is not None and _real(code.co_filename) in _changed:
            bad.append("%s: its code comes from %s, a source file the change touched" % (key, _rel(_real(code.co_filename), _tree)))
    return bad
class _Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test); _note(test, 0)
    def addSkip(self, test, reason):
        super().addSkip(test, reason); _note(test, 1)
    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err); _note(test, 1)
    def addFailure(self, test, err):
        super().addFailure(test, err); _note(test, 2)
    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); _note(test, 2)
    def addError(self, test, err):
        super().addError(test, err); _note(test, 3)
    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            _note(test, 2 if issubclass(err[0], test.failureException) else 3)
class _Runner(unittest.TextTestRunner):
    resultclass = _Result
_prog = unittest.main(module=None, testRunner=_Runner, exit=False)
_tags = ["", "<skipped/>", "<failure/>", "<error/>"]
_bad = _guard()
for _b in _bad:
    sys.stderr.write("airlock guard: %s\n" % _b)
with open(_report, "w", encoding="utf-8") as _f:
    _f.write('<testsuites><testsuite><properties><property name="airlock-guard" value="checked"/>')
    for _b in _bad:
        _f.write('<property name="airlock-guard-violation" value=%s/>' % quoteattr(_b))
    _f.write("</properties>")
    for _id, _rank in sorted(_seen.items()):
        _cls, _, _name = _id.rpartition(".")
        _f.write("<testcase classname=%s name=%s>%s</testcase>" % (quoteattr(_cls), quoteattr(_name), _tags[_rank]))
    _f.write("</testsuite></testsuites>")
_r = _prog.result
if sys.version_info >= (3, 12) and _r.testsRun == 0 and not _r.skipped:
    sys.exit(5)
sys.exit(not _r.wasSuccessful())
"#;

/// The program `python -m pytest` is replaced by for a witness command where the command
/// runs pytest as a module: `pytest.main` on the arguments after the report path, with a guard
/// in the test process (its source, `pytest_guard.py` beside this file, says what it checks)
/// whose verdict it adds to the JUnit report pytest wrote (`--junitxml`, as without it), then
/// exits with pytest's code. A bare `pytest` console script is run as it is, unguarded.
pub const PYTEST_GUARD: &str = include_str!("pytest_guard.py");

/// Largest report read, in bytes: a bigger one is refused rather than parsed.
pub const MAX_REPORT_BYTES: usize = 32 * 1024 * 1024;

/// The tests of one JUnit XML report, keyed as the report names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JunitReport {
    /// `classname::name` of every `<testcase>`, with its worst status.
    pub tests: BTreeMap<String, TestStatus>,
    /// How many `<testcase>` elements the report holds.
    pub testcases: usize,
    /// The runner's guard ran its checks (an `airlock-guard` property; airlock's unittest
    /// reporter writes one).
    pub guard_checked: bool,
    /// What the runner's guard found (`airlock-guard-violation` properties).
    pub guard_violations: Vec<String>,
}

impl JunitReport {
    /// Tests that failed or errored.
    fn failures(&self) -> Vec<&str> {
        self.tests
            .iter()
            .filter(|(_, s)| matches!(s, TestStatus::Failed | TestStatus::Error))
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

impl TestRunner {
    /// `argv` with the options that make the runner write a JUnit XML report to `path`
    /// (appended, so a selected test stays where it was; for unittest, airlock's reporter in
    /// place of `-m unittest`), or `None` when the runner has no report or the command is a
    /// wrapper airlock cannot see into.
    pub fn with_report(self, argv: &[String], path: &str) -> Option<Vec<String>> {
        if Self::detect(argv) != Some(self) {
            return None;
        }
        let mut out = argv.to_vec();
        match self {
            TestRunner::Pytest => {
                if let Some(at) = out
                    .windows(2)
                    .position(|w| w[0] == "-m" && w[1] == "pytest")
                {
                    out.splice(
                        at..at + 2,
                        ["-c".to_owned(), PYTEST_GUARD.to_owned(), path.to_owned()],
                    );
                }
                out.push(format!("--junitxml={path}"));
            }
            // `python -m unittest ARGS` becomes `python -c UNITTEST_REPORTER PATH ARGS`: the
            // same loader and runner, plus a JUnit file written once the run has finished.
            TestRunner::Unittest => {
                let at = out
                    .windows(2)
                    .position(|w| w[0] == "-m" && w[1] == "unittest")?;
                out.splice(
                    at..at + 2,
                    [
                        "-c".to_owned(),
                        UNITTEST_REPORTER.to_owned(),
                        path.to_owned(),
                    ],
                );
            }
            // vitest can write one beside its verbose reporter (`--reporter=junit
            // --outputFile.junit=PATH`), but how its `classname`/`name` relate to the parser's
            // `file > describe > title` has not been checked against a real vitest here, and a
            // wrong mapping would make every honest vitest witness invalid: not asked for yet.
            TestRunner::Vitest | TestRunner::Cargo | TestRunner::Go | TestRunner::Jest => {
                return None;
            }
        }
        Some(out)
    }

    /// Whether `argv` (as [`Self::with_report`] made it) runs airlock's guard in the test
    /// process, whose verdict its report must then carry.
    pub fn guards(self, argv: &[String]) -> bool {
        argv.iter()
            .any(|word| word == UNITTEST_REPORTER || word == PYTEST_GUARD)
    }

    /// The key a JUnit report gives the test this runner's output calls `id`.
    ///
    /// pytest writes `classname` and `name` from the node id (its `mangle_test_address`): the
    /// parameter id (from the first `[`) stays with the last component; the rest splits at
    /// `::`, and the file path's `/` become `.` without the `.py`. So `a/t.py::C::f[x::y]`
    /// becomes `a.t.C` and `f[x::y]`, and a collection error of `a/t.py` has an empty
    /// `classname` and the name `a.t`. This direction is exact; the reverse is not (`a.t.C` may
    /// be the class `C` of `a/t.py` or a module `a/t/C.py`), which is why reports are compared
    /// by mapping the parsed ids to report keys, never the other way. A pinned
    /// `junit_prefix` ini option would prefix every `classname`; the report then disagrees
    /// and the run is invalid, never green.
    ///
    /// vitest's reporter names a test by its file (`classname`) and its describe path and
    /// title joined by ` > ` (`name`), which is how the parser names it too (`file > ... >
    /// title`).
    pub fn report_key(self, id: &str) -> String {
        match self {
            TestRunner::Pytest => {
                let (path, params) = match id.find('[') {
                    Some(i) => id.split_at(i),
                    None => (id, ""),
                };
                let mut names: Vec<String> = path.split("::").map(str::to_owned).collect();
                if let Some(first) = names.first_mut() {
                    let dotted = first.replace('/', ".");
                    *first = dotted.strip_suffix(".py").unwrap_or(&dotted).to_owned();
                }
                if let Some(last) = names.last_mut() {
                    last.push_str(params);
                }
                let name = names.pop().unwrap_or_default();
                format!("{}::{name}", names.join("."))
            }
            TestRunner::Unittest => match id.rsplit_once('.') {
                Some((class, name)) => format!("{class}::{name}"),
                None => format!("::{id}"),
            },
            _ => match id.split_once(" > ") {
                Some((file, rest)) => format!("{file}::{rest}"),
                None => format!("::{id}"),
            },
        }
    }
}

/// Parse a JUnit XML report (pytest's or vitest's). `Err` says why it cannot be read.
pub fn parse_junit(xml: &str) -> Result<JunitReport, String> {
    if xml.len() > MAX_REPORT_BYTES {
        return Err(format!(
            "the report is {} bytes, more than the {MAX_REPORT_BYTES} read",
            xml.len()
        ));
    }
    // DTDs (and so entity expansion) are refused by the parser's defaults.
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not well-formed XML: {e}"))?;
    let root = doc.root_element();
    if !matches!(root.tag_name().name(), "testsuites" | "testsuite") {
        return Err(format!(
            "the root element is <{}>, not <testsuites> or <testsuite>",
            root.tag_name().name()
        ));
    }
    let mut report = JunitReport::default();
    for property in root
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "property")
    {
        match property.attribute("name") {
            Some("airlock-guard") => report.guard_checked = true,
            Some("airlock-guard-violation") => report
                .guard_violations
                .push(property.attribute("value").unwrap_or("").to_owned()),
            _ => {}
        }
    }
    for case in root
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "testcase")
    {
        report.testcases += 1;
        let classname = case.attribute("classname").unwrap_or("");
        let name = case.attribute("name").unwrap_or("");
        let mut status = TestStatus::Passed;
        for child in case.children().filter(|n| n.is_element()) {
            let this = match child.tag_name().name() {
                "failure" => TestStatus::Failed,
                "error" => TestStatus::Error,
                "skipped" => TestStatus::Skipped,
                _ => continue,
            };
            status = worst(status, this);
        }
        let key = format!("{classname}::{name}");
        let entry = report.tests.entry(key).or_insert(status);
        *entry = worst(*entry, status);
    }
    Ok(report)
}

/// The worse of two statuses. A skip is worse than a pass, and a failure worse than a skip (a
/// test that failed in set-up and was then reported skipped failed).
fn worst(a: TestStatus, b: TestStatus) -> TestStatus {
    a.max(b)
}

/// Why a run's report disagrees with its exit code or with the results parsed from its
/// output, or `None` when they agree. Every test the output names must be in the report with
/// the same status, every test in the report must be named by the output, and failures in
/// the report must go with a non-zero exit code (none with zero). The tests that disagree are
/// named (the first ten). A test the report has as skipped need not be named by the output
/// (pytest's `-rA` summary names skips by file and line).
///
/// For unittest (whose report airlock's own reporter writes, naming tests as the parser does)
/// two parts are weaker, because the parser's names cannot always be matched exactly: the
/// parser tells tests that share a name apart by their description (`name [description]`),
/// which is dropped before comparing, and a test the report has but the output does not name
/// is not a disagreement here (the inventory comparison finds a pinned test missing from the
/// output); a test the output shows passing must still be in the report, passing.
///
/// A `guarded` command ([`TestRunner::guards`]: airlock's unittest reporter, or its pytest
/// guard) ran a guard in the test process: its verdict comes first, and a report without one
/// disagrees.
pub fn report_disagreement(
    runner: TestRunner,
    parsed: &ParsedRun,
    exit_code: Option<i32>,
    report: &JunitReport,
    guarded: bool,
) -> Option<String> {
    let lenient = runner == TestRunner::Unittest;
    if guarded {
        if !report.guard_checked {
            return Some(
                "the runner's guard gave no verdict (airlock's guard checks the framework and \
                 the test modules in the test process and adds its verdict to the report)"
                    .to_owned(),
            );
        }
        if !report.guard_violations.is_empty() {
            return Some(format!(
                "the runner's guard found the test process tampered with: {}",
                report.guard_violations.join("; ")
            ));
        }
    }
    let mut mapped: BTreeMap<String, (&str, TestStatus)> = BTreeMap::new();
    for (id, status) in &parsed.tests {
        let named = match id.find(" [") {
            Some(i) if lenient => &id[..i],
            _ => id.as_str(),
        };
        let key = runner.report_key(named);
        let entry = mapped.entry(key).or_insert((id.as_str(), *status));
        entry.1 = worst(entry.1, *status);
    }
    let mut problems: Vec<String> = Vec::new();
    for (key, (id, printed)) in &mapped {
        match report.tests.get(key) {
            None if lenient && *printed != TestStatus::Passed => {}
            None => problems.push(format!("{id} is in the output but not in the report")),
            Some(reported) if reported != printed => problems.push(format!(
                "{id} is {} in the output but {} in the report",
                status_word(*printed),
                status_word(*reported)
            )),
            Some(_) => {}
        }
    }
    for (key, status) in &report.tests {
        // pytest's `-rA` summary names a skipped test by its file and line, not its node id,
        // so the output never names it; a skip is never a pass, and the inventory comparison
        // already refuses a pinned test skipped in the patched run.
        if !lenient && *status != TestStatus::Skipped && !mapped.contains_key(key) {
            problems.push(format!(
                "{} is in the report but not in the output",
                key.trim_start_matches("::")
            ));
        }
    }
    let failures = report.failures();
    match exit_code {
        Some(0) if !failures.is_empty() => problems.push(format!(
            "exit code 0 but the report has failures: {}",
            failures.join(", ")
        )),
        Some(code) if code != 0 && failures.is_empty() && report.testcases > 0 => problems.push(
            format!("exit code {code} but the report has no failure or error"),
        ),
        _ => {}
    }
    if problems.is_empty() {
        return None;
    }
    let more = problems.len().saturating_sub(10);
    problems.truncate(10);
    let mut text = problems.join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    Some(format!(
        "the runner's report disagrees with its output: {text}"
    ))
}

fn status_word(status: TestStatus) -> &'static str {
    match status {
        TestStatus::Passed => "passed",
        TestStatus::Skipped => "skipped",
        TestStatus::Failed => "failed",
        TestStatus::Error => "an error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    const PYTEST_XML: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5" time="0.05"><testcase classname="tests.test_ops.TestClamp" name="test_low" time="0.001" /><testcase classname="tests.test_ops" name="test_p[a::b-1]" time="0.001"><failure message="assert 1 == 2">x</failure></testcase><testcase classname="tests.test_ops" name="test_skip" time="0.0"><skipped type="pytest.skip" message="no">s</skipped></testcase><testcase classname="" name="tests.test_broken" time="0.0"><error message="collection failure">ImportError</error></testcase><testcase classname="tests.test_ops" name="test_ok" time="0.0" /></testsuite></testsuites>"#;

    fn parsed(entries: &[(&str, TestStatus)]) -> ParsedRun {
        let mut run = ParsedRun {
            summary_seen: true,
            ..ParsedRun::default()
        };
        for (id, status) in entries {
            run.record(id, *status);
        }
        run
    }

    #[test]
    fn node_ids_map_to_pytest_report_keys() {
        let key = |id| TestRunner::Pytest.report_key(id);
        assert_eq!(
            key("tests/test_ops.py::TestClamp::test_low"),
            "tests.test_ops.TestClamp::test_low"
        );
        assert_eq!(key("tests/test_ops.py::test_ok"), "tests.test_ops::test_ok");
        // The parameter id keeps its `::` and `/`.
        assert_eq!(
            key("tests/test_ops.py::test_p[a::b-1]"),
            "tests.test_ops::test_p[a::b-1]"
        );
        assert_eq!(key("t.py::C::D::test_x[a/b.py]"), "t.C.D::test_x[a/b.py]");
        // A collection error names the file alone.
        assert_eq!(key("tests/test_broken.py"), "::tests.test_broken");
        assert_eq!(
            TestRunner::Vitest.report_key("src/a.test.ts > clamp > low"),
            "src/a.test.ts::clamp > low"
        );
    }

    #[test]
    fn a_pytest_report_is_read_with_each_test_s_worst_status() {
        let report = parse_junit(PYTEST_XML).unwrap();
        assert_eq!(report.testcases, 5);
        assert_eq!(
            report.tests.get("tests.test_ops.TestClamp::test_low"),
            Some(&TestStatus::Passed)
        );
        assert_eq!(
            report.tests.get("tests.test_ops::test_p[a::b-1]"),
            Some(&TestStatus::Failed)
        );
        assert_eq!(
            report.tests.get("tests.test_ops::test_skip"),
            Some(&TestStatus::Skipped)
        );
        assert_eq!(
            report.tests.get("::tests.test_broken"),
            Some(&TestStatus::Error)
        );
    }

    #[test]
    fn a_report_that_agrees_with_the_output_and_exit_code_passes() {
        let report = parse_junit(PYTEST_XML).unwrap();
        let run = parsed(&[
            ("tests/test_ops.py::TestClamp::test_low", TestStatus::Passed),
            ("tests/test_ops.py::test_p[a::b-1]", TestStatus::Failed),
            ("tests/test_ops.py::test_skip", TestStatus::Skipped),
            ("tests/test_broken.py", TestStatus::Error),
            ("tests/test_ops.py::test_ok", TestStatus::Passed),
        ]);
        assert_eq!(
            report_disagreement(TestRunner::Pytest, &run, Some(1), &report, false),
            None
        );
        // Failures in the report with exit code 0.
        let why = report_disagreement(TestRunner::Pytest, &run, Some(0), &report, false).unwrap();
        assert!(why.contains("exit code 0"), "{why}");
    }

    #[test]
    fn disagreements_name_the_tests() {
        let report = parse_junit(PYTEST_XML).unwrap();
        // The output claims the failing test passed and omits one, and names one the report
        // never ran.
        let run = parsed(&[
            ("tests/test_ops.py::TestClamp::test_low", TestStatus::Passed),
            ("tests/test_ops.py::test_p[a::b-1]", TestStatus::Passed),
            ("tests/test_ops.py::test_skip", TestStatus::Skipped),
            ("tests/test_broken.py", TestStatus::Error),
            ("tests/test_ops.py::test_invented", TestStatus::Passed),
        ]);
        let why = report_disagreement(TestRunner::Pytest, &run, Some(1), &report, false).unwrap();
        assert!(
            why.contains(
                "tests/test_ops.py::test_p[a::b-1] is passed in the output but failed in the report"
            ),
            "{why}"
        );
        assert!(
            why.contains("tests/test_ops.py::test_invented is in the output but not in the report"),
            "{why}"
        );
        assert!(
            why.contains("tests.test_ops::test_ok is in the report but not in the output"),
            "{why}"
        );
    }

    #[test]
    fn a_skip_the_output_does_not_name_is_no_disagreement() {
        let xml = r#"<testsuites><testsuite><testcase classname="t" name="test_a"/><testcase classname="t" name="test_s"><skipped/></testcase></testsuite></testsuites>"#;
        let report = parse_junit(xml).unwrap();
        let run = parsed(&[("t.py::test_a", TestStatus::Passed)]);
        assert_eq!(
            report_disagreement(TestRunner::Pytest, &run, Some(0), &report, false),
            None
        );
        // But a skip the output shows passing is one.
        let run = parsed(&[
            ("t.py::test_a", TestStatus::Passed),
            ("t.py::test_s", TestStatus::Passed),
        ]);
        let why = report_disagreement(TestRunner::Pytest, &run, Some(0), &report, false).unwrap();
        assert!(
            why.contains("t.py::test_s is passed in the output but skipped in the report"),
            "{why}"
        );
    }

    #[test]
    fn a_clean_report_with_a_failing_exit_code_disagrees() {
        let xml = r#"<testsuites><testsuite><testcase classname="t" name="test_a"/></testsuite></testsuites>"#;
        let report = parse_junit(xml).unwrap();
        let run = parsed(&[("t.py::test_a", TestStatus::Passed)]);
        assert_eq!(
            report_disagreement(TestRunner::Pytest, &run, Some(0), &report, false),
            None
        );
        let why = report_disagreement(TestRunner::Pytest, &run, Some(1), &report, false).unwrap();
        assert!(why.contains("exit code 1"), "{why}");
    }

    #[test]
    fn unittest_names_map_to_the_reporter_s_keys() {
        let xml = r#"<testsuites><testsuite><properties><property name="airlock-guard" value="checked"/></properties><testcase classname="tests.test_ops.T" name="test_a"></testcase><testcase classname="tests" name="test_broken"><error/></testcase></testsuite></testsuites>"#;
        let report = parse_junit(xml).unwrap();
        let run = parsed(&[
            ("tests.test_ops.T.test_a", TestStatus::Passed),
            ("tests.test_broken", TestStatus::Error),
        ]);
        assert_eq!(
            report_disagreement(TestRunner::Unittest, &run, Some(1), &report, true),
            None
        );
        // A pass the runner never reported is forged.
        let run = parsed(&[
            ("tests.test_ops.T.test_a", TestStatus::Passed),
            ("tests.test_ops.T.test_b", TestStatus::Passed),
            ("tests.test_broken", TestStatus::Error),
        ]);
        let why = report_disagreement(TestRunner::Unittest, &run, Some(1), &report, true).unwrap();
        assert!(
            why.contains("tests.test_ops.T.test_b is in the output but not in the report"),
            "{why}"
        );
    }

    #[test]
    fn a_unittest_report_without_the_guard_s_verdict_or_with_a_violation_is_refused() {
        let run = parsed(&[("tests.test_ops.T.test_a", TestStatus::Passed)]);
        let unguarded = parse_junit(
            r#"<testsuites><testsuite><testcase classname="tests.test_ops.T" name="test_a"/></testsuite></testsuites>"#,
        )
        .unwrap();
        let why =
            report_disagreement(TestRunner::Unittest, &run, Some(0), &unguarded, true).unwrap();
        assert!(why.contains("the runner's guard gave no verdict"), "{why}");
        let tampered = parse_junit(
            r#"<testsuites><testsuite><properties><property name="airlock-guard" value="checked"/><property name="airlock-guard-violation" value="unittest.TestCase.assertEqual is not the framework's own"/></properties><testcase classname="tests.test_ops.T" name="test_a"/></testsuite></testsuites>"#,
        )
        .unwrap();
        assert_eq!(
            tampered.guard_violations,
            ["unittest.TestCase.assertEqual is not the framework's own"]
        );
        let why =
            report_disagreement(TestRunner::Unittest, &run, Some(0), &tampered, true).unwrap();
        assert!(
            why.contains("tampered with: unittest.TestCase.assertEqual is not the framework's own"),
            "{why}"
        );
        // A guarded pytest command's report must carry the verdict too.
        let run = parsed(&[("t.py::test_a", TestStatus::Passed)]);
        let plain = parse_junit(
            r#"<testsuites><testsuite><testcase classname="t" name="test_a"/></testsuite></testsuites>"#,
        )
        .unwrap();
        assert!(
            report_disagreement(TestRunner::Pytest, &run, Some(0), &plain, true)
                .unwrap()
                .contains("no verdict")
        );
        // An unguarded one (a bare `pytest`) has none; its report is read as before.
        let run = parsed(&[("t.py::test_a", TestStatus::Passed)]);
        let plain = parse_junit(
            r#"<testsuites><testsuite><testcase classname="t" name="test_a"/></testsuite></testsuites>"#,
        )
        .unwrap();
        assert_eq!(
            report_disagreement(TestRunner::Pytest, &run, Some(0), &plain, false),
            None
        );
    }

    #[test]
    fn unittest_gets_airlock_s_reporter_in_place_of_its_main_module() {
        let argv = TestRunner::Unittest
            .with_report(&argv("python3 -W error -m unittest -v t.T.x"), "/r/a.xml")
            .unwrap();
        assert_eq!(argv[..3], ["python3", "-W", "error"]);
        assert_eq!(argv[3], "-c");
        assert_eq!(argv[4], UNITTEST_REPORTER);
        assert_eq!(argv[5..], ["/r/a.xml", "-v", "t.T.x"]);
    }

    #[test]
    fn what_is_not_a_report_is_refused() {
        assert!(parse_junit("PASSED everything").is_err());
        assert!(parse_junit("<html/>").unwrap_err().contains("<html>"));
        let dtd = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]><testsuites>&lol;</testsuites>"#;
        assert!(parse_junit(dtd).is_err());
    }

    #[test]
    fn report_options_are_added_where_the_runner_has_a_report() {
        // `python -m pytest` runs through airlock's guard; a bare console script as it is.
        let guarded = TestRunner::Pytest
            .with_report(&argv("python3 -m pytest -rA t.py::x"), "/r/a.xml")
            .unwrap();
        assert_eq!(guarded[..2], ["python3", "-c"]);
        assert_eq!(guarded[2], PYTEST_GUARD);
        assert_eq!(
            guarded[3..],
            ["/r/a.xml", "-rA", "t.py::x", "--junitxml=/r/a.xml"]
        );
        assert!(TestRunner::Pytest.guards(&guarded));
        let bare = TestRunner::Pytest
            .with_report(&argv("pytest -rA t.py::x"), "/r/a.xml")
            .unwrap();
        assert_eq!(bare, argv("pytest -rA t.py::x --junitxml=/r/a.xml"));
        assert!(!TestRunner::Pytest.guards(&bare));
        for (runner, cmd) in [
            (TestRunner::Cargo, "cargo test"),
            (TestRunner::Go, "go test -v ./..."),
            (TestRunner::Jest, "npx jest --verbose"),
            (TestRunner::Vitest, "npx vitest run --reporter=verbose"),
            (TestRunner::Pytest, "make test"),
        ] {
            assert_eq!(runner.with_report(&argv(cmd), "/r/a.xml"), None, "{cmd}");
        }
    }
}
