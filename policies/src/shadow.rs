//! New Python modules that would shadow the standard library or the test runner: a new
//! `unittest/__main__.py`, `pytest.py` or `tests/json.py` (pytest puts a test directory without
//! `__init__.py` on `sys.path`) is imported instead of the real one, by the test run itself.

use std::collections::BTreeSet;
use std::sync::LazyLock;

static NAMES: LazyLock<BTreeSet<&'static str>> = LazyLock::new(|| {
    include_str!("../python_modules.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// The standard-library or test-runner module a new Python file at `path` (repository-relative,
/// `/`-separated) would shadow, if any. A module is importable by a top-level name from every
/// directory that may be on `sys.path`: the repository root and every directory that is not a
/// package (`is_package(dir)` says whether `dir` holds an `__init__.py`, at the pin or in the
/// change). Submodules of a package (`mypkg/json.py`) shadow nothing, and neither does a name
/// the pinned tree already has there (`pinned(path)`: the project's own `code/` directory).
pub fn shadowed_python_module(
    path: &str,
    is_package: &dyn Fn(&str) -> bool,
    pinned: &dyn Fn(&str) -> bool,
) -> Option<String> {
    if !path.ends_with(".py") {
        return None;
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    for k in 0..parts.len() {
        let dir = parts[..k].join("/");
        if k > 0 && is_package(&dir) {
            continue;
        }
        let name = parts[k].strip_suffix(".py").unwrap_or(parts[k]);
        if name != "__init__" && NAMES.contains(name) && !pinned(&parts[..=k].join("/")) {
            return Some(name.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packages(dirs: &'static [&'static str]) -> impl Fn(&str) -> bool {
        move |d: &str| dirs.contains(&d)
    }

    fn shadowed(path: &str, is_package: &dyn Fn(&str) -> bool) -> Option<String> {
        shadowed_python_module(path, is_package, &|p| p == "code" || p == "test")
    }

    #[test]
    fn top_level_names_shadow_and_submodules_do_not() {
        let none = packages(&[]);
        assert_eq!(
            shadowed("unittest/__main__.py", &none).as_deref(),
            Some("unittest")
        );
        assert_eq!(shadowed("pytest.py", &none).as_deref(), Some("pytest"));
        assert_eq!(
            shadowed("_pytest/runner.py", &none).as_deref(),
            Some("_pytest")
        );
        // A test directory that is not a package is on sys.path under pytest.
        assert_eq!(shadowed("tests/json.py", &none).as_deref(), Some("json"));
        let pkg = packages(&["tests", "mypkg", "src/mypkg"]);
        assert_eq!(shadowed("tests/json.py", &pkg), None);
        assert_eq!(shadowed("mypkg/types.py", &pkg), None);
        assert_eq!(shadowed("src/mypkg/json.py", &pkg), None);
        // `src/` is not a package: a module directly in it is top-level in a src layout.
        assert_eq!(shadowed("src/os.py", &pkg).as_deref(), Some("os"));
        assert_eq!(shadowed("tests/test_json.py", &none), None);
        assert_eq!(shadowed("README.md", &none), None);
        // Names the project already has at the pin are its own.
        assert_eq!(shadowed("code/extra.py", &none), None);
        assert_eq!(shadowed("test/rules/new_test.py", &none), None);
    }
}
