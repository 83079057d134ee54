//! Reading the output of a runner's listing command (`pytest --collect-only -q`,
//! `cargo test -- --list`, `go test -list .`, `vitest list`): the tests the suite holds.

use super::TestRunner;
use std::collections::BTreeSet;

/// The test names a listing printed, or `None` when the output is not a listing of `runner`
/// (no line of the shape it prints and no closing count). An empty set is a listing that found
/// no test.
pub fn parse_collection(runner: TestRunner, output: &str) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    let mut closing = false;
    for line in output.lines() {
        let line = line.trim_end();
        match runner {
            TestRunner::Pytest => {
                let t = line.trim();
                if (t.ends_with(" collected") || t.contains(" collected in "))
                    && (t.contains("test") || t.starts_with("no "))
                {
                    closing = true;
                } else if t.contains("::")
                    && (!t.contains(' ') || t.split(' ').next().is_some_and(|h| h.contains('[')))
                    && !t.starts_with('<')
                {
                    // A node id per line; a parameter id may hold spaces (`test_a[a b]`).
                    names.insert(t.to_string());
                }
            }
            TestRunner::Cargo => {
                if let Some(name) = line.strip_suffix(": test") {
                    names.insert(name.to_string());
                } else if line.ends_with(" benchmarks") && line.contains(" tests, ") {
                    closing = true;
                }
            }
            TestRunner::Go => {
                let t = line.trim();
                if ["Test", "Example", "Fuzz"].iter().any(|p| t.starts_with(p))
                    && !t.contains(char::is_whitespace)
                {
                    names.insert(t.to_string());
                } else if t.starts_with("ok ") || t.starts_with("ok\t") {
                    closing = true;
                }
            }
            TestRunner::Vitest => {
                let t = line.trim();
                if t.contains(" > ") {
                    names.insert(t.to_string());
                    closing = true;
                }
            }
            TestRunner::Unittest | TestRunner::Jest => return None,
        }
    }
    (closing || !names.is_empty()).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_listing() {
        let out =
            "test_six.py::test_a\ntest_six.py::TestX::test_b[1]\n\n2 tests collected in 0.03s\n";
        let got = parse_collection(TestRunner::Pytest, out).unwrap();
        assert_eq!(got.len(), 2);
        let none = parse_collection(TestRunner::Pytest, "\nno tests collected in 0.01s\n").unwrap();
        assert!(none.is_empty());
        assert!(parse_collection(TestRunner::Pytest, "ImportError: boom\n").is_none());
    }

    #[test]
    fn cargo_listing() {
        let out = "tests::a: test\nb::c: test\nbench_x: bench\n\n2 tests, 1 benchmarks\n";
        let got = parse_collection(TestRunner::Cargo, out).unwrap();
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            vec!["b::c", "tests::a"]
        );
    }

    #[test]
    fn go_listing() {
        let out = "TestA\nTestB\nExampleC\nok  \texample.com/x\t0.01s\n";
        assert_eq!(parse_collection(TestRunner::Go, out).unwrap().len(), 3);
    }
}
