//! Running the detector over a corpus of ordinary files to measure its false-positive rate.

use crate::detect::{self, Finding, SourceKind};
use crate::error::{Result, io};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Extensions counted as source code.
const SOURCE_EXTS: &[&str] = &[
    "rs", "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "java", "kt", "c", "h", "cc",
    "cpp", "hpp", "cs", "rb", "php", "swift", "scala", "sh", "bash", "lua", "pl", "toml", "yaml",
    "yml", "json", "cfg", "ini",
];
/// Extensions counted as documentation.
const DOC_EXTS: &[&str] = &["md", "markdown", "mdx", "rst", "txt"];
/// Larger files are skipped (generated data, vendored bundles).
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// One flagged file.
#[derive(Debug, Clone, Serialize)]
pub struct FlaggedFile {
    /// Path of the file.
    pub path: PathBuf,
    /// What fired.
    pub findings: Vec<Finding>,
}

/// Counts for one class of files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassCount {
    /// Files scanned.
    pub scanned: u64,
    /// Files with at least one finding.
    pub flagged: u64,
}

impl ClassCount {
    /// Flagged files per 1,000 scanned.
    pub fn per_thousand(&self) -> f64 {
        if self.scanned == 0 {
            0.0
        } else {
            self.flagged as f64 * 1000.0 / self.scanned as f64
        }
    }
}

/// Result of a corpus scan.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CorpusReport {
    /// Source files (by extension).
    pub source: ClassCount,
    /// Documentation files (Markdown, reStructuredText, plain text).
    pub docs: ClassCount,
    /// Scanned files per extension.
    pub by_extension: BTreeMap<String, u64>,
    /// Findings per rule, over all flagged files.
    pub by_rule: BTreeMap<String, u64>,
    /// Every flagged file, sorted by path.
    pub flagged: Vec<FlaggedFile>,
    /// Files skipped (too large, binary, unreadable).
    pub skipped: u64,
}

/// Scan every source and documentation file under `roots` (symlinks are not followed).
pub fn scan_corpus(roots: &[PathBuf]) -> Result<CorpusReport> {
    let mut files = Vec::new();
    for root in roots {
        walk(root, &mut files)?;
    }
    files.sort();
    files.dedup();
    let mut report = CorpusReport::default();
    for path in files {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        let is_doc = DOC_EXTS.contains(&ext.as_str());
        if !is_doc && !SOURCE_EXTS.contains(&ext.as_str()) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&path) else {
            report.skipped += 1;
            continue;
        };
        if meta.len() > MAX_FILE_BYTES {
            report.skipped += 1;
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            report.skipped += 1;
            continue;
        };
        if bytes.iter().take(8192).any(|&b| b == 0) {
            report.skipped += 1;
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = path.to_string_lossy();
        let findings = detect::detect(&text, SourceKind::File, Some(&shown));
        *report.by_extension.entry(ext).or_default() += 1;
        let class = if is_doc {
            &mut report.docs
        } else {
            &mut report.source
        };
        class.scanned += 1;
        if !findings.is_empty() {
            class.flagged += 1;
            for f in &findings {
                *report
                    .by_rule
                    .entry(f.rule.as_str().to_string())
                    .or_default() += 1;
            }
            report.flagged.push(FlaggedFile { path, findings });
        }
    }
    Ok(report)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir, "stat"))?;
    if meta.is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(io(&d, "list directory"))?;
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let p = entry.path();
            if ft.is_dir() {
                if p.file_name().is_some_and(|n| n == ".git" || n == "target") {
                    continue;
                }
                stack.push(p);
            } else if ft.is_file() {
                out.push(p);
            }
        }
    }
    Ok(())
}
