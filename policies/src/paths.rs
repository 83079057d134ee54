//! The write policy: path normalisation, refused classes, the allowlist, symlink resolution.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_security::confusable_detection::skeleton;

use crate::locate::rule_error;
use crate::{Error, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefuseSection {
    pub(crate) rule: String,
    pub(crate) reason: String,
    pub(crate) globs: Vec<String>,
    #[serde(rename = "match")]
    pub(crate) must_match: Vec<String>,
    pub(crate) not_match: Vec<String>,
}

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
        /// `path-invisible-character`, `path-blank-component`, `path-too-long`, `symlink-escape`,
        /// `symlink-dangling`, `symlink-target`, `hard-link`, `root-unreadable`) or the content
        /// rule `binary-file`.
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
        if READINGS.iter().any(|&compatible| {
            let folded = fold_component(component, compatible);
            folded == ".." || folded.is_empty() || folded == "."
        }) {
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

/// Text as a hurried reader sees it: Unicode's confusable skeleton (UTS #39: `ꜱ`, `ѕ`, `ｓ` and
/// `𝐬` all read `s`, `m` reads `rn`, `I` and `1` read `l`), lower-cased, then both again, since
/// lower-casing can make a new confusable and a skeleton can be upper-case (`Н` -> `H` -> `h`).
/// With `compatible`, the text is first put in its compatibility form (NFKC), which reads a few
/// characters the skeleton keeps apart as ASCII (the full-width `－` as `-`); without, those
/// NFKC would take elsewhere keep their skeleton (`Ϲ` reads `c`, where NFKC makes it `Σ`). A
/// path is refused when either reading matches.
/// The skeleton maps some ASCII too (`m` -> `rn`), so a folded path is compared only with
/// globs folded the same way ([`fold_glob`]), never with the text as written.
fn fold_text(text: &str, compatible: bool) -> String {
    let compatible: String = if compatible {
        text.nfkc().collect()
    } else {
        text.to_owned()
    };
    let once: String = skeleton(&compatible).collect::<String>().to_lowercase();
    skeleton(&once).collect::<String>().to_lowercase()
}

/// Both readings of [`fold_text`].
const READINGS: [bool; 2] = [false, true];

/// Drop what Windows drops at the end of a name (dots and spaces). A name made only of
/// dots keeps two of them, so `...` still reads as the parent directory it is on Windows.
fn trim_component(folded: String) -> String {
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

/// A component as a case-insensitive file system or a hurried reviewer would see it:
/// look-alikes folded ([`fold_text`]), trailing dots and spaces dropped (Windows does).
fn fold_component(component: &str, compatible: bool) -> String {
    if component.is_ascii() {
        return trim_component(fold_ascii(component));
    }
    trim_component(fold_text(component, compatible))
}

/// [`fold_text`] of an ASCII text, in either reading, from [`ASCII_FOLDS`].
fn fold_ascii(text: &str) -> String {
    text.bytes()
        .map(|b| ASCII_FOLDS.get(usize::from(b)).map_or("", String::as_str))
        .collect()
}

/// A normalised path as a case-insensitive file system sees it: lower-cased, trailing dots and
/// spaces of each component dropped. Matched against the refused globs as written.
fn plain_form(normalized: &str) -> String {
    normalized
        .split('/')
        .map(|c| trim_component(c.to_lowercase()))
        .collect::<Vec<_>>()
        .join("/")
}

/// The folded form of a normalised path ([`fold_component`] per component), matched against
/// the refused globs folded by [`fold_glob`]. A look-alike of a separator (`⁄`) folds to `/`
/// and then separates, as it appears to.
fn folded_form(normalized: &str, compatible: bool) -> String {
    normalized
        .split('/')
        .map(|c| fold_component(c, compatible))
        .collect::<Vec<_>>()
        .join("/")
}

/// [`fold_text`] of each ASCII character. The skeleton maps one character at a time after a
/// canonical decomposition that leaves ASCII as it is, and NFKC leaves ASCII as it is too, so
/// an ASCII text folds (in both readings) to the concatenation of its characters' folds.
static ASCII_FOLDS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    (0u8..128)
        .map(|b| fold_text(char::from(b).encode_utf8(&mut [0; 4]), false))
        .collect()
});

/// [`folded_form`] of an ASCII path, from [`ASCII_FOLDS`].
fn folded_ascii_form(normalized: &str) -> String {
    normalized
        .split('/')
        .map(|component| trim_component(fold_ascii(component)))
        .collect::<Vec<_>>()
        .join("/")
}

/// [`plain_form`] and the distinct readings of [`folded_form`].
struct Forms {
    plain: String,
    folded: Vec<String>,
}

impl Forms {
    fn of(normalized: &str) -> Forms {
        let folded = if normalized.is_ascii() {
            vec![folded_ascii_form(normalized)]
        } else {
            let mut readings: Vec<String> = READINGS
                .iter()
                .map(|&compatible| folded_form(normalized, compatible))
                .collect();
            readings.dedup();
            readings
        };
        Forms {
            plain: plain_form(normalized),
            folded,
        }
    }
}

/// A normalised path for a person: lower-cased, each non-ASCII character whose skeleton is
/// ASCII written as that skeleton (`Cаrgo.lock` -> `cargo.lock`), ASCII left as it is (so
/// `m` stays `m`, where the skeleton says `rn`).
fn readable_form(normalized: &str) -> String {
    let mut out = String::with_capacity(normalized.len());
    for c in normalized.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        let text = c.encode_utf8(&mut [0; 4]).to_owned();
        // The compatibility form first, so a full-width `ｍ` shows as `m`, not as its `rn`.
        let compatible: String = text.nfkc().collect();
        let folded = fold_text(&text, true);
        if compatible.is_ascii() {
            out.push_str(&compatible.to_ascii_lowercase());
        } else if folded.is_ascii() {
            out.push_str(&folded);
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Characters with a meaning in a glob (globset syntax with backslash escapes).
const GLOB_META: [char; 8] = ['*', '?', '[', ']', '{', '}', ',', '\\'];

/// A glob with its literal text folded by [`fold_text`] and its syntax kept: `*`, `?`, `{`,
/// `}`, `,` and `/` as they are, a `[...]` class and a `\x` escape verbatim. A folded literal
/// that produces a glob character has it escaped, so folding never changes a glob's shape.
fn fold_glob(glob: &str) -> String {
    let mut out = String::with_capacity(glob.len());
    let mut literal = String::new();
    let flush = |literal: &mut String, out: &mut String| {
        // Globs are written in ASCII, which NFKC leaves as it is: one reading serves both.
        for c in fold_text(literal, false).chars() {
            if GLOB_META.contains(&c) {
                out.push('\\');
            }
            out.push(c);
        }
        literal.clear();
    };
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' | '?' | '{' | '}' | ',' | '/' => {
                flush(&mut literal, &mut out);
                out.push(c);
            }
            '\\' => {
                flush(&mut literal, &mut out);
                out.push(c);
                if let Some(escaped) = chars.next() {
                    out.push(escaped);
                }
            }
            '[' => {
                flush(&mut literal, &mut out);
                out.push(c);
                // `[!]...]` and `[]...]`: a `]` first in the class is a literal.
                if let Some(&bang) = chars.peek()
                    && (bang == '!' || bang == '^')
                {
                    out.push(bang);
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == ']' {
                        break;
                    }
                }
            }
            _ => literal.push(c),
        }
    }
    flush(&mut literal, &mut out);
    out
}

/// `text` quoted with every non-ASCII or non-printing character escaped (`\u{430}`), so a
/// person sees a look-alike or a control character for what it is.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c.is_ascii() {
            out.extend(c.escape_debug());
        } else {
            out.extend(c.escape_unicode());
        }
    }
    out.push('"');
    out
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
    /// The globs as written, to name the one a look-alike matched.
    written: Vec<String>,
    /// The globs as written, matched case-insensitively against [`plain_form`].
    plain: GlobSet,
    /// The globs folded by [`fold_glob`], matched against [`folded_form`].
    folded: GlobSet,
}

/// How a path fell into a refused class.
enum ClassMatch<'a> {
    /// The path as written (case and trailing dots aside) matches a glob.
    Written,
    /// Only its folded form matches the folded glob: a look-alike of that glob.
    LookAlike(&'a str),
}

impl RefusedClass {
    fn matches(&self, forms: &Forms) -> Option<ClassMatch<'_>> {
        if self.plain.is_match(&forms.plain) {
            return Some(ClassMatch::Written);
        }
        let index = forms
            .folded
            .iter()
            .find_map(|folded| self.folded.matches(folded).first().copied())?;
        Some(ClassMatch::LookAlike(
            self.written.get(index).map_or("", String::as_str),
        ))
    }
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
    /// Every class's globs in one set, as written and folded, so a path is matched twice
    /// (plus once per further reading) rather than twice per class.
    all_plain: GlobSet,
    all_folded: GlobSet,
    /// The class (index into `refused`) and the glob (index into its `written`) of each glob
    /// of `all_plain` and `all_folded`.
    owners: Vec<(usize, usize)>,
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
            let plain = compile_globs(&section.globs, true)
                .map_err(|m| rule_error(text, file, &section.rule, m))?;
            let folded: Vec<String> = section.globs.iter().map(|g| fold_glob(g)).collect();
            let folded = compile_globs(&folded, true).map_err(|m| {
                rule_error(
                    text,
                    file,
                    &section.rule,
                    format!("once its look-alikes are folded, {m}"),
                )
            })?;
            refused.push(RefusedClass {
                rule: section.rule.clone(),
                reason: section.reason.clone(),
                written: section.globs.clone(),
                plain,
                folded,
            });
        }
        let mut owners = Vec::new();
        let mut every = Vec::new();
        for (class, section) in refuse.iter().enumerate() {
            for (index, glob) in section.globs.iter().enumerate() {
                owners.push((class, index));
                every.push(glob.clone());
            }
        }
        let folded: Vec<String> = every.iter().map(|g| fold_glob(g)).collect();
        let all_plain =
            compile_globs(&every, true).map_err(|m| rule_error(text, file, "write", m))?;
        let all_folded =
            compile_globs(&folded, true).map_err(|m| rule_error(text, file, "write", m))?;
        let policy = WritePolicy {
            allow_globs: allow.to_vec(),
            allow: allow_set,
            refused,
            all_plain,
            all_folded,
            owners,
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
                    .is_some_and(|n| class.is_some_and(|c| c.matches(&Forms::of(&n)).is_some()));
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
        let forms = Forms::of(normalized);
        // The first class (in policy order) with a hit, as written or folded: the same answer
        // as asking each class in turn, in two or three set matches.
        let first = |hits: Vec<usize>| {
            hits.into_iter()
                .filter_map(|hit| self.owners.get(hit).copied())
                .min()
        };
        let written = first(self.all_plain.matches(&forms.plain));
        let look_alike = forms
            .folded
            .iter()
            .filter_map(|folded| first(self.all_folded.matches(folded)))
            .min();
        let chosen = match (written, look_alike) {
            (Some(w), Some(l)) if l.0 < w.0 => Some((l.0, Some(l.1))),
            (Some(w), _) => Some((w.0, None)),
            (None, Some(l)) => Some((l.0, Some(l.1))),
            (None, None) => None,
        };
        if let Some((index, glob)) = chosen
            && let Some(class) = self.refused.get(index)
        {
            let how = match glob {
                None => ClassMatch::Written,
                Some(glob) => {
                    ClassMatch::LookAlike(class.written.get(glob).map_or("", String::as_str))
                }
            };
            let mut reason = class.reason.clone();
            let reads_as = readable_form(normalized);
            match how {
                ClassMatch::LookAlike(glob) => reason.push_str(&format!(
                    " ({} reads as {reads_as:?}, a look-alike of {glob:?}: their Unicode \
                     confusable skeletons (UTS #39) match)",
                    shown(normalized)
                )),
                ClassMatch::Written if reads_as != normalized.to_lowercase() => {
                    reason.push_str(&format!(" ({} reads as {reads_as:?})", shown(normalized)))
                }
                ClassMatch::Written => {}
            }
            return WriteDecision::Refused {
                rule: class.rule.clone(),
                reason,
            };
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

/// The most links followed resolving one symlink's target (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// A name under a directory that no refused glob spells out: a link to a directory is refused
/// when a file of that directory would be (`ci/`, `.github/workflows/`), whatever it holds now.
const DIRECTORY_PROBE: &str = "airlock-directory-probe";

impl WritePolicy {
    /// Whether the symlink `link` (normalised or not) may point to `target`. `link_at(path)`
    /// gives the target of the symlink at a repository path of the same tree, if there is one,
    /// so chains of links are followed as the kernel would.
    pub(crate) fn check_symlink(
        &self,
        link: &str,
        target: &str,
        link_at: &dyn Fn(&str) -> Option<String>,
    ) -> WriteDecision {
        let refuse = |why: String| {
            WriteDecision::refused(
                "symlink-target",
                format!(
                    "the symlink {} points to {}, {why}",
                    shown(link),
                    shown(target)
                ),
            )
        };
        let normalized = match normalize_path(link) {
            Ok(n) => n,
            Err(refusal) => return refusal,
        };
        let own = self.check_normalized(&normalized);
        if !own.is_allowed() {
            return own;
        }
        if target.is_empty() {
            return refuse("an empty target".to_string());
        }
        if target.len() > MAX_PATH_BYTES {
            return refuse(format!(
                "a target of {} bytes; at most {MAX_PATH_BYTES} are accepted",
                target.len()
            ));
        }
        if target.starts_with('/') {
            return refuse("an absolute path: a link must stay inside the repository".to_string());
        }
        let mut resolved: Vec<String> = normalized.split('/').map(str::to_owned).collect();
        resolved.pop();
        let mut pending: std::collections::VecDeque<String> =
            target.split('/').map(str::to_owned).collect();
        let mut hops = 0;
        while let Some(part) = pending.pop_front() {
            match part.as_str() {
                "" | "." => {}
                ".." => {
                    if resolved.pop().is_none() {
                        return refuse(
                            "which climbs above the repository root (a link must stay inside \
                             the repository)"
                                .to_string(),
                        );
                    }
                }
                _ => {
                    resolved.push(part);
                    let here = resolved.join("/");
                    let Some(next) = link_at(&here) else {
                        continue;
                    };
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return refuse(format!(
                            "which goes through more than {MAX_SYMLINK_HOPS} links"
                        ));
                    }
                    if next.starts_with('/') {
                        return refuse(format!(
                            "which goes through the symlink {} to the absolute path {}",
                            shown(&here),
                            shown(&next)
                        ));
                    }
                    resolved.pop();
                    for part in next.split('/').rev() {
                        pending.push_front(part.to_owned());
                    }
                }
            }
        }
        if resolved.is_empty() {
            return refuse(
                "which is the repository root: every refused path would be reachable through it"
                    .to_string(),
            );
        }
        let resolved = resolved.join("/");
        if let WriteDecision::Refused { rule, reason } = self.check(&resolved) {
            return refuse(format!(
                "which resolves to {}: {reason} (rule {rule})",
                shown(&resolved)
            ));
        }
        let inside = Forms::of(&format!("{resolved}/{DIRECTORY_PROBE}"));
        if let Some(class) = self.refused.iter().find(|c| c.matches(&inside).is_some()) {
            return refuse(format!(
                "which resolves to {}, a directory whose files are refused: {} (rule {})",
                shown(&resolved),
                class.reason,
                class.rule
            ));
        }
        WriteDecision::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_a_glob_keeps_its_syntax_and_folds_its_literals() {
        assert_eq!(fold_glob("**/cargo.toml"), "**/cargo.tornl");
        assert_eq!(fold_glob("**/requirements*.txt"), "**/requirernents*.txt");
        assert_eq!(fold_glob(".github/**"), ".github/**");
        assert_eq!(
            fold_glob("**/{Gemfile,mix}.lock"),
            "**/{gernfile,rnix}.lock"
        );
        assert_eq!(fold_glob("src/?.py"), "src/?.py");
        // Classes and escapes are kept verbatim, `]` first in a class included.
        assert_eq!(fold_glob("[]m]x[!M]"), "[]m]x[!M]");
        assert_eq!(fold_glob("\\*m"), "\\*rn");
        // A literal whose fold holds a separator keeps it a separator on both sides.
        assert_eq!(fold_glob("a%b"), "a\u{b0}/\u{2080}b");
        assert_eq!(folded_form("a%b", false), "a\u{b0}/\u{2080}b");
    }

    #[test]
    fn a_path_and_a_glob_fold_the_same_way() {
        for (path, glob) in [
            ("\u{A731}etup.py", "setup.py"),
            ("Cargo.tom1", "Cargo.toml"),
            (
                "\u{FF43}\u{FF4F}\u{FF4E}\u{FF46}\u{FF54}\u{FF45}\u{FF53}\u{FF54}.py",
                "conftest.py",
            ),
            ("\u{03F9}argo.lock", "cargo.lock"),
        ] {
            let set = compile_globs(&[fold_glob(glob)], true).unwrap();
            let forms = Forms::of(path);
            assert!(
                forms.folded.iter().any(|f| set.is_match(f)),
                "{path} vs {glob}"
            );
        }
        // The ASCII table agrees with folding the text whole, in both readings.
        let printable: String = (' '..='~').collect();
        for text in [
            printable.as_str(),
            "Cargo.toml",
            "c0nftest.py",
            "a%b",
            "I|1`\"m.txt",
        ] {
            for compatible in READINGS {
                assert_eq!(fold_ascii(text), fold_text(text, compatible), "{text}");
            }
        }
        assert_eq!(folded_ascii_form("x/setup.py. /..."), "x/setup.py/..");
        assert_eq!(readable_form("C\u{0430}rgo.lock"), "cargo.lock");
        assert_eq!(readable_form("docs/m.md"), "docs/m.md");
        assert_eq!(readable_form("\u{FF4D}ix.exs"), "mix.exs");
        assert_eq!(shown("a\u{0430}\n"), "\"a\\u{430}\\n\"");
    }
}
