//! `[tests.prepare.python]`: the Python recipe as written, and the checks it passes when the
//! file loads. `crate::recipe` turns a recipe into the steps prepare runs.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The lockfiles whose pins the recipe reads, by file name.
pub const LOCKFILES: [&str; 4] = ["uv.lock", "poetry.lock", "Pipfile.lock", "pylock.toml"];

/// Which releases an environment is resolved from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AsOf {
    /// Only releases uploaded before the pinned commit was committed: a commit of 2021 gets
    /// the releases of 2021 (pip's `--uploaded-prior-to`).
    #[default]
    Pin,
    /// Today's releases.
    Latest,
}

/// `[tests.prepare.python]`: a virtualenv that sees only what is installed into it (never
/// the interpreter's own site-packages), with the project installed editable (the files its
/// build generates exist, and every test run sees them) and its test dependencies taken from
/// the project's own declarations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PythonRecipe {
    /// The venv's base interpreter: an absolute path (or `~/...`) granted to the sandbox, or a
    /// name the sandbox's `PATH` finds (`python3`).
    pub interpreter: String,
    /// Install the project itself, editable (`pip install -e .`); false installs only the
    /// dependencies listed below.
    pub editable: bool,
    /// The project's extras installed with it (`-e ".[test]"`); needs `editable`.
    pub extras: Vec<String>,
    /// PEP 735 dependency groups of `pyproject.toml` (`[dependency-groups]`).
    pub groups: Vec<String>,
    /// Requirements files of the tree (`-r`), pins and all.
    pub requirements: Vec<String>,
    /// More packages (`pytest`), as requirement specifiers.
    pub packages: Vec<String>,
    /// Packages some of the project's test runs add (its CI installs them, job by job), each
    /// installed on its own after the rest; one that does not install is left out and said in
    /// `{env}/optional-left-out.txt` (and by `doctor`), the environment kept.
    pub optional: Vec<String>,
    /// `pin` (the default): only releases uploaded before the pinned commit; `latest`: today's.
    pub as_of: AsOf,
    /// A lockfile of the tree whose pins constrain every install (`uv.lock`, `poetry.lock`,
    /// `Pipfile.lock`, `pylock.toml`); unset: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lockfile: Option<String>,
}

impl Default for PythonRecipe {
    fn default() -> Self {
        PythonRecipe {
            interpreter: "python3".into(),
            editable: true,
            extras: Vec::new(),
            groups: Vec::new(),
            requirements: Vec::new(),
            packages: Vec::new(),
            optional: Vec::new(),
            as_of: AsOf::Pin,
            lockfile: None,
        }
    }
}

/// Check a recipe as written; the error is `(key under tests.prepare.python, problem)`.
pub fn check_python_recipe(recipe: &PythonRecipe) -> std::result::Result<(), (String, String)> {
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
    for (key, specs) in [
        ("packages", &recipe.packages),
        ("optional", &recipe.optional),
    ] {
        for (i, spec) in specs.iter().enumerate() {
            if spec.trim().is_empty() || spec.starts_with('-') || spec.contains(['\'', '\n']) {
                return bad(
                    &format!("{key}[{i}]"),
                    format!("{spec:?} is not a requirement specifier (options are not accepted)"),
                );
            }
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
