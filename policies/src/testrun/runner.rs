//! The test runners airlock reads: which one a command is, how it selects one test, how it lists
//! its tests without running them, and the flags without which its output names no test.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// How the operator's test command runs and reports; decides how one test is selected, how the
/// suite is collected and which per-test result parser reads the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestRunner {
    /// `pytest -rA`-style output; one test is selected by appending its node id.
    Pytest,
    /// `python -m unittest -v`; one test is selected by appending its dotted name.
    Unittest,
    /// `cargo test`; one test is selected with `-- --exact NAME`.
    Cargo,
    /// `go test -v`; one test is selected with `-run '^NAME$'`.
    Go,
    /// `jest --verbose`; one test is selected with `-t NAME`.
    Jest,
    /// `vitest run --reporter verbose`; one test is selected with `-t NAME`.
    Vitest,
}

/// Every runner, in the order configuration errors list them.
pub const ALL_RUNNERS: [TestRunner; 6] = [
    TestRunner::Pytest,
    TestRunner::Unittest,
    TestRunner::Cargo,
    TestRunner::Go,
    TestRunner::Jest,
    TestRunner::Vitest,
];

impl TestRunner {
    /// The configuration spelling (`pytest`, `unittest`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TestRunner::Pytest => "pytest",
            TestRunner::Unittest => "unittest",
            TestRunner::Cargo => "cargo",
            TestRunner::Go => "go",
            TestRunner::Jest => "jest",
            TestRunner::Vitest => "vitest",
        }
    }

    /// The runner spelled `name`; `Err` lists the names there are.
    pub fn from_name(name: &str) -> Result<TestRunner, String> {
        ALL_RUNNERS
            .into_iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| {
                format!(
                    "{name:?} is not a test runner; expected one of {}",
                    ALL_RUNNERS.map(TestRunner::name).join(", ")
                )
            })
    }

    /// The runner a command plainly invokes (`pytest ...`, `python3 -m unittest ...`,
    /// `cargo test`, `go test`, `npx jest`, `node node_modules/.bin/vitest run`), or `None`
    /// when the command is a wrapper airlock cannot see into (`make test`, `tox`, a script).
    pub fn detect(command: &[String]) -> Option<TestRunner> {
        let base = |s: &str| {
            Path::new(s)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(s)
                .to_string()
        };
        let words: Vec<String> = command.iter().map(|w| base(w)).collect();
        let program = words.first()?.as_str();
        let module = command
            .iter()
            .position(|w| w == "-m")
            .and_then(|i| command.get(i + 1))
            .map(String::as_str);
        if program.starts_with("python") {
            return match module {
                Some("pytest" | "py.test") => Some(TestRunner::Pytest),
                Some("unittest") => Some(TestRunner::Unittest),
                _ => None,
            };
        }
        match program {
            "pytest" | "py.test" => return Some(TestRunner::Pytest),
            "cargo" if command.get(1).map(String::as_str) == Some("test") => {
                return Some(TestRunner::Cargo);
            }
            "go" if command.get(1).map(String::as_str) == Some("test") => {
                return Some(TestRunner::Go);
            }
            _ => {}
        }
        // `node .../jest.js`, `npx jest`, `node_modules/.bin/vitest`: the first word naming a
        // JavaScript runner, within the first three.
        words.iter().take(3).find_map(|w| {
            let stem = w
                .strip_suffix(".js")
                .or(w.strip_suffix(".mjs"))
                .unwrap_or(w);
            match stem {
                "jest" => Some(TestRunner::Jest),
                "vitest" | "vitest.mjs" => Some(TestRunner::Vitest),
                _ => None,
            }
        })
    }

    /// Check that `command` suits this runner: a command that plainly invokes another runner is
    /// refused (its output would be read with the wrong parser), and so is one whose output
    /// would name no test (unittest without `-v`, pytest without `-rA` or `-v`, go without
    /// `-v`, jest without `--verbose`, vitest without the verbose reporter). `Err` says what to
    /// change.
    pub fn check_command(self, command: &[String]) -> Result<(), String> {
        if let Some(found) = Self::detect(command)
            && found != self
        {
            return Err(format!(
                "the command `{}` runs {}, but the runner is {}: set runner = \"{}\" or change \
                 the command",
                command.join(" "),
                found.name(),
                self.name(),
                found.name()
            ));
        }
        if Self::detect(command) != Some(self) {
            // A wrapper: its flags are its own business.
            return Ok(());
        }
        let has = |flag: &str| command.iter().any(|w| w == flag);
        let has_prefix = |p: &str| command.iter().any(|w| w.starts_with(p));
        let (ok, need) = match self {
            TestRunner::Unittest => (
                has("-v") || has("--verbose"),
                "`-v` (unittest names each test only in verbose mode)",
            ),
            TestRunner::Pytest => (
                has("-v")
                    || has("--verbose")
                    || has("-vv")
                    || command
                        .iter()
                        .any(|w| w.starts_with("-r") && w.contains('A')),
                "`-rA` or `-v` (pytest names each test only then)",
            ),
            TestRunner::Go => (has("-v"), "`-v` (go test names each test only then)"),
            TestRunner::Jest => (
                has("--verbose"),
                "`--verbose` (jest names each test only then)",
            ),
            TestRunner::Vitest => (
                has_prefix("--reporter=verbose")
                    || command
                        .windows(2)
                        .any(|w| w[0] == "--reporter" && w[1] == "verbose"),
                "`--reporter=verbose` (vitest names each test only then)",
            ),
            TestRunner::Cargo => (true, ""),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the {} command `{}` prints no per-test results: add {need}",
                self.name(),
                command.join(" ")
            ))
        }
    }

    /// The command line that runs only `test` (a fully qualified test name), built from the
    /// operator's full-suite command.
    pub fn select_one(self, command: &[String], test: &str) -> Vec<String> {
        let mut argv = command.to_vec();
        match self {
            TestRunner::Pytest | TestRunner::Unittest => argv.push(test.to_owned()),
            TestRunner::Cargo => {
                if !argv.iter().any(|a| a == "--") {
                    argv.push("--".to_owned());
                }
                argv.push("--exact".to_owned());
                argv.push(test.to_owned());
            }
            TestRunner::Go => {
                let name = test.rsplit('.').next().unwrap_or(test);
                let at = argv
                    .iter()
                    .position(|a| a == "test")
                    .map_or(argv.len(), |i| i + 1);
                argv.insert(at, "-run".to_owned());
                argv.insert(at + 1, format!("^{name}$"));
            }
            TestRunner::Jest | TestRunner::Vitest => {
                // `file > describe > title` (as the parser names a test): the file, and the
                // describe path and title as jest's and vitest's full name, matched literally.
                let parts: Vec<&str> = test.split(" > ").collect();
                let (file, name) = match parts.split_first() {
                    Some((first, rest)) if !rest.is_empty() && looks_like_js_file(first) => {
                        (Some(*first), rest.join(" "))
                    }
                    _ => (None, parts.join(" ")),
                };
                if let Some(file) = file {
                    argv.push(file.to_owned());
                }
                argv.push("-t".to_owned());
                argv.push(regex::escape(&name));
            }
        }
        argv
    }

    /// The command that lists the suite's tests without running them, where the runner has one
    /// and the command plainly invokes it: `--collect-only -q` (pytest), `-- --list` (cargo),
    /// `-list .` (go), `vitest list`. `None` for unittest (whose loader has no listing), jest
    /// (`--listTests` names files, not tests) and wrapper commands; their inventory is the base
    /// run's parsed results alone.
    pub fn collect_command(self, command: &[String]) -> Option<Vec<String>> {
        if Self::detect(command) != Some(self) {
            return None;
        }
        let mut argv = command.to_vec();
        match self {
            TestRunner::Pytest => {
                argv.retain(|w| {
                    !(w == "-v" || w == "-vv" || w == "--verbose" || w.starts_with("-r"))
                });
                argv.push("--collect-only".into());
                argv.push("-q".into());
            }
            TestRunner::Cargo => {
                if !argv.iter().any(|a| a == "--") {
                    argv.push("--".into());
                }
                argv.push("--list".into());
            }
            TestRunner::Go => {
                let at = argv.iter().position(|a| a == "test")? + 1;
                argv.retain(|w| w != "-v");
                let at = at.min(argv.len());
                argv.insert(at, "-list".into());
                argv.insert(at + 1, ".".into());
            }
            TestRunner::Vitest => {
                let at = argv.iter().position(|w| w == "run")?;
                argv[at] = "list".into();
                argv.retain(|w| !w.starts_with("--reporter"));
                if let Some(i) = argv.iter().position(|w| w == "verbose") {
                    argv.remove(i);
                }
            }
            TestRunner::Unittest | TestRunner::Jest => return None,
        }
        Some(argv)
    }
}

impl TestRunner {
    /// The file a test id names, as `is_file` (a relative path of the tree the test runs in)
    /// finds it: the path before `::` of a pytest node id, the longest dotted prefix of a
    /// unittest name that is a module (`a/b.py`) or a package (`a/b/__init__.py`), the file of
    /// a jest or vitest `file > ... > title`. `None` where the id names no file (cargo's and
    /// go's names, a bare title) or no such file exists.
    pub fn file_of_test(self, test: &str, is_file: impl Fn(&str) -> bool) -> Option<String> {
        let test = test.trim();
        let test = test.strip_prefix("./").unwrap_or(test);
        match self {
            TestRunner::Pytest => {
                let path = test.split("::").next().unwrap_or(test);
                is_file(path).then(|| path.to_owned())
            }
            TestRunner::Unittest => {
                let parts: Vec<&str> = test.split('.').collect();
                (1..=parts.len()).rev().find_map(|n| {
                    let stem = parts[..n].join("/");
                    [format!("{stem}.py"), format!("{stem}/__init__.py")]
                        .into_iter()
                        .find(|candidate| is_file(candidate))
                })
            }
            TestRunner::Jest | TestRunner::Vitest => {
                let file = test.split(" > ").next().unwrap_or(test);
                (looks_like_js_file(file) && is_file(file)).then(|| file.to_owned())
            }
            TestRunner::Cargo | TestRunner::Go => None,
        }
    }
}

impl std::fmt::Display for TestRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `word` names a JavaScript or TypeScript test file.
fn looks_like_js_file(word: &str) -> bool {
    [".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts"]
        .iter()
        .any(|ext| word.ends_with(ext))
        && !word.contains(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn a_jest_test_is_selected_by_its_file_and_full_name() {
        let cmd = argv("node node_modules/jest/bin/jest.js --verbose");
        assert_eq!(
            TestRunner::Jest.select_one(&cmd, "src/a.test.ts > equals (maps) > differ"),
            argv("node node_modules/jest/bin/jest.js --verbose src/a.test.ts -t")
                .into_iter()
                .chain(["equals \\(maps\\) differ".to_string()])
                .collect::<Vec<_>>()
        );
        // A title alone is matched anywhere, literally.
        assert_eq!(
            TestRunner::Jest
                .select_one(&cmd, "adds 1+1")
                .last()
                .unwrap(),
            "adds 1\\+1"
        );
    }

    #[test]
    fn detects_the_runner_a_command_invokes() {
        assert_eq!(
            TestRunner::detect(&argv("python3 -m pytest -rA")),
            Some(TestRunner::Pytest)
        );
        assert_eq!(
            TestRunner::detect(&argv("/opt/venv/bin/python -m unittest -v")),
            Some(TestRunner::Unittest)
        );
        assert_eq!(
            TestRunner::detect(&argv("/root/.cargo/bin/cargo test -q")),
            Some(TestRunner::Cargo)
        );
        assert_eq!(
            TestRunner::detect(&argv("node node_modules/jest/bin/jest.js --verbose")),
            Some(TestRunner::Jest)
        );
        assert_eq!(
            TestRunner::detect(&argv("npx vitest run --reporter=verbose")),
            Some(TestRunner::Vitest)
        );
        assert_eq!(TestRunner::detect(&argv("make test")), None);
        assert_eq!(TestRunner::detect(&argv("python3 runtests.py")), None);
    }

    #[test]
    fn a_runner_that_does_not_match_the_command_is_refused() {
        let err = TestRunner::Unittest
            .check_command(&argv("python3 -m pytest -rA"))
            .unwrap_err();
        assert!(err.contains("runs pytest"), "{err}");
        assert!(err.contains("runner = \"pytest\""), "{err}");
        assert!(
            TestRunner::Pytest
                .check_command(&argv("python3 -m pytest -rA"))
                .is_ok()
        );
        assert!(
            TestRunner::Unittest
                .check_command(&argv("make test"))
                .is_ok()
        );
    }

    #[test]
    fn a_command_that_names_no_test_is_refused() {
        let err = TestRunner::Unittest
            .check_command(&argv("python3 -m unittest"))
            .unwrap_err();
        assert!(err.contains("-v"), "{err}");
        assert!(
            TestRunner::Pytest
                .check_command(&argv("pytest -q"))
                .is_err()
        );
        assert!(
            TestRunner::Pytest
                .check_command(&argv("pytest -q -rA"))
                .is_ok()
        );
        assert!(
            TestRunner::Vitest
                .check_command(&argv("npx vitest run --reporter verbose"))
                .is_ok()
        );
    }

    #[test]
    fn a_test_id_resolves_to_its_file() {
        let files = [
            "tests/test_a.py",
            "calc/helpers.py",
            "pkg/__init__.py",
            "src/a.test.ts",
        ];
        let is_file = |p: &str| files.contains(&p);
        assert_eq!(
            TestRunner::Pytest.file_of_test("tests/test_a.py::T::test_x[1-2]", is_file),
            Some("tests/test_a.py".into())
        );
        assert_eq!(
            TestRunner::Pytest.file_of_test("calc/helpers.py::test_fake", is_file),
            Some("calc/helpers.py".into())
        );
        assert_eq!(
            TestRunner::Pytest.file_of_test("./calc/helpers.py::test_fake", is_file),
            Some("calc/helpers.py".into())
        );
        assert_eq!(
            TestRunner::Unittest.file_of_test("calc.helpers.T.test_fake", is_file),
            Some("calc/helpers.py".into())
        );
        assert_eq!(
            TestRunner::Unittest.file_of_test("tests.test_a.T.test_x", is_file),
            Some("tests/test_a.py".into())
        );
        assert_eq!(
            TestRunner::Unittest.file_of_test("pkg.T.test_x", is_file),
            Some("pkg/__init__.py".into())
        );
        assert_eq!(
            TestRunner::Vitest.file_of_test("src/a.test.ts > clamp > low", is_file),
            Some("src/a.test.ts".into())
        );
        assert_eq!(
            TestRunner::Unittest.file_of_test("nowhere.T.t", is_file),
            None
        );
        assert_eq!(TestRunner::Go.file_of_test("TestClamp", is_file), None);
    }

    #[test]
    fn collection_commands() {
        assert_eq!(
            TestRunner::Pytest.collect_command(&argv("python3 -m pytest -rA -p no:cacheprovider")),
            Some(argv(
                "python3 -m pytest -p no:cacheprovider --collect-only -q"
            ))
        );
        assert_eq!(
            TestRunner::Cargo.collect_command(&argv("cargo test")),
            Some(argv("cargo test -- --list"))
        );
        assert_eq!(
            TestRunner::Go.collect_command(&argv("go test -v ./...")),
            Some(argv("go test -list . ./..."))
        );
        assert_eq!(
            TestRunner::Vitest.collect_command(&argv("npx vitest run --reporter=verbose")),
            Some(argv("npx vitest list"))
        );
        assert_eq!(
            TestRunner::Unittest.collect_command(&argv("python3 -m unittest -v")),
            None
        );
    }
}
