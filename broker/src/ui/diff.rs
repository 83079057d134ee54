//! The diff as HTML: per file, unified or side by side, each line's code highlighted by
//! `syntect` (a class per token kind, styled by the page's stylesheet, so the CSP needs no
//! inline style), with the lines a detector flagged marked and addressable (`#f{file}-n{line}`
//! for a line of the new file, `#f{file}-o{line}` for a removed one).
//!
//! Every line is made visible first (`policies::terminal::escaped`: control, format and
//! invisible characters written out) and then HTML-escaped token by token.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use airlock_policies::{DiffLine, FileDiff, LineKind};
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};

use super::page::esc_text;

/// Lines longer than this are shown without highlighting: a regex engine over an agent's
/// line of megabytes is not worth its time.
const MAX_HIGHLIGHTED_LINE_BYTES: usize = 400;
/// Files with more diff lines than this are shown without highlighting.
const MAX_HIGHLIGHTED_FILE_LINES: usize = 5_000;

/// The token kinds the stylesheet colours, by the scope that makes a token one.
const TOKEN_CLASSES: &[(&str, &str)] = &[
    ("comment", "hl-c"),
    ("string", "hl-s"),
    ("constant.numeric", "hl-n"),
    ("constant.language", "hl-k"),
    ("keyword", "hl-k"),
    ("storage", "hl-k"),
    ("entity.name", "hl-f"),
    ("support.function", "hl-f"),
    ("variable.parameter", "hl-v"),
];

struct Highlighting {
    syntaxes: SyntaxSet,
    classes: Vec<(Scope, &'static str)>,
}

fn highlighting() -> &'static Highlighting {
    static SET: OnceLock<Highlighting> = OnceLock::new();
    SET.get_or_init(|| Highlighting {
        syntaxes: SyntaxSet::load_defaults_newlines(),
        classes: TOKEN_CLASSES
            .iter()
            .filter_map(|(scope, class)| Scope::new(scope).ok().map(|s| (s, *class)))
            .collect(),
    })
}

/// Where a file's lines are flagged: new-file line numbers.
pub type FlaggedLines = BTreeSet<usize>;

/// One side's highlighter: a parse state carried from line to line of that side.
struct Side<'a> {
    set: &'a Highlighting,
    state: Option<ParseState>,
    stack: ScopeStack,
}

impl<'a> Side<'a> {
    fn new(set: &'a Highlighting, syntax: Option<&SyntaxReference>) -> Self {
        Side {
            set,
            state: syntax.map(ParseState::new),
            stack: ScopeStack::new(),
        }
    }

    /// One line as HTML: visible, escaped, its tokens in spans.
    fn line(&mut self, text: &str) -> String {
        let visible = airlock_policies::terminal::escaped(text);
        let Some(state) = self.state.as_mut() else {
            return esc_text(&visible);
        };
        if visible.len() > MAX_HIGHLIGHTED_LINE_BYTES {
            return esc_text(&visible);
        }
        let with_newline = format!("{visible}\n");
        let Ok(ops) = state.parse_line(&with_newline, &self.set.syntaxes) else {
            // The grammar failed on this line: the rest of the file is shown plain.
            self.state = None;
            return esc_text(&visible);
        };
        let mut out = String::new();
        let mut start = 0;
        for (at, op) in ops {
            let at = at.min(visible.len());
            if at > start {
                self.token(&visible[start..at], &mut out);
                start = at;
            }
            if self.stack.apply(&op).is_err() {
                self.state = None;
                out.push_str(&esc_text(&visible[start..]));
                return out;
            }
        }
        if start < visible.len() {
            self.token(&visible[start..], &mut out);
        }
        out
    }

    fn token(&self, text: &str, out: &mut String) {
        let class = self.stack.as_slice().iter().rev().find_map(|scope| {
            self.set
                .classes
                .iter()
                .find(|(prefix, _)| prefix.is_prefix_of(*scope))
                .map(|(_, class)| *class)
        });
        match class {
            Some(class) => {
                out.push_str("<span class=\"");
                out.push_str(class);
                out.push_str("\">");
                out.push_str(&esc_text(text));
                out.push_str("</span>");
            }
            None => out.push_str(&esc_text(text)),
        }
    }
}

/// The highlighted HTML of every line of `file`, in diff order, each on the side it belongs
/// to (context lines on the new side, which parses them too).
fn highlighted_lines(file: &FileDiff) -> Vec<Vec<String>> {
    let set = highlighting();
    let total: usize = file.hunks.iter().map(|h| h.lines.len()).sum();
    let extension = file.path().rsplit_once('.').map(|(_, ext)| ext);
    let syntax = extension
        .and_then(|ext| set.syntaxes.find_syntax_by_extension(ext))
        .filter(|_| total <= MAX_HIGHLIGHTED_FILE_LINES);
    let mut old = Side::new(set, syntax);
    let mut new = Side::new(set, syntax);
    file.hunks
        .iter()
        .map(|hunk| {
            hunk.lines
                .iter()
                .map(|line| match line.kind {
                    LineKind::Removed => old.line(&line.text),
                    LineKind::Added => new.line(&line.text),
                    LineKind::Context => {
                        let _ = old.line(&line.text);
                        new.line(&line.text)
                    }
                })
                .collect()
        })
        .collect()
}

fn number(n: Option<usize>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

fn row_id(file: usize, line: &DiffLine) -> String {
    match (line.kind, line.new_line, line.old_line) {
        (LineKind::Removed, _, Some(old)) => format!(" id=\"f{file}-o{old}\""),
        (_, Some(new), _) => format!(" id=\"f{file}-n{new}\""),
        _ => String::new(),
    }
}

fn is_flagged(line: &DiffLine, flagged: &FlaggedLines) -> bool {
    line.kind != LineKind::Removed && line.new_line.is_some_and(|n| flagged.contains(&n))
}

fn hunk_header(hunk: &airlock_policies::Hunk) -> String {
    format!(
        "@@ -{},{} +{},{} @@ {}",
        hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len, hunk.section
    )
}

/// One file's diff as a unified table.
pub fn unified(index: usize, file: &FileDiff, flagged: &FlaggedLines) -> String {
    let html = highlighted_lines(file);
    let mut out = String::from(
        "<table class=\"diff unified\"><colgroup><col class=\"ln\"><col class=\"ln\"><col class=\"mark\"><col></colgroup>\n",
    );
    for (hunk, lines) in file.hunks.iter().zip(&html) {
        out.push_str(&format!(
            "<tr class=\"hunk\"><td colspan=\"4\">{}</td></tr>\n",
            esc_text(&airlock_policies::terminal::escaped_line(&hunk_header(
                hunk
            )))
        ));
        for (line, code) in hunk.lines.iter().zip(lines) {
            let (class, marker) = match line.kind {
                LineKind::Added => ("add", "+"),
                LineKind::Removed => ("del", "-"),
                LineKind::Context => ("ctx", " "),
            };
            let flag = is_flagged(line, flagged);
            out.push_str(&format!(
                "<tr class=\"{class}{}\"{}><td class=\"ln\">{}</td><td class=\"ln\">{}</td><td class=\"{}\">{}</td><td class=\"code\">{marker}{code}</td></tr>\n",
                if flag { " flagged" } else { "" },
                row_id(index, line),
                number(line.old_line),
                number(line.new_line),
                if flag { "mark flag" } else { "mark" },
                if flag { "⚑" } else { "" },
            ));
        }
    }
    out.push_str("</table>\n");
    out
}

/// One file's diff side by side: base on the left, the change on the right, a run of removed
/// lines paired with the run of added lines that follows it.
pub fn side_by_side(index: usize, file: &FileDiff, flagged: &FlaggedLines) -> String {
    let html = highlighted_lines(file);
    let mut out = String::from(
        "<table class=\"diff split\"><colgroup><col class=\"ln\"><col><col class=\"ln\"><col class=\"mark\"><col></colgroup>\n",
    );
    for (hunk, lines) in file.hunks.iter().zip(&html) {
        out.push_str(&format!(
            "<tr class=\"hunk\"><td colspan=\"5\">{}</td></tr>\n",
            esc_text(&airlock_policies::terminal::escaped_line(&hunk_header(
                hunk
            )))
        ));
        let mut removed: Vec<(&DiffLine, &String)> = Vec::new();
        let mut added: Vec<(&DiffLine, &String)> = Vec::new();
        let flush = |removed: &mut Vec<(&DiffLine, &String)>,
                     added: &mut Vec<(&DiffLine, &String)>,
                     out: &mut String| {
            for i in 0..removed.len().max(added.len()) {
                split_row(
                    index,
                    removed.get(i).copied(),
                    added.get(i).copied(),
                    flagged,
                    out,
                );
            }
            removed.clear();
            added.clear();
        };
        for (line, code) in hunk.lines.iter().zip(lines) {
            match line.kind {
                LineKind::Removed => {
                    if !added.is_empty() {
                        flush(&mut removed, &mut added, &mut out);
                    }
                    removed.push((line, code));
                }
                LineKind::Added => added.push((line, code)),
                LineKind::Context => {
                    flush(&mut removed, &mut added, &mut out);
                    split_row(
                        index,
                        Some((line, code)),
                        Some((line, code)),
                        flagged,
                        &mut out,
                    );
                }
            }
        }
        flush(&mut removed, &mut added, &mut out);
    }
    out.push_str("</table>\n");
    out
}

fn split_row(
    index: usize,
    left: Option<(&DiffLine, &String)>,
    right: Option<(&DiffLine, &String)>,
    flagged: &FlaggedLines,
    out: &mut String,
) {
    let context = matches!(left, Some((l, _)) if l.kind == LineKind::Context);
    let id = match (left, right) {
        (_, Some((r, _))) => row_id(index, r),
        (Some((l, _)), None) => row_id(index, l),
        (None, None) => String::new(),
    };
    let flag = right.is_some_and(|(r, _)| is_flagged(r, flagged));
    out.push_str(&format!(
        "<tr{}{id}>",
        if flag { " class=\"flagged\"" } else { "" }
    ));
    match left {
        Some((l, code)) => out.push_str(&format!(
            "<td class=\"ln\">{}</td><td class=\"code{}\">{code}</td>",
            number(l.old_line),
            if context { "" } else { " del" }
        )),
        None => out.push_str("<td class=\"ln\"></td><td class=\"code\"></td>"),
    }
    match right {
        Some((r, code)) => out.push_str(&format!(
            "<td class=\"ln\">{}</td><td class=\"{}\">{}</td><td class=\"code{}\">{code}</td>",
            number(r.new_line),
            if flag { "mark flag" } else { "mark" },
            if flag { "⚑" } else { "" },
            if context { "" } else { " add" }
        )),
        None => {
            out.push_str("<td class=\"ln\"></td><td class=\"mark\"></td><td class=\"code\"></td>")
        }
    }
    out.push_str("</tr>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(diff: &str) -> FileDiff {
        airlock_policies::parse_unified_diff(diff)
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
    }

    const DIFF: &str = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,3 +1,3 @@\n def clamp(x, lo, hi):\n     \"\"\"Clamp.\"\"\"\n-    return max(lo, x)\n+    return max(lo, min(x, hi))  # <script>alert(1)</script>\u{1b}[2K\n";

    #[test]
    fn lines_are_highlighted_escaped_and_flagged() {
        let f = file(DIFF);
        let flagged: FlaggedLines = [3].into_iter().collect();
        let unified_html = unified(0, &f, &flagged);
        // Unified, the removed line has an anchor of its own; side by side it shares the row
        // of the added line it is paired with.
        assert!(unified_html.contains("id=\"f0-o3\""), "{unified_html}");
        for html in [unified_html, side_by_side(0, &f, &flagged)] {
            assert!(!html.contains("<script>"), "{html}");
            assert!(
                html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "{html}"
            );
            assert!(html.contains("\\u{1b}[2K"), "{html}");
            assert!(!html.contains('\u{1b}'), "{html}");
            assert!(html.contains("<span class=\"hl-k\">def</span>"), "{html}");
            assert!(html.contains("<span class=\"hl-c\">"), "{html}");
            assert!(html.contains("id=\"f0-n3\""), "{html}");
            assert!(html.contains("flagged"), "{html}");
        }
    }

    #[test]
    fn side_by_side_pairs_a_removed_line_with_the_added_one() {
        let f = file(DIFF);
        let html = side_by_side(0, &f, &FlaggedLines::new());
        let row = html.lines().find(|l| l.contains("id=\"f0-n3\"")).unwrap();
        assert!(row.contains("code del"), "{row}");
        assert!(row.contains("code add"), "{row}");
    }
}
