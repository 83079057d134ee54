//! The tracked file tree rendered for a prompt, within a character budget.
//!
//! Rendering is greedy over directory expansions: the root listing first, then directories
//! relevant to the query (most query words in their paths first, down to their files), then
//! everything else breadth-first, smaller directories first. An expansion that does not fit
//! the remaining budget leaves its directory collapsed as `name/ (N files)`. A crowded
//! directory (more than [`CROWDED_ENTRIES`] entries) first opens partially, showing only the
//! entries relevant to the query and a `… N more entries (M files)` line, and opens fully
//! only if the budget still allows. Every tie is broken by path, so output is deterministic.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// A directory with more direct entries than this opens partially first.
pub const CROWDED_ENTRIES: usize = 30;

/// At most this many entries of a crowded directory show in its partial listing.
const PARTIAL_ENTRIES: usize = 8;

/// Inputs of a file-tree rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileTreeOptions<'a> {
    /// Upper bound on the output length, in characters (Unicode scalar values), newlines
    /// included. The output never exceeds it.
    pub char_budget: usize,
    /// Issue text or search words: directories and files whose path words match are kept
    /// expanded in preference to the rest.
    pub query: Option<&'a str>,
}

impl Default for FileTreeOptions<'_> {
    fn default() -> Self {
        FileTreeOptions {
            char_budget: 4000,
            query: None,
        }
    }
}

/// Renders `/`-separated file paths as an indented tree (two spaces per level, directories
/// before files, each sorted bytewise) of at most `options.char_budget` characters.
/// Duplicate and empty paths are ignored; input order does not matter.
pub fn render_file_tree<S: AsRef<str>>(paths: &[S], options: &FileTreeOptions<'_>) -> String {
    let query = options.query.map(query_words).unwrap_or_default();
    let mut tree = Tree::build(paths, &query);
    tree.expand_within(options.char_budget);
    let mut out = String::new();
    tree.render(0, &mut out);
    fit_to_budget(out, options.char_budget)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Collapsed,
    Partial,
    Full,
}

#[derive(Debug)]
struct FileEntry {
    name: String,
    /// Query words matched by the file's full path.
    score: usize,
}

#[derive(Debug)]
struct Dir {
    name: String,
    path: String,
    depth: usize,
    children: BTreeMap<String, usize>,
    files: Vec<FileEntry>,
    total_files: usize,
    /// Query words matched by the directory's own path.
    score: usize,
    /// Best query-word count over the full paths of files below.
    relevance: usize,
    state: State,
}

struct Tree {
    dirs: Vec<Dir>,
}

impl Tree {
    fn build<S: AsRef<str>>(paths: &[S], query: &BTreeSet<String>) -> Tree {
        let mut unique: Vec<&str> = paths
            .iter()
            .map(|p| p.as_ref().trim_matches('/'))
            .filter(|p| !p.is_empty())
            .collect();
        unique.sort_unstable();
        unique.dedup();
        let mut dirs = vec![Dir {
            name: String::new(),
            path: String::new(),
            depth: 0,
            children: BTreeMap::new(),
            files: Vec::new(),
            total_files: 0,
            score: 0,
            relevance: 0,
            state: State::Full,
        }];
        for path in unique {
            let path_score = score(&path_words(path), query);
            let mut parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            let Some(file) = parts.pop() else { continue };
            let mut at = 0;
            dirs[0].total_files += 1;
            dirs[0].relevance = dirs[0].relevance.max(path_score);
            for part in parts {
                let next = match dirs[at].children.get(part) {
                    Some(&i) => i,
                    None => {
                        let i = dirs.len();
                        let path = format!("{}{part}/", dirs[at].path);
                        let depth = dirs[at].depth + 1;
                        let score = score(&path_words(&path), query);
                        dirs.push(Dir {
                            name: part.to_owned(),
                            path,
                            depth,
                            children: BTreeMap::new(),
                            files: Vec::new(),
                            total_files: 0,
                            score,
                            relevance: 0,
                            state: State::Collapsed,
                        });
                        dirs[at].children.insert(part.to_owned(), i);
                        i
                    }
                };
                at = next;
                dirs[at].total_files += 1;
                dirs[at].relevance = dirs[at].relevance.max(path_score);
            }
            dirs[at].files.push(FileEntry {
                name: file.to_owned(),
                score: path_score,
            });
        }
        let mut tree = Tree { dirs };
        if tree.is_crowded(0) && tree.has_partial_view(0) {
            tree.dirs[0].state = State::Partial;
        }
        tree
    }

    /// Whether a partial listing of `d` would show anything (otherwise it only costs space).
    fn has_partial_view(&self, d: usize) -> bool {
        let (dirs, files) = self.visible(d, State::Partial);
        !dirs.is_empty() || !files.is_empty()
    }

    fn is_crowded(&self, d: usize) -> bool {
        let dir = &self.dirs[d];
        dir.children.len() + dir.files.len() > CROWDED_ENTRIES
    }

    /// Children (subdirectories, then files) shown when `d` is in `state`.
    fn visible(&self, d: usize, state: State) -> (Vec<usize>, Vec<&FileEntry>) {
        let dir = &self.dirs[d];
        match state {
            State::Collapsed => (Vec::new(), Vec::new()),
            State::Full => (
                dir.children.values().copied().collect(),
                dir.files.iter().collect(),
            ),
            State::Partial => {
                // Only the children that match the query better than the directory itself
                // does (its name matching would otherwise select every child), the best first.
                let best = dir
                    .children
                    .values()
                    .map(|&c| self.dirs[c].relevance)
                    .chain(dir.files.iter().map(|f| f.score))
                    .max()
                    .unwrap_or(0);
                if best <= dir.score {
                    return (Vec::new(), Vec::new());
                }
                let dirs: Vec<usize> = dir
                    .children
                    .values()
                    .copied()
                    .filter(|&c| self.dirs[c].relevance == best)
                    .take(PARTIAL_ENTRIES)
                    .collect();
                let files = dir
                    .files
                    .iter()
                    .filter(|f| f.score == best)
                    .take(PARTIAL_ENTRIES - dirs.len())
                    .collect();
                (dirs, files)
            }
        }
    }

    fn header_len(&self, d: usize) -> usize {
        let dir = &self.dirs[d];
        let indent = 2 * (dir.depth - 1);
        match dir.state {
            State::Collapsed => {
                indent + chars(&dir.name) + collapsed_suffix(dir.total_files).len() + 2
            }
            _ => indent + chars(&dir.name) + 2,
        }
    }

    /// Length of `d`'s own listing in `state`: its visible children's lines (not their
    /// contents) and the "more entries" line.
    fn listing_len(&self, d: usize, state: State) -> usize {
        if state == State::Collapsed {
            return 0;
        }
        let indent = 2 * self.dirs[d].depth;
        let (subdirs, files) = self.visible(d, state);
        let mut len: usize = subdirs.iter().map(|&c| self.header_len(c)).sum();
        len += files
            .iter()
            .map(|f| indent + chars(&f.name) + 1)
            .sum::<usize>();
        if let Some(more) = self.more_line(d, state, &subdirs, files.len()) {
            len += indent + chars(&more) + 1;
        }
        len
    }

    fn more_line(
        &self,
        d: usize,
        state: State,
        shown_dirs: &[usize],
        shown_files: usize,
    ) -> Option<String> {
        if state != State::Partial {
            return None;
        }
        let dir = &self.dirs[d];
        let hidden_entries = dir.children.len() + dir.files.len() - shown_dirs.len() - shown_files;
        if hidden_entries == 0 {
            return None;
        }
        let shown_file_total: usize = shown_dirs
            .iter()
            .map(|&c| self.dirs[c].total_files)
            .sum::<usize>()
            + shown_files;
        let hidden_files = dir.total_files - shown_file_total;
        Some(format!(
            "… {hidden_entries} more {} ({hidden_files} {})",
            plural(hidden_entries, "entry", "entries"),
            plural(hidden_files, "file", "files")
        ))
    }

    fn total_len(&self, d: usize) -> usize {
        let state = self.dirs[d].state;
        let (subdirs, _) = self.visible(d, state);
        self.listing_len(d, state) + subdirs.iter().map(|&c| self.total_len(c)).sum::<usize>()
    }

    fn next_state(&self, d: usize) -> Option<State> {
        match self.dirs[d].state {
            State::Collapsed if self.is_crowded(d) && self.has_partial_view(d) => {
                Some(State::Partial)
            }
            State::Collapsed | State::Partial => Some(State::Full),
            State::Full => None,
        }
    }

    fn push_step(&self, heap: &mut BinaryHeap<Reverse<Step>>, d: usize) {
        let Some(to) = self.next_state(d) else { return };
        let dir = &self.dirs[d];
        // Opening a partial directory fully only adds entries the query did not match.
        let relevance = if dir.state == State::Partial {
            0
        } else {
            dir.relevance
        };
        heap.push(Reverse(Step {
            relevance: Reverse(relevance),
            depth: dir.depth,
            total_files: dir.total_files,
            path: dir.path.clone(),
            dir: d,
            to,
        }));
    }

    fn expand_within(&mut self, budget: usize) {
        let mut used = self.total_len(0);
        let mut heap = BinaryHeap::new();
        self.push_visible_steps(&mut heap, 0);
        if self.dirs[0].state == State::Partial {
            self.push_step(&mut heap, 0);
        }
        while let Some(Reverse(step)) = heap.pop() {
            let d = step.dir;
            if self.dirs[d].state >= step.to {
                continue;
            }
            let from = self.dirs[d].state;
            let mut delta_plus = self.listing_len(d, step.to);
            let mut delta_minus = self.listing_len(d, from);
            if from == State::Collapsed && d != 0 {
                delta_minus += self.header_len(d);
                self.dirs[d].state = step.to;
                delta_plus += self.header_len(d);
                self.dirs[d].state = from;
            }
            let new_used = (used + delta_plus).saturating_sub(delta_minus);
            if new_used > budget {
                continue;
            }
            used = new_used;
            self.dirs[d].state = step.to;
            self.push_visible_steps(&mut heap, d);
            if step.to == State::Partial {
                self.push_step(&mut heap, d);
            }
        }
    }

    fn push_visible_steps(&self, heap: &mut BinaryHeap<Reverse<Step>>, d: usize) {
        let (subdirs, _) = self.visible(d, self.dirs[d].state);
        for c in subdirs {
            if self.dirs[c].state == State::Collapsed {
                self.push_step(heap, c);
            }
        }
    }

    fn render(&self, d: usize, out: &mut String) {
        let dir = &self.dirs[d];
        if d != 0 {
            let indent = "  ".repeat(dir.depth - 1);
            if dir.state == State::Collapsed {
                out.push_str(&format!(
                    "{indent}{}/{}\n",
                    dir.name,
                    collapsed_suffix(dir.total_files)
                ));
                return;
            }
            out.push_str(&format!("{indent}{}/\n", dir.name));
        }
        let indent = "  ".repeat(dir.depth);
        let (subdirs, files) = self.visible(d, dir.state);
        for &c in &subdirs {
            self.render(c, out);
        }
        for f in &files {
            out.push_str(&format!("{indent}{}\n", f.name));
        }
        if let Some(more) = self.more_line(d, dir.state, &subdirs, files.len()) {
            out.push_str(&format!("{indent}{more}\n"));
        }
    }
}

/// One possible expansion; the smallest (in this order) is tried first.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Step {
    relevance: Reverse<usize>,
    depth: usize,
    total_files: usize,
    path: String,
    dir: usize,
    to: State,
}

fn collapsed_suffix(total_files: usize) -> String {
    format!(" ({total_files} {})", plural(total_files, "file", "files"))
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Cuts at a line boundary so the result fits, saying so on a last line when there is room.
fn fit_to_budget(out: String, budget: usize) -> String {
    if chars(&out) <= budget {
        return out;
    }
    let total_lines = out.lines().count();
    let mut kept = String::new();
    let mut kept_len = 0;
    let mut kept_lines = 0;
    for line in out.split_inclusive('\n') {
        let len = chars(line);
        let marker = format!("… {} more lines cut\n", total_lines - kept_lines - 1);
        if kept_len + len + chars(&marker) > budget {
            break;
        }
        kept.push_str(line);
        kept_len += len;
        kept_lines += 1;
    }
    let marker = format!("… {} more lines cut\n", total_lines - kept_lines);
    if kept_len + chars(&marker) <= budget {
        kept.push_str(&marker);
    }
    kept
}

const STOPWORDS: &[&str] = &[
    "about", "after", "again", "all", "also", "and", "any", "are", "because", "been", "before",
    "being", "but", "can", "cannot", "could", "did", "does", "doesn", "don", "each", "even", "for",
    "from", "get", "got", "had", "has", "have", "how", "into", "isn", "its", "just", "like",
    "more", "most", "not", "now", "only", "other", "our", "out", "should", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "use",
    "used", "using", "very", "want", "was", "wasn", "way", "were", "what", "when", "where",
    "which", "while", "who", "why", "will", "with", "would", "you", "your",
];

/// Words of a query that can select paths: identifiers split at `_`, `-`, `.`, `/` and
/// camelCase humps (whole identifiers kept too), lowercased, stemmed, at least 3 letters,
/// common English words dropped.
fn query_words(query: &str) -> BTreeSet<String> {
    split_words(query)
        .into_iter()
        .filter(|w| w.chars().count() >= 3 && !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

fn path_words(path: &str) -> BTreeSet<String> {
    split_words(path).into_iter().map(|w| stem(&w)).collect()
}

fn score(words: &BTreeSet<String>, query: &BTreeSet<String>) -> usize {
    if query.is_empty() {
        return 0;
    }
    words.intersection(query).count()
}

fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in text.split(|c: char| !c.is_alphanumeric() && c != '_') {
        if piece.is_empty() {
            continue;
        }
        let whole = piece.to_lowercase();
        for part in piece.split('_').filter(|p| !p.is_empty()) {
            let mut word = String::new();
            let mut prev: Option<char> = None;
            for c in part.chars() {
                if let Some(p) = prev
                    && c.is_uppercase()
                    && p.is_lowercase()
                    && !word.is_empty()
                {
                    out.push(std::mem::take(&mut word).to_lowercase());
                }
                word.push(c);
                prev = Some(c);
            }
            if !word.is_empty() {
                out.push(word.to_lowercase());
            }
        }
        let joined: String = whole.chars().filter(|c| *c != '_').collect();
        out.push(whole);
        out.push(joined);
    }
    out
}

fn stem(word: &str) -> String {
    for suffix in ["ing", "ers", "er", "es", "ed", "s"] {
        if let Some(base) = word.strip_suffix(suffix)
            && base.chars().count() >= 4
        {
            return base.to_owned();
        }
    }
    word.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_identifiers_and_keep_whole() {
        let words = query_words("FileTree budget in read_file_tree() for the parser");
        for w in [
            "file",
            "tree",
            "filetree",
            "budget",
            "read_file_tree",
            "readfiletree",
        ] {
            assert!(words.contains(w), "{w} missing from {words:?}");
        }
        assert!(words.contains("pars"), "stemmed parser: {words:?}");
        assert!(!words.contains("the") && !words.contains("for"));
    }

    #[test]
    fn small_tree_renders_fully() {
        let paths = ["src/lib.rs", "README.md", "src/cli/mod.rs", "Cargo.toml"];
        let out = render_file_tree(&paths, &FileTreeOptions::default());
        assert_eq!(
            out,
            "src/\n  cli/\n    mod.rs\n  lib.rs\nCargo.toml\nREADME.md\n"
        );
    }

    #[test]
    fn never_exceeds_budget() {
        let paths: Vec<String> = (0..500).map(|i| format!("d{}/f{i}.py", i % 7)).collect();
        for budget in [0, 1, 5, 17, 40, 100, 333, 1000, 5000] {
            let out = render_file_tree(
                &paths,
                &FileTreeOptions {
                    char_budget: budget,
                    query: Some("f3"),
                },
            );
            assert!(out.chars().count() <= budget, "{budget}: {out}");
        }
    }
}
