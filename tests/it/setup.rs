//! `airlock init` then `airlock doctor --config`, as a newcomer runs them: the generated
//! airlock.toml is used as written, prepare installs the test runner from the package registry
//! in the sandbox (with the network), and the base inventory is taken at the pin.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

fn airlock(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .current_dir(cwd)
        // The records (prepared environments among them) go to the data directory.
        .env("XDG_DATA_HOME", cwd)
        .env_remove("AIRLOCK_HOME")
        .env_remove("AIRLOCK_CONFIG")
        .output()
        .unwrap()
}

/// `airlock doctor --config airlock.toml --repo repo` in `dir`.
fn run_doctor(dir: &Path) -> Output {
    airlock(
        dir,
        &["doctor", "--config", "airlock.toml", "--repo", "repo"],
    )
}

fn repo_with(dir: &Path, files: &[(&str, &str)]) {
    airlock_testkit::git::repo_with(&dir.join("repo"), files);
}

/// Re-date the fixture's one commit (author and committer), as a project of that day.
fn commit_dated(repo: &Path, date: &str) {
    let amend = Command::new("git")
        .args(["commit", "-q", "--amend", "--no-edit", "--date", date])
        .current_dir(repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .unwrap();
    assert!(amend.status.success(), "{}", text(&amend));
}

/// `airlock init --repo repo` in `dir`, which must succeed; the airlock.toml it wrote.
fn init_config(dir: &Path) -> String {
    let init = airlock(dir, &["init", "--repo", "repo"]);
    assert!(init.status.success(), "{}", text(&init));
    std::fs::read_to_string(dir.join("airlock.toml")).unwrap()
}

/// [`run_doctor`], which must succeed; its output.
fn doctor_succeeds(dir: &Path, config: &str) -> String {
    let doctor = run_doctor(dir);
    let out = text(&doctor);
    assert!(doctor.status.success(), "{out}\n{config}");
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn init_then_doctor_on_a_pytest_project_builds_its_environment_and_takes_the_inventory() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[
            ("mod.py", "def add(a, b):\n    return a + b\n"),
            ("conftest.py", ""),
            ("requirements.txt", "iniconfig\n"),
            (
                "tests/test_mod.py",
                "from mod import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\ndef test_known_bad():\n    assert add(1, 2) == 4\n",
            ),
        ],
    );
    let init = airlock(dir.path(), &["init", "--repo", "repo"]);
    assert!(init.status.success(), "{}", text(&init));
    assert!(
        String::from_utf8_lossy(&init.stdout).contains("allow_ro"),
        "{}",
        text(&init)
    );
    let config = std::fs::read_to_string(dir.path().join("airlock.toml")).unwrap();
    assert!(config.contains("runner = \"pytest\""), "{config}");
    assert!(config.contains("[tests.prepare]"), "{config}");

    let doctor = run_doctor(dir.path());
    let out = text(&doctor);
    assert!(doctor.status.success(), "{out}");
    assert!(
        out.contains("runner        pytest (matches the command)"),
        "{out}"
    );
    assert!(out.contains("prepare       built"), "{out}");
    assert!(out.contains("collected     2 tests"), "{out}");
    assert!(
        out.contains("2 tests at base (the listing found 2): 1 pass, 1 fail"),
        "{out}"
    );
    assert!(
        out.contains("failing at base: tests/test_mod.py::test_known_bad"),
        "{out}"
    );
    assert!(out.contains("why: assert 3 == 4"), "{out}");
    assert!(
        out.contains("runner says   passed 1, failed 1, errors 0, skipped 0"),
        "{out}"
    );
    // The command built it as the sandbox's host identity; prepare took it back, so every file
    // of it is the caller's, which later runs read as their own.
    let own_uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap();
    let envs = dir.path().join("airlock/envs");
    let mut stack = vec![envs.clone()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = entry.path().symlink_metadata().unwrap();
            assert_eq!(
                meta.uid(),
                own_uid,
                "{} was not taken back",
                entry.path().display()
            );
            if meta.is_dir() {
                stack.push(entry.path());
            }
            files += 1;
        }
    }
    assert!(files > 10, "{} holds {files} entries", envs.display());
    // The environment is kept: a second check reuses it.
    let again = run_doctor(dir.path());
    assert!(
        text(&again).contains("prepare       reused"),
        "{}",
        text(&again)
    );
    // Reused without working the recipe out again, it still grants what the environment needs.
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("2 tests at base (the listing found 2): 1 pass, 1 fail"),
        "{}",
        text(&again)
    );
}

#[test]
fn doctor_names_the_key_when_the_runner_does_not_match_the_command() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[("tests/test_x.py", "def test_x():\n    pass\n")],
    );
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[tests]\ncommand = [\"python3\", \"-m\", \"pytest\", \"-rA\"]\nrunner = \"unittest\"\n",
    )
    .unwrap();
    let doctor = run_doctor(dir.path());
    let out = text(&doctor);
    assert_eq!(doctor.status.code(), Some(2), "{out}");
    assert!(out.contains("tests.runner"), "{out}");
    assert!(out.contains("runs pytest"), "{out}");
}

/// A project the way a real one declares itself: a `[dependency-groups]` table names its test
/// dependencies, its build writes a version file into the tree (as `setuptools_scm` and
/// versioneer do), and its tests import both. `init` proposes the Python recipe and `doctor`
/// builds it unchanged: an isolated virtualenv, the project installed editable at the tree's
/// fixed path, the group installed, the generated file kept and shown in every test run.
#[test]
fn init_then_doctor_builds_the_project_its_own_way_with_a_group_and_a_generated_file() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=64\"]\nbuild-backend = \"setuptools.build_meta\"\n\n\
                 [project]\nname = \"calc\"\nversion = \"1.2.3\"\n\n\
                 [dependency-groups]\ntests = [\"pytest\", \"iniconfig\"]\nlint = [\"ruff\"]\n\n\
                 [tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n\n\
                 [tool.setuptools]\npackages = [\"calc\"]\n",
            ),
            (
                "setup.py",
                "import pathlib\nfrom setuptools import setup\n\n\
                 # The build generates the version module, as setuptools_scm does.\n\
                 pathlib.Path(\"calc/_version.py\").write_text(\"version = '1.2.3'\\n\")\n\
                 setup()\n",
            ),
            (
                "calc/__init__.py",
                "from calc._version import version\n\n\ndef add(a, b):\n    return a + b\n",
            ),
            (
                "tests/test_calc.py",
                "import site\nimport sys\n\nimport iniconfig\n\nimport calc\n\n\n\
                 def test_version_from_the_generated_file():\n    assert calc.version == '1.2.3'\n\n\n\
                 def test_add():\n    assert calc.add(1, 2) == 3\n\n\n\
                 def test_the_group_is_installed():\n    assert iniconfig.IniConfig\n\n\n\
                 def test_only_the_venv_is_on_the_path():\n    assert sys.prefix != sys.base_prefix\n    \
                 assert all(p.startswith(sys.prefix) for p in site.getsitepackages()), site.getsitepackages()\n\n\n\
                 def test_the_tree_is_at_the_fixed_path():\n    assert calc.__file__ == '/airlock/repo/calc/__init__.py', calc.__file__\n",
            ),
        ],
    );
    // Committed in 2025, as a project requiring setuptools 64 (2022) would be: the releases
    // are resolved as of the commit.
    commit_dated(&dir.path().join("repo"), "2025-06-02T00:00:00Z");
    let config = init_config(dir.path());
    assert!(config.contains("[tests.prepare.python]"), "{config}");
    assert!(config.contains("groups = [\"tests\"]"), "{config}");
    assert!(config.contains("editable = true"), "{config}");

    let out = doctor_succeeds(dir.path(), &config);
    assert!(out.contains("prepare       built"), "{out}");
    assert!(
        out.contains("5 tests at base (the listing found 5): 5 pass"),
        "{out}"
    );
    assert!(
        out.contains("resolved against releases up to the pinned commit, 2025-06-02T00:00:00Z")
            || out.contains("resolved against releases up to Python "),
        "{out}"
    );
    assert!(
        out.contains("kept from the build, shown in every run: "),
        "{out}"
    );
    assert!(out.contains("calc/_version.py"), "{out}");
    // The generated file is kept beside the environment; the tree at the pin never had it.
    let envs = dir.path().join("airlock/envs");
    let record = std::fs::read_dir(&envs)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("prepare.json"))
        .find(|p| p.exists())
        .unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    let generated: Vec<&str> = record["generated"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(generated.contains(&"calc/_version.py"), "{record}");
    assert!(!dir.path().join("repo/calc/_version.py").exists());
}

/// A project that pins a build backend older than editable builds (setuptools < 64, as
/// projects of 2022 did), whose requirements file installs the project itself (`-e .`) and whose
/// tox environment names a test dependency: `init` takes the tox deps, prepare passes the
/// requirements file without the project and installs the project the legacy way (pip < 25.3,
/// `setup.py develop`) once the modern install says the backend has no `build_editable`; the
/// tests import the tree at the fixed path.
#[test]
fn a_project_whose_backend_builds_no_editable_wheel_is_installed_the_legacy_way() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=61,<64\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\n\
                 [project]\nname = \"oldcalc\"\nversion = \"0.1\"\n\n[tool.setuptools]\npackages = [\"oldcalc\"]\n",
            ),
            ("setup.cfg", "[tool:pytest]\ntestpaths = tests\n"),
            ("requirements_test.txt", "-e .\npytest\n"),
            (
                "tox.ini",
                "[tox]\nenvlist = py3\n[testenv]\ndeps =\n    -rrequirements_test.txt\n    iniconfig\n    airlock-no-such-distribution-for-tests\ncommands = pytest\n",
            ),
            ("oldcalc/__init__.py", "def add(a, b):\n    return a + b\n"),
            (
                "tests/test_oldcalc.py",
                "import iniconfig\n\nimport oldcalc\n\n\n\
                 def test_add():\n    assert oldcalc.add(1, 2) == 3\n\n\n\
                 def test_the_tree_is_imported_in_place():\n    assert oldcalc.__file__ == '/airlock/repo/oldcalc/__init__.py', oldcalc.__file__\n\n\n\
                 def test_the_tox_dependency_is_installed():\n    assert iniconfig.IniConfig\n",
            ),
        ],
    );
    // Committed in November 2022, when setuptools 63 was what such a pin resolved to.
    commit_dated(&dir.path().join("repo"), "2022-11-15T00:00:00Z");
    let config = init_config(dir.path());
    assert!(
        config.contains("optional = [\"airlock-no-such-distribution-for-tests\", \"iniconfig\"]"),
        "{config}"
    );
    assert!(
        config.contains("requirements = [\"requirements_test.txt\"]"),
        "{config}"
    );
    let out = doctor_succeeds(dir.path(), &config);
    assert!(
        out.contains("3 tests at base (the listing found 3): 3 pass"),
        "{out}"
    );
    assert!(
        out.contains("optional packages that did not install, left out: airlock-no-such-distribution-for-tests"),
        "{out}"
    );
    let envs = dir.path().join("airlock/envs");
    let record = std::fs::read_dir(&envs)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("prepare.json"))
        .find(|p| p.exists())
        .unwrap();
    let record = std::fs::read_to_string(record).unwrap();
    assert!(
        record.contains("builds no editable wheel; installing it the legacy way"),
        "{record}"
    );
    assert!(record.contains("pip<25.3"), "{record}");
}

/// `[[tests.services]]`: a real PostgreSQL server from the host's binaries and a Python HTTP
/// server, each started inside the test run's own sandbox on its private loopback, waited for
/// (a port, a command), their variables given to the tests; the suite reaches both. A service
/// that never becomes ready stops `doctor` before any test, naming it and quoting its output.
#[test]
fn services_start_inside_the_sandbox_before_the_tests_and_one_never_ready_is_named() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[
            ("tests/__init__.py", ""),
            (
                "tests/test_services.py",
                "import os\nimport subprocess\nimport unittest\nimport urllib.request\n\n\n\
             class Services(unittest.TestCase):\n    \
             def test_postgres_answers(self):\n        \
             out = subprocess.run([os.environ['PG_BIN'] + '/psql', '-d', 'postgres', '-tAc', 'select 40 + 2'],\n            \
             capture_output=True, text=True, check=True).stdout\n        \
             self.assertEqual(out.strip(), '42')\n\n    \
             def test_http_answers(self):\n        \
             with urllib.request.urlopen(os.environ['FILES_URL'], timeout=5) as r:\n            \
             self.assertEqual(r.status, 200)\n",
            ),
        ],
    );
    let bin = airlock_testkit::pg::bin_dir();
    let python = std::fs::canonicalize(
        String::from_utf8(
            Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    )
    .unwrap();
    let prefix = python.parent().unwrap().parent().unwrap().to_path_buf();
    let config = |services: &str| {
        format!(
            "[tests]\ncommand = [\"{py}\", \"-m\", \"unittest\", \"-v\"]\nrunner = \"unittest\"\n\
             ro = [\"{prefix}\"]\n\n{services}",
            py = python.display(),
            prefix = prefix.display(),
        )
    };
    let services = format!(
        "[[tests.services]]\nname = \"postgres\"\n\
         command = [\"sh\", \"-c\", \"{bin}/initdb -D /tmp/pg -A trust -U airlock >/dev/null && exec {bin}/postgres -D /tmp/pg -k /tmp -c listen_addresses=127.0.0.1 -p 54329\"]\n\
         ready_command = [\"{bin}/pg_isready\", \"-h\", \"127.0.0.1\", \"-p\", \"54329\"]\n\
         ready_timeout = \"60s\"\n\
         env = {{ PGHOST = \"127.0.0.1\", PGPORT = \"54329\", PGUSER = \"airlock\", PG_BIN = \"{bin}\" }}\n\n\
         [[tests.services]]\nname = \"files\"\ncommand = [\"{py}\", \"-m\", \"http.server\", \"8765\", \"--bind\", \"127.0.0.1\", \"--directory\", \"/tmp\"]\n\
         ready_port = 8765\nenv = {{ FILES_URL = \"http://127.0.0.1:8765/\" }}\n",
        bin = bin.display(),
        py = python.display(),
    );
    std::fs::write(dir.path().join("airlock.toml"), config(&services)).unwrap();
    let doctor = run_doctor(dir.path());
    let out = text(&doctor);
    assert!(doctor.status.success(), "{out}");
    assert!(out.contains("2 tests at base: 2 pass, 0 fail"), "{out}");

    // A service that never listens: named, with its output, before any test runs.
    let never = "[[tests.services]]\nname = \"mute\"\n\
                 command = [\"sh\", \"-c\", \"echo starting up; exec sleep 60\"]\n\
                 ready_port = 8766\nready_timeout = \"2s\"\n";
    std::fs::write(dir.path().join("airlock.toml"), config(never)).unwrap();
    let doctor = run_doctor(dir.path());
    let out = text(&doctor);
    assert!(!doctor.status.success(), "{out}");
    assert!(out.contains("service \"mute\""), "{out}");
    assert!(
        out.contains("was not ready within 2 s (waiting for a connection to 127.0.0.1:8766)"),
        "{out}"
    );
    assert!(out.contains("starting up"), "{out}");

    // A readiness port with no network is refused at load, naming the key.
    let mut none = config(never);
    none = none.replace(
        "runner = \"unittest\"\n",
        "runner = \"unittest\"\nnetwork = \"none\"\n",
    );
    std::fs::write(dir.path().join("airlock.toml"), none).unwrap();
    let doctor = run_doctor(dir.path());
    let out = text(&doctor);
    assert_eq!(doctor.status.code(), Some(2), "{out}");
    assert!(out.contains("tests.services[0].ready_port"), "{out}");
}

/// Doctor says why tests fail at base: the runner's own counts, each failing test's reason,
/// and a diagnosis naming the key to change (here a module the environment lacks).
#[test]
fn doctor_says_why_tests_fail_at_base_and_which_key_to_change() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[
            ("tests/__init__.py", ""),
            (
                "tests/test_x.py",
                "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n\n    \
                 def test_needs_a_module(self):\n        import airlock_absent_module  # noqa: F401\n\n    \
                 @unittest.skip('later')\n    def test_later(self):\n        pass\n",
            ),
        ],
    );
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\nrunner = \"unittest\"\n",
    )
    .unwrap();
    let doctor = run_doctor(dir.path());
    let out = text(&doctor);
    assert!(doctor.status.success(), "{out}");
    assert!(
        out.contains("runner says   passed 1, failed 0, errors 1, skipped 1"),
        "{out}"
    );
    assert!(
        out.contains("why: ModuleNotFoundError: No module named 'airlock_absent_module'"),
        "{out}"
    );
    assert!(
        out.contains("diagnosis     the tests import airlock_absent_module")
            && out.contains("tests.prepare.python"),
        "{out}"
    );
}

/// `init` reads the project's CI: a workflow whose job starts a PostgreSQL image becomes a
/// `[[tests.services]]` run from the host's binaries, with the job's database URL; `doctor`
/// runs the suite against it unchanged (the database the image names is created).
#[test]
fn init_turns_the_ci_database_service_into_a_service_the_suite_reaches() {
    let dir = tempfile::tempdir().unwrap();
    repo_with(
        dir.path(),
        &[
            (
                ".github/workflows/ci.yml",
                "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    env:\n      \
                 DATABASE_URL: postgresql://app@localhost:5433/shop\n    services:\n      db:\n        \
                 image: postgres:16\n        env:\n          POSTGRES_USER: app\n          POSTGRES_DB: shop\n        \
                 ports: ['5433:5432']\n    steps:\n      - run: python -m unittest -v\n",
            ),
            ("tests/__init__.py", ""),
            (
                "tests/test_db.py",
                "import glob\nimport os\nimport subprocess\nimport unittest\n\n\n\
                 class Db(unittest.TestCase):\n    def test_the_database_of_the_url_answers(self):\n        \
                 psql = sorted(glob.glob('/usr/lib/postgresql/*/bin/psql'))[-1]\n        \
                 url = os.environ['DATABASE_URL']\n        \
                 out = subprocess.run([psql, url, '-tAc', 'select current_database()'],\n            \
                 capture_output=True, text=True, check=True).stdout\n        \
                 self.assertEqual(out.strip(), 'shop')\n",
            ),
        ],
    );
    let config = init_config(dir.path());
    assert!(config.contains("[[tests.services]]"), "{config}");
    assert!(
        config.contains("The project's CI runs its tests with `python -m unittest -v`"),
        "{config}"
    );
    let out = doctor_succeeds(dir.path(), &config);
    assert!(
        out.contains("1 tests at base: 1 pass, 0 fail"),
        "{out}\n{config}"
    );
}
