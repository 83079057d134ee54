//! Structural extraction with tree-sitter: definitions (with signature, docstring and
//! nesting), imports, called names and every identifier used.
//!
//! Definitions and calls come from each grammar's own tags query; imports and docstrings from
//! a small per-language walk. Nothing here reads the repository: input is one file's text.

use crate::files::Language;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tree_sitter::{Node, Parser, Query, QueryCursor, StreamingIterator};

/// Longest signature or import line kept, in characters.
const MAX_SIGNATURE_CHARS: usize = 160;
/// Longest docstring kept, in characters.
const MAX_DOC_CHARS: usize = 300;

/// One definition found in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Def {
    /// The defined name, as written.
    pub name: String,
    /// Tag kind: `class`, `function`, `method`, `interface`, `module`, `macro`, `constant`, `type`.
    pub kind: String,
    /// First line of the definition, 1-based.
    pub line: u32,
    /// Last line of the definition, 1-based.
    pub end_line: u32,
    /// Nesting depth among the file's definitions (0 = top level).
    pub depth: u32,
    /// The definition's header with whitespace collapsed (up to the body).
    pub signature: String,
    /// The docstring or leading comment, shortened.
    pub doc: Option<String>,
}

/// What one file defines and uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbols {
    /// Definitions in source order.
    pub defs: Vec<Def>,
    /// Names of called functions/methods and referenced types, sorted, unique.
    pub calls: Vec<String>,
    /// Import statements, whitespace collapsed, in source order.
    pub imports: Vec<String>,
    /// Every identifier used in the file (except the names it defines) with its count.
    pub idents: BTreeMap<String, u32>,
}

impl Symbols {
    /// The text the structural channel indexes: signatures, docstrings, imports, called names.
    pub fn structural_text(&self) -> String {
        let mut text = String::new();
        for def in &self.defs {
            text.push_str(&def.name);
            text.push(' ');
            text.push_str(&def.signature);
            text.push('\n');
            if let Some(doc) = &def.doc {
                text.push_str(doc);
                text.push('\n');
            }
        }
        for import in &self.imports {
            text.push_str(import);
            text.push('\n');
        }
        for call in &self.calls {
            text.push_str(call);
            text.push(' ');
        }
        text
    }
}

struct LanguageSupport {
    language: Language,
    ts_language: tree_sitter::Language,
    tags: Query,
}

/// A reusable extractor: one parser and the compiled tags queries of the languages met so far.
/// Not shareable between threads; create one per thread.
pub struct Extractor {
    parser: Parser,
    languages: Vec<LanguageSupport>,
}

fn grammar(language: Language) -> (tree_sitter::Language, String) {
    match language {
        Language::Python => (
            tree_sitter_python::LANGUAGE.into(),
            tree_sitter_python::TAGS_QUERY.to_string(),
        ),
        Language::Rust => (
            tree_sitter_rust::LANGUAGE.into(),
            tree_sitter_rust::TAGS_QUERY.to_string(),
        ),
        Language::Javascript => (
            tree_sitter_javascript::LANGUAGE.into(),
            tree_sitter_javascript::TAGS_QUERY.to_string(),
        ),
        Language::Typescript => (
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            tree_sitter_typescript::TAGS_QUERY.to_string(),
        ),
        Language::Tsx => (
            tree_sitter_typescript::LANGUAGE_TSX.into(),
            tree_sitter_typescript::TAGS_QUERY.to_string(),
        ),
        Language::Go => (
            tree_sitter_go::LANGUAGE.into(),
            tree_sitter_go::TAGS_QUERY.to_string(),
        ),
        Language::Java => (
            tree_sitter_java::LANGUAGE.into(),
            tree_sitter_java::TAGS_QUERY.to_string(),
        ),
    }
}

/// Node kinds that are import statements, per language.
fn import_kinds(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &["import_statement", "import_from_statement"],
        Language::Rust => &["use_declaration", "extern_crate_declaration", "mod_item"],
        Language::Javascript | Language::Typescript | Language::Tsx => {
            &["import_statement", "export_statement"]
        }
        Language::Go => &["import_spec"],
        Language::Java => &["import_declaration", "package_declaration"],
    }
}

impl Extractor {
    /// A new extractor. Grammars and tags queries are loaded on first use of each language
    /// (compiling a query costs milliseconds; an incremental run may need only one language).
    pub fn new() -> Result<Extractor> {
        Ok(Extractor {
            parser: Parser::new(),
            languages: Vec::new(),
        })
    }

    fn support(&mut self, language: Language) -> Result<usize> {
        if let Some(i) = self.languages.iter().position(|l| l.language == language) {
            return Ok(i);
        }
        let (ts_language, mut source) = grammar(language);
        // TypeScript's tags query only adds TS-specific patterns on top of JavaScript's.
        if matches!(language, Language::Typescript | Language::Tsx) {
            let combined = format!("{}\n{}", tree_sitter_javascript::TAGS_QUERY, source);
            if Query::new(&ts_language, &combined).is_ok() {
                source = combined;
            }
        }
        let tags = Query::new(&ts_language, &source).map_err(|e| Error::Grammar {
            language: language.name(),
            message: e.to_string(),
        })?;
        self.languages.push(LanguageSupport {
            language,
            ts_language,
            tags,
        });
        Ok(self.languages.len() - 1)
    }

    /// Extract the symbols of one file. A file that does not parse cleanly still yields
    /// whatever tree-sitter recovered.
    pub fn extract(&mut self, language: Language, source: &str) -> Result<Symbols> {
        let index = self.support(language)?;
        let support = &self.languages[index];
        self.parser
            .set_language(&support.ts_language)
            .map_err(|e| Error::Grammar {
                language: language.name(),
                message: e.to_string(),
            })?;
        let Some(tree) = self.parser.parse(source, None) else {
            return Ok(Symbols::default());
        };
        let bytes = source.as_bytes();
        let root = tree.root_node();

        let mut defs: Vec<(usize, usize, Def)> = Vec::new();
        let mut def_names: BTreeSet<String> = BTreeSet::new();
        let mut calls: BTreeSet<String> = BTreeSet::new();
        let mut seen_def_nodes: BTreeSet<(usize, usize)> = BTreeSet::new();
        let names = support.tags.capture_names();
        let mut cursor = QueryCursor::new();
        let mut matches = cursor.matches(&support.tags, root, bytes);
        while let Some(m) = matches.next() {
            let mut name_node = None;
            let mut def: Option<(Node, &str)> = None;
            let mut is_ref = false;
            for cap in m.captures() {
                let cap_name = names.get(cap.index as usize).copied().unwrap_or("");
                if cap_name == "name" {
                    name_node = Some(cap.node);
                } else if let Some(kind) = cap_name.strip_prefix("definition.") {
                    def = Some((cap.node, kind));
                } else if cap_name.starts_with("reference.") {
                    is_ref = true;
                }
            }
            let Some(name_node) = name_node else { continue };
            let Ok(name) = name_node.utf8_text(bytes) else {
                continue;
            };
            if let Some((node, kind)) = def {
                let key = (node.start_byte(), name_node.start_byte());
                if !seen_def_nodes.insert(key) {
                    continue;
                }
                let kind =
                    if language == Language::Python && kind == "function" && inside_class(node) {
                        "method"
                    } else {
                        kind
                    };
                def_names.insert(name.to_string());
                defs.push((
                    node.start_byte(),
                    node.end_byte(),
                    Def {
                        name: name.to_string(),
                        kind: kind.to_string(),
                        line: node.start_position().row as u32 + 1,
                        end_line: node.end_position().row as u32 + 1,
                        depth: 0,
                        signature: signature(node, source),
                        doc: doc_of(language, node, source),
                    },
                ));
            } else if is_ref {
                calls.insert(name.to_string());
            }
        }
        defs.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut stack: Vec<usize> = Vec::new();
        for (start, end, def) in defs.iter_mut() {
            while stack.last().is_some_and(|&top_end| *start >= top_end) {
                stack.pop();
            }
            def.depth = stack.len() as u32;
            stack.push(*end);
        }

        let mut imports = Vec::new();
        let mut idents: BTreeMap<String, u32> = BTreeMap::new();
        let kinds = import_kinds(language);
        walk(root, &mut |node| {
            let kind = node.kind();
            if kinds.contains(&kind) {
                if kind == "export_statement" && node.child_by_field_name("source").is_none() {
                    return true;
                }
                if let Ok(text) = node.utf8_text(bytes) {
                    imports.push(collapse(text, MAX_SIGNATURE_CHARS));
                }
            }
            if node.child_count() == 0
                && kind.contains("identifier")
                && let Ok(text) = node.utf8_text(bytes)
                && text.len() >= 2
                && !def_names.contains(text)
            {
                *idents.entry(text.to_string()).or_insert(0) += 1;
            }
            true
        });

        Ok(Symbols {
            defs: defs.into_iter().map(|(_, _, d)| d).collect(),
            calls: calls.into_iter().collect(),
            imports,
            idents,
        })
    }
}

/// Depth-first walk without recursion (deep trees must not overflow the stack).
fn walk<'t>(root: Node<'t>, visit: &mut impl FnMut(Node<'t>) -> bool) {
    let mut cursor = root.walk();
    loop {
        let descend = visit(cursor.node());
        if descend && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

fn inside_class(node: Node) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "class_definition" => return true,
            "function_definition" => return false,
            _ => current = n.parent(),
        }
    }
    false
}

/// Collapse runs of whitespace to one space and cut to `max` characters.
fn collapse(text: &str, max: usize) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        if out.len() >= max {
            break;
        }
    }
    if out.chars().count() > max {
        out = out.chars().take(max).collect::<String>() + "…";
    }
    out
}

/// The definition's header: its text up to the body, whitespace collapsed.
fn signature(node: Node, source: &str) -> String {
    let start = node.start_byte();
    let end = node
        .child_by_field_name("body")
        .map(|b| b.start_byte())
        .unwrap_or_else(|| {
            // No body field: the first line of the node.
            let rest = &source[start..node.end_byte()];
            start + rest.find('\n').unwrap_or(rest.len())
        });
    let text = source.get(start..end).unwrap_or("");
    let text = text.trim_end().trim_end_matches(['{', ':']).trim_end();
    collapse(text, MAX_SIGNATURE_CHARS)
}

/// The outermost node that starts on the definition's first line and only wraps it: the
/// definition itself, or the export, assignment or declaration statement around it. A body,
/// block, list or the whole file is never an anchor (its comments are not the definition's).
fn doc_anchor(node: Node) -> Node {
    let row = node.start_position().row;
    let mut anchor = node;
    while let Some(parent) = anchor.parent() {
        let kind = parent.kind();
        let container = parent.parent().is_none()
            || kind.ends_with("body")
            || kind.ends_with("block")
            || kind.ends_with("_list")
            || matches!(kind, "object" | "array" | "arguments");
        if container || parent.start_position().row != row {
            break;
        }
        anchor = parent;
    }
    anchor
}

fn doc_of(language: Language, node: Node, source: &str) -> Option<String> {
    let bytes = source.as_bytes();
    if language == Language::Python {
        let body = node.child_by_field_name("body")?;
        let first = body.named_child(0)?;
        if first.kind() != "expression_statement" {
            return None;
        }
        let string = first.named_child(0)?;
        if string.kind() != "string" {
            return None;
        }
        let text = string.utf8_text(bytes).ok()?;
        let text = text.trim_matches(|c| c == '"' || c == '\'' || c == 'r' || c == 'u');
        let doc = collapse(text, MAX_DOC_CHARS);
        return (!doc.is_empty()).then_some(doc);
    }
    // Other languages: the contiguous comments right above the definition, or above the
    // statement that carries it on its first line (`export function f`, `proto.f = function`,
    // `const f = () =>`, Go's `type T struct`), attributes and decorators in between skipped
    // (`#[derive(..)]`, `@Injectable()`).
    let anchor = doc_anchor(node);
    let mut lines = Vec::new();
    let mut current = anchor.prev_sibling();
    let mut expected_row = anchor.start_position().row;
    while let Some(n) = current {
        // A gap ends the comments, except one blank line under a `/** .. */` block right
        // above the definition (a common JSDoc and Javadoc layout).
        let gap = expected_row.saturating_sub(n.end_position().row + 1);
        let doc_block = lines.is_empty()
            && n.kind().contains("comment")
            && n.utf8_text(bytes).is_ok_and(|t| t.starts_with("/**"));
        if gap > usize::from(doc_block) {
            break;
        }
        if n.kind().contains("comment") {
            if let Ok(text) = n.utf8_text(bytes) {
                lines.push(text.to_string());
            }
        } else if !matches!(n.kind(), "attribute_item" | "decorator" | "annotation") {
            break;
        }
        expected_row = n.start_position().row;
        current = n.prev_sibling();
    }
    if lines.is_empty() {
        return None;
    }
    lines.reverse();
    let joined = lines.join(" ");
    let cleaned: String = joined
        .split_whitespace()
        .filter(|w| !w.chars().all(|c| matches!(c, '/' | '*' | '!')))
        .collect::<Vec<_>>()
        .join(" ");
    let doc = collapse(&cleaned, MAX_DOC_CHARS);
    (!doc.is_empty()).then_some(doc)
}
