//! Tests of `airlock init` over fixture trees the tests create and faked hosts: what is
//! detected, and that the rendered file loads back to exactly that.

use super::proposal::path_text;
use super::python::{setup_cfg_extras, setup_py_extras};
use super::render::quote;
use super::tree::glob_literal;
use super::*;
use crate::config::{AsOf, SelectorStyle};
use airlock_policies::testrun::TestRunner;

const FAKE_PYTHON: &str = "/opt/fakepy/3.11/bin/python3.11";
const FAKE_PYTHON_PREFIX: &str = "/opt/fakepy/3.11";
const FAKE_NODE: &str = "/opt/node-v20/bin/node";
const FAKE_GO: &str = "/opt/go/bin/go";

struct Fixture {
    repo: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Fixture {
        let repo = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = repo.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".cargo/bin")).unwrap();
        std::fs::create_dir_all(home.path().join(".rustup")).unwrap();
        Fixture { repo, home }
    }

    /// A host whose python3, node and go all live outside the system directories.
    fn host(&self) -> HostFacts {
        HostFacts {
            home: Some(self.home.path().to_path_buf()),
            python: Some(PythonFacts {
                executable: FAKE_PYTHON.into(),
                prefix: FAKE_PYTHON_PREFIX.into(),
                base_prefix: FAKE_PYTHON_PREFIX.into(),
            }),
            node: Some(FAKE_NODE.into()),
            go: Some(GoFacts {
                executable: FAKE_GO.into(),
                goroot: "/opt/go".into(),
            }),
            config_dir: "/etc/airlock-test".into(),
            data_dir: "/var/lib/airlock-test".into(),
            pythons: Vec::new(),
            postgres_bin: Some("/usr/lib/postgresql/15/bin".into()),
            redis_server: None,
        }
    }

    fn detect(&self) -> Detected {
        detect(self.repo.path(), &self.host())
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The rendered file loads, and to exactly what was detected.
fn assert_parses(d: &Detected) -> Config {
    let text = render_airlock_toml(d);
    let config =
        Config::parse(&text, Path::new("airlock.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(config.tests.command, d.tests.command, "{text}");
    assert_eq!(config.tests.runner, d.tests.runner);
    assert_eq!(config.tests.selector_style, d.tests.selector_style);
    assert_eq!(config.tests.ro, d.tests.ro);
    assert_eq!(config.tests.env, d.tests.env);
    assert_eq!(config.tests.pass_env, d.tests.pass_env);
    assert_eq!(config.write.allowlist, d.allowlist);
    assert_eq!(config.broker.repository.as_deref(), Some(d.name.as_str()));
    match (&config.tests.prepare, &d.tests.prepare) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            assert_eq!(a.command, b.command);
            assert_eq!(a.inputs, b.inputs);
            assert_eq!(a.links, b.links);
            assert_eq!(a.env, b.env);
            assert_eq!(a.timeout_secs, b.timeout_secs);
            assert_eq!(a.python, b.python);
            assert_eq!(d.tests.services, config.tests.services);
        }
        (a, b) => panic!("prepare {a:?} != {b:?}\n{text}"),
    }
    assert_eq!(text, render_airlock_toml(d), "rendering is deterministic");
    config
}

fn venv_command(rest: &[&str]) -> Vec<String> {
    let mut out = vec!["{env}/venv/bin/python".to_string()];
    out.extend(strings(rest));
    out
}

#[test]
fn pytest_project_with_requirements() {
    let f = Fixture::new(&[
        ("conftest.py", ""),
        ("requirements.txt", "requests\n"),
        ("requirements-dev.txt", "pytest-mock\n"),
        ("requirements-docs.txt", "sphinx\n"),
        ("pyproject.toml", "[project]\nname = \"calc\"\n"),
        ("calc/__init__.py", ""),
        (
            "tests/test_calc.py",
            "def test_add():\n    assert 1 + 1 == 2\n",
        ),
        ("docs/index.md", ""),
    ]);
    let d = f.detect();
    assert_eq!(d.ecosystem, Some(Ecosystem::Python));
    assert_eq!(d.tests.runner, TestRunner::Pytest);
    assert_eq!(d.tests.selector_style, SelectorStyle::NodeId);
    assert_eq!(
        d.tests.command,
        venv_command(&["-m", "pytest", "-rA", "-p", "no:cacheprovider"])
    );
    assert_eq!(d.tests.ro, strings(&[FAKE_PYTHON_PREFIX]));
    let p = d.tests.prepare.as_ref().unwrap();
    assert!(p.command.is_empty());
    let r = p.python.as_ref().unwrap();
    assert_eq!(r.interpreter, FAKE_PYTHON);
    assert!(r.editable, "a [project] table is installable");
    assert_eq!(r.requirements, strings(&["requirements-dev.txt"]));
    assert_eq!(r.packages, strings(&["pytest"]));
    assert_eq!(r.as_of, AsOf::Pin);
    assert_eq!(r.lockfile, None);
    assert_eq!(
        p.inputs,
        strings(&["pyproject.toml", "requirements-dev.txt"])
    );
    assert!(p.links.is_empty());
    assert!(!d.tests.env.contains_key("PYTHONPATH"));
    assert_eq!(d.allowlist, strings(&["*.py", "calc/**", "tests/**"]));
    let text = render_airlock_toml(&d);
    assert!(text.contains("[tests.prepare.python]"), "{text}");
    assert!(text.contains("\nnetwork = \"loopback\"\n"), "{text}");
    assert!(text.contains("conftest.py"), "{text}");
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    assert_parses(&d);
}

#[test]
fn dependency_groups_extras_and_the_lockfile_are_read_from_the_project() {
    let f = Fixture::new(&[
        (
            "pyproject.toml",
            "[build-system]\nrequires = [\"flit_core\"]\n\n[project]\nname = \"fl\"\n\n\
             [project.optional-dependencies]\ndocs = [\"sphinx\"]\nasync = [\"asgiref\"]\n\n\
             [dependency-groups]\ndev = [\"ruff\", \"pre-commit\"]\ntests = [\"pytest\", \"asgiref\"]\n\
             typing = [\"mypy\"]\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
        ),
        ("uv.lock", "version = 1\n"),
        ("src/fl/__init__.py", ""),
        ("tests/conftest.py", ""),
        ("examples/js/tests/conftest.py", ""),
        ("tests/test_fl.py", "def test_a():\n    pass\n"),
    ]);
    let d = f.detect();
    assert_eq!(d.tests.runner, TestRunner::Pytest);
    assert!(
        d.findings
            .iter()
            .any(|l| l.contains("[tool.pytest] in pyproject.toml")),
        "{:?}",
        d.findings
    );
    let p = d.tests.prepare.as_ref().unwrap();
    let r = p.python.as_ref().unwrap();
    assert!(r.editable);
    assert!(r.extras.is_empty(), "no extra is named for tests");
    assert_eq!(r.groups, strings(&["tests"]), "the tests group, not dev");
    assert!(r.packages.is_empty(), "the tests group names pytest");
    assert_eq!(r.lockfile.as_deref(), Some("uv.lock"));
    assert_eq!(p.inputs, strings(&["pyproject.toml", "uv.lock"]));
    assert!(
        !d.tests.env.contains_key("PYTHONPATH"),
        "an installed src layout needs no path"
    );
    let text = render_airlock_toml(&d);
    assert!(
        text.contains("Also declared, not installed (extras): async, docs."),
        "{text}"
    );
    assert!(
        text.contains("Also declared, not installed (dependency groups): dev, typing."),
        "{text}"
    );
    assert!(text.contains("lockfile = \"uv.lock\""), "{text}");
    assert_parses(&d);
}

#[test]
fn unittest_project_without_requirements_gets_a_bare_venv() {
    let f = Fixture::new(&[
        (
            "src/shout/__init__.py",
            "def shout(s):\n    return s.upper()\n",
        ),
        (
            "tests/test_shout.py",
            "import unittest\n\nclass T(unittest.TestCase):\n    pass\n",
        ),
    ]);
    let d = f.detect();
    assert_eq!(d.tests.runner, TestRunner::Unittest);
    assert_eq!(d.tests.selector_style, SelectorStyle::Dotted);
    assert_eq!(d.tests.command, venv_command(&["-m", "unittest", "-v"]));
    assert_eq!(d.tests.ro, strings(&[FAKE_PYTHON_PREFIX]));
    let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
    assert!(!r.editable, "nothing makes it installable");
    assert!(r.packages.is_empty() && r.requirements.is_empty() && r.groups.is_empty());
    assert_eq!(d.tests.env["PYTHONPATH"], "src");
    assert_eq!(d.allowlist, strings(&["src/**", "tests/**"]));
    assert_parses(&d);
}

#[test]
fn extras_declared_in_setup_cfg_or_setup_py_are_found() {
    assert_eq!(
        setup_cfg_extras(
            "[metadata]\nname = w\n\n[options.extras_require]\ntesting =\n    pytest\n    pytest-cov\ndocs =\n    sphinx\n\n[tool:pytest]\naddopts = --cov\n"
        ),
        strings(&["testing", "docs"])
    );
    assert_eq!(
        setup_py_extras(
            "setup(\n    extras_require={\n        'security': [],\n        \"socks\": ['PySocks>=1.5.6, !=1.5.7'],\n        'tests': {'a': 1},\n    },\n    name='x',\n)\n"
        ),
        strings(&["security", "socks", "tests"])
    );
    // Through a module-level name, with keys added after the mapping.
    assert_eq!(
        setup_py_extras(
            "EXTRAS_REQUIRE = {\n    'reco': ['simplejson'],\n    \"tests\": ['pytest'],\n}\nEXTRAS_REQUIRE['dev'] = EXTRAS_REQUIRE['tests'] + ['tox']\nsetup(name='m', project_urls={'Funding': 'x'}, extras_require=EXTRAS_REQUIRE)\n"
        ),
        strings(&["dev", "reco", "tests"])
    );
    let f = Fixture::new(&[
        (
            "setup.py",
            "from setuptools import setup\nsetup(name='w', extras_require={'testing': ['pytest-cov']})\n",
        ),
        ("setup.cfg", "[tool:pytest]\naddopts = --cov\n"),
        ("w/__init__.py", ""),
        ("tests/test_w.py", "def test_a():\n    pass\n"),
    ]);
    let d = f.detect();
    let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
    assert_eq!(r.extras, strings(&["testing"]));
    assert_parses(&d);
}

#[test]
fn the_environment_is_what_the_projects_ci_installs_for_its_tests() {
    let f = Fixture::new(&[
        (
            "setup.py",
            "EXTRAS = {'reco': ['simplejson'], 'tests': ['pytest'], 'lint': ['flake8']}\nsetup(name='w', extras_require=EXTRAS)\n",
        ),
        ("w/__init__.py", ""),
        (
            "tests/test_w.py",
            "import pytest\ndef test_a():\n    pass\n",
        ),
        ("requirements-test.txt", "pytest\n"),
        (
            "requirements-ci.txt",
            "pytest\nhypothesis\n-r requirements-cov.txt\n",
        ),
        ("requirements-cov.txt", "coverage~=6.4\n"),
        (
            "tox.ini",
            "[tox]\nenvlist = py38, lint\n[testenv]\nextras = tests,reco\ndeps =\n    mock\n    coverage<5\n    -rrequirements-ci.txt\n    \
             -rrequirements-missing.txt\ncommands = pytest {posargs}\n[testenv:lint]\nextras = lint\n",
        ),
    ]);
    let d = f.detect();
    let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
    assert_eq!(
        r.extras,
        strings(&["reco", "tests"]),
        "the lint job's extra is not the tests'"
    );
    assert_eq!(
        r.requirements,
        strings(&["requirements-ci.txt"]),
        "the CI's own file, not the name heuristic; a missing file is left out"
    );
    assert_eq!(
        r.optional,
        strings(&["mock"]),
        "pytest comes with the requirements file, and coverage is pinned by the file it \
         includes: the CI's own pins of them are left out"
    );
    assert!(r.packages.is_empty());
    assert!(
        d.findings
            .iter()
            .any(|l| l.starts_with("The project's CI installs for its tests: extras reco, tests")),
        "{:?}",
        d.findings
    );
    assert_parses(&d);
}

#[test]
fn a_server_the_tests_expect_is_proposed_without_ci_files() {
    assert_eq!(
        ci::service_signs(
            "import os\nhost = os.environ.get('PGHOST')\nURL = 'redis://localhost:6379/0'\n"
        ),
        [("postgres", 2), ("redis", 3)]
    );
    assert!(
        ci::service_signs("assert parse('postgres://user@db.example.com/x')\n").is_empty(),
        "a URL to another host is a parsing test, not a server"
    );
    let f = Fixture::new(&[
        (
            "pyproject.toml",
            "[project]\nname = 'drv'\n[build-system]\nrequires = ['hatchling']\n",
        ),
        ("src/drv/__init__.py", ""),
        (
            "test/conftest.py",
            "import os\nimport pytest\n\n@pytest.fixture\ndef kw():\n    return {'host': os.environ.get('PGHOST', 'localhost')}\n",
        ),
        ("test/test_q.py", "def test_a(kw):\n    pass\n"),
    ]);
    let d = f.detect();
    let names: Vec<&str> = d.tests.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["postgres"]);
    assert!(
        d.findings
            .iter()
            .any(|l| l == "The tests expect a postgres server (test/conftest.py:6)"),
        "{:?}",
        d.findings
    );
    assert_parses(&d);
}

#[test]
fn the_projects_ci_gives_its_commands_pythons_and_services() {
    let f = Fixture::new(&[
        ("conftest.py", ""),
        ("tests/test_db.py", "def test_a():\n    pass\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    strategy:\n      matrix:\n        python-version: ['3.10', '3.12']\n    \
             env:\n      DATABASE_URL: postgres://app@localhost:5433/shop\n      SECRET: ${{ secrets.S }}\n    \
             services:\n      db:\n        image: postgres:16\n        env:\n          POSTGRES_USER: app\n          \
             POSTGRES_DB: shop\n        ports: ['5433:5432']\n      cache:\n        image: redis:7\n    \
             steps:\n      - run: pytest -x tests\n",
        ),
    ]);
    let d = f.detect();
    assert!(
        d.findings
            .iter()
            .any(|l| l.contains("`pytest -x tests` (.github/workflows/ci.yml)")),
        "{:?}",
        d.findings
    );
    assert!(d.findings.iter().any(|l| l.contains("Python 3.10, 3.12")));
    assert_eq!(
        d.tests.services.len(),
        1,
        "redis has no binary on this host"
    );
    let pg = &d.tests.services[0];
    assert_eq!(pg.name, "postgres");
    assert!(
        pg.command[2].contains("/usr/lib/postgresql/15/bin/initdb"),
        "{:?}",
        pg.command
    );
    assert!(pg.command[2].contains("-U app") && pg.command[2].contains("-p 5433"));
    assert_eq!(pg.env["PGDATABASE"], "shop");
    assert_eq!(
        d.tests.env["DATABASE_URL"],
        "postgres://app@localhost:5433/shop"
    );
    assert!(!d.tests.env.contains_key("SECRET"));
    assert!(
        d.warnings.iter().any(|w| w.contains("redis:7")),
        "{:?}",
        d.warnings
    );
    let text = render_airlock_toml(&d);
    assert!(text.contains("[[tests.services]]"), "{text}");
    assert_parses(&d);
}

#[test]
fn several_interpreters_on_the_host_are_chosen_among_per_pin() {
    let f = Fixture::new(&[
        (
            "pyproject.toml",
            "[project]\nname = \"p\"\nrequires-python = \">=3.8\"\n",
        ),
        ("tests/test_p.py", "def test_a():\n    pass\n"),
        ("conftest.py", ""),
    ]);
    let mut host = f.host();
    host.pythons = [(3, 9), (3, 12)]
        .map(|v: (u32, u32)| crate::recipe::HostPython {
            executable: format!("/opt/py/{}.{}/bin/python{}.{}", v.0, v.1, v.0, v.1).into(),
            base_prefix: format!("/opt/py/{}.{}", v.0, v.1).into(),
            version: v,
        })
        .to_vec();
    host.pythons.push(crate::recipe::HostPython {
        executable: "/usr/bin/python3.11".into(),
        base_prefix: "/usr".into(),
        version: (3, 11),
    });
    let d = detect(f.repo.path(), &host);
    let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
    assert_eq!(r.interpreter, crate::recipe::AUTO_INTERPRETER);
    for prefix in ["/opt/py/3.9", "/opt/py/3.12"] {
        assert!(d.tests.ro.contains(&prefix.to_string()), "{:?}", d.tests.ro);
    }
    assert!(!d.tests.ro.contains(&"/usr".to_string()));
    assert!(
        d.findings
            .iter()
            .any(|l| l.contains("Python 3.9, 3.12, 3.11")),
        "{:?}",
        d.findings
    );
    assert_parses(&d);
}

#[test]
fn a_test_file_importing_pytest_means_pytest() {
    let f = Fixture::new(&[("test_x.py", "import pytest\n\ndef test_a():\n    pass\n")]);
    let d = f.detect();
    assert_eq!(d.tests.runner, TestRunner::Pytest);
    let p = d.tests.prepare.as_ref().unwrap();
    let r = p.python.as_ref().unwrap();
    assert_eq!(r.packages, strings(&["pytest"]));
    assert!(!r.editable);
    assert!(p.inputs.is_empty());
    assert_eq!(d.allowlist, strings(&["*.py"]));
    assert_parses(&d);
}

#[test]
fn a_venv_in_the_repository_is_used_and_its_base_granted() {
    let f = Fixture::new(&[
        (".venv/bin/python", ""),
        (
            ".venv/pyvenv.cfg",
            "home = /opt/fakepy/3.11/bin\nversion = 3.11.7\n",
        ),
        (".venv/lib/python3.11/site-packages/x/test_x.py", ""),
        ("pkg/tests.py", "import unittest\n"),
    ]);
    let d = f.detect();
    let venv = f.repo.path().join(".venv");
    assert_eq!(d.tests.command, venv_command(&["-m", "unittest", "-v"]));
    let r = d.tests.prepare.as_ref().unwrap().python.clone().unwrap();
    assert_eq!(r.interpreter, venv.join("bin/python").display().to_string());
    let mut ro = vec![venv.display().to_string(), FAKE_PYTHON_PREFIX.to_string()];
    ro.sort();
    assert_eq!(d.tests.ro, ro);
    assert_eq!(d.allowlist, strings(&["pkg/**"]), "the venv is not source");
    assert_parses(&d);
}

#[test]
fn cargo_crate_without_a_lockfile_keeps_the_one_prepare_resolves() {
    let f = Fixture::new(&[
        (
            "Cargo.toml",
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\n",
        ),
        ("src/lib.rs", "pub fn f() {}\n"),
        ("tests/it.rs", "#[test]\nfn t() {}\n"),
    ]);
    let d = f.detect();
    assert_eq!(d.ecosystem, Some(Ecosystem::Rust));
    assert_eq!(d.tests.runner, TestRunner::Cargo);
    assert_eq!(d.tests.selector_style, SelectorStyle::Append);
    assert_eq!(d.tests.command, strings(&["~/.cargo/bin/cargo", "test"]));
    assert_eq!(d.tests.ro, strings(&["~/.cargo", "~/.rustup"]));
    assert_eq!(d.tests.env["CARGO_HOME"], "{env}/cargo");
    assert_eq!(d.tests.env["RUSTUP_HOME"], "~/.rustup");
    assert_eq!(d.tests.env["CARGO_NET_OFFLINE"], "true");
    assert!(d.tests.env["PATH"].starts_with("~/.cargo/bin:"));
    let p = d.tests.prepare.as_ref().unwrap();
    assert_eq!(p.command, strings(&["~/.cargo/bin/cargo", "fetch"]));
    assert_eq!(p.env["CARGO_NET_OFFLINE"], "false");
    assert_eq!(
        p.inputs,
        strings(&["**/Cargo.toml", "Cargo.lock", "Cargo.toml"])
    );
    assert_eq!(p.links, strings(&["Cargo.lock"]));
    assert_eq!(d.allowlist, strings(&["src/**", "tests/**"]));
    assert_parses(&d);
}

#[test]
fn cargo_crate_with_a_lockfile_links_nothing_and_missing_toolchains_are_named() {
    let f = Fixture::new(&[
        ("Cargo.toml", "[package]\nname = \"tiny\"\n"),
        ("Cargo.lock", "version = 3\n"),
        ("src/main.rs", "fn main() {}\n"),
    ]);
    std::fs::remove_dir_all(f.home.path().join(".rustup")).unwrap();
    let d = f.detect();
    assert!(d.tests.prepare.as_ref().unwrap().links.is_empty());
    assert_eq!(d.tests.ro, strings(&["~/.cargo"]));
    assert!(
        d.warnings.iter().any(|w| w.contains("~/.rustup")),
        "{:?}",
        d.warnings
    );
    assert_parses(&d);
}

#[test]
fn package_json_with_vitest() {
    let f = Fixture::new(&[
        (
            "package.json",
            r#"{"name": "w", "devDependencies": {"vitest": "^1.6.0"}}"#,
        ),
        ("package-lock.json", "{}"),
        ("src/sum.ts", "export const sum = (a, b) => a + b;\n"),
        ("src/sum.test.ts", ""),
        ("vitest.config.ts", ""),
    ]);
    let d = f.detect();
    assert_eq!(d.ecosystem, Some(Ecosystem::JavaScript));
    assert_eq!(d.tests.runner, TestRunner::Vitest);
    assert_eq!(d.tests.selector_style, SelectorStyle::Append);
    assert_eq!(
        d.tests.command,
        strings(&[
            FAKE_NODE,
            "node_modules/vitest/vitest.mjs",
            "run",
            "--reporter=verbose"
        ])
    );
    assert_eq!(d.tests.ro, strings(&["/opt/node-v20"]));
    assert!(d.tests.env["PATH"].starts_with("/opt/node-v20/bin:"));
    let p = d.tests.prepare.as_ref().unwrap();
    assert_eq!(
        p.command,
        strings(&["/opt/node-v20/bin/npm", "ci", "--no-audit", "--no-fund"])
    );
    assert_eq!(p.inputs, strings(&["package-lock.json", "package.json"]));
    assert_eq!(p.links, strings(&["node_modules"]));
    assert_eq!(d.allowlist, strings(&["*.ts", "src/**"]));
    assert_parses(&d);
}

#[test]
fn package_json_with_jest_and_no_lockfile() {
    let f = Fixture::new(&[
        (
            "package.json",
            r#"{"scripts": {"test": "jest"}, "devDependencies": {"jest": "^29"}}"#,
        ),
        ("lib/sum.js", ""),
        ("__tests__/sum.test.js", ""),
        ("node_modules/jest/bin/jest.js", ""),
    ]);
    let mut host = f.host();
    host.node = None;
    let d = detect(f.repo.path(), &host);
    assert_eq!(d.tests.runner, TestRunner::Jest);
    assert_eq!(
        d.tests.command,
        strings(&["node", "node_modules/jest/bin/jest.js", "--verbose"])
    );
    assert!(d.tests.ro.is_empty());
    let p = d.tests.prepare.as_ref().unwrap();
    assert_eq!(
        p.command,
        strings(&["npm", "install", "--no-audit", "--no-fund"])
    );
    assert_eq!(p.links, strings(&["node_modules"]));
    assert!(
        d.warnings.iter().any(|w| w.contains("node")),
        "{:?}",
        d.warnings
    );
    assert_eq!(d.allowlist, strings(&["__tests__/**", "lib/**"]));
    assert_parses(&d);
}

#[test]
fn go_module() {
    let f = Fixture::new(&[
        ("go.mod", "module example.com/m\n\ngo 1.22\n"),
        ("go.sum", ""),
        ("main.go", "package main\n"),
        ("pkg/parse/parse_test.go", "package parse\n"),
    ]);
    let d = f.detect();
    assert_eq!(d.ecosystem, Some(Ecosystem::Go));
    assert_eq!(d.tests.runner, TestRunner::Go);
    assert_eq!(d.tests.selector_style, SelectorStyle::Append);
    assert_eq!(d.tests.command, strings(&[FAKE_GO, "test", "-v", "./..."]));
    assert_eq!(d.tests.ro, strings(&["/opt/go"]));
    assert_eq!(d.tests.env["GOMODCACHE"], "{env}/gomod");
    assert_eq!(d.tests.env["GOFLAGS"], "-mod=mod");
    assert_eq!(d.tests.env["GOCACHE"], "/tmp/gocache");
    assert_eq!(d.tests.env["GOPROXY"], "off");
    let p = d.tests.prepare.as_ref().unwrap();
    assert_eq!(p.command, strings(&[FAKE_GO, "mod", "download"]));
    assert_eq!(p.env["GOPROXY"], "", "prepare uses Go's default proxy");
    assert!(p.links.is_empty());
    assert_eq!(d.allowlist, strings(&["*.go", "pkg/**"]));
    let text = render_airlock_toml(&d);
    assert!(!text.contains("proxy.golang.org"), "{text}");
    assert_parses(&d);
}

#[test]
fn an_empty_tree_gets_the_default_command_and_a_warning() {
    let f = Fixture::new(&[]);
    let d = f.detect();
    assert_eq!(d.ecosystem, None);
    assert_eq!(d.tests.command, TestsConfig::default().command);
    assert_eq!(d.tests.runner, TestRunner::Unittest);
    assert!(d.tests.prepare.is_none());
    assert!(d.allowlist.is_empty());
    assert!(
        d.warnings
            .iter()
            .any(|w| w.contains("nothing was recognised")),
        "{:?}",
        d.warnings
    );
    assert!(render_airlock_toml(&d).contains("nothing was recognised"));
    assert_parses(&d);
}

#[test]
fn other_ecosystems_are_named_but_the_first_rule_wins() {
    let f = Fixture::new(&[
        ("Cargo.toml", "[package]\nname = \"x\"\n"),
        ("src/lib.rs", ""),
        ("python/tests/test_x.py", "import pytest\n"),
    ]);
    let d = f.detect();
    assert_eq!(d.ecosystem, Some(Ecosystem::Rust));
    assert!(
        d.findings
            .iter()
            .any(|l| l.contains("Also found Python: pytest")),
        "{:?}",
        d.findings
    );
    assert_parses(&d);
}

#[test]
fn the_broker_block_allows_every_granted_path() {
    for f in [
        Fixture::new(&[("conftest.py", ""), ("requirements.txt", "")]),
        Fixture::new(&[("Cargo.toml", "[package]\nname = \"x\"\n")]),
        Fixture::new(&[(".venv/bin/python", ""), ("test_a.py", "")]),
    ] {
        let d = f.detect();
        let block = render_broker_block(&d, "acme/calc");
        let table: toml::Table = toml::from_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        let repo = &table["repositories"]["acme/calc"];
        // No remote: approved branches go into the tree itself, with no pull request.
        assert_eq!(repo["remote"].as_str(), Some(path_text(&d.repo).as_str()));
        assert_eq!(
            repo["clone"].as_str(),
            Some(d.repo.display().to_string().as_str())
        );
        assert!(repo.get("forge_repo").is_none());
        assert!(repo.get("forge_token_env").is_none(), "{block}");
        let allowed: Vec<String> = repo["allow_ro"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let config = assert_parses(&d);
        let home = f.home.path().display().to_string();
        let mut expected: Vec<String> = config
            .tests
            .ro
            .iter()
            .map(|p| p.replacen('~', &home, 1))
            .collect();
        expected.push(path_text(&config.paths.envs_dir));
        expected.sort();
        assert_eq!(allowed, expected, "{block}");
        assert!(allowed.iter().all(|p| Path::new(p).is_absolute()));
    }
}

/// Where approved branches go, by remote: a GitHub remote gets its `owner/name` and the forge
/// token, another forge neither (no pull request), no remote the tree itself; each but GitHub
/// says so in a note. Both files name the same socket, runs root and environments.
#[test]
fn the_remote_decides_the_forge_keys_and_both_files_agree() {
    let f = Fixture::new(&[("test_a.py", "")]);
    let mut d = f.detect();
    assert_eq!(d.remote, Remote::None);
    assert!(
        d.publication_note()
            .unwrap()
            .contains("git remote add origin")
    );
    for (remote, forge) in [
        (
            classify_remote(
                "origin".into(),
                "https://github.com/acme/calc.git".into(),
                None,
            ),
            Some(("acme/calc", None)),
        ),
        (
            classify_remote(
                "origin".into(),
                "https://ghe.acme.test/team/calc.git".into(),
                Some("https://ghe.acme.test/api/v3/"),
            ),
            Some(("team/calc", Some("https://ghe.acme.test/api/v3"))),
        ),
        (
            classify_remote(
                "up".into(),
                "https://git.acme.test/acme/calc.git".into(),
                None,
            ),
            None,
        ),
    ] {
        d.remote = remote;
        let text = render_broker_toml(&d, "calc", Path::new("/etc/airlock-test/airlock.toml"));
        let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let repo = &table["repositories"]["calc"];
        match forge {
            Some((slug, api)) => {
                assert_eq!(repo["remote"].as_str(), Some("origin"));
                assert_eq!(repo["forge_repo"].as_str(), Some(slug), "{text}");
                assert_eq!(repo.get("github_api").and_then(|v| v.as_str()), api);
                assert_eq!(
                    repo["forge_token_env"].as_str(),
                    Some("AIRLOCK_FORGE_TOKEN")
                );
                assert!(d.publication_note().is_none());
            }
            None => {
                assert_eq!(repo["remote"].as_str(), Some("up"));
                assert!(repo.get("forge_repo").is_none() && repo.get("forge_token_env").is_none());
                let note = d.publication_note().unwrap();
                assert!(
                    note.contains("not on GitHub") && note.contains("GitLab"),
                    "{note}"
                );
            }
        }
        let config = assert_parses(&d);
        assert_eq!(
            table["socket"].as_str().map(PathBuf::from),
            config.broker.socket
        );
        assert_eq!(
            table["runs_root"].as_str().map(PathBuf::from),
            Some(config.paths.runs_root.clone())
        );
        assert!(config.paths.runs_root.starts_with("/var/lib/airlock-test"));
        assert!(
            repo["allow_ro"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p.as_str().map(Path::new) == Some(config.paths.envs_dir.as_path())),
            "{text}"
        );
    }
}

#[test]
fn github_remotes_give_owner_and_name() {
    for url in [
        "https://github.com/acme/calc.git",
        "https://github.com/acme/calc",
        "https://x-access-token:secret@github.com/acme/calc.git",
        "git@github.com:acme/calc.git",
        "ssh://git@github.com/acme/calc.git",
        "ssh://git@github.com:22/acme/calc/",
    ] {
        assert_eq!(github_slug(url).as_deref(), Some("acme/calc"), "{url}");
    }
    for url in [
        "https://gitlab.com/acme/calc.git",
        "/srv/git/calc.git",
        "https://github.com/acme",
        "https://github.com/acme/calc/tree/main",
        "git@example.com:acme/calc.git",
    ] {
        assert_eq!(github_slug(url), None, "{url}");
    }
}

#[test]
fn an_existing_file_is_kept_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("airlock.toml");
    std::fs::write(&path, "# mine\n").unwrap();
    let text = render_airlock_toml(&Fixture::new(&[]).detect());
    let err = write_config(&path, &text, false).unwrap_err();
    assert!(matches!(err, InitError::Exists { .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
    write_config(&path, &text, true).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    let err = write_config(&dir.path().join("bad.toml"), "[tests]\nrunner = 1\n", true);
    assert!(matches!(err, Err(InitError::Generated(_))));
    assert!(!dir.path().join("bad.toml").exists());
}

#[test]
fn strings_are_escaped_for_toml() {
    let t: toml::Table = toml::from_str(&format!("k = {}", quote("a\"b\\c\n\u{1}"))).unwrap();
    assert_eq!(t["k"].as_str(), Some("a\"b\\c\n\u{1}"));
    assert_eq!(
        glob_literal("requirements[dev].txt"),
        "requirements[[]dev[]].txt"
    );
}

#[test]
fn a_remote_whose_host_says_gitlab_or_that_gitlab_api_names_is_a_gitlab_project() {
    use super::{ForgeApi, classify_remote_with};
    for (url, api, expected) in [
        (
            "https://gitlab.com/plat/tools/calc.git",
            ForgeApi::FromHost,
            Some(("plat/tools/calc", "https://gitlab.com/api/v4")),
        ),
        (
            "git@gitlab.acme.test:plat/calc.git",
            ForgeApi::FromHost,
            Some(("plat/calc", "https://gitlab.acme.test/api/v4")),
        ),
        (
            "http://code-GitLab.example/plat/calc",
            ForgeApi::FromHost,
            Some(("plat/calc", "http://code-GitLab.example/api/v4")),
        ),
        (
            "https://git.acme.test/plat/calc.git",
            ForgeApi::GitLab("https://git.acme.test/api/v4/"),
            Some(("plat/calc", "https://git.acme.test/api/v4")),
        ),
        (
            "https://git.acme.test/plat/calc.git",
            ForgeApi::FromHost,
            None,
        ),
        ("https://gitlab.com/solo.git", ForgeApi::FromHost, None),
    ] {
        let remote = classify_remote_with("origin".into(), url.into(), api);
        match expected {
            Some((project, api_url)) => assert_eq!(
                remote,
                Remote::GitLab {
                    name: "origin".into(),
                    url: url.into(),
                    project: project.into(),
                    api: api_url.into(),
                },
                "{url}"
            ),
            None => assert!(matches!(remote, Remote::Other { .. }), "{url}: {remote:?}"),
        }
    }
    // github.com stays GitHub's whatever the rule for GitLab says.
    assert!(matches!(
        classify_remote_with(
            "origin".into(),
            "https://github.com/gitlab/calc.git".into(),
            ForgeApi::FromHost
        ),
        Remote::GitHub { .. }
    ));

    // airlock.toml gets [gitlab] (its api_url and project set) instead of [github]; broker.toml
    // pushes to the remote and names the repository by its project path.
    let f = Fixture::new(&[("test_a.py", "")]);
    let mut d = f.detect();
    d.remote = classify_remote_with(
        "origin".into(),
        "git@gitlab.acme.test:plat/calc.git".into(),
        ForgeApi::FromHost,
    );
    d.name = super::tree::repository_name(&d.repo, &d.remote);
    assert_eq!(d.name, "plat/calc");
    let text = render_airlock_toml(&d);
    assert!(
        text.contains("[gitlab]") && !text.contains("[github]"),
        "{text}"
    );
    assert!(text.contains("# token_env = \"GITLAB_TOKEN\""), "{text}");
    let config = assert_parses(&d);
    assert_eq!(config.gitlab.api_url, "https://gitlab.acme.test/api/v4");
    assert_eq!(config.gitlab.projects, ["plat/calc"]);
    assert_eq!(config.broker.repository.as_deref(), Some("plat/calc"));
    let broker = render_broker_toml(&d, &d.name, Path::new("/etc/airlock-test/airlock.toml"));
    let table: toml::Table = toml::from_str(&broker).unwrap_or_else(|e| panic!("{e}\n{broker}"));
    let repo = &table["repositories"]["plat/calc"];
    assert_eq!(repo["remote"].as_str(), Some("origin"), "{broker}");
    assert!(repo.get("forge_repo").is_none(), "{broker}");
    // ... and opens its draft merge requests through the forge table.
    let forge = &repo["forge"];
    assert_eq!(forge["kind"].as_str(), Some("gitlab"), "{broker}");
    assert_eq!(
        forge["api_url"].as_str(),
        Some("https://gitlab.acme.test/api/v4")
    );
    assert_eq!(forge["project"].as_str(), Some("plat/calc"));
    assert_eq!(forge["token_env"].as_str(), Some("AIRLOCK_FORGE_TOKEN"));
    assert!(
        broker.contains("# feedback_min_access = \"developer\""),
        "{broker}"
    );
    let note = d.publication_note().unwrap();
    assert!(
        note.contains("plat/calc") && note.contains("kind = \"gitlab\""),
        "{note}"
    );
}
