//! The corpus: each of the six forbidden moves in each language, and clean counterparts that
//! must not flag. Each fixture is a real git repository built here; its digest is checked
//! field by field, and the pure text path must agree with the repository path.

use std::path::Path;

use airlock_policies::{DigestReport, MoveKind, Policy};

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) base: String,
}

impl Fixture {
    /// A repository whose single commit holds `files`.
    pub(crate) fn new(files: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        for (path, content) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, content).unwrap();
        }
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree_id = index.write_tree().unwrap();
        let tree = repo.find_tree(tree_id).unwrap();
        let sig = git2::Signature::new("t", "t@example.invalid", &git2::Time::new(0, 0)).unwrap();
        let oid = repo
            .commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
        Fixture {
            dir,
            base: oid.to_string(),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, path: &str, content: &str) {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    pub(crate) fn remove(&self, path: &str) {
        std::fs::remove_file(self.dir.path().join(path)).unwrap();
    }

    pub(crate) fn digest(&self) -> DigestReport {
        Policy::default()
            .unwrap()
            .compute_digest(self.path(), &self.base)
            .unwrap()
    }
}

/// What one fixture's digest must be, field by field.
struct Expect {
    insertions: u64,
    deletions: u64,
    /// Whether the test file counts as modified (existing test lines changed).
    modified: bool,
    assertions_removed: u64,
    skip_markers_added: u64,
    kinds: Vec<MoveKind>,
}

fn expect(ins: u64, del: u64, modified: bool, kinds: &[MoveKind]) -> Expect {
    let count = |k| kinds.iter().filter(|x| **x == k).count() as u64;
    Expect {
        insertions: ins,
        deletions: del,
        modified,
        assertions_removed: count(MoveKind::AssertionRemoved),
        skip_markers_added: count(MoveKind::SkipMarkerAdded),
        kinds: kinds.to_vec(),
    }
}

/// Run one fixture: commit `before` at `path`, write `after`, compare every field.
fn run(name: &str, path: &str, before: &str, after: &str, e: &Expect) {
    let fx = Fixture::new(&[(path, before), ("README.md", "readme\n")]);
    fx.write(path, after);
    let d = fx.digest();
    let ctx = format!(
        "fixture {name} ({path})\n{}\nfindings: {:#?}",
        d.diff, d.findings
    );
    assert_eq!(d.files_changed, vec![path.to_string()], "{ctx}");
    assert_eq!(d.insertions, e.insertions, "insertions: {ctx}");
    assert_eq!(d.deletions, e.deletions, "deletions: {ctx}");
    assert!(d.test_files_added.is_empty(), "{ctx}");
    let modified: Vec<String> = if e.modified {
        vec![path.to_string()]
    } else {
        vec![]
    };
    assert_eq!(
        d.test_files_modified, modified,
        "test_files_modified: {ctx}"
    );
    assert_eq!(
        d.assertions_removed, e.assertions_removed,
        "assertions_removed: {ctx}"
    );
    assert_eq!(
        d.skip_markers_added, e.skip_markers_added,
        "skip_markers_added: {ctx}"
    );
    let mut kinds: Vec<MoveKind> = d.findings.iter().map(|f| f.kind).collect();
    kinds.sort();
    let mut want = e.kinds.clone();
    want.sort();
    assert_eq!(kinds, want, "finding kinds: {ctx}");
    for f in &d.findings {
        assert_eq!(f.file, path, "{ctx}");
        assert!(f.line > 0 && !f.excerpt.is_empty(), "{ctx}");
    }
    // The pure text path agrees with the repository path (Rust sources aside, where the
    // repository path reads whole files to find test modules).
    let pure = Policy::default()
        .unwrap()
        .digest_from_unified_diff(&d.diff)
        .unwrap();
    assert_eq!(
        pure.to_diff_digest(),
        d.to_diff_digest(),
        "pure vs git: {ctx}"
    );
    assert_eq!(pure.findings, d.findings, "pure vs git findings: {ctx}");
}

/// Apply `from -> to` (exactly once) to `base`.
fn edit(base: &str, from: &str, to: &str) -> String {
    assert_eq!(
        base.matches(from).count(),
        1,
        "fixture edit {from:?} must be unique"
    );
    base.replacen(from, to, 1)
}

use MoveKind::{
    AssertionRemoved as Removed, CatchWidened as Catch, ComparisonLoosened as Loosened,
    SkipMarkerAdded as Skip, TestInputShrunk as Shrunk, TimeoutRaised as Timeout,
};

/// (name, from, to, expected) edits of one language's base test file.
type Case = (&'static str, &'static str, &'static str, Expect);

fn run_language(path: &str, base: &str, cases: Vec<Case>) {
    for (name, from, to, e) in cases {
        run(name, path, base, &edit(base, from, to), &e);
    }
}

const PYTHON: &str = r#"import pytest
from calc import area, parse


def test_area():
    assert area(1.0) == 3.14159


def test_parse():
    with pytest.raises(ValueError):
        parse("")


def test_many():
    for i in range(10000):
        assert parse(str(i)) == i


def check_one():
    return parse("2")


@pytest.mark.timeout(5)
def test_slow():
    assert parse("1") == 1
    check_one()
"#;

#[test]
fn python_moves_and_clean_counterparts() {
    run_language(
        "tests/test_calc.py",
        PYTHON,
        vec![
            (
                "assertion deleted",
                "    assert area(1.0) == 3.14159\n",
                "    area(1.0)\n",
                expect(1, 1, true, &[Removed]),
            ),
            (
                "assertion deleted outright",
                "    assert area(1.0) == 3.14159\n",
                "",
                expect(0, 1, true, &[Removed]),
            ),
            (
                "equality to approximation",
                "== 3.14159",
                "== pytest.approx(3.14159, rel=0.1)",
                expect(1, 1, true, &[Loosened]),
            ),
            (
                "except widened",
                "pytest.raises(ValueError)",
                "pytest.raises(Exception)",
                expect(1, 1, true, &[Catch]),
            ),
            (
                "skip added",
                "\ndef test_parse():",
                "\n@pytest.mark.skip(reason=\"flaky\")\ndef test_parse():",
                expect(1, 0, false, &[Skip]),
            ),
            (
                "test disabled by rename",
                "def test_parse():",
                "def _test_parse():",
                expect(1, 1, true, &[Skip]),
            ),
            (
                "input shrunk",
                "range(10000)",
                "range(10)",
                expect(1, 1, true, &[Shrunk]),
            ),
            (
                "timeout raised",
                "timeout(5)",
                "timeout(60)",
                expect(1, 1, true, &[Timeout]),
            ),
            (
                "timeout removed",
                "@pytest.mark.timeout(5)\n",
                "",
                expect(0, 1, true, &[Timeout]),
            ),
            // Clean counterparts.
            (
                "renamed test",
                "def test_area():",
                "def test_area_of_unit_circle():",
                expect(1, 1, true, &[]),
            ),
            (
                "added assertion",
                "    assert area(1.0) == 3.14159\n",
                "    assert area(1.0) == 3.14159\n    assert area(2.0) == 12.56636\n",
                expect(1, 0, false, &[]),
            ),
            (
                "refactor moving an assertion",
                "def check_one():\n    return parse(\"2\")\n\n\n@pytest.mark.timeout(5)\ndef test_slow():\n    assert parse(\"1\") == 1\n    check_one()\n",
                "def check_one():\n    assert parse(\"1\") == 1\n    return parse(\"2\")\n\n\n@pytest.mark.timeout(5)\ndef test_slow():\n    check_one()\n",
                expect(1, 1, true, &[]),
            ),
            (
                "tightened tolerance is not loosening",
                "== 3.14159",
                "== 3.141592",
                expect(1, 1, true, &[]),
            ),
        ],
    );
}

const RUST: &str = r#"pub fn area(r: f64) -> f64 {
    3.14159 * r * r
}

pub fn helper() -> u32 {
    assert!(true);
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn area_unit() {
        assert_eq!(area(1.0), 3.14159);
    }

    #[test]
    #[should_panic(expected = "empty")]
    fn parse_empty() {
        parse("");
    }

    #[test]
    fn many() {
        for i in 0..10_000 {
            assert_eq!(parse(&i.to_string()), i);
        }
    }

    fn check_one() {
        let _ = parse("2");
    }

    #[test]
    fn slow() {
        let limit = Duration::from_millis(500);
        assert!(run_within(limit));
        check_one();
    }
}
"#;

#[test]
fn rust_moves_and_clean_counterparts_in_cfg_test_modules() {
    let cases = vec![
        (
            "assertion deleted",
            "        assert_eq!(area(1.0), 3.14159);\n",
            "        let _ = area(1.0);\n",
            expect(1, 1, true, &[Removed]),
        ),
        (
            "equality to approximation",
            "        assert_eq!(area(1.0), 3.14159);\n",
            "        assert!((area(1.0) - 3.14159).abs() < 0.1);\n",
            expect(1, 1, true, &[Loosened]),
        ),
        (
            "should_panic widened",
            "    #[should_panic(expected = \"empty\")]\n",
            "    #[should_panic]\n",
            expect(1, 1, true, &[Catch]),
        ),
        (
            "ignore added",
            "    #[test]\n    fn area_unit",
            "    #[test]\n    #[ignore]\n    fn area_unit",
            expect(1, 0, false, &[Skip]),
        ),
        (
            "input shrunk",
            "0..10_000",
            "0..10",
            expect(1, 1, true, &[Shrunk]),
        ),
        (
            "timeout raised",
            "Duration::from_millis(500)",
            "Duration::from_secs(5)",
            expect(1, 1, true, &[Timeout]),
        ),
        // Clean counterparts.
        (
            "renamed test",
            "fn area_unit()",
            "fn area_of_unit_circle()",
            expect(1, 1, true, &[]),
        ),
        (
            "added assertion",
            "        assert_eq!(area(1.0), 3.14159);\n",
            "        assert_eq!(area(1.0), 3.14159);\n        assert_eq!(area(2.0), 12.56636);\n",
            expect(1, 0, false, &[]),
        ),
        (
            "refactor moving an assertion",
            "    fn check_one() {\n        let _ = parse(\"2\");\n    }\n\n    #[test]\n    fn slow() {\n        let limit = Duration::from_millis(500);\n        assert!(run_within(limit));\n        check_one();\n",
            "    fn check_one() {\n        assert!(run_within(Duration::from_millis(500)));\n        let _ = parse(\"2\");\n    }\n\n    #[test]\n    fn slow() {\n        check_one();\n",
            // Two removed lines (the limit binding and the assertion), one added (the moved
            // assertion in its new form): replaced in the same file, so nothing is removed.
            expect(1, 2, true, &[]),
        ),
        (
            "source fix outside tests",
            "    3.14159 * r * r\n",
            "    std::f64::consts::PI * r * r\n",
            expect(1, 1, false, &[]),
        ),
        (
            "assertion removed from non-test code",
            "    assert!(true);\n",
            "",
            expect(0, 1, false, &[]),
        ),
    ];
    for (name, from, to, e) in cases {
        let after = edit(RUST, from, to);
        run_rust(name, "src/lib.rs", RUST, &after, &e);
    }
}

/// Rust in `src/` relies on reading whole files for test modules; the pure text path only has
/// hunk context, so only the repository digest is compared field by field here, and the pure
/// path is checked to agree on the counts that gate `open_pr`.
fn run_rust(name: &str, path: &str, before: &str, after: &str, e: &Expect) {
    let fx = Fixture::new(&[(path, before)]);
    fx.write(path, after);
    let d = fx.digest();
    let ctx = format!(
        "fixture {name} ({path})\n{}\nfindings: {:#?}",
        d.diff, d.findings
    );
    assert_eq!(d.files_changed, vec![path.to_string()], "{ctx}");
    assert_eq!(
        (d.insertions, d.deletions),
        (e.insertions, e.deletions),
        "{ctx}"
    );
    let modified: Vec<String> = if e.modified {
        vec![path.to_string()]
    } else {
        vec![]
    };
    assert_eq!(d.test_files_modified, modified, "{ctx}");
    assert!(d.test_files_added.is_empty(), "{ctx}");
    assert_eq!(d.assertions_removed, e.assertions_removed, "{ctx}");
    assert_eq!(d.skip_markers_added, e.skip_markers_added, "{ctx}");
    let mut kinds: Vec<MoveKind> = d.findings.iter().map(|f| f.kind).collect();
    kinds.sort();
    assert_eq!(kinds, e.kinds, "{ctx}");
}

#[test]
fn rust_moves_in_an_integration_test_file() {
    let base = RUST.replace(
        "#[cfg(test)]\nmod tests {\n    use super::*;\n",
        "mod tests {\n",
    );
    run_language(
        "tests/calc.rs",
        &base,
        vec![
            (
                "assertion deleted",
                "        assert_eq!(area(1.0), 3.14159);\n",
                "",
                expect(0, 1, true, &[Removed]),
            ),
            (
                "ignore added",
                "    #[test]\n    fn many",
                "    #[test]\n    #[ignore = \"slow\"]\n    fn many",
                expect(1, 0, false, &[Skip]),
            ),
            (
                "test disabled",
                "    #[test]\n    fn many",
                "    fn many",
                expect(0, 1, true, &[Skip]),
            ),
            (
                "input shrunk",
                "0..10_000",
                "0..100",
                expect(1, 1, true, &[Shrunk]),
            ),
        ],
    );
}

const JS: &str = r#"const { area, parse, run } = require('../src/calc');

jest.setTimeout(5000);

test('area', () => {
  expect(area(1)).toBe(3.14159);
});

test('parse empty', () => {
  expect(() => parse('')).toThrow(SyntaxError);
});

test('many', () => {
  for (let i = 0; i < 10000; i++) {
    expect(parse(String(i))).toBe(i);
  }
});

function checkOne() {
  return parse('2');
}

test('slow', async () => {
  expect(await run()).toBe(true);
  checkOne();
});
"#;

fn js_cases() -> Vec<Case> {
    vec![
        (
            "assertion deleted",
            "  expect(area(1)).toBe(3.14159);\n",
            "  area(1);\n",
            expect(1, 1, true, &[Removed]),
        ),
        (
            "equality to approximation",
            ".toBe(3.14159)",
            ".toBeCloseTo(3.14159)",
            expect(1, 1, true, &[Loosened]),
        ),
        (
            "catch widened",
            ".toThrow(SyntaxError)",
            ".toThrow()",
            expect(1, 1, true, &[Catch]),
        ),
        (
            "skip added",
            "test('area'",
            "test.skip('area'",
            expect(1, 1, true, &[Skip]),
        ),
        (
            "input shrunk",
            "i < 10000",
            "i < 10",
            expect(1, 1, true, &[Shrunk]),
        ),
        (
            "timeout raised",
            "jest.setTimeout(5000)",
            "jest.setTimeout(60000)",
            expect(1, 1, true, &[Timeout]),
        ),
        // Clean counterparts.
        (
            "renamed test",
            "test('area'",
            "test('area of the unit circle'",
            expect(1, 1, true, &[]),
        ),
        (
            "added assertion",
            "  expect(area(1)).toBe(3.14159);\n",
            "  expect(area(1)).toBe(3.14159);\n  expect(area(2)).toBe(12.56636);\n",
            expect(1, 0, false, &[]),
        ),
        (
            "refactor moving an assertion",
            "function checkOne() {\n  return parse('2');\n}\n\ntest('slow', async () => {\n  expect(await run()).toBe(true);\n  checkOne();\n",
            "async function checkOne() {\n  expect(await run()).toBe(true);\n  return parse('2');\n}\n\ntest('slow', async () => {\n  await checkOne();\n",
            expect(3, 3, true, &[]),
        ),
    ]
}

#[test]
fn javascript_moves_and_clean_counterparts() {
    run_language("src/calc.test.js", JS, js_cases());
}

#[test]
fn typescript_moves_and_clean_counterparts() {
    let ts = JS.replace(
        "const { area, parse, run } = require('../src/calc');",
        "import { area, parse, run } from '../src/calc';",
    );
    run_language("src/calc.spec.ts", &ts, js_cases());
}

const GO: &str = "package calc

import (
\t\"context\"
\t\"errors\"
\t\"fmt\"
\t\"testing\"
\t\"time\"
)

func TestArea(t *testing.T) {
\tif got := Area(1); got != 3.14159 {
\t\tt.Errorf(\"Area(1) = %v\", got)
\t}
}

func TestParseEmpty(t *testing.T) {
\t_, err := Parse(\"\")
\tif !errors.Is(err, ErrEmpty) {
\t\tt.Fatalf(\"err = %v\", err)
\t}
}

func TestMany(t *testing.T) {
\tfor i := 0; i < 10000; i++ {
\t\tif Parse(fmt.Sprint(i)) != i {
\t\t\tt.Fatal(i)
\t\t}
\t}
}

func TestTable(t *testing.T) {
\tcases := []struct {
\t\tin   string
\t\twant int
\t}{
\t\t{\"1\", 1},
\t\t{\"22\", 22},
\t}
\tfor _, c := range cases {
\t\tif Parse(c.in) != c.want {
\t\t\tt.Error(c.in)
\t\t}
\t}
}

func TestSlow(t *testing.T) {
\tctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
\tdefer cancel()
\trun(ctx)
}
";

#[test]
fn go_moves_and_clean_counterparts() {
    run_language(
        "calc/calc_test.go",
        GO,
        vec![
            (
                "assertion deleted",
                "\t\tt.Errorf(\"Area(1) = %v\", got)\n",
                "\t\t_ = got\n",
                expect(1, 1, true, &[Removed]),
            ),
            (
                "equality to approximation",
                "got != 3.14159 {",
                "math.Abs(got-3.14159) > 0.1 {",
                expect(1, 1, true, &[Loosened]),
            ),
            (
                "error check widened",
                "\tif !errors.Is(err, ErrEmpty) {",
                "\tif err == nil {",
                expect(1, 1, true, &[Catch]),
            ),
            (
                "skip added",
                "func TestArea(t *testing.T) {\n",
                "func TestArea(t *testing.T) {\n\tt.Skip(\"flaky\")\n",
                expect(1, 0, false, &[Skip]),
            ),
            (
                "input shrunk",
                "i < 10000",
                "i < 10",
                expect(1, 1, true, &[Shrunk]),
            ),
            (
                "table row removed",
                "\t\t{\"22\", 22},\n",
                "",
                expect(0, 1, true, &[Shrunk]),
            ),
            (
                "timeout raised",
                "100*time.Millisecond",
                "5*time.Second",
                expect(1, 1, true, &[Timeout]),
            ),
            // Clean counterparts.
            (
                "renamed test",
                "func TestArea(",
                "func TestAreaOfUnitCircle(",
                expect(1, 1, true, &[]),
            ),
            (
                "added assertion",
                "\t\tt.Errorf(\"Area(1) = %v\", got)\n\t}\n",
                "\t\tt.Errorf(\"Area(1) = %v\", got)\n\t}\n\tif Area(2) != 12.56636 {\n\t\tt.Error(\"Area(2)\")\n\t}\n",
                expect(3, 0, false, &[]),
            ),
            (
                "table row added",
                "\t\t{\"22\", 22},\n",
                "\t\t{\"22\", 22},\n\t\t{\"333\", 333},\n",
                expect(1, 0, false, &[]),
            ),
            (
                "equivalent timeout",
                "100*time.Millisecond",
                "time.Second / 10",
                expect(1, 1, true, &[]),
            ),
        ],
    );
}

const JAVA: &str = r#"package calc;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void area() {
        assertEquals(3.14159, Calc.area(1.0));
    }

    @Test
    void parseEmpty() {
        assertThrows(IllegalArgumentException.class, () -> Calc.parse(""));
    }

    @Test
    void many() {
        for (int i = 0; i < 10000; i++) {
            assertEquals(i, Calc.parse(String.valueOf(i)));
        }
    }

    @Test
    void slow() {
        assertTimeout(Duration.ofMillis(500), () -> Calc.run());
    }
}
"#;

#[test]
fn java_moves_and_clean_counterparts() {
    run_language(
        "src/test/java/calc/CalcTest.java",
        JAVA,
        vec![
            (
                "assertion deleted",
                "        assertEquals(3.14159, Calc.area(1.0));\n",
                "        Calc.area(1.0);\n",
                expect(1, 1, true, &[Removed]),
            ),
            (
                "equality to inequality",
                "assertEquals(3.14159, Calc.area(1.0));",
                "assertTrue(Calc.area(1.0) > 3.0);",
                expect(1, 1, true, &[Loosened]),
            ),
            (
                "catch widened",
                "assertThrows(IllegalArgumentException.class",
                "assertThrows(Exception.class",
                expect(1, 1, true, &[Catch]),
            ),
            (
                "skip added",
                "    @Test\n    void area()",
                "    @Test\n    @Disabled(\"flaky\")\n    void area()",
                expect(1, 0, false, &[Skip]),
            ),
            (
                "input shrunk",
                "i < 10000",
                "i < 10",
                expect(1, 1, true, &[Shrunk]),
            ),
            (
                "timeout raised",
                "Duration.ofMillis(500)",
                "Duration.ofSeconds(5)",
                expect(1, 1, true, &[Timeout]),
            ),
            // Clean counterparts.
            (
                "renamed test",
                "void area()",
                "void areaOfUnitCircle()",
                expect(1, 1, true, &[]),
            ),
            (
                "added assertion",
                "        assertEquals(3.14159, Calc.area(1.0));\n",
                "        assertEquals(3.14159, Calc.area(1.0));\n        assertEquals(12.56636, Calc.area(2.0));\n",
                expect(1, 0, false, &[]),
            ),
            (
                "equivalent timeout",
                "Duration.ofMillis(500)",
                "Duration.ofMillis(500L)",
                expect(1, 1, true, &[]),
            ),
        ],
    );
}

#[test]
fn comment_only_lines_never_count() {
    let base = "def test_a():\n    # assert old_behaviour()\n    assert f() == 1\n";
    run(
        "commented assertion removed",
        "tests/test_a.py",
        base,
        &edit(base, "    # assert old_behaviour()\n", ""),
        &expect(0, 1, true, &[]),
    );
}
