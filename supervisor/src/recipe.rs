//! `[tests.prepare.python]`: the Python environment recipe, turned into the steps the prepare
//! command runs in the sandbox.
//!
//! The environment is a virtualenv of its own in `{env}/venv` (never the interpreter's
//! site-packages: what the tests import is what prepare installed), with a pip recent enough
//! for PEP 735 dependency groups and for resolving as of a date. The project is installed
//! editable from the tree at [`SANDBOX_TREE`], the one path every test command sees its tree
//! at, so the `.pth` file and finder the install writes point where every later run finds the
//! tree; what its build generates in the tree (a `setuptools_scm` or versioneer version file, an
//! `.egg-info`, a compiled extension) is kept by prepare and shown in every run. Releases are
//! those uploaded before the pinned commit was committed, unless `as_of = "latest"`; a
//! lockfile's pins constrain every install.
//!
//! [`SANDBOX_TREE`]: airlock_policies::testrun::SANDBOX_TREE

use crate::config::{AsOf, PythonRecipe};
use std::path::Path;

/// The first pip that reads dependency groups (`--group`, 25.1) and resolves as of a date
/// (`--uploaded-prior-to`, 26.0).
pub const PIP_REQUIREMENT: &str = "pip>=26";

/// The lockfiles whose pins the recipe reads, by file name; the recipe as written, `LOCKFILES`
/// and its check belong to the configuration, which reads them when the file loads.
pub use crate::config::{LOCKFILES, check_python_recipe as check};

/// The name of the constraints file prepare writes into `{env}` from the lockfile.
pub const CONSTRAINTS_FILE: &str = "lock-constraints.txt";

/// The file prepare writes into `{env}` saying which releases the recipe resolved against.
pub const RESOLUTION_FILE: &str = "resolved-as-of.txt";

/// The file prepare writes into `{env}` saying which interpreter `interpreter = "auto"` chose
/// and why.
pub const INTERPRETER_FILE: &str = "interpreter.txt";

mod lock;
mod requirements;

pub use lock::{lock_constraints, marker_holds};
pub use requirements::{closure as requirements_closure, without_the_project};

/// The file prepare writes into `{env}` naming the installation of the interpreter
/// `interpreter = "auto"` chose, which every test run is granted; read back when the
/// environment is reused.
pub const INTERPRETER_GRANT_FILE: &str = "interpreter-grant.txt";

/// Where the recipe's venv lives inside the environment directory.
pub fn venv_dir(env_dir: &Path) -> std::path::PathBuf {
    env_dir.join("venv")
}

/// `2021-03-04T05:06:07Z`: the pinned commit's time as pip's `--uploaded-prior-to` takes it.
pub fn as_of_text(commit_time: i64) -> String {
    let text = airlock_audit::Timestamp(commit_time.saturating_mul(1_000_000)).to_rfc3339();
    match text.split_once('.') {
        Some((whole, _)) => format!("{whole}Z"),
        None => text,
    }
}

/// The steps of the recipe, each an argv run in turn in the tree at [`SANDBOX_TREE`]:
/// create the venv, bring its pip up to [`PIP_REQUIREMENT`], install (a venv without pip
/// alone when there is nothing to install). `interpreter` is the
/// recipe's, expanded; `as_of` the `--uploaded-prior-to` value (`None`: today's releases);
/// `constraints` the constraints file written from the lockfile.
///
/// [`SANDBOX_TREE`]: airlock_policies::testrun::SANDBOX_TREE
pub fn steps(
    recipe: &PythonRecipe,
    interpreter: &str,
    env_dir: &Path,
    as_of: Option<&str>,
    constraints: Option<&Path>,
) -> Vec<Vec<String>> {
    let resolution = Resolution {
        as_of: as_of.map(str::to_string),
        why: String::new(),
        editable_as_of: None,
    };
    steps_with(recipe, interpreter, env_dir, &resolution, constraints, None)
}

/// The first interpreter the newest pip runs on: an older one gets the newest pip it can run,
/// which reads no dependency group and resolves no date.
pub const MODERN_PIP_PYTHON: (u32, u32) = (3, 9);

/// [`steps`], for an interpreter older than [`MODERN_PIP_PYTHON`] when `legacy_groups` is
/// given: its pip is brought up to the newest it runs, and the groups are passed as the
/// requirements they hold (read by airlock from the pinned `pyproject.toml`, see
/// [`group_requirements`]); `resolution.as_of` must then be `None`.
///
/// With `resolution.editable_as_of` (a pin older than [`EDITABLE_BUILDS_SINCE`]) an editable
/// project is installed in two steps: the project (not editable) with everything it needs, as
/// of the pin; then the project alone, editable (`--no-deps`), its build environment resolved as
/// of that later date, so that its backend builds editable wheels.
pub fn steps_with(
    recipe: &PythonRecipe,
    interpreter: &str,
    env_dir: &Path,
    resolution: &Resolution,
    constraints: Option<&Path>,
    legacy_groups: Option<&[String]>,
) -> Vec<Vec<String>> {
    let venv = venv_dir(env_dir);
    let python = venv.join("bin/python").display().to_string();
    let pip = |more: &[&str]| -> Vec<String> {
        [python.as_str(), "-m", "pip", "install", "--no-input"]
            .iter()
            .chain(["--disable-pip-version-check", "--no-cache-dir"].iter())
            .chain(more.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let as_of = resolution.as_of.as_deref();
    let split_editable = recipe.editable && resolution.editable_as_of.is_some();
    let mut install = pip(&[]);
    let before = install.len();
    if recipe.editable {
        if !split_editable {
            install.push("-e".into());
        }
        if recipe.extras.is_empty() {
            install.push(".".into());
        } else {
            install.push(format!(".[{}]", recipe.extras.join(",")));
        }
    }
    match legacy_groups {
        Some(requirements) => install.extend(requirements.iter().cloned()),
        None => {
            for group in &recipe.groups {
                install.push("--group".into());
                install.push(group.clone());
            }
        }
    }
    for file in &recipe.requirements {
        install.push("-r".into());
        install.push(file.clone());
    }
    install.extend(recipe.packages.iter().cloned());
    let mut venv_step = vec![interpreter.to_string(), "-m".into(), "venv".into()];
    if install.len() == before && recipe.optional.is_empty() {
        // Nothing to install: the standard library alone, and no network needed.
        venv_step.push("--without-pip".into());
    }
    venv_step.push(venv.display().to_string());
    let mut out = vec![venv_step];
    let has_install = install.len() > before;
    if has_install || !recipe.optional.is_empty() {
        out.push(pip(&[if legacy_groups.is_some() {
            "pip"
        } else {
            PIP_REQUIREMENT
        }]));
        let mut options = Vec::new();
        if let Some(date) = as_of {
            options.push("--uploaded-prior-to".to_string());
            options.push(date.to_string());
        }
        if let Some(file) = constraints {
            options.push("-c".to_string());
            options.push(file.display().to_string());
        }
        install.splice(before..before, options.clone());
        if has_install {
            out.push(install);
        }
        if let (true, Some(date)) = (split_editable, &resolution.editable_as_of) {
            out.push(pip(&[
                "--uploaded-prior-to",
                date,
                "--no-deps",
                "--force-reinstall",
                "-e",
                ".",
            ]));
        }
        if !recipe.optional.is_empty() {
            // Each on its own, as of the same date and pins; one that does not install is
            // left out and named in {env}/optional-left-out.txt.
            let one = pip(&options.iter().map(String::as_str).collect::<Vec<_>>());
            let quoted: Vec<String> = one.iter().map(|a| shell_quoted(a)).collect();
            let left_out = env_dir.join(OPTIONAL_LEFT_OUT_FILE);
            let script = format!(
                ": > {out}; for p in \"$@\"; do {pip} \"$p\" || {{ echo \"airlock: $p did not \
                 install; left out\"; echo \"$p\" >> {out}; }}; done",
                out = shell_quoted(&left_out.display().to_string()),
                pip = quoted.join(" ")
            );
            let mut step = vec!["/bin/sh".to_string(), "-c".into(), script, "sh".into()];
            step.extend(recipe.optional.iter().cloned());
            out.push(step);
        }
    }
    out
}

/// The file naming the optional packages that did not install.
pub const OPTIONAL_LEFT_OUT_FILE: &str = "optional-left-out.txt";

fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The version a build computed from git would give the pin (`setuptools_scm`, `hatch-vcs`),
/// from the newest tag reachable from it and the commits since: `v1.2.3` at the tag is `1.2.3`,
/// three commits later `1.2.3.post3`. A worktree holds the pinned commit alone (no tag, no
/// history), where such a build would say `0.1.dev1`; prepare passes this as
/// `SETUPTOOLS_SCM_PRETEND_VERSION`. `None` when the tag is not a version.
pub fn scm_version(tag: &str, distance: usize) -> Option<String> {
    let version = tag
        .rsplit('/')
        .next()
        .unwrap_or(tag)
        .trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '-' || c == '_');
    let valid = !version.is_empty()
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.')
        && !version.contains("..");
    if !valid {
        return None;
    }
    Some(if distance == 0 {
        version.to_string()
    } else {
        format!("{version}.post{distance}")
    })
}

/// The requirements PEP 735 dependency groups of `pyproject.toml` hold, `include-group`s
/// followed (each group once); the error names a group that is not there.
pub fn group_requirements(pyproject: &str, groups: &[String]) -> Result<Vec<String>, String> {
    let doc: toml::Table = pyproject
        .parse()
        .map_err(|e| format!("pyproject.toml is not TOML: {e}"))?;
    let table = doc
        .get("dependency-groups")
        .and_then(|g| g.as_table())
        .ok_or("pyproject.toml has no [dependency-groups] table")?;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo: Vec<String> = groups.iter().rev().cloned().collect();
    while let Some(group) = todo.pop() {
        if !seen.insert(group.clone()) {
            continue;
        }
        let items = table
            .get(&group)
            .and_then(|g| g.as_array())
            .ok_or_else(|| format!("pyproject.toml has no dependency group {group:?}"))?;
        for item in items {
            if let Some(requirement) = item.as_str() {
                out.push(requirement.to_string());
            } else if let Some(included) = item
                .as_table()
                .and_then(|t| t.get("include-group"))
                .and_then(|g| g.as_str())
            {
                todo.push(included.to_string());
            }
        }
    }
    Ok(out)
}

/// When each CPython minor version was first released (its `.0`), seconds since the epoch: a
/// release of the libraries older than the interpreter was never made for it, so "as of the
/// pin" is never earlier than this.
const PYTHON_RELEASES: [((u32, u32), i64); 9] = [
    ((3, 6), 1_482_451_200),  // 2016-12-23
    ((3, 7), 1_530_057_600),  // 2018-06-27
    ((3, 8), 1_571_011_200),  // 2019-10-14
    ((3, 9), 1_601_856_000),  // 2020-10-05
    ((3, 10), 1_633_305_600), // 2021-10-04
    ((3, 11), 1_666_569_600), // 2022-10-24
    ((3, 12), 1_696_204_800), // 2023-10-02
    ((3, 13), 1_728_259_200), // 2024-10-07
    ((3, 14), 1_759_795_200), // 2025-10-07
];

/// What a recipe resolves against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The `--uploaded-prior-to` value; `None`: today's releases.
    pub as_of: Option<String>,
    /// Why, for the record (`as of the pin, 2021-03-04T05:06:07Z`).
    pub why: String,
    /// When `as_of` is older than [`EDITABLE_BUILDS_SINCE`]: the date the editable install of
    /// the project itself resolves its build backend as of (see [`steps_with`]).
    pub editable_as_of: Option<String>,
}

/// 2022-09-01: from here on, the build backends a project of the time declares build editable
/// wheels (PEP 660; setuptools 64.0 of 2022-08-11 and its first fixes, flit_core 3.4, poetry-core
/// 1.0.8). pip installs an editable project only through that hook, and the build environment
/// of a project pinned earlier would resolve a backend without it.
pub const EDITABLE_BUILDS_SINCE: i64 = 1_661_990_400;

impl Resolution {
    fn at(date: i64, why: String) -> Resolution {
        let editable_as_of =
            (date < EDITABLE_BUILDS_SINCE).then(|| as_of_text(EDITABLE_BUILDS_SINCE));
        let why = match &editable_as_of {
            Some(later) => format!(
                "{why}; an editable install of the project resolves its build backend as of \
                 {later} (older backends build no editable wheel)"
            ),
            None => why,
        };
        Resolution {
            as_of: Some(as_of_text(date)),
            why,
            editable_as_of,
        }
    }
}

/// The releases a recipe installs: `as_of = "latest"` is today's; `"pin"` those uploaded before
/// the pinned commit, but never before the interpreter `version` (`(3, 11)`) was released, since
/// older releases were not made for it; an interpreter newer than airlock knows, or no
/// commit time, is today's.
pub fn resolution(
    recipe: &PythonRecipe,
    commit_time: Option<i64>,
    version: Option<(u32, u32)>,
) -> Resolution {
    let latest = |why: &str| Resolution {
        as_of: None,
        why: why.to_string(),
        editable_as_of: None,
    };
    if recipe.as_of == AsOf::Latest {
        return latest("today's releases (as_of = \"latest\")");
    }
    let Some(pin) = commit_time else {
        return latest("today's releases (the pinned commit's time is unknown)");
    };
    let released = version.and_then(|v| PYTHON_RELEASES.iter().find(|(m, _)| *m == v));
    let newest_known = PYTHON_RELEASES[PYTHON_RELEASES.len() - 1].0;
    match (version, released) {
        (Some(v), None) if v > newest_known => latest(&format!(
            "today's releases (Python {}.{} is newer than the releases airlock dates)",
            v.0, v.1
        )),
        (Some(v), Some((_, at))) if *at > pin => Resolution::at(
            *at,
            format!(
                "releases up to Python {}.{}'s release, {} (the pin, {}, is older than the \
                 interpreter)",
                v.0,
                v.1,
                as_of_text(*at),
                as_of_text(pin)
            ),
        ),
        _ => Resolution::at(
            pin,
            format!("releases up to the pinned commit, {}", as_of_text(pin)),
        ),
    }
}

/// The last pip that installs a project editable the legacy way (`setup.py develop`) when its
/// build backend has no `build_editable` hook: 25.3 removed that way.
pub const LEGACY_EDITABLE_PIP: &str = "pip<25.3";

/// What pip says when a project's build backend cannot build an editable wheel.
pub const NO_EDITABLE_HOOK: &str = "missing the 'build_editable' hook";

/// In place of a pip install `failed` because the project's build backend has no
/// `build_editable` hook (one the project pins, `setuptools~=62.6`): the same install with the
/// project not editable (unless `failed` installed the project alone, `--no-deps`); the
/// project's build requirements (`build_requires`) in the venv, as of the same date; the last
/// pip with the legacy editable install; the project alone, editable, with that pip and the
/// venv's backend. `None` when `failed` is no editable pip install.
pub fn legacy_editable_steps(
    failed: &[String],
    build_requires: &[String],
) -> Option<Vec<Vec<String>>> {
    let at = failed
        .windows(2)
        .position(|w| w[0] == "pip" && w[1] == "install")?;
    let e = failed.iter().position(|a| a == "-e")?;
    let head: Vec<String> = failed[..at + 2].to_vec();
    let common: Vec<String> = [
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
    ]
    .map(String::from)
    .to_vec();
    let date: Vec<String> = failed
        .iter()
        .position(|a| a == "--uploaded-prior-to")
        .and_then(|i| failed.get(i..i + 2))
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let mut steps = Vec::new();
    if !failed.iter().any(|a| a == "--no-deps") {
        let mut not_editable = failed.to_vec();
        not_editable.remove(e);
        steps.push(not_editable);
    }
    let mut requires = [head.clone(), common.clone(), date].concat();
    requires.extend(build_requires.iter().cloned());
    steps.push(requires);
    steps.push(
        [
            head.clone(),
            common.clone(),
            vec![LEGACY_EDITABLE_PIP.to_string()],
        ]
        .concat(),
    );
    steps.push(
        [
            head,
            common,
            ["--no-deps", "--no-build-isolation", "-e", "."]
                .map(String::from)
                .to_vec(),
        ]
        .concat(),
    );
    Some(steps)
}

/// `[build-system] requires` of the tree's `pyproject.toml`, else what pip assumes without one.
pub fn build_requires(tree: &Path) -> Vec<String> {
    let declared = std::fs::read_to_string(tree.join("pyproject.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|doc| {
            doc.get("build-system")?
                .get("requires")?
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect::<Vec<_>>()
                })
        });
    declared.unwrap_or_else(|| vec!["setuptools>=40.8.0".into(), "wheel".into()])
}

/// `NAME==VERSION` when pip's output says that the only releases of NAME that fit were yanked
/// (`Ignored the following yanked versions: 0.1.0, 0.1.3` then `No matching distribution found
/// for NAME`): the newest of them. Releases yanked after the date resolved against were what the
/// project installed then.
pub fn yanked_pin(pip_output: &str) -> Option<String> {
    let versions = pip_output
        .lines()
        .filter_map(|l| l.split("Ignored the following yanked versions:").nth(1))
        .next_back()?;
    let name = pip_output
        .lines()
        .filter_map(|l| l.split("No matching distribution found for ").nth(1))
        .next_back()?
        .trim();
    let name = crate::ci_files::requirement_name(name)?;
    let key = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    let newest = versions
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
        .max_by_key(|v| key(v))?;
    Some(format!("{name}=={newest}"))
}

/// `interpreter = "auto"`: the interpreter is chosen at prepare time among the host's
/// ([`choose_interpreter`]).
pub const AUTO_INTERPRETER: &str = "auto";

/// A Python interpreter found on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPython {
    /// Its real executable.
    pub executable: std::path::PathBuf,
    /// `sys.base_prefix`: what a sandbox must be granted for it (and a venv made from it).
    pub base_prefix: std::path::PathBuf,
    /// `major.minor`.
    pub version: (u32, u32),
}

/// The CPython interpreters on this host: every `python3.N` in the directories of `PATH`, in
/// `/usr/bin` and `/usr/local/bin`, and in pyenv's versions under `home`, each asked for its
/// version and prefix (isolated, without site), one per real executable, oldest first.
pub fn host_interpreters(home: Option<&Path>) -> Vec<HostPython> {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push("/usr/bin".into());
    dirs.push("/usr/local/bin".into());
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(std::path::PathBuf::from)
        .or_else(|| home.map(|h| h.join(".pyenv")));
    if let Some(versions) = pyenv.map(|r| r.join("versions"))
        && let Ok(entries) = std::fs::read_dir(versions)
    {
        dirs.extend(entries.flatten().map(|e| e.path().join("bin")));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| {
                n.strip_prefix("python3.")
                    .is_some_and(|m| !m.is_empty() && m.chars().all(|c| c.is_ascii_digit()))
            })
            .collect();
        names.sort();
        for name in names {
            let Ok(real) = std::fs::canonicalize(dir.join(&name)) else {
                continue;
            };
            if !seen.insert(real.clone()) {
                continue;
            }
            if let Some(python) = ask_interpreter(&real)
                && (python.executable == real || seen.insert(python.executable.clone()))
            {
                out.push(python);
            }
        }
    }
    out.sort_by(|a, b| {
        a.version
            .cmp(&b.version)
            .then(a.executable.cmp(&b.executable))
    });
    out.dedup_by(|a, b| a.version == b.version);
    out
}

/// Ask the interpreter at `path` (isolated, without site) its version and base prefix; `None`
/// when it does not answer.
pub fn ask_interpreter(path: &Path) -> Option<HostPython> {
    let output = std::process::Command::new(path)
        .args([
            "-I",
            "-S",
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.base_prefix); \
             print(sys.executable)",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = text.lines();
    let version = lines.next().and_then(parse_version)?;
    let prefix = lines.next()?;
    // The interpreter itself, not a launcher that runs it (a pyenv shim is a shell script,
    // which a sandbox that sees only the interpreter's prefix could not run).
    let executable = lines
        .next()
        .map(Path::new)
        .filter(|p| p.is_absolute() && p.is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| path.to_path_buf());
    Some(HostPython {
        executable,
        base_prefix: prefix.into(),
        version,
    })
}

/// Whether the sandbox sees `path` without a grant (it lies in its system directories).
pub fn in_system_dirs(path: &Path) -> bool {
    airlock_sandbox::SYSTEM_RO
        .iter()
        .any(|dir| path.starts_with(dir))
}

/// What the tree at the pin declares of its interpreter: `[project] requires-python` of
/// `pyproject.toml`, else `python_requires` of `setup.cfg` or `setup.py`.
pub fn requires_python(tree: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(tree.join("pyproject.toml"))
        && let Ok(doc) = text.parse::<toml::Table>()
        && let Some(spec) = doc
            .get("project")
            .and_then(|p| p.get("requires-python"))
            .and_then(|v| v.as_str())
    {
        return Some(spec.to_string());
    }
    for file in ["setup.cfg", "setup.py"] {
        let Ok(text) = std::fs::read_to_string(tree.join(file)) else {
            continue;
        };
        for line in text.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("python_requires") else {
                continue;
            };
            let value = rest
                .trim_start()
                .trim_start_matches(['=', ':'])
                .trim()
                .trim_end_matches(',')
                .trim_matches(|c| c == '"' || c == '\'');
            if !value.is_empty() {
                return Some(value.to_string());
            }
        }
    }
    None
}

/// Whether `major.minor` satisfies a PEP 440 specifier set as written for `requires-python`,
/// judged at minor-version granularity (`>=3.8.1` admits 3.8); `None` when a clause does not
/// parse.
pub fn satisfies(spec: &str, v: (u32, u32)) -> Option<bool> {
    let mut all = true;
    for clause in spec.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let op_len = clause
            .find(|c: char| c.is_ascii_digit())
            .filter(|i| *i <= 3)?;
        let (op, version) = clause.split_at(op_len);
        let op = op.trim();
        let version = version.trim();
        let wildcard = version.ends_with(".*");
        let parts: Vec<u32> = version
            .trim_end_matches(".*")
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        let major = *parts.first()?;
        let minor = parts.get(1).copied();
        let want = (major, minor.unwrap_or(0));
        let ok = match op {
            ">=" => v >= want,
            ">" if minor.is_none() => v.0 > major,
            ">" if parts.len() > 2 => v >= want,
            ">" => v > want,
            "<=" => v <= (major, minor.unwrap_or(u32::MAX)),
            "<" if minor.is_none() => v.0 < major,
            "<" => v < want,
            "==" | "===" if minor.is_none() => v.0 == major,
            "==" | "===" => v == want,
            "!=" if wildcard || parts.len() == 2 => v != want,
            "!=" => true,
            "~=" => v >= want && v.0 == major,
            _ => return None,
        };
        all &= ok;
    }
    Some(all)
}

/// When Python `major.minor` was first released, where airlock knows it.
pub fn python_release(v: (u32, u32)) -> Option<i64> {
    PYTHON_RELEASES
        .iter()
        .find(|(m, _)| *m == v)
        .map(|(_, at)| *at)
}

/// The interpreter a pin gets: among `candidates` that satisfy `requires` (all of them when the
/// tree declares nothing, or the declaration does not parse), the newest released before the
/// pinned commit, else the oldest; with the reason, for the record. `Err` says that none
/// satisfies, naming what the host has.
pub fn choose_interpreter(
    candidates: &[HostPython],
    requires: Option<&str>,
    commit_time: Option<i64>,
) -> Result<(HostPython, String), String> {
    let fits: Vec<&HostPython> = candidates
        .iter()
        .filter(|c| requires.and_then(|r| satisfies(r, c.version)) != Some(false))
        .collect();
    let have = || {
        candidates
            .iter()
            .map(|c| format!("{}.{}", c.version.0, c.version.1))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if fits.is_empty() {
        return Err(match requires {
            Some(r) => format!(
                "no Python on this host satisfies the project's requires-python {r:?} (the host has {}): install one, or set tests.prepare.python.interpreter to a path",
                have()
            ),
            None => "no Python interpreter was found on this host (python3.N on PATH or under pyenv): install one, or set tests.prepare.python.interpreter to a path"
                .into(),
        });
    };
    let declared = requires
        .map(|r| format!("requires-python {r:?}"))
        .unwrap_or_else(|| "no requires-python".into());
    let released_before = |c: &&&HostPython| match (commit_time, python_release(c.version)) {
        (Some(pin), Some(at)) => at <= pin,
        (None, _) => true,
        (Some(_), None) => c.version < PYTHON_RELEASES[0].0,
    };
    // Interpreters the newest pip runs on come first: only they resolve as of a date and read
    // dependency groups; an older one is chosen only when nothing newer fits.
    let modern: Vec<&HostPython> = fits
        .iter()
        .copied()
        .filter(|c| c.version >= MODERN_PIP_PYTHON)
        .collect();
    let fits = if modern.is_empty() { fits } else { modern };
    let oldest = fits[0];
    let chosen = match fits.iter().rev().find(released_before) {
        Some(c) => (
            (*c).clone(),
            format!(
                "Python {}.{}, the newest on this host released before the pin that fits {declared}",
                c.version.0, c.version.1
            ),
        ),
        None => (
            (*oldest).clone(),
            format!(
                "Python {}.{}, the oldest on this host that fits {declared} (none was released before the pin)",
                oldest.version.0, oldest.version.1
            ),
        ),
    };
    Ok(chosen)
}

/// The `major.minor` of a `sys.version_info[:2]` printed as `3.11`.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> PythonRecipe {
        PythonRecipe {
            interpreter: "/usr/bin/python3".into(),
            extras: vec!["test".into()],
            groups: vec!["tests".into()],
            requirements: vec!["requirements/ci.txt".into()],
            packages: vec!["pytest".into()],
            ..PythonRecipe::default()
        }
    }

    #[test]
    fn the_steps_make_a_venv_bring_pip_up_and_install_the_project_its_way() {
        let env = Path::new("/envs/k/env");
        let steps = steps(
            &recipe(),
            "/usr/bin/python3",
            env,
            Some("2021-03-04T05:06:07Z"),
            Some(&env.join(CONSTRAINTS_FILE)),
        );
        assert_eq!(steps.len(), 3);
        assert_eq!(
            steps[0],
            ["/usr/bin/python3", "-m", "venv", "/envs/k/env/venv"]
        );
        assert_eq!(steps[1].last().map(String::as_str), Some(PIP_REQUIREMENT));
        assert!(!steps[1].iter().any(|w| w == "--uploaded-prior-to"));
        let install = steps[2].join(" ");
        assert!(
            install.starts_with("/envs/k/env/venv/bin/python -m pip install --no-input"),
            "{install}"
        );
        assert!(
            install.ends_with(
                "--uploaded-prior-to 2021-03-04T05:06:07Z -c /envs/k/env/lock-constraints.txt \
                 -e .[test] --group tests -r requirements/ci.txt pytest"
            ),
            "{install}"
        );
    }

    #[test]
    fn a_backend_without_editable_builds_falls_back_to_the_legacy_install() {
        let failed: Vec<String> = "/e/venv/bin/python -m pip install --no-input --uploaded-prior-to 2022-11-01T00:00:00Z -c /e/lock.txt -e .[test] -r r.txt"
            .split(' ')
            .map(String::from)
            .collect();
        let steps = legacy_editable_steps(&failed, &["setuptools~=62.6".into()]).unwrap();
        let joined: Vec<String> = steps.iter().map(|s| s.join(" ")).collect();
        assert_eq!(
            joined,
            [
                "/e/venv/bin/python -m pip install --no-input --uploaded-prior-to 2022-11-01T00:00:00Z -c /e/lock.txt .[test] -r r.txt",
                "/e/venv/bin/python -m pip install --no-input --disable-pip-version-check --no-cache-dir --uploaded-prior-to 2022-11-01T00:00:00Z setuptools~=62.6",
                "/e/venv/bin/python -m pip install --no-input --disable-pip-version-check --no-cache-dir pip<25.3",
                "/e/venv/bin/python -m pip install --no-input --disable-pip-version-check --no-cache-dir --no-deps --no-build-isolation -e .",
            ]
        );
        let alone: Vec<String> = "/p -m pip install --no-deps --force-reinstall -e ."
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(legacy_editable_steps(&alone, &[]).unwrap().len(), 3);
        assert!(legacy_editable_steps(&["/p".into(), "-m".into(), "venv".into()], &[]).is_none());
        let tree = tempfile::tempdir().unwrap();
        assert_eq!(build_requires(tree.path()), ["setuptools>=40.8.0", "wheel"]);
        std::fs::write(
            tree.path().join("pyproject.toml"),
            "[build-system]\nrequires = [\"flit_core<3\"]\n",
        )
        .unwrap();
        assert_eq!(build_requires(tree.path()), ["flit_core<3"]);
    }

    #[test]
    fn optional_packages_install_each_on_its_own_after_the_rest() {
        let r = PythonRecipe {
            editable: false,
            optional: vec!["numpy".into(), "it's".into()],
            ..PythonRecipe::default()
        };
        let steps = steps(
            &r,
            "python3",
            Path::new("/e"),
            Some("2021-03-04T05:06:07Z"),
            None,
        );
        assert_eq!(
            steps.len(),
            3,
            "venv (with pip), pip, the optional loop: {steps:?}"
        );
        assert!(!steps[0].contains(&"--without-pip".to_string()));
        let last = &steps[2];
        assert_eq!(last[..2], ["/bin/sh", "-c"]);
        assert!(
            last[2].contains("'--uploaded-prior-to' '2021-03-04T05:06:07Z' \"$p\""),
            "{}",
            last[2]
        );
        assert!(
            last[2].contains("'/e/optional-left-out.txt'"),
            "{}",
            last[2]
        );
        assert_eq!(last[3..], ["sh", "numpy", "it's"]);
        assert!(
            check(&PythonRecipe {
                optional: vec!["-r x".into()],
                ..PythonRecipe::default()
            })
            .is_err()
        );
    }

    #[test]
    fn a_release_yanked_since_is_pinned() {
        let out = "Collecting types-toml\nERROR: Ignored the following yanked versions: 0.1.0, 0.1.10, 0.1.3\n\
                   ERROR: Could not find a version that satisfies the requirement types-pkg_resources (from versions: none)\n\
                   ERROR: No matching distribution found for types-pkg_resources\n";
        assert_eq!(
            yanked_pin(out).as_deref(),
            Some("types-pkg_resources==0.1.10")
        );
        assert_eq!(
            yanked_pin("ERROR: No matching distribution found for x\n"),
            None,
            "nothing yanked: nothing to pin"
        );
    }

    #[test]
    fn a_pin_older_than_editable_builds_installs_the_project_editable_in_a_second_step() {
        let r = recipe();
        let old = resolution(&r, Some(1_614_834_367), Some((3, 9)));
        assert_eq!(
            old.editable_as_of.as_deref(),
            Some("2022-09-01T00:00:00Z"),
            "{old:?}"
        );
        assert!(old.why.contains("build backend"), "{}", old.why);
        let steps = steps_with(&r, "python3", Path::new("/e"), &old, None, None);
        let install = &steps[2];
        assert!(!install.contains(&"-e".to_string()), "{install:?}");
        assert!(install.contains(&"2021-03-04T05:06:07Z".to_string()));
        assert!(install.iter().any(|a| a.starts_with(".[")), "{install:?}");
        assert_eq!(
            steps[3][steps[3].len() - 6..],
            [
                "--uploaded-prior-to",
                "2022-09-01T00:00:00Z",
                "--no-deps",
                "--force-reinstall",
                "-e",
                "."
            ]
        );
        // A later pin: one editable install.
        let new = resolution(&r, Some(1_700_000_000), Some((3, 11)));
        assert_eq!(new.editable_as_of, None);
        let steps = steps_with(&r, "python3", Path::new("/e"), &new, None, None);
        assert_eq!(steps.len(), 3);
        assert!(steps[2].contains(&"-e".to_string()));
    }

    #[test]
    fn nothing_to_install_is_a_venv_without_pip_and_latest_has_no_date() {
        let r = PythonRecipe {
            editable: false,
            as_of: AsOf::Latest,
            ..PythonRecipe::default()
        };
        assert_eq!(resolution(&r, Some(0), Some((3, 11))).as_of, None);
        assert_eq!(
            steps(&r, "python3", Path::new("/e"), None, None),
            [["python3", "-m", "venv", "--without-pip", "/e/venv"]]
        );
        let pinned = PythonRecipe::default();
        let r = resolution(&pinned, Some(1_614_834_367), Some((3, 9)));
        assert_eq!(r.as_of.as_deref(), Some("2021-03-04T05:06:07Z"));
        assert!(r.why.contains("pinned commit"), "{}", r.why);
        // A pin older than the interpreter resolves as of the interpreter's release.
        let r = resolution(&pinned, Some(1_614_834_367), Some((3, 11)));
        assert_eq!(r.as_of.as_deref(), Some("2022-10-24T00:00:00Z"));
        assert!(r.why.contains("older than the interpreter"), "{}", r.why);
        assert_eq!(resolution(&pinned, Some(1), Some((3, 99))).as_of, None);
        assert_eq!(resolution(&pinned, None, Some((3, 11))).as_of, None);
        assert_eq!(parse_version("3.11\n"), Some((3, 11)));
        assert_eq!(parse_version("x"), None);
    }

    fn host(v: (u32, u32)) -> HostPython {
        HostPython {
            executable: format!("/py/{}.{}/bin/python{}.{}", v.0, v.1, v.0, v.1).into(),
            base_prefix: format!("/py/{}.{}", v.0, v.1).into(),
            version: v,
        }
    }

    #[test]
    fn requires_python_is_read_at_minor_granularity() {
        assert_eq!(satisfies(">=3.8", (3, 11)), Some(true));
        assert_eq!(satisfies(">=3.8", (3, 7)), Some(false));
        assert_eq!(satisfies(">=3.6, <3.10", (3, 10)), Some(false));
        assert_eq!(satisfies(">=3.6, <3.10", (3, 9)), Some(true));
        assert_eq!(satisfies(">=3.8.1", (3, 8)), Some(true));
        assert_eq!(satisfies("~=3.9", (3, 12)), Some(true));
        assert_eq!(satisfies("!=3.7.*, >=3.6", (3, 7)), Some(false));
        assert_eq!(satisfies("==3.*", (3, 13)), Some(true));
        assert_eq!(satisfies(">3.9", (3, 9)), Some(false));
        assert_eq!(satisfies("<=3.11", (3, 11)), Some(true));
        assert_eq!(satisfies("python3", (3, 11)), None);
    }

    #[test]
    fn the_interpreter_is_the_newest_released_before_the_pin_that_fits() {
        let hosts: Vec<HostPython> = [(3, 8), (3, 9), (3, 11), (3, 13)].map(host).to_vec();
        // A 2021-03 pin: 3.9 is the newest released before it.
        let (c, why) = choose_interpreter(&hosts, Some(">=3.6"), Some(1_614_834_367)).unwrap();
        assert_eq!(c.version, (3, 9));
        assert!(
            why.contains("newest on this host released before the pin"),
            "{why}"
        );
        // Today: the newest that fits.
        let (c, _) = choose_interpreter(&hosts, Some(">=3.8, <3.12"), Some(1_800_000_000)).unwrap();
        assert_eq!(c.version, (3, 11));
        // A pin older than every interpreter that fits: the oldest of them.
        let (c, why) = choose_interpreter(&hosts, Some(">=3.11"), Some(1_614_834_367)).unwrap();
        assert_eq!(c.version, (3, 11));
        assert!(why.contains("oldest"), "{why}");
        let err = choose_interpreter(&hosts, Some(">=3.14"), None).unwrap_err();
        assert!(
            err.contains("3.8, 3.9, 3.11, 3.13") && err.contains("interpreter"),
            "{err}"
        );
        assert!(choose_interpreter(&[], None, None).is_err());
    }

    #[test]
    fn requires_python_comes_from_pyproject_or_setup() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(requires_python(dir.path()), None);
        std::fs::write(
            dir.path().join("setup.py"),
            "setup(\n    name='x',\n    python_requires='>=3.6',\n)\n",
        )
        .unwrap();
        assert_eq!(requires_python(dir.path()).as_deref(), Some(">=3.6"));
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname = \"x\"\nrequires-python = \">=3.9\"\n",
        )
        .unwrap();
        assert_eq!(requires_python(dir.path()).as_deref(), Some(">=3.9"));
    }

    #[test]
    fn an_interpreter_older_than_the_newest_pip_gets_groups_as_requirements() {
        let pyproject = "[dependency-groups]\ntests = [\"pytest\", {include-group = \"base\"}]\n\
                         base = [\"iniconfig\", {include-group = \"tests\"}]\n";
        let reqs = group_requirements(pyproject, &["tests".into()]).unwrap();
        assert_eq!(reqs, ["pytest", "iniconfig"]);
        assert!(
            group_requirements(pyproject, &["docs".into()])
                .unwrap_err()
                .contains("\"docs\"")
        );
        let steps = steps_with(
            &recipe(),
            "/py3.8",
            Path::new("/e"),
            &Resolution {
                as_of: None,
                why: String::new(),
                editable_as_of: None,
            },
            None,
            Some(&reqs),
        );
        assert_eq!(steps[1].last().map(String::as_str), Some("pip"));
        let install = steps[2].join(" ");
        assert!(!install.contains("--group") && !install.contains("--uploaded-prior-to"));
        assert!(
            install.ends_with("-e .[test] pytest iniconfig -r requirements/ci.txt pytest"),
            "{install}"
        );
        // Where a 3.9 or newer fits, an older interpreter is not chosen even for an old pin.
        let hosts: Vec<HostPython> = [(3, 7), (3, 8), (3, 11)].map(host).to_vec();
        let (c, _) = choose_interpreter(&hosts, None, Some(1_570_000_000)).unwrap();
        assert_eq!(c.version, (3, 11));
        let (c, _) = choose_interpreter(&hosts, Some("<3.9"), Some(1_570_000_000)).unwrap();
        assert_eq!(c.version, (3, 7));
    }

    #[test]
    fn a_version_from_git_is_the_tag_and_the_commits_since() {
        assert_eq!(scm_version("v1.2.3", 0).as_deref(), Some("1.2.3"));
        assert_eq!(scm_version("1.2.3", 3).as_deref(), Some("1.2.3.post3"));
        assert_eq!(scm_version("release-2.0rc1", 0).as_deref(), Some("2.0rc1"));
        assert_eq!(
            scm_version("refs/tags/v4.0", 1).as_deref(),
            Some("4.0.post1")
        );
        assert_eq!(scm_version("nightly", 0), None);
        assert_eq!(scm_version("v1.2 beta", 0), None);
    }

    #[test]
    fn bad_recipes_name_their_key() {
        let mut r = recipe();
        r.editable = false;
        assert_eq!(check(&r).unwrap_err().0, "extras");
        let mut r = recipe();
        r.groups = vec!["a b".into()];
        assert_eq!(check(&r).unwrap_err().0, "groups");
        let mut r = recipe();
        r.requirements = vec!["../x.txt".into()];
        assert_eq!(check(&r).unwrap_err().0, "requirements[0]");
        let mut r = recipe();
        r.packages = vec!["--index-url=http://x".into()];
        assert_eq!(check(&r).unwrap_err().0, "packages[0]");
        let mut r = recipe();
        r.lockfile = Some("Cargo.lock".into());
        assert!(check(&r).unwrap_err().1.contains("uv.lock"));
        let mut r = recipe();
        r.interpreter = " ".into();
        assert_eq!(check(&r).unwrap_err().0, "interpreter");
        assert!(check(&recipe()).is_ok());
    }
}
