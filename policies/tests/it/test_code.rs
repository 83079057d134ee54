//! Test infrastructure written as test files, and test files that patch the code under test
//! at import time: which rule fires, on which line, and what it does; honest test files and
//! the same code inside a test function fire nothing.

use airlock_policies::{Policy, TestCodeAction};

fn fired(path: &str, old: Option<&str>, new: &str) -> Vec<(String, usize, TestCodeAction)> {
    Policy::default()
        .unwrap()
        .check_test_code(path, old, new)
        .into_iter()
        .map(|f| (f.rule, f.line, f.action))
        .collect()
}

use TestCodeAction::{Flag, Refuse};

#[test]
fn code_in_a_test_package_init_is_refused_and_an_empty_or_documented_one_is_not() {
    let init = "tests/__init__.py";
    assert_eq!(fired(init, None, ""), []);
    assert_eq!(
        fired(init, None, "\"\"\"The tests.\"\"\"\n# nothing else\n\n"),
        []
    );
    assert_eq!(
        fired(init, None, "\"\"\"The tests.\"\"\"\nimport calc.ops\n"),
        [("test-package-init".to_string(), 2, Refuse)]
    );
    assert_eq!(
        fired("tests/sub/__init__.py", Some(""), "x = 1\n"),
        [("test-package-init".to_string(), 1, Refuse)]
    );
    // Lines the pinned file already had are not the change's.
    assert_eq!(fired(init, Some("import os\n"), "import os\n# more\n"), []);
    // A package that is not a test package is not test infrastructure.
    assert_eq!(fired("calc/__init__.py", None, "import os\n"), []);
}

#[test]
fn go_test_main_and_init_in_a_test_file_are_refused_with_their_line() {
    let text = "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.Exit(0)\n}\n";
    assert_eq!(
        fired("calc_test.go", None, text),
        [("test-main".to_string(), 8, Refuse)]
    );
    let text = "package calc\n\nfunc init() {\n\tClamp = nil\n}\n";
    let got = fired("calc_test.go", None, text);
    assert!(
        got.contains(&("test-main".to_string(), 3, Refuse)),
        "{got:?}"
    );
    assert!(
        got.contains(&("test-patches-code-go".to_string(), 4, Flag)),
        "{got:?}"
    );
    // An ordinary test file.
    let text = "package calc\n\nimport \"testing\"\n\nfunc TestClamp(t *testing.T) {\n\tif got := Clamp(9, 0, 3); got != 3 {\n\t\tt.Errorf(\"got %d\", got)\n\t}\n}\n";
    assert_eq!(fired("calc_test.go", None, text), []);
    // Not a test file: not this rule's business.
    assert_eq!(
        fired("calc.go", None, "package calc\n\nfunc init() {}\n"),
        []
    );
}

#[test]
fn pytest_hooks_and_plugins_are_refused_and_load_tests_is_flagged() {
    let path = "tests/test_new.py";
    let text = "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n    items.clear()\n";
    assert_eq!(
        fired(path, None, text),
        [("pytest-hooks".to_string(), 4, Refuse)]
    );
    assert_eq!(
        fired(path, None, "pytest_plugins = ['evil']\n"),
        [("pytest-hooks".to_string(), 1, Refuse)]
    );
    let text = "import unittest\n\n\ndef load_tests(loader, tests, pattern):\n    return unittest.TestSuite()\n";
    assert_eq!(
        fired(path, None, text),
        [("unittest-load-tests".to_string(), 4, Flag)]
    );
    let text = "def pytest_generate_tests(metafunc):\n    metafunc.parametrize('x', [1, 2])\n\n\ndef test_x(x):\n    assert x\n";
    assert_eq!(fired(path, None, text), []);
}

#[test]
fn import_time_patches_are_flagged_and_the_same_code_in_a_test_is_not() {
    let path = "tests/test_new.py";
    for (text, line) in [
        (
            "import calc.ops\n\ncalc.ops.clamp = lambda x, lo, hi: 3\n",
            3,
        ),
        ("from calc import ops\n\nops.clamp = max\n", 3),
        (
            "from unittest import mock\n\n_p = mock.patch('calc.ops.clamp', return_value=3)\n",
            3,
        ),
        ("import sys\nsys.modules['calc.ops'] = object()\n", 2),
        ("import builtins\nbuiltins.print = None\n", 2),
        ("from calc import ops\nsetattr(ops, 'clamp', max)\n", 2),
        ("import calc.ops\n\nif True:\n    calc.ops.clamp = max\n", 4),
        (
            "import calc.ops\n\nx = [\n    1,\n]\ncalc.ops.clamp = max\n",
            6,
        ),
    ] {
        assert_eq!(
            fired(path, None, text),
            [("test-patches-code".to_string(), line, Flag)],
            "{text}"
        );
    }
    for text in [
        // Ordinary imports, fixtures and tests.
        "import pytest\n\nfrom calc.ops import clamp\n\n\n@pytest.fixture\ndef bounds():\n    return (0, 3)\n\n\ndef test_clamp(bounds):\n    assert clamp(9, *bounds) == 3\n",
        // Patching inside a test (or a decorator that patches only during it).
        "from unittest import mock\nimport calc.ops\n\n\n@mock.patch('calc.ops.clamp')\ndef test_x(m):\n    calc.ops.clamp = max\n    assert m\n",
        // A docstring that mentions a patch.
        "\"\"\"\ncalc.ops.clamp = max\n\"\"\"\n",
        // Module-level constants computed from the code under test.
        "import calc.ops\n\nEXPECTED = calc.ops.clamp(9, 0, 3)\n",
    ] {
        assert_eq!(fired(path, None, text), [], "{text}");
    }
}

#[test]
fn javascript_top_level_patches_are_flagged() {
    let path = "tests/clamp.test.js";
    let text = "const ops = require('../src/ops');\n\nops.clamp = () => 3;\n\ntest('x', () => {\n  expect(ops.clamp(9, 0, 3)).toBe(3);\n});\n";
    assert_eq!(
        fired(path, None, text),
        [("test-patches-code-js".to_string(), 3, Flag)]
    );
    let text = "const ops = require('../src/ops');\n\ntest('x', () => {\n  const spy = { calls: 0 };\n  spy.calls = 1;\n  expect(ops.clamp(9, 0, 3)).toBe(3);\n});\n";
    assert_eq!(fired(path, None, text), []);
}
