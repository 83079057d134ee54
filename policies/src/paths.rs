//! The write policy: path normalisation, refused classes, the allowlist, symlink resolution.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Serialize;

use crate::config::{RefuseSection, rule_error};
use crate::{Error, Result};

/// The answer to "may the agent write this path?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum WriteDecision {
    /// The path is in the allowlist and in no refused class.
    Allowed,
    /// The path is refused.
    Refused {
        /// The rule that refused it: a refused class from the policy file (`ci-config`,
        /// `dependency-manifest`, ...), `allowlist`, or one of the built-in path rules
        /// (`path-empty`, `path-absolute`, `path-traversal`, `path-control-character`,
        /// `path-invisible-character`, `path-blank-component`, `symlink-escape`, `symlink-dangling`, `hard-link`,
        /// `root-unreadable`).
        rule: String,
        /// Why, for a person.
        reason: String,
    },
}

impl WriteDecision {
    /// True for [`WriteDecision::Allowed`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, WriteDecision::Allowed)
    }

    /// The refusing rule, if refused.
    pub fn rule(&self) -> Option<&str> {
        match self {
            WriteDecision::Allowed => None,
            WriteDecision::Refused { rule, .. } => Some(rule),
        }
    }

    fn refused(rule: &str, reason: impl Into<String>) -> WriteDecision {
        WriteDecision::Refused {
            rule: rule.to_string(),
            reason: reason.into(),
        }
    }
}

/// The longest path accepted, in bytes (Linux's `PATH_MAX` is 4096; a reviewer reads far less).
pub const MAX_PATH_BYTES: usize = 512;
/// The longest path component accepted, in bytes (`NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Characters that render as nothing or reorder text: a path holding one cannot be reviewed
/// by eye, so it is refused outright.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{E0000}'..='\u{E007F}')
}

/// Normalise a repository-relative path as a model wrote it: backslashes become separators,
/// empty and `.` components vanish. Refuses (with the rule) empty paths, absolute paths
/// (`/x`, `C:x`, `~x`), any `..` component (also when disguised with trailing dots or spaces,
/// or written with full-width dots), control characters and invisible characters.
pub fn normalize_path(raw: &str) -> std::result::Result<String, WriteDecision> {
    if raw.is_empty() {
        return Err(WriteDecision::refused("path-empty", "the path is empty"));
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(WriteDecision::refused(
            "path-too-long",
            format!(
                "the path is {} bytes long; at most {MAX_PATH_BYTES} are accepted",
                raw.len()
            ),
        ));
    }
    if let Some(long) = raw
        .split(['/', '\\'])
        .find(|c| c.len() > MAX_COMPONENT_BYTES)
    {
        return Err(WriteDecision::refused(
            "path-too-long",
            format!(
                "a path component is {} bytes long; at most {MAX_COMPONENT_BYTES} are accepted",
                long.len()
            ),
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(WriteDecision::refused(
            "path-control-character",
            "the path contains a control character",
        ));
    }
    if raw.chars().any(is_invisible) {
        return Err(WriteDecision::refused(
            "path-invisible-character",
            "the path contains an invisible or text-direction character",
        ));
    }
    let unified = raw.replace('\\', "/");
    let bytes = unified.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if unified.starts_with('/') || unified.starts_with('~') || drive {
        return Err(WriteDecision::refused(
            "path-absolute",
            format!("{raw:?} is absolute; paths are relative to the repository root"),
        ));
    }
    let mut parts = Vec::new();
    for component in unified.split('/') {
        if component.is_empty() || component == "." {
            continue;
        }
        if component.chars().all(char::is_whitespace) {
            return Err(WriteDecision::refused(
                "path-blank-component",
                format!("{raw:?} has a component made only of white space"),
            ));
        }
        let folded = fold_component(component);
        if folded == ".." || folded.is_empty() || folded == "." {
            return Err(WriteDecision::refused(
                "path-traversal",
                format!("{raw:?} has a parent-directory or dot-only component {component:?}"),
            ));
        }
        parts.push(component);
    }
    if parts.is_empty() {
        return Err(WriteDecision::refused(
            "path-empty",
            "the path names the repository root",
        ));
    }
    // A drive or home prefix can also surface after `.` components are dropped (`./c:/x`,
    // `./~/x`): check the first surviving component too.
    if parts.first().is_some_and(|first| {
        let b = first.as_bytes();
        first.starts_with('~') || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
    }) {
        return Err(WriteDecision::refused(
            "path-absolute",
            format!(
                "{raw:?} starts with a drive or home prefix; paths are relative to the repository root"
            ),
        ));
    }
    Ok(parts.join("/"))
}

/// Fold one character to the ASCII character it is commonly mistaken for.
fn fold_char(c: char) -> char {
    match c {
        // Full-width ASCII block.
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        '\u{2024}' | '\u{FE52}' | '\u{2E31}' | '\u{00B7}' | '\u{2219}' => '.',
        '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE63}' => '-',
        '\u{2044}' | '\u{2215}' | '\u{29F8}' => '/',
        '\u{0430}' | '\u{03B1}' | '\u{0410}' | '\u{0391}' => 'a',
        '\u{0432}' | '\u{0412}' | '\u{0392}' => 'b',
        '\u{0441}' | '\u{0421}' | '\u{03F2}' | '\u{217D}' => 'c',
        '\u{0501}' | '\u{217E}' => 'd',
        '\u{0435}' | '\u{0415}' | '\u{0395}' => 'e',
        '\u{0261}' => 'g',
        '\u{04BB}' | '\u{041D}' | '\u{0397}' => 'h',
        '\u{0456}' | '\u{0131}' | '\u{03B9}' | '\u{0406}' | '\u{0399}' | '\u{2170}' => 'i',
        '\u{0458}' | '\u{0408}' => 'j',
        '\u{03BA}' | '\u{041A}' | '\u{039A}' | '\u{212A}' => 'k',
        '\u{04CF}' | '\u{217C}' => 'l',
        '\u{041C}' | '\u{039C}' | '\u{217F}' => 'm',
        '\u{039D}' => 'n',
        '\u{043E}' | '\u{03BF}' | '\u{041E}' | '\u{039F}' => 'o',
        '\u{0440}' | '\u{03C1}' | '\u{0420}' | '\u{03A1}' => 'p',
        '\u{0455}' | '\u{0405}' | '\u{017F}' => 's',
        '\u{03C4}' | '\u{0422}' | '\u{03A4}' => 't',
        '\u{03C5}' => 'u',
        '\u{03BD}' | '\u{2174}' => 'v',
        '\u{0445}' | '\u{0425}' | '\u{03A7}' | '\u{2179}' => 'x',
        '\u{0443}' | '\u{04AF}' | '\u{03A5}' | '\u{0423}' => 'y',
        '\u{0396}' => 'z',
        _ => c,
    }
}

/// A component as a case-insensitive file system or a hurried reviewer would see it:
/// look-alikes folded to ASCII, lower-cased, trailing dots and spaces dropped (Windows does).
fn fold_component(component: &str) -> String {
    let folded: String = component
        .chars()
        .map(fold_char)
        .collect::<String>()
        .to_lowercase();
    let trimmed = folded.trim_end_matches(['.', ' ']);
    if trimmed.is_empty() && !folded.is_empty() {
        // "..." or ". ." collapse to nothing on Windows: keep the dots so the caller sees them.
        if folded.chars().filter(|c| *c == '.').count() >= 2 {
            return "..".to_string();
        }
        return String::new();
    }
    trimmed.to_string()
}

/// The folded form of a normalised path, matched against the refused classes.
fn skeleton(normalized: &str) -> String {
    normalized
        .split('/')
        .map(fold_component)
        .collect::<Vec<_>>()
        .join("/")
}

fn compile_globs(globs: &[String], case_insensitive: bool) -> std::result::Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let compiled = GlobBuilder::new(glob)
            .literal_separator(true)
            .case_insensitive(case_insensitive)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("glob {glob:?} does not compile: {e}"))?;
        builder.add(compiled);
    }
    builder
        .build()
        .map_err(|e| format!("glob set does not compile: {e}"))
}

#[derive(Debug, Clone)]
struct RefusedClass {
    rule: String,
    reason: String,
    globs: GlobSet,
}

/// A regular file with more than one name: writing one name writes the others.
#[cfg(unix)]
fn has_other_links(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.is_file() && meta.nlink() > 1
}

#[cfg(not(unix))]
fn has_other_links(_meta: &std::fs::Metadata) -> bool {
    false
}

/// Compiled write rules.
#[derive(Debug, Clone)]
pub(crate) struct WritePolicy {
    allow_globs: Vec<String>,
    allow: GlobSet,
    refused: Vec<RefusedClass>,
}

impl WritePolicy {
    pub(crate) fn build(
        allow: &[String],
        refuse: &[RefuseSection],
        text: &str,
        file: &str,
    ) -> Result<WritePolicy> {
        let allow_set =
            compile_globs(allow, false).map_err(|m| rule_error(text, file, "allow", m))?;
        let mut refused = Vec::new();
        for section in refuse {
            let globs = compile_globs(&section.globs, true)
                .map_err(|m| rule_error(text, file, &section.rule, m))?;
            refused.push(RefusedClass {
                rule: section.rule.clone(),
                reason: section.reason.clone(),
                globs,
            });
        }
        let policy = WritePolicy {
            allow_globs: allow.to_vec(),
            allow: allow_set,
            refused,
        };
        for section in refuse {
            if section.must_match.is_empty() || section.not_match.is_empty() {
                return Err(rule_error(
                    text,
                    file,
                    &section.rule,
                    "needs at least one `match` and one `not_match` example".to_string(),
                ));
            }
            for example in &section.must_match {
                let decision = policy.check(example);
                if decision.rule() != Some(section.rule.as_str()) {
                    return Err(rule_error(
                        text,
                        file,
                        &section.rule,
                        format!(
                            "match example {example:?} is not refused by this rule (got {decision:?})"
                        ),
                    ));
                }
            }
            for example in &section.not_match {
                let class = policy.refused.iter().find(|c| c.rule == section.rule);
                let hit = normalize_path(example)
                    .ok()
                    .is_some_and(|n| class.is_some_and(|c| c.globs.is_match(skeleton(&n))));
                if hit {
                    return Err(rule_error(
                        text,
                        file,
                        &section.rule,
                        format!("not_match example {example:?} is refused by this rule"),
                    ));
                }
            }
        }
        Ok(policy)
    }

    pub(crate) fn set_allowlist(&mut self, globs: &[String], file: &str) -> Result<()> {
        self.allow = compile_globs(globs, false).map_err(|message| Error::Rule {
            file: file.to_string(),
            line: 0,
            rule: "allow".to_string(),
            message,
        })?;
        self.allow_globs = globs.to_vec();
        Ok(())
    }

    pub(crate) fn allowlist(&self) -> &[String] {
        &self.allow_globs
    }

    pub(crate) fn check(&self, raw: &str) -> WriteDecision {
        let normalized = match normalize_path(raw) {
            Ok(n) => n,
            Err(refusal) => return refusal,
        };
        self.check_normalized(&normalized)
    }

    fn check_normalized(&self, normalized: &str) -> WriteDecision {
        let folded = skeleton(normalized);
        for class in &self.refused {
            if class.globs.is_match(&folded) {
                let mut reason = class.reason.clone();
                if folded != normalized.to_lowercase() {
                    reason.push_str(&format!(" ({normalized:?} reads as {folded:?})"));
                }
                return WriteDecision::Refused {
                    rule: class.rule.clone(),
                    reason,
                };
            }
        }
        if self.allow.is_match(normalized) {
            WriteDecision::Allowed
        } else {
            WriteDecision::refused(
                "allowlist",
                format!(
                    "{normalized:?} matches none of the allowed globs {:?}",
                    self.allow_globs
                ),
            )
        }
    }

    pub(crate) fn check_in_root(&self, root: &Path, raw: &str) -> WriteDecision {
        let normalized = match normalize_path(raw) {
            Ok(n) => n,
            Err(refusal) => return refusal,
        };
        let lexical = self.check_normalized(&normalized);
        if !lexical.is_allowed() {
            return lexical;
        }
        let Ok(root) = root.canonicalize() else {
            return WriteDecision::refused(
                "root-unreadable",
                format!("the repository root {} cannot be resolved", root.display()),
            );
        };
        let components: Vec<&str> = normalized.split('/').collect();
        let mut current: PathBuf = root.clone();
        for (index, component) in components.iter().enumerate() {
            let next = current.join(component);
            let meta = match std::fs::symlink_metadata(&next) {
                Ok(meta) => meta,
                // Nothing there yet: the rest is created inside `current`, already checked.
                Err(_) => break,
            };
            if !meta.file_type().is_symlink() {
                if index + 1 == components.len() && has_other_links(&meta) {
                    return WriteDecision::refused(
                        "hard-link",
                        format!(
                            "{normalized:?} is a hard link: writing it would change another path too"
                        ),
                    );
                }
                current = next;
                continue;
            }
            let Ok(target) = next.canonicalize() else {
                return WriteDecision::refused(
                    "symlink-dangling",
                    format!("{normalized:?} goes through a symlink that resolves nowhere"),
                );
            };
            let Ok(inside) = target.strip_prefix(&root) else {
                return WriteDecision::refused(
                    "symlink-escape",
                    format!("{normalized:?} goes through a symlink that leaves the repository"),
                );
            };
            let mut resolved: Vec<String> = inside
                .components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect();
            resolved.extend(components[index + 1..].iter().map(|s| s.to_string()));
            if resolved.is_empty() {
                return WriteDecision::refused(
                    "symlink-escape",
                    format!("{normalized:?} resolves to the repository root"),
                );
            }
            let resolved = resolved.join("/");
            if let WriteDecision::Refused { rule, reason } = self.check_normalized(&resolved) {
                return WriteDecision::Refused {
                    rule,
                    reason: format!(
                        "{normalized:?} resolves through a symlink to {resolved:?}: {reason}"
                    ),
                };
            }
            current = target;
        }
        WriteDecision::Allowed
    }
}
