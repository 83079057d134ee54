//! Requirements files as the recipe passes them to pip: those that also install the project
//! itself (`-e .`, `.`) are passed as copies without that line, since the recipe installs the
//! project its own way (editable, in one or two steps), and pip refuses the same project twice
//! in one install when the two ways differ.

use std::collections::BTreeMap;
use std::path::Path;

/// Most requirements files followed through `-r` and `-c` from the recipe's.
const MAX_FILES: usize = 64;

/// Whether a requirements line installs the project at the tree's root.
fn installs_the_project(line: &str) -> bool {
    let line = line.split(" #").next().unwrap_or(line).trim();
    let target = line
        .strip_prefix("--editable")
        .or_else(|| line.strip_prefix("-e"))
        .map(|t| t.trim_start_matches('=').trim())
        .unwrap_or(line);
    let target = target.split('[').next().unwrap_or(target).trim();
    matches!(target, "." | "./" | "file:." | "file:./")
}

/// The `-r FILE` / `-c FILE` a line includes, if any.
fn included(line: &str) -> Option<&str> {
    let line = line.trim();
    for flag in ["--requirement", "--constraint", "-r", "-c"] {
        if let Some(rest) = line.strip_prefix(flag) {
            let rest = rest.trim_start_matches('=').trim();
            if !rest.is_empty() {
                return Some(rest);
            }
        }
    }
    None
}

/// `a/b.txt` -> `requirements--a--b.txt`: a flat name in `{env}`.
fn copy_name(path: &str) -> String {
    format!("requirements--{}", path.replace('/', "--"))
}

fn normal(path: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            std::path::Component::Normal(p) => parts.push(p.to_str()?.to_string()),
            std::path::Component::ParentDir => {
                parts.pop()?;
            }
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// `files` and every requirements or constraints file they include (`-r`, `-c`, relative to
/// the including file), by path from the tree's root, with their text as `read` gives it (at
/// most [`MAX_FILES`]; a file `read` cannot give is left out).
pub fn closure(
    files: &[String],
    read: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut queue: Vec<String> = files.to_vec();
    while let Some(path) = queue.pop() {
        if texts.contains_key(&path) || texts.len() >= MAX_FILES {
            continue;
        }
        let Some(text) = read(&path) else {
            continue;
        };
        let dir = Path::new(&path).parent().unwrap_or(Path::new(""));
        for line in text.lines() {
            if let Some(inc) = included(line)
                && let Some(p) = normal(&dir.join(inc))
            {
                queue.push(p);
            }
        }
        texts.insert(path, text);
    }
    texts
}

/// The requirements files to pass for `files` (paths from the tree's root): each file as it
/// is, unless it or a file it includes installs the project itself; then copies without those
/// lines, for every file of its includes, written into `{env}` (name, content) and passed by
/// their path there. Returns (paths to pass, files to write).
pub fn without_the_project(
    tree: &Path,
    files: &[String],
    env_dir: &Path,
) -> (Vec<String>, Vec<(String, String)>) {
    let texts = closure(files, |p| std::fs::read_to_string(tree.join(p)).ok());
    if !texts.values().any(|t| t.lines().any(installs_the_project)) {
        return (files.to_vec(), Vec::new());
    }
    let mut written = Vec::new();
    for (path, text) in &texts {
        let dir = Path::new(path).parent().unwrap_or(Path::new(""));
        let mut out = String::new();
        for line in text.lines() {
            if installs_the_project(line) {
                out.push_str("# (the project itself: airlock's recipe installs it)\n");
                continue;
            }
            match included(line).and_then(|inc| normal(&dir.join(inc))) {
                Some(p) if texts.contains_key(&p) => {
                    let flag = if line.trim_start().starts_with("-c")
                        || line.trim_start().starts_with("--constraint")
                    {
                        "-c"
                    } else {
                        "-r"
                    };
                    out.push_str(&format!(
                        "{flag} {}\n",
                        env_dir.join(copy_name(&p)).display()
                    ));
                }
                _ => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        written.push((copy_name(path), out));
    }
    let passed = files
        .iter()
        .map(|f| {
            if texts.contains_key(f) {
                env_dir.join(copy_name(f)).display().to_string()
            } else {
                f.clone()
            }
        })
        .collect();
    (passed, written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_installs_the_project_is_passed_as_a_copy_without_it() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir(tree.path().join("req")).unwrap();
        std::fs::write(
            tree.path().join("requirements_test.txt"),
            "-r req/min.txt\ncoverage~=5.5\n",
        )
        .unwrap();
        std::fs::write(tree.path().join("req/min.txt"), "-e .\npytest\n").unwrap();
        std::fs::write(tree.path().join("plain.txt"), "mock\n").unwrap();
        let env = Path::new("/env");
        let (passed, written) = without_the_project(
            tree.path(),
            &["requirements_test.txt".into(), "plain.txt".into()],
            env,
        );
        assert_eq!(
            passed,
            [
                "/env/requirements--requirements_test.txt",
                "/env/requirements--plain.txt"
            ]
        );
        let by_name: BTreeMap<_, _> = written.into_iter().collect();
        assert_eq!(
            by_name["requirements--requirements_test.txt"],
            "-r /env/requirements--req--min.txt\ncoverage~=5.5\n"
        );
        assert!(by_name["requirements--req--min.txt"].ends_with("\npytest\n"));
        assert!(!by_name["requirements--req--min.txt"].contains("-e ."));
        // Nothing installs the project: the files are passed as they are.
        let (passed, written) = without_the_project(tree.path(), &["plain.txt".into()], env);
        assert_eq!(passed, ["plain.txt"]);
        assert!(written.is_empty());
        assert!(installs_the_project("-e .[tests]") && installs_the_project("."));
        assert!(!installs_the_project("-e ./plugins/x") && !installs_the_project("pytest"));
    }
}
