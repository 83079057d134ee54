//! What a path is: its language and whether it is a test (both from the one table in
//! `airlock_policies`), vendored or documentation file.
//!
//! Classification looks at the path only (and, for binary detection, at the first bytes),
//! so the same path always gets the same answer.

use serde::{Deserialize, Serialize};

/// Files larger than this are skipped as huge (generated data, dumps).
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Files larger than this are indexed lexically but not parsed.
pub const MAX_PARSE_BYTES: usize = 512 * 1024;
/// How many leading bytes are checked for a NUL byte to call a file binary.
pub const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// The languages with a structural channel (tree-sitter grammar and tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Python (`.py`, `.pyi`).
    Python,
    /// Rust (`.rs`).
    Rust,
    /// JavaScript (`.js`, `.mjs`, `.cjs`, `.jsx`).
    Javascript,
    /// TypeScript (`.ts`, `.mts`, `.cts`).
    Typescript,
    /// TypeScript with JSX (`.tsx`).
    Tsx,
    /// Go (`.go`).
    Go,
    /// Java (`.java`).
    Java,
}

impl Language {
    /// The language of a path, from the one table in `airlock_policies::languages`; `None`
    /// for files indexed lexically only (Kotlin has no grammar here yet).
    pub fn from_path(path: &str) -> Option<Language> {
        use airlock_policies::Language as L;
        Some(match airlock_policies::language_of(path)? {
            L::Python => Language::Python,
            L::Rust => Language::Rust,
            L::Javascript => Language::Javascript,
            L::Typescript if extension(path).as_deref() == Some("tsx") => Language::Tsx,
            L::Typescript => Language::Typescript,
            L::Go => Language::Go,
            L::Java => Language::Java,
            L::Kotlin => return None,
        })
    }

    /// Short stable name, used in cache keys and output.
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Rust => "rust",
            Language::Javascript => "javascript",
            Language::Typescript => "typescript",
            Language::Tsx => "tsx",
            Language::Go => "go",
            Language::Java => "java",
        }
    }
}

use airlock_policies::languages::extension;

/// Extensions that are binary (or never useful as text) and are skipped without reading.
const BINARY_EXTENSIONS: &[&str] = &[
    "7z", "a", "avi", "bin", "bmp", "bz2", "class", "dat", "dcm", "dll", "doc", "docx", "dylib",
    "eot", "exe", "gif", "gz", "h5", "hdf5", "ico", "jar", "jpeg", "jpg", "lz4", "mat", "mov",
    "mp3", "mp4", "nc", "npy", "npz", "o", "otf", "parquet", "pdf", "pickle", "pkl", "png", "ppt",
    "pptx", "pyc", "pyd", "so", "sqlite", "svgz", "tar", "tgz", "tif", "tiff", "ttf", "wasm",
    "wav", "webm", "webp", "whl", "woff", "woff2", "xls", "xlsx", "xz", "zip", "zst",
];

/// Whether the extension alone says the file is binary.
pub fn has_binary_extension(path: &str) -> bool {
    extension(path).is_some_and(|e| BINARY_EXTENSIONS.contains(&e.as_str()))
}

/// Whether content looks binary: a NUL byte among the first [`BINARY_SNIFF_BYTES`].
pub fn looks_binary(content: &[u8]) -> bool {
    content[..content.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

fn dirs(path: &str) -> impl Iterator<Item = String> + '_ {
    let mut comps: Vec<&str> = path.split('/').collect();
    comps.pop();
    comps.into_iter().map(|c| c.to_ascii_lowercase())
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase()
}

/// Whether the path is part of the test suite: the policy's test rules, or data and fixtures
/// below a test directory ([`airlock_policies::is_test_file`]).
pub fn is_test_path(path: &str) -> bool {
    airlock_policies::is_test_file(path)
}

/// Whether the path is vendored or third-party code. `external/` (the C and C++ habit for
/// checked-in dependencies) counts only at the top of the tree: inside a package
/// (`sympy/external/gmpy.py`) it is the project's own code that wraps a dependency.
pub fn is_vendored_path(path: &str) -> bool {
    let vendor_dirs = [
        "vendor",
        "vendored",
        "_vendor",
        "third_party",
        "thirdparty",
        "third-party",
        "node_modules",
        "site-packages",
    ];
    let top_level_dirs = ["external", "externals"];
    dirs(path).enumerate().any(|(i, d)| {
        vendor_dirs.contains(&d.as_str()) || (i == 0 && top_level_dirs.contains(&d.as_str()))
    }) || file_name(path).ends_with(".min.js")
        || file_name(path).ends_with(".min.css")
}

/// Whether the path is documentation, examples or benchmarks rather than the product's code.
pub fn is_docs_path(path: &str) -> bool {
    let doc_dirs = [
        "doc",
        "docs",
        "documentation",
        "example",
        "examples",
        "benchmarks",
        "bench",
        "asv_bench",
    ];
    if dirs(path).any(|d| doc_dirs.contains(&d.as_str())) {
        return true;
    }
    matches!(
        extension(path).as_deref(),
        Some("md" | "rst" | "txt" | "adoc" | "html" | "css" | "svg")
    )
}

/// A path for a line of text output: control characters (a newline in a file name could fake
/// a hit) and backslashes are escaped, as `"\n"` and `"\\"`.
pub fn printable_path(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.chars().any(|c| c.is_control() || c == '\\') {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut escaped = String::with_capacity(path.len() + 8);
    for c in path.chars() {
        if c.is_control() || c == '\\' {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    std::borrow::Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use super::printable_path;

    #[test]
    fn control_characters_in_paths_are_escaped_and_other_text_kept() {
        assert_eq!(printable_path("src/café.py"), "src/café.py");
        assert_eq!(printable_path("weird/new\nline.py"), "weird/new\\nline.py");
        assert_eq!(printable_path("a\\b\t.py"), "a\\\\b\\t.py");
    }
}
