//! The weakenings the first detectors missed, in each language where the move exists: an
//! assertion's comparison dropped, a dead guard, an early return before the assertions and a
//! tautological assertion. Each is counted in the digest field the schema bounds at 0
//! (`assertions_removed` or `skip_markers_added`) and named by file, line and rule; the
//! honest controls count nothing.

use airlock_policies::{DigestReport, MoveKind, Policy};

use crate::digest_corpus::Fixture;

/// Commit `before` at `path`, write `after`, and return the digest (checked against the pure
/// text path).
fn digest(path: &str, before: &str, after: &str) -> DigestReport {
    let fx = Fixture::new(&[(path, before)]);
    fx.write(path, after);
    let d = fx.digest();
    let pure = Policy::default()
        .unwrap()
        .digest_from_unified_diff(&d.diff)
        .unwrap();
    assert_eq!(pure.to_diff_digest(), d.to_diff_digest(), "{}", d.diff);
    assert_eq!(pure.findings, d.findings, "{}", d.diff);
    d
}

/// `(name, from, to, rule that must fire (or None for a control), counted kind)`.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    MoveKind,
);

fn check(path: &str, base: &str, cases: &[Case]) {
    for (name, from, to, rule, kind) in cases {
        assert_eq!(base.matches(from).count(), 1, "{name}: edit must be unique");
        let after = base.replacen(from, to, 1);
        let d = digest(path, base, &after);
        let ctx = format!("{name}\n{}\nfindings: {:#?}", d.diff, d.findings);
        let counted = d.assertions_removed + d.skip_markers_added;
        match rule {
            Some(rule) => {
                let finding = d
                    .findings
                    .iter()
                    .find(|f| f.rule == *rule)
                    .unwrap_or_else(|| panic!("{rule} must fire: {ctx}"));
                assert_eq!(finding.kind, *kind, "{ctx}");
                assert_eq!(finding.file, path, "{ctx}");
                let line = after.lines().nth(finding.line - 1).unwrap_or("");
                assert!(
                    finding.excerpt.contains(line.trim()) || line.contains(&finding.excerpt),
                    "the finding names the weakening's own line {line:?}: {ctx}"
                );
                let field = match kind {
                    MoveKind::AssertionRemoved => d.assertions_removed,
                    MoveKind::SkipMarkerAdded => d.skip_markers_added,
                    other => panic!("{other:?} is not a counted kind"),
                };
                // At least this one: a guard may also replace a comparison (`if false {` in
                // place of `if got != 4 {`), which is a second true finding.
                assert!(field >= 1, "{ctx}");
            }
            None => assert_eq!(counted, 0, "control: {ctx}"),
        }
    }
}

use MoveKind::{AssertionRemoved as Removed, SkipMarkerAdded as Skip};

const PYTHON: &str = r#"import unittest

from calc import f


def test_f():
    assert f(2) == 4
    assert f(3) == 9


class TestF(unittest.TestCase):
    def test_eq(self):
        self.assertEqual(f(2), 4)
"#;

#[test]
fn python_gaps_are_counted_and_controls_are_not() {
    check(
        "tests/test_calc.py",
        PYTHON,
        &[
            (
                "comparison dropped",
                "    assert f(2) == 4\n",
                "    assert f(2)\n",
                Some("py-comparison-dropped"),
                Removed,
            ),
            (
                "comparison dropped to a bare True",
                "    assert f(2) == 4\n",
                "    assert True\n",
                Some("py-comparison-dropped"),
                Removed,
            ),
            (
                "comparison dropped to a presence check",
                "    assert f(2) == 4\n",
                "    assert f(2) is not None\n",
                Some("py-comparison-to-presence"),
                Removed,
            ),
            (
                "unittest comparison dropped",
                "assertEqual(f(2), 4)",
                "assertTrue(f(2))",
                Some("py-unittest-comparison-dropped"),
                Removed,
            ),
            (
                "if False guard",
                "    assert f(2) == 4\n",
                "    if False:\n        assert f(2) == 4\n",
                Some("py-dead-guard"),
                Skip,
            ),
            (
                "if 0 guard",
                "    assert f(2) == 4\n",
                "    if 0:\n        assert f(2) == 4\n",
                Some("py-dead-guard"),
                Skip,
            ),
            (
                "if None guard",
                "    assert f(2) == 4\n",
                "    if None:\n        assert f(2) == 4\n",
                Some("py-dead-guard"),
                Skip,
            ),
            (
                "while False guard",
                "    assert f(2) == 4\n",
                "    while False:\n        assert f(2) == 4\n",
                Some("py-dead-guard"),
                Skip,
            ),
            (
                "early return in a function",
                "def test_f():\n",
                "def test_f():\n    return\n",
                Some("py-early-return"),
                Skip,
            ),
            (
                "early return in a method",
                "    def test_eq(self):\n",
                "    def test_eq(self):\n        return None\n",
                Some("py-early-return"),
                Skip,
            ),
            (
                "one-line always-true return",
                "def test_f():\n",
                "def test_f():\n    if True: return\n",
                Some("py-dead-guard"),
                Skip,
            ),
            (
                "unittest tautology",
                "assertEqual(f(2), 4)",
                "assertEqual(f(2), f(2))",
                Some("py-same-operands"),
                Removed,
            ),
            (
                "assert tautology",
                "    assert f(3) == 9\n",
                "    assert f(3) == f(3)\n",
                Some("py-same-operands-compare"),
                Removed,
            ),
            // Honest controls.
            (
                "a changed expected value",
                "assertEqual(f(2), 4)",
                "assertEqual(f(2), 5)",
                None,
                Removed,
            ),
            (
                "a comparison kept",
                "    assert f(2) == 4\n",
                "    assert f(2) == 2 * 2\n",
                None,
                Removed,
            ),
            (
                "a conditional return",
                "def test_f():\n",
                "def test_f():\n    if not HAVE_F:\n        return\n",
                None,
                Removed,
            ),
            (
                "a helper that returns",
                "\n\nclass TestF",
                "\n\ndef helper():\n    return f(2)\n\n\nclass TestF",
                None,
                Removed,
            ),
        ],
    );
}

const JS: &str = "const { f } = require('../calc');

test('f', () => {
  expect(f(2)).toBe(4);
  assert.strictEqual(f(3), 9);
});
";

#[test]
fn javascript_gaps_are_counted_and_controls_are_not() {
    for path in ["tests/calc.test.js", "tests/calc.test.ts"] {
        check(
            path,
            JS,
            &[
                (
                    "comparison dropped",
                    "toBe(4)",
                    "toBeTruthy()",
                    Some("js-comparison-dropped"),
                    Removed,
                ),
                (
                    "if (false) guard",
                    "  expect(f(2)).toBe(4);\n",
                    "  if (false) {\n    expect(f(2)).toBe(4);\n  }\n",
                    Some("js-dead-guard"),
                    Skip,
                ),
                (
                    "early return",
                    "test('f', () => {\n",
                    "test('f', () => {\n  return;\n",
                    Some("js-early-return"),
                    Skip,
                ),
                (
                    "tautology",
                    "expect(f(2)).toBe(4)",
                    "expect(f(2)).toBe(f(2))",
                    Some("js-same-operands"),
                    Removed,
                ),
                (
                    "assert tautology",
                    "assert.strictEqual(f(3), 9)",
                    "assert.strictEqual(f(3), f(3))",
                    Some("js-same-operands-assert"),
                    Removed,
                ),
                (
                    "a changed expected value",
                    "toBe(4)",
                    "toBe(2 + 2)",
                    None,
                    Removed,
                ),
                (
                    "a guarded return",
                    "test('f', () => {\n",
                    "test('f', () => {\n  if (!f) {\n    return;\n  }\n",
                    None,
                    Removed,
                ),
            ],
        );
    }
}

const RUST: &str = "use calc::f;

#[test]
fn f_of_two() {
    assert_eq!(f(2), 4);
    assert!(f(3) == 9);
}
";

#[test]
fn rust_gaps_are_counted_and_controls_are_not() {
    check(
        "tests/calc.rs",
        RUST,
        &[
            (
                "comparison dropped",
                "assert!(f(3) == 9);",
                "assert!(valid(3));",
                Some("rust-comparison-dropped"),
                Removed,
            ),
            (
                "if false guard",
                "    assert_eq!(f(2), 4);\n",
                "    if false {\n        assert_eq!(f(2), 4);\n    }\n",
                Some("rust-dead-guard"),
                Skip,
            ),
            (
                "early return",
                "fn f_of_two() {\n",
                "fn f_of_two() {\n    return;\n",
                Some("rust-early-return"),
                Skip,
            ),
            (
                "tautology",
                "assert_eq!(f(2), 4)",
                "assert_eq!(f(2), f(2))",
                Some("rust-same-operands"),
                Removed,
            ),
            (
                "assert! tautology",
                "assert!(f(3) == 9)",
                "assert!(f(3) == f(3))",
                Some("rust-same-operands-compare"),
                Removed,
            ),
            (
                "a changed expected value",
                "assert_eq!(f(2), 4)",
                "assert_eq!(f(2), 2 + 2)",
                None,
                Removed,
            ),
            (
                "a guarded return",
                "fn f_of_two() {\n",
                "fn f_of_two() {\n    if cfg!(miri) {\n        return;\n    }\n",
                None,
                Removed,
            ),
        ],
    );
}

const GO: &str = "package calc

import \"testing\"

func TestF(t *testing.T) {
\tif got := F(2); got != 4 {
\t\tt.Errorf(\"F(2) = %d\", got)
\t}
}
";

#[test]
fn go_gaps_are_counted_and_controls_are_not() {
    check(
        "calc_test.go",
        GO,
        &[
            (
                "comparison dropped to a truthiness check",
                "\tif got := F(2); got != 4 {\n",
                "\tif !ok {\n",
                Some("go-comparison-dropped"),
                Removed,
            ),
            (
                "if false guard",
                "\tif got := F(2); got != 4 {\n\t\tt.Errorf(\"F(2) = %d\", got)\n\t}\n",
                "\tif false {\n\t\tif got := F(2); got != 4 {\n\t\t\tt.Errorf(\"F(2) = %d\", got)\n\t\t}\n\t}\n",
                Some("go-dead-guard"),
                Skip,
            ),
            (
                "early return",
                "func TestF(t *testing.T) {\n",
                "func TestF(t *testing.T) {\n\treturn\n",
                Some("go-early-return"),
                Skip,
            ),
            (
                "tautology",
                "got != 4 {",
                "got != F(2) {",
                Some("go-same-operands-compare"),
                Removed,
            ),
            (
                "a changed expected value",
                "got != 4 {",
                "got != 2*2 {",
                None,
                Removed,
            ),
            (
                "a guarded return",
                "func TestF(t *testing.T) {\n",
                "func TestF(t *testing.T) {\n\tif testing.Short() {\n\t\treturn\n\t}\n",
                None,
                Removed,
            ),
        ],
    );
}

#[test]
fn a_new_test_file_that_returns_before_its_assertions_counts_and_an_ordinary_one_does_not() {
    let fx = Fixture::new(&[("README.md", "x\n")]);
    fx.write(
        "tests/test_new.py",
        "from calc import f\n\n\ndef helper():\n    return f(2)\n\n\ndef test_new():\n    assert helper() == 4\n",
    );
    let d = fx.digest();
    assert_eq!(
        (d.assertions_removed, d.skip_markers_added),
        (0, 0),
        "{:#?}",
        d.findings
    );
    fx.write(
        "tests/test_new.py",
        "from calc import f\n\n\ndef test_new():\n    return\n    assert f(2) == 4\n",
    );
    let d = fx.digest();
    assert_eq!(d.skip_markers_added, 1, "{:#?}", d.findings);
    assert_eq!(d.findings[0].rule, "py-early-return");
    assert_eq!(
        (d.findings[0].file.as_str(), d.findings[0].line),
        ("tests/test_new.py", 5)
    );
}

#[test]
fn dead_code_that_only_moved_is_not_counted_again() {
    let base =
        "def test_a():\n    return\n    assert 1 == 2\n\n\ndef test_b():\n    assert 2 == 2\n";
    let moved =
        "def test_b():\n    assert 2 == 2\n\n\ndef test_a():\n    return\n    assert 1 == 2\n";
    let d = digest("tests/test_m.py", base, moved);
    assert_eq!(d.skip_markers_added, 0, "{:#?}", d.findings);
}

#[test]
fn pep8_none_comparisons_are_not_weakenings() {
    let base = "def test_none():\n    assert f(4) != None\n    assert g(4) == None\n";
    let after = "def test_none():\n    assert f(4) is not None\n    assert g(4) is None\n";
    let d = digest("tests/test_none.py", base, after);
    assert_eq!(
        (d.assertions_removed, d.skip_markers_added),
        (0, 0),
        "{:#?}",
        d.findings
    );
}
