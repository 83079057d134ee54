//! What a query (usually an issue's text) mentions: its weighted terms, the file paths and
//! module paths it names (tracebacks included) and the identifiers that look like code.

use crate::tokenize::for_each_term;
use std::collections::BTreeMap;

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryAnalysis {
    /// Distinct terms with their weights, sorted by term.
    pub terms: Vec<(String, f64)>,
    /// Path fragments the text names (`pkg/mod.py`, `mod.py`, or `a/b/c` from `a.b.c`),
    /// each with how strongly it counts.
    pub paths: Vec<(String, f64)>,
    /// Identifiers that look like code (snake_case, camelCase, letter+digit, in backticks or
    /// followed by `(`), with how strongly they count; case preserved.
    pub identifiers: Vec<(String, f64)>,
}

/// Weight of a term occurrence in the query's first line (an issue's title).
pub const TITLE_WEIGHT: f64 = 2.0;
/// Weight of a term occurrence inside a fenced code block.
pub const CODE_BLOCK_WEIGHT: f64 = 0.5;

/// Source-like file extensions recognised in free text as file names.
const FILE_EXTENSIONS: &[&str] = &[
    "py", "pyi", "rs", "js", "mjs", "cjs", "jsx", "ts", "tsx", "go", "java", "c", "h", "cc", "cpp",
    "hpp", "rb", "php", "cfg", "toml", "yaml", "yml", "json", "ini", "sql", "md", "rst", "txt",
    "sh", "kt", "scala", "cs", "swift",
];

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Whether a bare word is shaped like code rather than prose.
fn looks_like_code(word: &str) -> bool {
    if !is_identifier(word) || word.len() < 3 {
        return false;
    }
    let has_underscore = word.trim_matches('_').contains('_');
    let chars: Vec<char> = word.chars().collect();
    let hump = chars
        .windows(2)
        .any(|w| w[0].is_lowercase() && w[1].is_uppercase());
    let letter_digit =
        chars.iter().any(|c| c.is_ascii_digit()) && chars.iter().any(|c| c.is_alphabetic());
    has_underscore || hump || letter_digit
}

impl QueryAnalysis {
    /// Analyse a query text.
    pub fn new(text: &str) -> QueryAnalysis {
        // Each occurrence counts by where it is: the title (first line) most, fenced code
        // blocks (logs, configuration dumps, examples) least.
        let mut mass: BTreeMap<String, f64> = BTreeMap::new();
        let mut in_fence = false;
        let mut seen_title = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            let weight = if !seen_title && !line.trim().is_empty() {
                seen_title = true;
                TITLE_WEIGHT
            } else if in_fence {
                CODE_BLOCK_WEIGHT
            } else {
                1.0
            };
            for_each_term(line, |t| {
                *mass.entry(t.to_string()).or_insert(0.0) += weight
            });
        }
        let terms = mass
            .into_iter()
            .map(|(t, m)| (t, if m <= 1.0 { m } else { 1.0 + m.ln() }))
            .collect();

        let mut paths: BTreeMap<String, f64> = BTreeMap::new();
        let mut idents: BTreeMap<String, f64> = BTreeMap::new();
        // Identifiers in fenced blocks (SQL, logs, configuration) are weaker evidence than
        // those in prose; paths (tracebacks) count wherever they are.
        let mut fenced: BTreeMap<String, f64> = BTreeMap::new();
        let mut in_fence = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            let target = if in_fence { &mut fenced } else { &mut idents };
            scan_spans(line, &mut paths, target);
        }
        for (ident, weight) in fenced {
            *idents.entry(ident).or_insert(0.0) += weight * CODE_BLOCK_WEIGHT;
        }
        QueryAnalysis {
            terms,
            paths: paths.into_iter().collect(),
            identifiers: idents.into_iter().collect(),
        }
    }
}

/// Find candidate spans (runs of identifier characters, dots, slashes, dashes) in one line.
fn scan_spans(line: &str, paths: &mut BTreeMap<String, f64>, idents: &mut BTreeMap<String, f64>) {
    let chars: Vec<char> = line.chars().collect();
    let is_span_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '\\' | '-');
    let mut i = 0;
    while i < chars.len() {
        if !is_span_char(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_span_char(chars[i]) {
            i += 1;
        }
        let raw: String = chars[start..i].iter().collect();
        let before = if start > 0 { chars[start - 1] } else { ' ' };
        let after = chars.get(i).copied().unwrap_or(' ');
        let span = raw.trim_matches(|c: char| matches!(c, '.' | '-' | '/' | '\\'));
        if span.is_empty() {
            continue;
        }
        let quoted = before == '`' || after == '`' || before == '\'' || before == '"';
        let called = after == '(';
        // A name of one or two letters (`Q(...)`, `F("price")`, `S(1)`) is code only when it
        // is called or wrapped in backticks; a quoted sentence's first word (`"No match"`) is not.
        let short_code = called || (before == '`' && after == '`');
        // Words that open a line, a sentence, a list item, a heading or a quote are capitalised
        // whatever they are.
        let opens_sentence = matches!(
            chars[..start].iter().rev().find(|c| !c.is_whitespace()),
            None | Some('.' | '!' | '?' | ':' | '-' | '*' | '#' | '>')
        );
        let context = SpanContext {
            opens_sentence,
            quoted,
            called,
            short_code,
        };
        analyse_span(span, context, paths, idents);
    }
}

fn bump(map: &mut BTreeMap<String, f64>, key: String, weight: f64) {
    let entry = map.entry(key).or_insert(0.0);
    // Repeated mentions count, with diminishing returns.
    *entry = if *entry == 0.0 {
        weight
    } else {
        *entry + weight * 0.25
    };
}

/// Where a span stands in its line.
#[derive(Debug, Clone, Copy)]
struct SpanContext {
    /// First word of a line or sentence (so capitalised whether or not it names a class).
    opens_sentence: bool,
    /// Next to a backtick, or after a quote.
    quoted: bool,
    /// Followed by `(`.
    called: bool,
    /// Called, or between two backticks: enough for a name shorter than three characters.
    short_code: bool,
}

fn analyse_span(
    span: &str,
    context: SpanContext,
    paths: &mut BTreeMap<String, f64>,
    idents: &mut BTreeMap<String, f64>,
) {
    let SpanContext {
        opens_sentence,
        quoted,
        called,
        short_code,
    } = context;
    let span = span.replace('\\', "/");
    let last = span.rsplit('/').next().unwrap_or(&span);
    let ext = last.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let has_file_ext = ext.as_deref().is_some_and(|e| FILE_EXTENSIONS.contains(&e));
    if span.contains('/') || has_file_ext {
        if has_file_ext {
            bump(paths, span.trim_start_matches("./").to_string(), 1.0);
            if let Some((stem, _)) = last.rsplit_once('.')
                && is_identifier(stem)
            {
                bump(idents, stem.to_string(), 0.5);
            }
        } else {
            for part in span.split('/') {
                if looks_like_code(part) {
                    bump(idents, part.to_string(), 0.5);
                }
            }
        }
        return;
    }
    let parts: Vec<&str> = span.split('.').collect();
    if parts.len() >= 2 && parts.iter().all(|p| is_identifier(p)) {
        // a.b.c: a module path and/or attribute access.
        bump(paths, parts.join("/"), 0.6);
        if parts.len() >= 3 {
            bump(paths, parts[..parts.len() - 1].join("/"), 0.4);
        }
        for part in &parts {
            if looks_like_code(part) || part.chars().next().is_some_and(char::is_uppercase) {
                bump(idents, (*part).to_string(), 0.8);
            }
        }
        return;
    }
    for word in span.split(['.', '-']) {
        if !is_identifier(word) {
            continue;
        }
        if word.len() < 3 {
            // Django's `Q` and `F`, sympy's `S` and `N`: short capitalised names are classes
            // and functions when the text calls them or sets them in backticks.
            if short_code && word.starts_with(|c: char| c.is_ascii_uppercase()) {
                bump(idents, word.to_string(), 1.0);
            }
            continue;
        }
        if looks_like_code(word) || ((quoted || called) && word.len() >= 3) {
            bump(idents, word.to_string(), 1.0);
        } else if !opens_sentence
            && word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().skip(1).any(char::is_lowercase)
        {
            // A capitalised word inside a sentence may be a class name.
            bump(idents, word.to_string(), 0.3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identifiers(text: &str) -> Vec<String> {
        QueryAnalysis::new(text)
            .identifiers
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn a_short_capitalised_name_counts_when_called_or_in_backticks() {
        let called = identifiers("Title\nQ() | Q(x__in={}.keys()) fails");
        assert!(called.contains(&"Q".to_string()), "{called:?}");
        let ticked = identifiers("Title\nan `F` expression in an update");
        assert!(ticked.contains(&"F".to_string()), "{ticked:?}");
    }

    #[test]
    fn a_capitalised_word_counts_inside_a_sentence_but_not_at_its_start() {
        let names = identifiers(
            "Error E108 does not cover some cases\nSteps to reproduce. Update the Field, then \
             save.\n- Added a Migration\n## Expected\nIt raises Error when the Field is empty.",
        );
        for opener in ["Steps", "Update", "Added", "Expected", "It"] {
            assert!(
                !names.contains(&opener.to_string()),
                "{opener} in {names:?}"
            );
        }
        // `Error` opens the title, but is also named inside the last sentence.
        for inside in ["Field", "Migration", "Error"] {
            assert!(
                names.contains(&inside.to_string()),
                "{inside} not in {names:?}"
            );
        }
        let title_only = identifiers("Error E108 does not cover some cases");
        assert!(!title_only.contains(&"Error".to_string()), "{title_only:?}");
    }

    #[test]
    fn a_short_word_in_prose_or_at_the_start_of_a_quote_is_not_code() {
        let names = identifiers(
            "Title\nIt fails with \"No matching discriminator\" as I said (f(x) is fine) at `x`",
        );
        for short in ["No", "I", "f", "x", "It"] {
            assert!(!names.contains(&short.to_string()), "{short} in {names:?}");
        }
    }
}
