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
use std::collections::BTreeMap;
use std::path::Path;

/// The first pip that reads dependency groups (`--group`, 25.1) and resolves as of a date
/// (`--uploaded-prior-to`, 26.0).
pub const PIP_REQUIREMENT: &str = "pip>=26";

/// The lockfiles whose pins the recipe reads, by file name.
pub const LOCKFILES: [&str; 4] = ["uv.lock", "poetry.lock", "Pipfile.lock", "pylock.toml"];

/// The name of the constraints file prepare writes into `{env}` from the lockfile.
pub const CONSTRAINTS_FILE: &str = "lock-constraints.txt";

/// The file prepare writes into `{env}` saying which releases the recipe resolved against.
pub const RESOLUTION_FILE: &str = "resolved-as-of.txt";

/// Where the recipe's venv lives inside the environment directory.
pub fn venv_dir(env_dir: &Path) -> std::path::PathBuf {
    env_dir.join("venv")
}

/// Check a recipe as written; the error is `(key under tests.prepare.python, problem)`.
pub fn check(recipe: &PythonRecipe) -> Result<(), (String, String)> {
    let bad = |key: &str, problem: String| Err((key.to_string(), problem));
    if recipe.interpreter.trim().is_empty() {
        return bad(
            "interpreter",
            "is empty: name the venv's base interpreter (\"python3\" or an absolute path)".into(),
        );
    }
    if !recipe.editable && !recipe.extras.is_empty() {
        return bad(
            "extras",
            "are installed with the project, but editable = false does not install it: set \
             editable = true or move the extras' packages to `packages`"
                .into(),
        );
    }
    for (key, names) in [("extras", &recipe.extras), ("groups", &recipe.groups)] {
        for name in names {
            if !is_name(name) {
                return bad(
                    key,
                    format!(
                        "{name:?} is not a name (letters, digits, `.`, `_` and `-`, starting with \
                         a letter or digit)"
                    ),
                );
            }
        }
    }
    for (i, path) in recipe.requirements.iter().enumerate() {
        if !is_tree_path(path) {
            return bad(
                &format!("requirements[{i}]"),
                format!("{path:?} must be a file of the tree, relative, without `..`"),
            );
        }
    }
    for (i, spec) in recipe.packages.iter().enumerate() {
        if spec.trim().is_empty() || spec.starts_with('-') {
            return bad(
                &format!("packages[{i}]"),
                format!("{spec:?} is not a requirement specifier (options are not accepted)"),
            );
        }
    }
    if let Some(lock) = &recipe.lockfile {
        let name = lock.rsplit('/').next().unwrap_or(lock);
        if !is_tree_path(lock) || !LOCKFILES.contains(&name) {
            return bad(
                "lockfile",
                format!(
                    "{lock:?} is not a lockfile airlock reads: a path of the tree ending in {}",
                    LOCKFILES.join(", ")
                ),
            );
        }
    }
    Ok(())
}

fn is_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn is_tree_path(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
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
    let mut install = pip(&[]);
    let before = install.len();
    if recipe.editable {
        install.push("-e".into());
        if recipe.extras.is_empty() {
            install.push(".".into());
        } else {
            install.push(format!(".[{}]", recipe.extras.join(",")));
        }
    }
    for group in &recipe.groups {
        install.push("--group".into());
        install.push(group.clone());
    }
    for file in &recipe.requirements {
        install.push("-r".into());
        install.push(file.clone());
    }
    install.extend(recipe.packages.iter().cloned());
    let mut venv_step = vec![interpreter.to_string(), "-m".into(), "venv".into()];
    if install.len() == before {
        // Nothing to install: the standard library alone, and no network needed.
        venv_step.push("--without-pip".into());
    }
    venv_step.push(venv.display().to_string());
    let mut out = vec![venv_step];
    if install.len() > before {
        out.push(pip(&[PIP_REQUIREMENT]));
        let mut options = Vec::new();
        if let Some(date) = as_of {
            options.push("--uploaded-prior-to".to_string());
            options.push(date.to_string());
        }
        if let Some(file) = constraints {
            options.push("-c".to_string());
            options.push(file.display().to_string());
        }
        install.splice(before..before, options);
        out.push(install);
    }
    out
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
        (Some(v), Some((_, at))) if *at > pin => Resolution {
            as_of: Some(as_of_text(*at)),
            why: format!(
                "releases up to Python {}.{}'s release, {} (the pin, {}, is older than the \
                 interpreter)",
                v.0,
                v.1,
                as_of_text(*at),
                as_of_text(pin)
            ),
        },
        _ => Resolution {
            as_of: Some(as_of_text(pin)),
            why: format!("releases up to the pinned commit, {}", as_of_text(pin)),
        },
    }
}

/// The `major.minor` of a `sys.version_info[:2]` printed as `3.11`.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The pins of a lockfile as a pip constraints file (`name==version`, one per line, sorted):
/// the packages it takes from a registry. A name pinned to two versions (a lockfile resolved
/// for several interpreters or platforms) is left unconstrained; the project itself and
/// packages from a path, a URL or git are never constrained. The error says what is wrong
/// with the file.
pub fn lock_constraints(file_name: &str, text: &str) -> Result<String, String> {
    let pins: Vec<(String, String)> = match file_name {
        "Pipfile.lock" => pipfile_pins(text)?,
        "uv.lock" | "poetry.lock" | "pylock.toml" => toml_pins(file_name, text)?,
        other => return Err(format!("{other} is not a lockfile airlock reads")),
    };
    let mut by_name: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (name, version) in pins {
        let key = normalise_name(&name);
        by_name
            .entry(key)
            .and_modify(|v| {
                if v.as_deref() != Some(version.as_str()) {
                    *v = None;
                }
            })
            .or_insert(Some(version));
    }
    let mut out = String::new();
    for (name, version) in by_name {
        if let Some(version) = version {
            out.push_str(&format!("{name}=={version}\n"));
        }
    }
    Ok(out)
}

/// PEP 503's normalised name.
fn normalise_name(name: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

fn is_version(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '-' | '_'))
}

fn toml_pins(file_name: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e| format!("{file_name} is not TOML: {e}"))?;
    let list_key = if file_name == "pylock.toml" {
        "packages"
    } else {
        "package"
    };
    let Some(list) = doc.get(list_key) else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err(format!(
            "{file_name}: `{list_key}` is not an array of tables"
        ));
    };
    let mut out = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let Some(table) = entry.as_table() else {
            return Err(format!("{file_name}: {list_key}[{i}] is not a table"));
        };
        let (Some(name), Some(version)) = (
            table.get("name").and_then(|v| v.as_str()),
            table.get("version").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        if !is_version(version) || !from_registry(file_name, table) {
            continue;
        }
        out.push((name.to_string(), version.to_string()));
    }
    Ok(out)
}

/// Whether a lockfile entry comes from a package index (not a path, URL, git or the project).
fn from_registry(file_name: &str, table: &toml::Table) -> bool {
    match file_name {
        "uv.lock" => table
            .get("source")
            .and_then(|s| s.as_table())
            .is_some_and(|s| s.contains_key("registry")),
        "poetry.lock" => match table.get("source").and_then(|s| s.as_table()) {
            None => true,
            Some(s) => s.get("type").and_then(|t| t.as_str()) == Some("legacy"),
        },
        // pylock.toml: an entry from an index has `wheels` or `sdist`, never `vcs`,
        // `directory` or `archive`.
        _ => !["vcs", "directory", "archive"]
            .iter()
            .any(|k| table.contains_key(*k)),
    }
}

fn pipfile_pins(text: &str) -> Result<Vec<(String, String)>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("Pipfile.lock is not JSON: {e}"))?;
    let mut out = Vec::new();
    for section in ["default", "develop"] {
        let Some(entries) = doc.get(section).and_then(|s| s.as_object()) else {
            continue;
        };
        for (name, entry) in entries {
            let Some(version) = entry.get("version").and_then(|v| v.as_str()) else {
                continue;
            };
            if let Some(v) = version.strip_prefix("==")
                && is_version(v)
            {
                out.push((name.clone(), v.to_string()));
            }
        }
    }
    Ok(out)
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

    #[test]
    fn uv_lock_pins_registry_packages_and_leaves_the_project_and_split_pins_out() {
        let text = r#"
version = 1
[[package]]
name = "flask"
version = "3.1.0"
source = { editable = "." }
[[package]]
name = "Pytest"
version = "8.3.4"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "numpy"
version = "2.0.2"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "numpy"
version = "2.2.1"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "local-thing"
version = "0.1"
source = { directory = "vendor/local" }
[[package]]
name = "typing_extensions"
version = "4.12.2"
source = { registry = "https://example.invalid/simple" }
"#;
        assert_eq!(
            lock_constraints("uv.lock", text).unwrap(),
            "pytest==8.3.4\ntyping-extensions==4.12.2\n"
        );
    }

    #[test]
    fn poetry_pipfile_and_pylock_pins_are_read_and_broken_files_are_named() {
        let poetry = "[[package]]\nname = \"attrs\"\nversion = \"21.2.0\"\n\n\
                      [[package]]\nname = \"mine\"\nversion = \"0.1\"\n[package.source]\n\
                      type = \"git\"\nurl = \"x\"\n";
        assert_eq!(
            lock_constraints("poetry.lock", poetry).unwrap(),
            "attrs==21.2.0\n"
        );
        let pipfile = r#"{"default": {"requests": {"version": "==2.25.1"}},
                          "develop": {"pytest": {"version": "==6.2.2"}, "x": {"git": "y"}}}"#;
        assert_eq!(
            lock_constraints("Pipfile.lock", pipfile).unwrap(),
            "pytest==6.2.2\nrequests==2.25.1\n"
        );
        let pylock = "lock-version = \"1.0\"\n[[packages]]\nname = \"idna\"\nversion = \"3.10\"\n\
                      [[packages.wheels]]\nurl = \"u\"\n";
        assert_eq!(
            lock_constraints("pylock.toml", pylock).unwrap(),
            "idna==3.10\n"
        );
        assert!(
            lock_constraints("uv.lock", "[[package]\n")
                .unwrap_err()
                .starts_with("uv.lock is not TOML")
        );
        assert!(
            lock_constraints("Pipfile.lock", "{")
                .unwrap_err()
                .contains("not JSON")
        );
    }
}
