//! The benches' fixture: a small Python project with a bug in `clamp`, its broker clone, the
//! honest fix and its fail-to-pass test, and the two statistics the benches print.

use std::path::PathBuf;
use std::time::Duration;

use airlock_testkit::{git, write};

pub const BUGGY: &str = "def clamp(x, lo, hi):\n    return max(lo, x)\n";
pub const FIXED: &str = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n";
pub const OLD_TEST: &str = "import unittest\n\nfrom calc.ops import clamp\n\n\nclass TestLow(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(clamp(-5, 0, 3), 0)\n";
pub const NEW_TEST: &str = "import unittest\n\nfrom calc.ops import clamp\n\n\nclass TestHigh(unittest.TestCase):\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n";
pub const NEW_TEST_NAME: &str = "tests.test_high.TestHigh.test_high";

pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub struct Project {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub origin: PathBuf,
    pub pin: String,
}

/// The project with `extra_modules` more small modules, committed, and cloned to
/// `<root>/clone` for the broker.
pub fn project(extra_modules: usize) -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let origin = root.join("origin");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "-b", "main"]);
    write(&origin, "calc/__init__.py", "");
    write(&origin, "calc/ops.py", BUGGY);
    write(&origin, "tests/__init__.py", "");
    write(&origin, "tests/test_ops.py", OLD_TEST);
    for i in 0..extra_modules {
        write(
            &origin,
            &format!("calc/more/m{i:03}.py"),
            format!("def f{i}(x):\n    return x + {i}\n"),
        );
    }
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "initial"]);
    let pin = git(&origin, &["rev-parse", "HEAD"]);
    git(
        &root,
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            root.join("clone").to_str().unwrap(),
        ],
    );
    Project {
        _dir: dir,
        root,
        origin,
        pin,
    }
}
