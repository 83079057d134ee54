//! The one table of languages: which extensions and file names are which language, by the
//! name shown to the model (`read_file`'s `language`), and which of them the policy's test
//! rules and detectors know ([`Language`]). `checkout` and `codegraph` read it from here.

use serde::{Deserialize, Serialize};

/// The languages the detectors, the test rules and the structural index know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// `.py`, `.pyi`
    Python,
    /// `.rs`
    Rust,
    /// `.js`, `.jsx`, `.mjs`, `.cjs`
    Javascript,
    /// `.ts`, `.tsx`, `.mts`, `.cts`
    Typescript,
    /// `.go`
    Go,
    /// `.java`
    Java,
    /// `.kt`, `.kts`
    Kotlin,
}

impl Language {
    /// The lowercase name used in policy files and shown to the model.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Rust => "rust",
            Language::Javascript => "javascript",
            Language::Typescript => "typescript",
            Language::Go => "go",
            Language::Java => "java",
            Language::Kotlin => "kotlin",
        }
    }

    /// The prefix of a line that is only a comment, for the detectors to skip.
    pub(crate) fn is_comment_line(self, line: &str) -> bool {
        let t = line.trim_start();
        match self {
            Language::Python => t.starts_with('#'),
            _ => {
                (t.starts_with("//") && !t.starts_with("//go:") && !t.starts_with("// +build"))
                    || t.starts_with("/*")
                    || t.starts_with("* ")
                    || t == "*"
                    || t.starts_with("*/")
            }
        }
    }
}

/// One row of the table: a display name, the extensions (lowercase, no dot) that have it, and
/// the [`Language`] when the rules know it.
struct Row {
    name: &'static str,
    extensions: &'static [&'static str],
    language: Option<Language>,
}

const fn row(
    name: &'static str,
    extensions: &'static [&'static str],
    language: Option<Language>,
) -> Row {
    Row {
        name,
        extensions,
        language,
    }
}

/// Every extension airlock names. The first seven rows are the languages the rules know.
const TABLE: &[Row] = &[
    row("python", &["py", "pyi"], Some(Language::Python)),
    row("rust", &["rs"], Some(Language::Rust)),
    row(
        "javascript",
        &["js", "jsx", "mjs", "cjs"],
        Some(Language::Javascript),
    ),
    row(
        "typescript",
        &["ts", "tsx", "mts", "cts"],
        Some(Language::Typescript),
    ),
    row("go", &["go"], Some(Language::Go)),
    row("java", &["java"], Some(Language::Java)),
    row("kotlin", &["kt", "kts"], Some(Language::Kotlin)),
    // Cython is Python to a reader, not to the Python rules.
    row("python", &["pyx"], None),
    row("scala", &["scala", "sc"], None),
    row("c", &["c", "h"], None),
    row("cpp", &["cc", "cpp", "cxx", "hpp", "hh", "hxx"], None),
    row("csharp", &["cs"], None),
    row("ruby", &["rb"], None),
    row("php", &["php"], None),
    row("swift", &["swift"], None),
    row("objective-c", &["m", "mm"], None),
    row("shell", &["sh", "bash", "zsh"], None),
    row("powershell", &["ps1"], None),
    row("perl", &["pl", "pm"], None),
    row("lua", &["lua"], None),
    row("r", &["r"], None),
    row("julia", &["jl"], None),
    row("elixir", &["ex", "exs"], None),
    row("erlang", &["erl", "hrl"], None),
    row("haskell", &["hs"], None),
    row("ocaml", &["ml", "mli"], None),
    row("clojure", &["clj", "cljs"], None),
    row("dart", &["dart"], None),
    row("zig", &["zig"], None),
    row("sql", &["sql"], None),
    row("html", &["html", "htm"], None),
    row("css", &["css"], None),
    row("scss", &["scss", "sass"], None),
    row("vue", &["vue"], None),
    row("svelte", &["svelte"], None),
    row("markdown", &["md", "markdown"], None),
    row("restructuredtext", &["rst"], None),
    row("text", &["txt"], None),
    row("json", &["json"], None),
    row("toml", &["toml"], None),
    row("yaml", &["yaml", "yml"], None),
    row("xml", &["xml"], None),
    row("ini", &["ini", "cfg"], None),
    row("protobuf", &["proto"], None),
    row("graphql", &["graphql", "gql"], None),
    row("terraform", &["tf"], None),
    row("nix", &["nix"], None),
];

/// Whole file names that say the language whatever their extension.
const FILE_NAMES: &[(&str, &str)] = &[
    ("Makefile", "make"),
    ("makefile", "make"),
    ("GNUmakefile", "make"),
    ("Dockerfile", "dockerfile"),
    ("CMakeLists.txt", "cmake"),
    ("BUILD", "starlark"),
    ("BUILD.bazel", "starlark"),
    ("WORKSPACE", "starlark"),
    ("Gemfile", "ruby"),
    ("Rakefile", "ruby"),
];

/// The file name of a path (after the last `/` or `\`).
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// A path's extension, lowercase, without the dot (`None` when the file name has no dot).
pub fn extension(path: &str) -> Option<String> {
    Some(file_name(path).rsplit_once('.')?.1.to_ascii_lowercase())
}

fn row_of(path: &str) -> Option<&'static Row> {
    let ext = extension(path)?;
    TABLE.iter().find(|r| r.extensions.contains(&ext.as_str()))
}

/// The language of a path by its extension (case-insensitive), if the rules know it.
pub fn language_of(path: &str) -> Option<Language> {
    row_of(path).and_then(|r| r.language)
}

/// The language's name for a reader of the file (`"text"` when unknown): by whole file name
/// first (`Makefile`), then by extension.
pub fn language_name(path: &str) -> &'static str {
    let name = file_name(path);
    if let Some((_, language)) = FILE_NAMES.iter().find(|(n, _)| *n == name) {
        return language;
    }
    row_of(path).map_or("text", |r| r.name)
}

/// Directory names that hold tests and their fixtures.
const TEST_DIRS: &[&str] = &[
    "test",
    "tests",
    "testing",
    "__tests__",
    "spec",
    "specs",
    "testdata",
];

/// Whether a file is part of the test suite: a test by the built-in policy's
/// `[tests.LANGUAGE]` rules ([`crate::is_test_path`]), or a file of no language the rules know
/// (data, fixtures, snapshots) below a test directory (`tests/`, `__tests__/`, `testdata/`, ...).
/// The index marks these files so that retrieval ranks the code they test first.
pub fn is_test_file(path: &str) -> bool {
    let path = path.replace('\\', "/");
    if crate::is_test_path(&path) {
        return true;
    }
    language_of(&path).is_none() && {
        let mut dirs: Vec<&str> = path.split('/').collect();
        dirs.pop();
        dirs.iter()
            .any(|d| TEST_DIRS.contains(&d.to_ascii_lowercase().as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_extension_has_one_row() {
        let mut seen = std::collections::BTreeSet::new();
        for row in TABLE {
            for ext in row.extensions {
                assert!(seen.insert(*ext), "{ext} is in two rows");
                assert_eq!(*ext, ext.to_ascii_lowercase(), "{ext} is not lowercase");
            }
        }
    }

    #[test]
    fn names_and_languages_come_from_the_table() {
        assert_eq!(language_name("a/b.rs"), "rust");
        assert_eq!(language_name("x.PY"), "python");
        assert_eq!(language_name("x.pyx"), "python");
        assert_eq!(language_of("x.pyx"), None);
        assert_eq!(language_name("src/Makefile"), "make");
        assert_eq!(language_name("README"), "text");
        assert_eq!(language_name("a.kt"), "kotlin");
        assert_eq!(language_of("a.kt"), Some(Language::Kotlin));
        for language in [
            Language::Python,
            Language::Rust,
            Language::Javascript,
            Language::Typescript,
            Language::Go,
            Language::Java,
            Language::Kotlin,
        ] {
            let row = TABLE
                .iter()
                .find(|r| r.language == Some(language))
                .expect("a row per language");
            assert_eq!(row.name, language.as_str());
        }
    }

    #[test]
    fn test_files_are_the_policy_tests_and_the_data_beside_them() {
        assert!(is_test_file("tests/test_cart.py"));
        assert!(is_test_file("pkg/io_test.go"));
        assert!(is_test_file("tests/fixtures/cart.json"));
        assert!(is_test_file("src/__tests__/__snapshots__/view.snap"));
        assert!(!is_test_file("shop/cart.py"));
        assert!(!is_test_file("docs/testing.md"));
        // Code below a test directory is a test only when its language's rules say so.
        assert!(!is_test_file("spec/helpers.py"));
    }
}
