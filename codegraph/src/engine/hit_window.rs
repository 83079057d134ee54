//! The window of lines a search hit shows: aligned to the function whose lines hold the most
//! query terms, a definition the query names counting extra, and the dotted name of the
//! definition it shows.

use super::snapshot::SnapFile;
use crate::query::QueryAnalysis;
use crate::window::{Block, Occurrence, TermMatcher};

/// Lines in a hit's best-matching window.
pub const WINDOW_LINES: u32 = 30;
/// Extra window weight of a definition whose name the query gives as an identifier.
const NAMED_DEF_BONUS: f64 = 10.0;

/// A hit's window of [`WINDOW_LINES`] lines ([`TermMatcher::best_window`]: aligned to the
/// function whose lines hold the most query terms; a line defining an identifier the query
/// names counts extra); the file's first lines when nothing matches or the blob is missing.
/// The dotted name of definition `index` of `defs` (its enclosing definitions first).
fn dotted_name(defs: &[crate::extract::Def], index: usize) -> String {
    let mut names = vec![defs[index].name.as_str()];
    let mut depth = defs[index].depth;
    for def in defs[..index].iter().rev() {
        if depth == 0 {
            break;
        }
        if def.depth < depth && def.end_line >= defs[index].line {
            names.push(&def.name);
            depth = def.depth;
        }
    }
    names.reverse();
    names.join(".")
}

/// A hit's window (see [`TermMatcher::best_window`]) and the definition it shows, dotted: the
/// function or method the window was aligned to, else the innermost definition holding the
/// whole window, else none.
pub(super) fn best_window(
    file: &SnapFile,
    analysis: &QueryAnalysis,
    matcher: &TermMatcher,
    occurrences: Option<Vec<Occurrence>>,
) -> ((u32, u32), Option<String>) {
    let lines_total = file.record.lines.max(1);
    let fallback = (1, lines_total.min(WINDOW_LINES));
    let defs: &[crate::extract::Def] = file
        .record
        .symbols
        .as_ref()
        .map_or(&[], |s| s.defs.as_slice());
    let holding = |(first, last): (u32, u32)| -> Option<String> {
        let index = defs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.line <= first && d.end_line >= last)
            .max_by_key(|(i, d)| (d.depth, *i))?
            .0;
        Some(dotted_name(defs, index))
    };
    let Some(occurrences) = occurrences else {
        return (fallback, holding(fallback));
    };
    let lines = file.record.lines as usize;
    let named = |name: &str| analysis.identifiers.iter().any(|(i, _)| i == name);
    let mut extra = vec![0.0; lines];
    let mut blocks = Vec::new();
    let mut block_defs = Vec::new();
    for (index, def) in defs.iter().enumerate() {
        let bonus = if named(&def.name) {
            NAMED_DEF_BONUS
        } else {
            0.0
        };
        if let Some(slot) = extra.get_mut((def.line as usize).wrapping_sub(1)) {
            *slot += bonus;
        }
        if matches!(def.kind.as_str(), "function" | "method") {
            blocks.push(Block {
                first: def.line,
                last: def.end_line,
                bonus,
            });
            block_defs.push(index);
        }
    }
    match matcher.best_window_in(&occurrences, lines, &extra, &blocks, WINDOW_LINES) {
        Some((window, Some(block))) => (window, Some(dotted_name(defs, block_defs[block]))),
        Some((window, None)) => (window, holding(window)),
        None => (fallback, holding(fallback)),
    }
}
