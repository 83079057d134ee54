//! What a test or prepare output says went wrong, as sentences that name the `airlock.toml` key
//! to change: a module the environment lacks, a file the project's build generates, a release
//! newer than the code, a collection error, a native build that failed. Pure text reading; the
//! network's part is the supervisor's (it knows the mode and what the proxy refused).

use std::collections::BTreeSet;

/// Most modules, files or names one kind of hint lists.
const MAX_LISTED: usize = 3;

/// The hints `output` supports, most specific first, each once.
pub fn hints(output: &str) -> Vec<String> {
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let mut generated: BTreeSet<String> = BTreeSet::new();
    let mut newer: BTreeSet<String> = BTreeSet::new();
    let mut collection: BTreeSet<String> = BTreeSet::new();
    let mut native = false;
    let mut unresolved: BTreeSet<String> = BTreeSet::new();
    let mut unrecognized: BTreeSet<String> = BTreeSet::new();
    let mut conflict = false;
    for line in output.lines() {
        let line = line.trim();
        if let Some(module) = quoted_after(line, "No module named ") {
            let leaf = module.rsplit('.').next().unwrap_or(&module);
            if leaf.contains("version") || leaf.starts_with("_build") || leaf.ends_with("_ext") {
                generated.insert(module);
            } else {
                missing.insert(module.split('.').next().unwrap_or(&module).to_string());
            }
        }
        if let Some(rest) = line.split("cannot import name ").nth(1)
            && let Some(name) = quoted_after(rest, "")
            && let Some(from) = quoted_after(rest, " from ")
        {
            if name.contains("version") {
                generated.insert(from);
            } else {
                newer.insert(format!("{name} from {from}"));
            }
        }
        if let Some(path) = line
            .split("ERROR collecting ")
            .nth(1)
            .map(|p| p.trim_matches(|c: char| c == '_' || c.is_whitespace()))
            .filter(|p| !p.is_empty())
        {
            collection.insert(path.to_string());
        }
        if line.contains("Failed building wheel for")
            || line.contains("error: command '")
            || line.contains("gcc: error")
            || line.contains("fatal error: ") && line.contains(".h: No such file")
        {
            native = true;
        }
        if let Some(rest) = line.split("error: unrecognized arguments: ").nth(1) {
            unrecognized.insert(rest.trim().to_string());
        }
        if line.contains("ResolutionImpossible") || line.contains("conflicting dependencies") {
            conflict = true;
        }
        if let Some(rest) = line.split("No matching distribution found for ").nth(1) {
            let name = rest.split_whitespace().next().unwrap_or(rest);
            if !name.is_empty() {
                unresolved.insert(name.to_string());
            }
        }
    }
    let list = |set: &BTreeSet<String>| {
        let mut items: Vec<&str> = set.iter().map(String::as_str).take(MAX_LISTED).collect();
        if set.len() > MAX_LISTED {
            items.push("...");
        }
        items.join(", ")
    };
    let mut out = Vec::new();
    if !generated.is_empty() {
        out.push(format!(
            "a file the project's build generates is missing ({}): install the project \
             (tests.prepare.python.editable = true), whose build writes it; prepare keeps it",
            list(&generated)
        ));
    }
    if !missing.is_empty() {
        out.push(format!(
            "the tests import {}, which the environment does not have: install it in prepare \
             (tests.prepare.python: packages, groups or extras)",
            list(&missing)
        ));
    }
    if !newer.is_empty() {
        out.push(format!(
            "a release newer than the code is installed (cannot import {}): resolve as of the \
             pin (tests.prepare.python.as_of = \"pin\") or pin the release in \
             tests.prepare.python.packages",
            list(&newer)
        ));
    }
    if !collection.is_empty() {
        out.push(format!(
            "pytest could not collect {} (the error is in the output): its tests are not in the \
             inventory; fix the environment, or leave them out in tests.command (--ignore=PATH)",
            list(&collection)
        ));
    }
    if !unrecognized.is_empty() {
        out.push(format!(
            "the runner does not know the options {} (the project's configuration adds them for \
             a plugin, as --cov for pytest-cov): install the project's test extra or group, or \
             the plugin in tests.prepare.python.packages",
            list(&unrecognized)
        ));
    }
    if !unresolved.is_empty() {
        out.push(format!(
            "no release fits {} (the date resolved against, the interpreter, or a pin): \
             tests.prepare.python.as_of = \"latest\" takes today's releases, \
             tests.prepare.python.interpreter another interpreter",
            list(&unresolved)
        ));
    }
    if conflict {
        out.push(
            "the requirements conflict (a lockfile's pin against the manifest, a pin against the \
             date resolved against, or a version computed from git that a requirement excludes; \
             pip's reasons are above): update or remove tests.prepare.python.lockfile, or set \
             tests.prepare.python.as_of = \"latest\""
                .into(),
        );
    }
    if native {
        out.push(
            "a native build failed (a C compiler or header is missing, or no wheel fits this \
             interpreter): install the build's system packages on the host, or choose another \
             interpreter (tests.prepare.python.interpreter)"
                .into(),
        );
    }
    out
}

/// The `'...'` or `"..."` text right after `marker` in `line`.
fn quoted_after(line: &str, marker: &str) -> Option<String> {
    let at = if marker.is_empty() {
        0
    } else {
        line.find(marker)? + marker.len()
    };
    let rest = &line[at..];
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &rest[1..];
    let end = inner.find(quote)?;
    Some(inner[..end].to_string()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_named_with_its_key() {
        let out = "\
E   ModuleNotFoundError: No module named 'hypothesis'
E   ModuleNotFoundError: No module named '_pytest._version'
E   ImportError: cannot import name 'url_quote' from 'werkzeug.urls' (/env/werkzeug/urls.py)
_____________ ERROR collecting tests/test_app.py _____________
  error: command 'gcc' failed: No such file or directory
ERROR: No matching distribution found for setuptools>=64
python -m pytest: error: unrecognized arguments: --cov
";
        let h = hints(out);
        assert_eq!(h.len(), 7, "{h:#?}");
        assert!(
            h[0].contains("_pytest._version") && h[0].contains("editable"),
            "{}",
            h[0]
        );
        assert!(
            h[1].contains("import hypothesis") && h[1].contains("packages"),
            "{}",
            h[1]
        );
        assert!(
            h[2].contains("url_quote from werkzeug.urls") && h[2].contains("as_of"),
            "{}",
            h[2]
        );
        assert!(h[3].contains("collect tests/test_app.py"), "{}", h[3]);
        assert!(h[4].contains("options --cov"), "{}", h[4]);
        assert!(h[5].contains("no release fits setuptools>=64"), "{}", h[5]);
        assert!(h[6].contains("native build"), "{}", h[6]);
        assert!(hints("5 passed in 0.1s\n").is_empty());
        let conflict = hints(
            "ERROR: Cannot install x and pytest==8.4.2 because these package versions have conflicting dependencies.\nERROR: ResolutionImpossible: for help visit ...\n",
        );
        assert_eq!(conflict.len(), 1, "{conflict:?}");
        assert!(
            conflict[0].contains("tests.prepare.python.lockfile"),
            "{}",
            conflict[0]
        );
        assert_eq!(
            hints("ImportError: cannot import name 'version' from 'pkg' (x)").len(),
            1
        );
    }
}
