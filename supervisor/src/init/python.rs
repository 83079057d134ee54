//! `airlock init` for a Python tree: the runner (pytest or unittest), the interpreter, and the
//! `[tests.prepare.python]` recipe from what the project declares (extras in `pyproject.toml`,
//! `setup.cfg` or `setup.py`, dependency groups, requirements files, a lockfile).

use super::host::{HostFacts, under_system_dirs};
use super::proposal::{Detected, path_text};
use super::toolchains::prepare_timeout_secs;
use super::tree::{
    MAX_SCANNED_TEST_FILES, Tree, VENV_DIRS, file_name, glob_literal, read_pyvenv_home,
};
use crate::config::{AsOf, ENV_DIR_PLACEHOLDER, PrepareConfig, PythonRecipe, SelectorStyle};
use airlock_policies::testrun::TestRunner;
use airlock_policies::{Language, is_test_path};
use std::collections::BTreeSet;
use std::path::Path;

/// pytest or unittest, and why; `None` when the tree shows no Python tests.
pub(super) fn python_runner(tree: &Tree) -> Option<(TestRunner, String)> {
    // The shallowest conftest.py names the reason (not one of an example project's).
    let conftest = tree
        .files
        .iter()
        .filter(|f| *f == "conftest.py" || f.ends_with("/conftest.py"))
        .min_by_key(|f| (f.matches('/').count(), f.as_str()));
    let why = if tree.has("pytest.ini") {
        Some("pytest.ini".to_string())
    } else if tree.contains("pyproject.toml", "[tool.pytest") {
        Some("[tool.pytest] in pyproject.toml".into())
    } else if tree.contains("setup.cfg", "[tool:pytest]") {
        Some("[tool:pytest] in setup.cfg".into())
    } else if tree.contains("tox.ini", "[pytest]") {
        Some("[pytest] in tox.ini".into())
    } else {
        conftest.cloned()
    };
    if let Some(why) = why {
        return Some((TestRunner::Pytest, why));
    }
    let tests: Vec<&String> = tree
        .sources(&[Language::Python])
        .filter(|f| is_test_path(f) || file_name(f) == "tests.py")
        .collect();
    let importer = tests.iter().take(MAX_SCANNED_TEST_FILES).find(|f| {
        tree.read(f).is_some_and(|text| {
            text.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("import pytest") || l.starts_with("from pytest")
            })
        })
    });
    if let Some(file) = importer {
        return Some((TestRunner::Pytest, format!("{file} imports pytest")));
    }
    let example = tests
        .iter()
        .find(|f| {
            let name = file_name(f);
            name.starts_with("test_") || name.ends_with("_test.py") || name == "tests.py"
        })
        .or(tests.first());
    example.map(|first| {
        (
            TestRunner::Unittest,
            format!("test files such as {first}, none importing pytest"),
        )
    })
}

/// The interpreter a Python test run uses: its command word and the grants it needs.
pub(super) struct Interpreter {
    program: String,
    ro: Vec<String>,
    note: String,
}

pub(super) fn python_interpreter(
    tree: &Tree,
    host: &HostFacts,
    warnings: &mut Vec<String>,
) -> Interpreter {
    for dir in VENV_DIRS {
        let venv = tree.root.join(dir);
        let python = venv.join("bin/python");
        if !python.exists() {
            continue;
        }
        let mut ro = vec![path_text(&venv)];
        let mut note = format!("the repository's venv {dir}/ (granted read-only)");
        // A venv's python is a link to its base interpreter, which must be visible too.
        if let Some(home) = read_pyvenv_home(&venv.join("pyvenv.cfg")) {
            let base = if home.ends_with("bin") {
                home.parent().map(Path::to_path_buf).unwrap_or(home)
            } else {
                home
            };
            if !under_system_dirs(&base) {
                note.push_str(&format!(
                    "; its base interpreter {} is outside the system directories and granted too",
                    base.display()
                ));
                ro.push(path_text(&base));
            }
        }
        ro.sort();
        ro.dedup();
        return Interpreter {
            program: path_text(&python),
            ro,
            note,
        };
    }
    match &host.python {
        Some(py) => {
            let mut ro = Vec::new();
            let mut note = format!("the host's python3, {}", py.executable.display());
            if !under_system_dirs(&py.executable) {
                for root in [&py.prefix, &py.base_prefix] {
                    if !under_system_dirs(root) {
                        ro.push(path_text(root));
                    }
                }
                ro.sort();
                ro.dedup();
                note.push_str(&format!(
                    ", outside the system directories: {} granted read-only",
                    ro.join(", ")
                ));
            }
            Interpreter {
                program: path_text(&py.executable),
                ro,
                note,
            }
        }
        None => {
            warnings.push(
                "python3 did not answer on this host: the command uses `python3` from the \
                 sandbox's PATH; grant your interpreter's directory in [tests] ro if it lives \
                 elsewhere"
                    .into(),
            );
            Interpreter {
                program: "python3".into(),
                ro: Vec::new(),
                note: "python3 (not found on this host)".into(),
            }
        }
    }
}

pub(super) fn configure_python(
    tree: &Tree,
    host: &HostFacts,
    runner: TestRunner,
    ci: &crate::ci_files::Installs,
    d: &mut Detected,
) {
    let py = python_interpreter(tree, host, &mut d.warnings);
    d.findings.push(format!("Interpreter: {}", py.note));
    let mut command = vec![py.program.clone(), "-m".into()];
    match runner {
        TestRunner::Pytest => {
            command.extend(["pytest", "-rA", "-p", "no:cacheprovider"].map(String::from));
            d.tests.selector_style = SelectorStyle::NodeId;
            d.comment(
                "tests.command",
                "-rA names every test's result; -p no:cacheprovider keeps .pytest_cache out of \
                 the tree.",
            );
        }
        _ => {
            command.extend(["unittest", "-v"].map(String::from));
            d.tests.selector_style = SelectorStyle::Dotted;
            d.comment("tests.command", "-v names every test's result.");
        }
    }
    d.tests.command = command;
    d.tests.runner = runner;
    d.tests.ro = py.ro;
    if !d.tests.ro.is_empty() {
        d.comment(
            "tests.ro",
            "The interpreter (a venv in the repository, or an installation outside the system \
             directories).",
        );
    }

    let pyproject: Option<toml::Table> = tree.read("pyproject.toml").and_then(|t| t.parse().ok());
    let table = |doc: &toml::Table, path: &[&str]| -> Vec<String> {
        let mut at = Some(doc);
        for key in path {
            at = at.and_then(|t| t.get(*key)).and_then(|v| v.as_table());
        }
        at.map(|t| t.keys().cloned().collect()).unwrap_or_default()
    };
    let (mut extras_declared, groups_declared) = match &pyproject {
        Some(doc) => (
            table(doc, &["project", "optional-dependencies"]),
            table(doc, &["dependency-groups"]),
        ),
        None => (Vec::new(), Vec::new()),
    };
    // Extras declared the setuptools way: `[options.extras_require]` of setup.cfg, the keys of
    // `extras_require` in setup.py.
    if let Some(text) = tree.read("setup.cfg") {
        extras_declared.extend(setup_cfg_extras(&text));
    }
    if let Some(text) = tree.read("setup.py") {
        extras_declared.extend(setup_py_extras(&text));
    }
    extras_declared.sort();
    extras_declared.dedup();
    // The extras the project's CI installs for its tests (those the project declares, when its
    // declaration could be read), then those named for tests.
    let mut extras: Vec<String> = ci
        .extras
        .keys()
        .filter(|e| extras_declared.is_empty() || extras_declared.contains(e))
        .cloned()
        .collect();
    for e in test_names(&extras_declared) {
        if !extras.contains(&e) {
            extras.push(e);
        }
    }
    let groups = test_names(&groups_declared);
    let ci_requirements: Vec<String> = ci
        .requirements
        .keys()
        .filter(|f| tree.has(f))
        .cloned()
        .collect();
    let requirements: Vec<String> = tree
        .files
        .iter()
        .filter(|f| {
            let (dir, name) = f.rsplit_once('/').unwrap_or(("", f));
            let top = dir.is_empty() || dir == "requirements";
            let txt = name.ends_with(".txt")
                || name.ends_with(".in") && !tree.has(&f.replace(".in", ".txt"));
            let named = dir == "requirements" || name.contains("requirements");
            top && txt && named && !NOT_TEST_REQUIREMENTS.iter().any(|w| name.contains(w))
        })
        .cloned()
        .collect();
    // Test requirements files when there are some; else every requirements file.
    let testish: Vec<String> = requirements
        .iter()
        .filter(|f| f.contains("test") || f.contains("dev"))
        .cloned()
        .collect();
    // The CI's own requirements files when it names some; else the test ones; else all.
    let requirements = if !ci_requirements.is_empty() {
        ci_requirements
    } else if testish.is_empty() {
        requirements
    } else {
        testish
    };
    // Packages the CI installs by name (tox's deps, `pip install pytest-mock`), but those the
    // chosen requirements files name already (their pin is the project's; another job's pin of
    // the same name would conflict with it).
    let named: BTreeSet<String> =
        crate::recipe::requirements_closure(&requirements, |f| tree.read(f))
            .values()
            .flat_map(|text| text.lines())
            .filter_map(|line| crate::ci_files::requirement_name(line.trim()))
            .map(|name| name.to_ascii_lowercase().replace('_', "-"))
            .collect();
    let ci_packages: Vec<String> = ci
        .packages
        .keys()
        .filter(|p| {
            crate::ci_files::requirement_name(p)
                .is_none_or(|n| !named.contains(&n.to_ascii_lowercase().replace('_', "-")))
        })
        .cloned()
        .collect();
    let manifests: Vec<String> = ["pyproject.toml", "setup.cfg", "setup.py"]
        .into_iter()
        .filter(|f| tree.has(f))
        .map(String::from)
        .collect();
    let installable = tree.has("setup.py")
        || pyproject
            .as_ref()
            .is_some_and(|d| d.contains_key("build-system") || d.contains_key("project"));
    let lockfile = crate::recipe::LOCKFILES
        .iter()
        .find(|f| tree.has(f))
        .map(|f| f.to_string());
    let src_layout = tree.files.iter().any(|f| {
        f.strip_prefix("src/").is_some_and(|rest| {
            let parts: Vec<&str> = rest.split('/').collect();
            matches!(parts.as_slice(), [file] if file.ends_with(".py"))
                || matches!(parts.as_slice(), [_, "__init__.py"])
        })
    });
    // pytest is added unless a chosen declaration names it already.
    let declares_pytest = pyproject.as_ref().is_some_and(|doc| {
        let lists = extras
            .iter()
            .filter_map(|e| doc.get("project")?.get("optional-dependencies")?.get(e))
            .chain(
                groups
                    .iter()
                    .filter_map(|g| doc.get("dependency-groups")?.get(g)),
            );
        lists
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .any(|item| {
                item.as_str().is_some_and(|s| {
                    let name: String = s
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                        .collect();
                    name.eq_ignore_ascii_case("pytest")
                })
            })
    }) || ci_packages.iter().any(|p| {
        crate::ci_files::requirement_name(p).is_some_and(|n| n.eq_ignore_ascii_case("pytest"))
    }) || requirements.iter().any(|f| {
        tree.read(f).is_some_and(|text| {
            text.lines().any(|l| {
                let l = l.trim().to_ascii_lowercase();
                l == "pytest"
                    || l.starts_with("pytest=")
                    || l.starts_with("pytest>")
                    || l.starts_with("pytest<")
                    || l.starts_with("pytest~")
                    || l.starts_with("pytest[")
                    || l.starts_with("pytest ")
            })
        })
    });
    // The runner the CI names is required; the rest of what it installs is optional (its jobs
    // add packages one at a time, some of which may not install for this interpreter).
    let is_pytest = |p: &String| {
        crate::ci_files::requirement_name(p).is_some_and(|n| n.eq_ignore_ascii_case("pytest"))
    };
    let mut packages: Vec<String> = ci_packages
        .iter()
        .filter(|p| is_pytest(p))
        .cloned()
        .collect();
    let optional: Vec<String> = ci_packages
        .iter()
        .filter(|p| !is_pytest(p))
        .cloned()
        .collect();
    let adds_pytest = runner == TestRunner::Pytest && !declares_pytest;
    if adds_pytest {
        packages.push("pytest".to_string());
    }
    // With several interpreters on the host (and no venv of the repository's own), the one a
    // pin gets is chosen when prepare runs, from what the pinned tree declares.
    let in_repo_venv = VENV_DIRS
        .iter()
        .any(|dir| py.program.starts_with(&path_text(&tree.root.join(dir))));
    let interpreter = if host.pythons.len() >= 2 && !in_repo_venv {
        let mut ro: BTreeSet<String> = d.tests.ro.iter().cloned().collect();
        for p in &host.pythons {
            if !under_system_dirs(&p.base_prefix) {
                ro.insert(path_text(&p.base_prefix));
            }
        }
        d.tests.ro = ro.into_iter().collect();
        let versions: Vec<String> = host
            .pythons
            .iter()
            .map(|p| format!("{}.{}", p.version.0, p.version.1))
            .collect();
        d.findings.push(format!(
            "Interpreters on this host: Python {}; each pin gets the newest released before it \
             that fits the project's requires-python (interpreter = \"auto\")",
            versions.join(", ")
        ));
        crate::recipe::AUTO_INTERPRETER.to_string()
    } else {
        py.program.clone()
    };
    let recipe = PythonRecipe {
        interpreter,
        editable: installable,
        extras: if installable {
            extras.clone()
        } else {
            Vec::new()
        },
        groups: groups.clone(),
        requirements: requirements.clone(),
        packages,
        optional: optional.clone(),
        as_of: AsOf::Pin,
        lockfile: lockfile.clone(),
    };
    // The venv's python, for every test run.
    let venv_python = format!("{ENV_DIR_PLACEHOLDER}/venv/bin/python");
    d.tests.command[0] = venv_python;
    d.comment(
        "tests.command",
        "The python of the virtualenv prepare builds in {env}/venv: the tests import what it \
         installed, never the interpreter's own site-packages.",
    );
    let mut said = Vec::new();
    if installable {
        said.push(format!(
            "the project, editable ({}){}",
            manifests.join(", "),
            if extras.is_empty() {
                String::new()
            } else {
                format!(" with its extras {}", extras.join(", "))
            }
        ));
    }
    if !groups.is_empty() {
        said.push(format!(
            "the dependency groups {} of pyproject.toml",
            groups.join(", ")
        ));
    }
    if !requirements.is_empty() {
        said.push(format!(
            "the requirements files {}",
            requirements.join(", ")
        ));
    }
    if !optional.is_empty() {
        said.push(format!(
            "then, each on its own and left out if it does not install, {} (the project's CI \
             installs {})",
            optional.join(", "),
            if optional.len() == 1 { "it" } else { "them" }
        ));
    }
    if adds_pytest {
        said.push("pytest (no declaration of the project names it)".into());
    }
    let ci_files: BTreeSet<&String> = ci
        .extras
        .values()
        .chain(ci.requirements.values())
        .chain(ci.packages.values())
        .collect();
    if !ci_files.is_empty() {
        d.findings.push(format!(
            "The project's CI installs for its tests: {} ({})",
            [
                (!ci.extras.is_empty()).then(|| format!(
                    "extras {}",
                    ci.extras.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
                (!ci.requirements.is_empty()).then(|| format!(
                    "requirements files {}",
                    ci.requirements
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                (!ci.packages.is_empty()).then(|| format!(
                    "packages {}",
                    ci.packages.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; "),
            ci_files.into_iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if said.is_empty() {
        d.comment(
            "tests.prepare.python",
            "Nothing to install was found: the venv holds the standard library only.",
        );
    } else {
        d.comment(
            "tests.prepare.python",
            format!("Installs {}.", said.join("; ")),
        );
    }
    for (what, declared, chosen) in [
        ("extras", &extras_declared, &extras),
        ("dependency groups", &groups_declared, &groups),
    ] {
        let others: Vec<&String> = declared.iter().filter(|n| !chosen.contains(n)).collect();
        if !others.is_empty() {
            d.comment(
                "tests.prepare.python",
                format!(
                    "Also declared, not installed ({what}): {}.",
                    others
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }
    if let Some(lock) = &lockfile {
        d.comment(
            "tests.prepare.python",
            format!("{lock} pins every install (its registry packages, as constraints)."),
        );
    }
    d.comment(
        "tests.prepare.python",
        "as_of = \"pin\": only releases uploaded before the pinned commit was committed.",
    );
    let mut inputs: Vec<String> = requirements
        .iter()
        .chain(&manifests)
        .chain(lockfile.iter())
        .map(|f| glob_literal(f))
        .collect();
    inputs.sort();
    inputs.dedup();
    d.tests.prepare = Some(PrepareConfig {
        command: Vec::new(),
        inputs,
        timeout_secs: prepare_timeout_secs(),
        python: Some(recipe),
        ..PrepareConfig::default()
    });
    if !installable && src_layout {
        d.tests.env.insert("PYTHONPATH".into(), "src".into());
        d.comment(
            "tests.env.PYTHONPATH",
            "The packages live under src/ (a src layout) and the project is not installed.",
        );
    }
}

/// The keys of `[options.extras_require]` in a `setup.cfg`.
pub(super) fn setup_cfg_extras(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == "[options.extras_require]";
            continue;
        }
        // A key starts at the first column; indented lines continue its value.
        if inside
            && !line.starts_with(char::is_whitespace)
            && let Some((key, _)) = trimmed.split_once(['=', ':'])
        {
            let key = key.trim();
            if !key.is_empty() && !key.starts_with(['#', ';']) {
                out.push(key.to_string());
            }
        }
    }
    out
}

/// The keys of the `extras_require` mapping of a `setup.py`: written literally
/// (`extras_require={"tests": [...]}`), or through a module-level name
/// (`extras_require=EXTRAS`, with `EXTRAS = {...}` and `EXTRAS["dev"] = ...` above).
pub(super) fn setup_py_extras(text: &str) -> Vec<String> {
    let Some(at) = text.find("extras_require") else {
        return Vec::new();
    };
    let rest = text[at + "extras_require".len()..].trim_start();
    let Some(value) = rest.strip_prefix('=').map(str::trim_start) else {
        return Vec::new();
    };
    if value.starts_with('{') {
        return dict_keys(value);
    }
    let name: String = value
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let Some(after) = line.strip_prefix(name.as_str()) else {
            continue;
        };
        let after = after.trim_start();
        if let Some(v) = after.strip_prefix('=').filter(|v| !v.starts_with('=')) {
            let v = v.trim_start();
            if v.starts_with('{') {
                // The mapping may span lines: read from its `{` to its end.
                out.extend(dict_keys(&text[line_start + line.len() - v.len()..]));
            }
        } else if let Some(key) = after
            .strip_prefix("[\"")
            .and_then(|k| k.split_once("\"]"))
            .or_else(|| after.strip_prefix("['").and_then(|k| k.split_once("']")))
            .map(|(k, _)| k)
            .filter(|k| is_extra_name(k))
        {
            out.push(key.to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The quoted keys of the mapping that `text` opens with `{`, up to the mapping's end.
fn dict_keys(text: &str) -> Vec<String> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            q @ ('"' | '\'') => {
                let start = i + 1;
                let Some(len) = chars[start..].iter().position(|c| *c == q) else {
                    break;
                };
                let word: String = chars[start..start + len].iter().collect();
                i = start + len;
                let after = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if depth == 1 && after == Some(&':') && is_extra_name(&word) {
                    out.push(word);
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

pub(super) fn is_extra_name(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Names of requirements files that hold no test dependencies.
pub(super) const NOT_TEST_REQUIREMENTS: [&str; 4] = ["doc", "lint", "typing", "mypy"];

/// The declared extras or groups a test run needs: those named for tests, else `dev`.
pub(super) fn test_names(declared: &[String]) -> Vec<String> {
    let tests: Vec<String> = declared
        .iter()
        .filter(|n| {
            let n = n.to_ascii_lowercase();
            n == "test"
                || n == "tests"
                || n == "testing"
                || n.starts_with("test-")
                || n.starts_with("tests-")
        })
        .cloned()
        .collect();
    if !tests.is_empty() {
        return tests;
    }
    declared
        .iter()
        .filter(|n| n.eq_ignore_ascii_case("dev"))
        .cloned()
        .collect()
}
