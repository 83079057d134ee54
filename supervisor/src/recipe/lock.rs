//! Lockfiles read as pip constraints: the versions `uv.lock`, `poetry.lock`, `Pipfile.lock` and
//! `pylock.toml` take from a registry, with the PEP 508 markers of an entry evaluated for the
//! interpreter the environment is built with.

use super::satisfies;
use std::collections::BTreeMap;

/// The pins of a lockfile as a pip constraints file (`name==version`, one per line, sorted):
/// the packages it takes from a registry. An entry whose markers (`resolution-markers` of
/// `uv.lock`, `marker` of `pylock.toml`) do not hold for this interpreter (`python`, and a
/// Linux CPython) is left out; a name still pinned to two versions is left unconstrained; the project itself and
/// packages from a path, a URL or git are never constrained. The error says what is wrong
/// with the file.
pub fn lock_constraints(
    file_name: &str,
    text: &str,
    python: Option<(u32, u32)>,
) -> Result<String, String> {
    let pins: Vec<(String, String)> = match file_name {
        "Pipfile.lock" => pipfile_pins(text)?,
        "uv.lock" | "poetry.lock" | "pylock.toml" => toml_pins(file_name, text, python)?,
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

/// Whether a PEP 508 environment marker holds for a Linux CPython `major.minor` (versions
/// judged at minor granularity); `None` when it cannot be told (an unknown variable, a syntax
/// this reader does not know).
pub fn marker_holds(marker: &str, python: (u32, u32)) -> Option<bool> {
    let tokens = marker_tokens(marker)?;
    let mut at = 0;
    let value = marker_or(&tokens, &mut at, python)?;
    (at == tokens.len()).then_some(value)?
}

#[derive(Debug, Clone, PartialEq)]
enum MarkerToken {
    Word(String),
    Text(String),
    Op(String),
    Open,
    Close,
}

fn marker_tokens(text: &str) -> Option<Vec<MarkerToken>> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            out.push(if c == '(' {
                MarkerToken::Open
            } else {
                MarkerToken::Close
            });
            i += 1;
        } else if c == '\'' || c == '"' {
            let end = chars[i + 1..].iter().position(|d| *d == c)? + i + 1;
            out.push(MarkerToken::Text(chars[i + 1..end].iter().collect()));
            i = end + 1;
        } else if "<>=!~".contains(c) {
            let mut op = String::new();
            while i < chars.len() && "<>=!~".contains(chars[i]) {
                op.push(chars[i]);
                i += 1;
            }
            out.push(MarkerToken::Op(op));
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            let mut word = String::new();
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_.".contains(chars[i])) {
                word.push(chars[i]);
                i += 1;
            }
            out.push(MarkerToken::Word(word));
        } else {
            return None;
        }
    }
    Some(out)
}

fn marker_or(t: &[MarkerToken], at: &mut usize, v: (u32, u32)) -> Option<Option<bool>> {
    marker_chain(t, at, v, "or", marker_and, true)
}

fn marker_and(t: &[MarkerToken], at: &mut usize, v: (u32, u32)) -> Option<Option<bool>> {
    marker_chain(t, at, v, "and", marker_atom, false)
}

/// A rule of the marker grammar: the tokens, the position (advanced past what it read), the
/// interpreter; `None` when the text does not parse, else the (three-valued) value.
type MarkerRule = fn(&[MarkerToken], &mut usize, (u32, u32)) -> Option<Option<bool>>;

/// `operand (op operand)*` in three-valued logic: `decides` (true for `or`, false for `and`)
/// from any operand decides the whole; an unknown operand otherwise leaves it unknown.
fn marker_chain(
    t: &[MarkerToken],
    at: &mut usize,
    v: (u32, u32),
    op: &str,
    operand: MarkerRule,
    decides: bool,
) -> Option<Option<bool>> {
    let mut value = operand(t, at, v)?;
    while t.get(*at) == Some(&MarkerToken::Word(op.into())) {
        *at += 1;
        let right = operand(t, at, v)?;
        value = match (value, right) {
            (Some(a), _) | (_, Some(a)) if a == decides => Some(decides),
            (Some(_), Some(_)) => Some(!decides),
            _ => None,
        };
    }
    Some(value)
}

fn marker_atom(t: &[MarkerToken], at: &mut usize, v: (u32, u32)) -> Option<Option<bool>> {
    if t.get(*at) == Some(&MarkerToken::Open) {
        *at += 1;
        let value = marker_or(t, at, v)?;
        if t.get(*at) != Some(&MarkerToken::Close) {
            return None;
        }
        *at += 1;
        return Some(value);
    }
    let operand = |tok: Option<&MarkerToken>| match tok {
        Some(MarkerToken::Word(w)) => Some((true, w.clone())),
        Some(MarkerToken::Text(s)) => Some((false, s.clone())),
        _ => None,
    };
    let left = operand(t.get(*at))?;
    *at += 1;
    let op = match t.get(*at)? {
        MarkerToken::Op(op) => op.clone(),
        MarkerToken::Word(w) if w == "in" => "in".into(),
        MarkerToken::Word(w) if w == "not" => {
            *at += 1;
            match t.get(*at)? {
                MarkerToken::Word(w) if w == "in" => "not in".into(),
                _ => return None,
            }
        }
        _ => return None,
    };
    *at += 1;
    let right = operand(t.get(*at))?;
    *at += 1;
    let (variable, literal, flipped) = match (left, right) {
        ((true, var), (false, lit)) => (var, lit, false),
        ((false, lit), (true, var)) => (var, lit, true),
        _ => return None,
    };
    let known = |name: &str| -> Option<&'static str> {
        match name {
            "sys_platform" => Some("linux"),
            "platform_system" => Some("Linux"),
            "os_name" => Some("posix"),
            "implementation_name" => Some("cpython"),
            "platform_python_implementation" => Some("CPython"),
            _ => None,
        }
    };
    let holds = match variable.as_str() {
        "python_version" | "python_full_version" if !flipped && op != "in" && op != "not in" => {
            satisfies(&format!("{op}{literal}"), v)
        }
        name => match known(name) {
            Some(actual) => match (op.as_str(), flipped) {
                ("==", _) => Some(actual == literal),
                ("!=", _) => Some(actual != literal),
                ("in", false) => Some(literal.contains(actual)),
                ("not in", false) => Some(!literal.contains(actual)),
                ("in", true) => Some(actual.contains(literal.as_str())),
                ("not in", true) => Some(!actual.contains(literal.as_str())),
                _ => None,
            },
            None => None,
        },
    };
    Some(holds)
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

fn toml_pins(
    file_name: &str,
    text: &str,
    python: Option<(u32, u32)>,
) -> Result<Vec<(String, String)>, String> {
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
        // Markers that are known not to hold for this interpreter leave the entry out.
        let markers: Vec<&str> = match (table.get("resolution-markers"), table.get("marker")) {
            (Some(list), _) => list
                .as_array()
                .map(|l| l.iter().filter_map(|m| m.as_str()).collect())
                .unwrap_or_default(),
            (None, Some(one)) => one.as_str().into_iter().collect(),
            (None, None) => Vec::new(),
        };
        if let Some(v) = python
            && !markers.is_empty()
            && markers.iter().all(|m| marker_holds(m, v) == Some(false))
        {
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
            lock_constraints("uv.lock", text, None).unwrap(),
            "pytest==8.3.4\ntyping-extensions==4.12.2\n"
        );
    }

    #[test]
    fn a_lock_forked_by_interpreter_pins_the_version_of_this_one() {
        let text = r#"
[[package]]
name = "pytest"
version = "8.4.2"
source = { registry = "https://example.invalid/simple" }
resolution-markers = ["python_full_version < '3.10'"]
[[package]]
name = "pytest"
version = "9.0.2"
source = { registry = "https://example.invalid/simple" }
resolution-markers = ["python_full_version >= '3.12'", "python_full_version == '3.11.*'", "python_full_version == '3.10.*'"]
[[package]]
name = "colorama"
version = "0.4.6"
source = { registry = "https://example.invalid/simple" }
resolution-markers = ["sys_platform == 'win32'"]
"#;
        assert_eq!(
            lock_constraints("uv.lock", text, Some((3, 11))).unwrap(),
            "pytest==9.0.2\n"
        );
        assert_eq!(
            lock_constraints("uv.lock", text, Some((3, 9))).unwrap(),
            "pytest==8.4.2\n"
        );
        assert_eq!(
            lock_constraints("uv.lock", text, None).unwrap(),
            "colorama==0.4.6\n"
        );
        assert_eq!(
            marker_holds(
                "python_version >= '3.8' and (sys_platform == 'linux' or os_name == 'nt')",
                (3, 9)
            ),
            Some(true)
        );
        assert_eq!(marker_holds("'linux' in sys_platform", (3, 9)), Some(true));
        assert_eq!(marker_holds("extra == 'x'", (3, 9)), None);
        assert_eq!(marker_holds("python_version <", (3, 9)), None);
    }

    #[test]
    fn poetry_pipfile_and_pylock_pins_are_read_and_broken_files_are_named() {
        let poetry = "[[package]]\nname = \"attrs\"\nversion = \"21.2.0\"\n\n\
                      [[package]]\nname = \"mine\"\nversion = \"0.1\"\n[package.source]\n\
                      type = \"git\"\nurl = \"x\"\n";
        assert_eq!(
            lock_constraints("poetry.lock", poetry, None).unwrap(),
            "attrs==21.2.0\n"
        );
        let pipfile = r#"{"default": {"requests": {"version": "==2.25.1"}},
                          "develop": {"pytest": {"version": "==6.2.2"}, "x": {"git": "y"}}}"#;
        assert_eq!(
            lock_constraints("Pipfile.lock", pipfile, None).unwrap(),
            "pytest==6.2.2\nrequests==2.25.1\n"
        );
        let pylock = "lock-version = \"1.0\"\n[[packages]]\nname = \"idna\"\nversion = \"3.10\"\n\
                      [[packages.wheels]]\nurl = \"u\"\n";
        assert_eq!(
            lock_constraints("pylock.toml", pylock, None).unwrap(),
            "idna==3.10\n"
        );
        assert!(
            lock_constraints("uv.lock", "[[package]\n", None)
                .unwrap_err()
                .starts_with("uv.lock is not TOML")
        );
        assert!(
            lock_constraints("Pipfile.lock", "{", None)
                .unwrap_err()
                .contains("not JSON")
        );
    }
}
