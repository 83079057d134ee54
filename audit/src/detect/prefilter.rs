//! Searching many large patterns over a text fast: each pattern is split into its top-level
//! branches, and each branch is searched paragraph by paragraph, only in the paragraphs that
//! hold one of its anchors.
//!
//! A branch's anchors are literals one of which every match of it must contain, read off its
//! syntax tree (`\b(?:skip|disable)\W+(?:\w+\W+){0,5}?tests?` has the anchor `test`; `skip`
//! and `disable` would do too). A branch has up to three such sets, its gates, one per part of
//! it that has some (`skip` or `disable`, and `test`). One Aho-Corasick pass over the text
//! finds every anchor of every branch; a paragraph without an anchor of each of a branch's
//! gates cannot hold a match of it, so that branch is never run there. Most text of a source
//! file never reaches the large multilingual patterns at all, and what does meets one small
//! automaton per branch rather than one huge one per concept (whose every state is slow to
//! build).
//!
//! A branch is compiled the first time a paragraph opens it, not when the set is built: its
//! Unicode word classes make each automaton cost milliseconds and megabytes, and a process
//! that screens a short issue and a few files needs a few dozen of the seven hundred. Where
//! the window searched is ASCII (most issues and source files), the branch runs as its ASCII
//! restriction instead ([`ascii_only`]): every class cut to ASCII, every literal with a byte
//! above it dropped, every word boundary an ASCII one. On ASCII text that automaton matches
//! exactly where the full one does (no other character can occur there), and it compiles in
//! a small fraction of the time: the full one is compiled only for a window that needs it.
//!
//! Searching by paragraph (text between blank lines) is a rule, not only a speed-up: a concept
//! is a few words of one sentence, and a match that ran across a blank line would join two
//! paragraphs that say different things. It also bounds the work a pattern does on text with
//! non-ASCII letters: the regex engine's fast automaton cannot decide a Unicode word boundary
//! there and falls back to a slower one, which now only ever sees one paragraph. A paragraph
//! longer than [`WINDOW_LINES`] lines (a JSON document, a changelog list) is searched in
//! windows of twice that many lines, one window's worth apart, each keeping the matches that
//! start in its first half, so a match of up to [`WINDOW_LINES`] lines is found as in one pass.

use aho_corasick::AhoCorasick;
use regex::Regex;
use regex_automata::{Input, meta};
use regex_syntax::hir::{
    Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look,
    Repetition,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

/// How many lines of a long paragraph each search keeps the matches of.
const WINDOW_LINES: usize = 24;

/// A class with at most this many characters counts as that many one-character literals.
const MAX_CLASS_LITERALS: usize = 16;

/// At most this many parts of a branch gate it together (see [`gates`]).
const MAX_GATES: usize = 3;

/// Patterns, each as branches with the anchors that gate them.
pub(crate) struct PatternSet<T> {
    /// Each pattern's branches, each searched on its own.
    patterns: Vec<Gated<T>>,
    /// How many patterns compiled (all their branches did).
    sources: usize,
    /// Every anchor of every pattern, once.
    anchors: Option<AhoCorasick>,
    /// For each anchor, the branches it opens and which of their gates: `(branch, gate)`.
    opens: Vec<Vec<(usize, usize)>>,
}

/// One branch of a pattern.
struct Gated<T> {
    label: T,
    /// The whole pattern the branch is part of, compiled into `regex` (its `branch`-th
    /// top-level alternative, or all of it) the first time a paragraph that is not ASCII
    /// holds one of its anchors: most branches of the multilingual patterns are never needed
    /// for a given text, and compiling them all up front cost every process seconds and
    /// hundreds of megabytes (their Unicode word classes expand into large automata). Parsed
    /// again then rather than kept printed: printing every branch cost each process more
    /// than compiling the few it needs.
    pattern: Arc<str>,
    branch: Option<usize>,
    /// `Err` inside when the branch does not compile ([`PatternSet::refused`] names it).
    regex: OnceLock<Result<Regex, String>>,
    /// The branch restricted to ASCII ([`ascii_only`]), for windows of ASCII text.
    ascii_hir: Hir,
    /// `ascii_hir` compiled at its first use; `None` when it does not compile (the full
    /// branch is used then).
    ascii: OnceLock<Option<meta::Regex>>,
    /// Its gates, each a set of anchors: a window is searched only when it holds an anchor
    /// of every gate. A branch without is searched in every paragraph.
    anchors: Option<Vec<BTreeSet<Vec<u8>>>>,
}

impl<T> Gated<T> {
    /// The compiled branch, compiled now if this is its first use.
    fn regex(&self) -> Result<&Regex, &str> {
        self.regex
            .get_or_init(|| {
                // The same limits the patterns always had: they are large alternations of
                // multilingual phrases. The lazy DFA's cache must hold enough states for
                // them, or the engine falls back to its slowest search on every text.
                let hir = regex_syntax::parse(&self.pattern).map_err(|e| e.to_string())?;
                let source = match (hir.kind(), self.branch) {
                    (HirKind::Alternation(subs), Some(i)) => {
                        subs.get(i).map_or_else(String::new, Hir::to_string)
                    }
                    _ => self.pattern.to_string(),
                };
                regex::RegexBuilder::new(&source)
                    .size_limit(64 << 20)
                    .dfa_size_limit(64 << 20)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// What searches a window: the ASCII restriction where the window is ASCII and it
    /// compiles, the full branch otherwise; `None` when neither compiles.
    fn matcher(&self, ascii_window: bool) -> Option<Matcher<'_>> {
        let ascii = ascii_window
            .then(|| {
                self.ascii
                    .get_or_init(|| {
                        meta::Regex::builder()
                            .configure(
                                meta::Config::new()
                                    .nfa_size_limit(Some(64 << 20))
                                    .hybrid_cache_capacity(64 << 20),
                            )
                            .build_from_hir(&self.ascii_hir)
                            .ok()
                    })
                    .as_ref()
            })
            .flatten();
        match ascii {
            Some(regex) => Some(Matcher::Ascii(regex)),
            None => self.regex().ok().map(Matcher::Full),
        }
    }
}

/// A compiled branch: in full, or its ASCII restriction.
enum Matcher<'a> {
    Full(&'a Regex),
    Ascii(&'a meta::Regex),
}

impl Matcher<'_> {
    /// The first match in `hay` at or after `at`, as `(start, end)`.
    fn find_at(&self, hay: &str, at: usize) -> Option<(usize, usize)> {
        match self {
            Matcher::Full(regex) => regex.find_at(hay, at).map(|m| (m.start(), m.end())),
            Matcher::Ascii(regex) => regex
                .find(Input::new(hay).range(at..))
                .map(|m| (m.start(), m.end())),
        }
    }
}

/// `hir` restricted to ASCII text: each class cut to its ASCII part, each literal holding a
/// byte above ASCII replaced by what never matches, each Unicode word boundary by the ASCII
/// one, captures dropped (only where a match is counts). On a haystack of ASCII characters
/// it matches exactly where `hir` does: a character outside ASCII cannot occur there, and
/// ASCII's word characters are Unicode's word characters below U+0080.
fn ascii_only(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(l) if l.0.is_ascii() => Hir::literal(l.0.clone()),
        HirKind::Literal(_) => Hir::fail(),
        // A class's ranges are sorted: its ASCII part is a prefix of them.
        HirKind::Class(Class::Unicode(c)) => Hir::class(Class::Unicode(ClassUnicode::new(
            c.ranges()
                .iter()
                .take_while(|r| r.start().is_ascii())
                .map(|r| ClassUnicodeRange::new(r.start(), r.end().min('\x7f'))),
        ))),
        HirKind::Class(Class::Bytes(c)) => Hir::class(Class::Bytes(ClassBytes::new(
            c.ranges()
                .iter()
                .take_while(|r| r.start().is_ascii())
                .map(|r| ClassBytesRange::new(r.start(), r.end().min(0x7f))),
        ))),
        HirKind::Look(look) => Hir::look(match look {
            Look::WordUnicode => Look::WordAscii,
            Look::WordUnicodeNegate => Look::WordAsciiNegate,
            Look::WordStartUnicode => Look::WordStartAscii,
            Look::WordEndUnicode => Look::WordEndAscii,
            Look::WordStartHalfUnicode => Look::WordStartHalfAscii,
            Look::WordEndHalfUnicode => Look::WordEndHalfAscii,
            other => *other,
        }),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            min: r.min,
            max: r.max,
            greedy: r.greedy,
            sub: Box::new(ascii_only(&r.sub)),
        }),
        HirKind::Capture(c) => ascii_only(&c.sub),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(ascii_only).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(ascii_only).collect()),
    }
}

/// A pattern's top-level branches (`a|b|c`), each with its anchors, parsed now and compiled at
/// first use. A large alternation searched as one automaton makes every state of it large and
/// slow to build; a branch on its own is small, and is only run where its own anchors are.
/// Branches are found in the same places as the whole pattern's matches, where matches of two
/// branches do not overlap (where they do, both are reported: a signal is a position, so
/// either is right).
fn branches<T: Copy>(label: T, pattern: &str) -> Result<Vec<Gated<T>>, String> {
    let hir = regex_syntax::parse(pattern).map_err(|e| e.to_string())?;
    let parts: Vec<(Option<usize>, &Hir)> = match hir.kind() {
        HirKind::Alternation(subs) => subs.iter().enumerate().map(|(i, h)| (Some(i), h)).collect(),
        _ => vec![(None, &hir)],
    };
    let whole: Arc<str> = Arc::from(pattern);
    Ok(parts
        .into_iter()
        .map(|(branch, h)| Gated {
            label,
            pattern: Arc::clone(&whole),
            branch,
            regex: OnceLock::new(),
            ascii_hir: ascii_only(h),
            ascii: OnceLock::new(),
            anchors: gates(h),
        })
        .collect())
}

/// A pattern that did not compile, with the label it was given and why.
pub(crate) struct Refused<T> {
    pub(crate) label: T,
    pub(crate) why: String,
}

impl<T: Copy> PatternSet<T> {
    /// Parse `wanted` (each branch is compiled at its first use); the patterns that fail to
    /// parse are returned beside the set, never dropped silently, and [`PatternSet::refused`]
    /// names the branches that parse but do not compile.
    pub(crate) fn build(wanted: Vec<(T, String)>) -> (Self, Vec<Refused<T>>) {
        let mut patterns: Vec<Gated<T>> = Vec::new();
        let mut refused = Vec::new();
        let mut sources = 0;
        for (label, pattern) in wanted {
            match branches(label, &pattern) {
                Ok(list) => {
                    sources += 1;
                    patterns.extend(list);
                }
                Err(why) => refused.push(Refused { label, why }),
            }
        }
        let mut literal_ids: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        let mut opens: Vec<Vec<(usize, usize)>> = Vec::new();
        for (index, p) in patterns.iter().enumerate() {
            for (gate, set) in p.anchors.iter().flatten().enumerate() {
                for literal in set {
                    let next = literal_ids.len();
                    let id = *literal_ids.entry(literal.clone()).or_insert(next);
                    if id == opens.len() {
                        opens.push(Vec::new());
                    }
                    if let Some(list) = opens.get_mut(id) {
                        list.push((index, gate));
                    }
                }
            }
        }
        let mut by_id: Vec<(usize, Vec<u8>)> =
            literal_ids.into_iter().map(|(l, id)| (id, l)).collect();
        by_id.sort();
        let anchors = if by_id.is_empty() {
            None
        } else {
            // Standard semantics so that overlapping anchors ("add" inside "address") are
            // all reported; a failure to build only means no pattern is gated.
            AhoCorasick::new(by_id.iter().map(|(_, l)| l.as_slice())).ok()
        };
        if anchors.is_none() {
            for p in &mut patterns {
                p.anchors = None;
            }
        }
        (
            PatternSet {
                patterns,
                sources,
                anchors,
                opens,
            },
            refused,
        )
    }

    /// How many patterns parsed.
    pub(crate) fn len(&self) -> usize {
        self.sources
    }

    /// Compile every branch not compiled yet; the ones that do not compile, with why.
    pub(crate) fn refused(&self) -> Vec<Refused<T>> {
        self.patterns
            .iter()
            .filter_map(|p| {
                p.regex().err().map(|why| Refused {
                    label: p.label,
                    why: why.to_string(),
                })
            })
            .collect()
    }

    /// How many branches are gated by anchors (the others run in every paragraph).
    #[cfg(test)]
    pub(crate) fn gated(&self) -> usize {
        self.patterns.iter().filter(|p| p.anchors.is_some()).count()
    }

    /// Whether any pattern matches in some paragraph of `text`.
    pub(crate) fn matches_any(&self, text: &str) -> bool {
        let mut any = false;
        self.find(text, &|_| true, &mut |_, _, _| any = true);
        any
    }

    /// The patterns' branches, in the order they were given (their labels and regexes).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (T, &Regex)> {
        self.patterns
            .iter()
            .filter_map(|p| p.regex().ok().map(|r| (p.label, r)))
    }

    /// Every match, in each paragraph of `text`, of the patterns whose label `wanted` accepts:
    /// `found(label, start, end)` per match, matches of one pattern in one paragraph
    /// non-overlapping and in order.
    pub(crate) fn find(
        &self,
        text: &str,
        wanted: &dyn Fn(T) -> bool,
        found: &mut dyn FnMut(T, usize, usize),
    ) {
        self.search(text, wanted, found, true);
    }

    /// [`PatternSet::find`] with every branch run in full, ASCII windows too: the reference
    /// the ASCII restrictions are checked against.
    #[cfg(test)]
    pub(crate) fn find_in_full(
        &self,
        text: &str,
        wanted: &dyn Fn(T) -> bool,
        found: &mut dyn FnMut(T, usize, usize),
    ) {
        self.search(text, wanted, found, false);
    }

    fn search(
        &self,
        text: &str,
        wanted: &dyn Fn(T) -> bool,
        found: &mut dyn FnMut(T, usize, usize),
        ascii_allowed: bool,
    ) {
        let mut hits: Vec<(usize, usize, usize)> = match &self.anchors {
            Some(ac) => ac
                .find_overlapping_iter(text)
                .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
                .collect(),
            None => Vec::new(),
        };
        hits.sort_unstable();
        // Per branch, a bit per gate that has an anchor in the window; open when all do.
        let all_gates: Vec<u32> = self
            .patterns
            .iter()
            .map(|p| p.anchors.as_ref().map_or(0, |g| (1 << g.len()) - 1))
            .collect();
        let mut open = vec![0u32; self.patterns.len()];
        for para in paragraphs(text) {
            let mut resume = vec![para.lead; self.patterns.len()];
            for w in windows(text, &para) {
                open.iter_mut().for_each(|o| *o = 0);
                // The character before the window counts: it decides a word boundary at its
                // start (a byte below 0x80 there is a whole character).
                let ascii_window = ascii_allowed
                    && text
                        .as_bytes()
                        .get(w.search_start.saturating_sub(1)..w.search_end)
                        .is_some_and(<[u8]>::is_ascii);
                let lo = hits.partition_point(|&(s, _, _)| s < w.search_start);
                for &(_, end, id) in hits[lo..].iter().take_while(|&&(s, _, _)| s < w.search_end) {
                    if end <= w.search_end {
                        for &(p, gate) in self.opens.get(id).map_or(&[][..], Vec::as_slice) {
                            if let Some(o) = open.get_mut(p) {
                                *o |= 1 << gate;
                            }
                        }
                    }
                }
                for (i, p) in self.patterns.iter().enumerate() {
                    // The gate first: a branch is compiled only once a window needs it.
                    let gated_out = open[i] != all_gates[i] || !wanted(p.label);
                    let matcher = (!gated_out).then(|| p.matcher(ascii_window)).flatten();
                    let Some(regex) = matcher else {
                        resume[i] = resume[i].max(w.keep_end);
                        continue;
                    };
                    // The haystack ends with the window, so no match runs past it; the text
                    // before the window still decides word boundaries and line starts.
                    let hay = &text[..w.search_end];
                    let mut at = resume[i].max(w.search_start);
                    while at < w.keep_end {
                        let Some((start, end)) = regex.find_at(hay, at) else {
                            at = w.keep_end;
                            break;
                        };
                        if start >= w.keep_end {
                            at = w.keep_end;
                            break;
                        }
                        found(p.label, start, end);
                        at = if end > start {
                            end
                        } else {
                            next_char(text, end)
                        };
                    }
                    resume[i] = at;
                }
            }
        }
    }
}

/// The offset after the character at `at` (or the text's end).
fn next_char(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map_or(text.len() + 1, |c| at + c.len_utf8())
}

/// A byte range of the text between blank lines.
#[derive(Debug, PartialEq, Eq)]
struct Paragraph {
    /// Where its search starts: after the last letter or digit before it, so that a pattern
    /// that begins at the end of the sentence before ("… commits.\n\nagent: push …") still
    /// sees that end. What a match is attributed to is its first letter, in this paragraph.
    lead: usize,
    start: usize,
    end: usize,
}

fn paragraph(text: &str, start: usize, end: usize) -> Paragraph {
    let before = &text[..start];
    let lead = before
        .trim_end_matches(|c: char| !c.is_alphanumeric())
        .len();
    Paragraph { lead, start, end }
}

/// The paragraphs of `text`: runs of lines that are not blank, each ending after its last
/// line's newline.
fn paragraphs(text: &str) -> Vec<Paragraph> {
    let mut out = Vec::new();
    let mut start = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        match (start, blank) {
            (None, false) => start = Some(offset),
            (Some(s), true) => {
                out.push(paragraph(text, s, offset));
                start = None;
            }
            _ => {}
        }
        offset += line.len();
    }
    if let Some(s) = start {
        out.push(paragraph(text, s, text.len()));
    }
    out
}

/// One search of a paragraph: it looks at `search_start..search_end` and keeps the matches
/// that start before `keep_end`.
#[derive(Debug, PartialEq, Eq)]
struct Window {
    search_start: usize,
    keep_end: usize,
    search_end: usize,
}

fn windows(text: &str, para: &Paragraph) -> Vec<Window> {
    let (start, end) = (para.start, para.end);
    let starts: Vec<usize> = std::iter::once(start)
        .chain(
            text[start..end]
                .match_indices('\n')
                .map(|(i, _)| start + i + 1)
                .filter(|&s| s < end),
        )
        .collect();
    let line_start = |n: usize| starts.get(n).copied().unwrap_or(end);
    let mut out = Vec::new();
    let mut first = 0;
    while first < starts.len() {
        out.push(Window {
            search_start: if first == 0 {
                para.lead
            } else {
                line_start(first)
            },
            keep_end: line_start(first + WINDOW_LINES),
            search_end: line_start(first + 2 * WINDOW_LINES),
        });
        first += WINDOW_LINES;
    }
    out
}

/// The gates of a branch: for each part of a concatenation that has [`required`] literals,
/// that set (every match contains one of each), the most telling [`MAX_GATES`] of them; for
/// anything else its one set. `None` when there is none. A window that lacks every literal of
/// one gate cannot hold a match, so a branch such as "an AI noun ... a modal verb" is
/// compiled and run only where both kinds of word occur, not wherever "ai" does.
fn gates(hir: &Hir) -> Option<Vec<BTreeSet<Vec<u8>>>> {
    let mut sets: Vec<BTreeSet<Vec<u8>>> = match hir.kind() {
        HirKind::Capture(c) => return gates(&c.sub),
        HirKind::Concat(subs) => subs.iter().filter_map(required).collect(),
        _ => required(hir).into_iter().collect(),
    };
    sets.sort_by(|a, b| {
        shortest(b)
            .cmp(&shortest(a))
            .then(a.len().cmp(&b.len()))
            .then(a.cmp(b))
    });
    sets.dedup();
    sets.truncate(MAX_GATES);
    (!sets.is_empty()).then_some(sets)
}

/// Literals one of which every match of `hir` contains, or `None` when there is no such
/// finite set (a pattern that can match without any fixed text).
fn required(hir: &Hir) -> Option<BTreeSet<Vec<u8>>> {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(l) => Some(BTreeSet::from([l.0.to_vec()])),
        HirKind::Class(class) => class_literals(class),
        HirKind::Repetition(r) if r.min >= 1 => required(&r.sub),
        HirKind::Repetition(_) => None,
        HirKind::Capture(c) => required(&c.sub),
        // Every part of a concatenation is in every match: the part with the most telling
        // literals (the longest shortest one, then the fewest) is the gate.
        HirKind::Concat(subs) => subs
            .iter()
            .filter_map(required)
            .max_by_key(|set| (shortest(set), std::cmp::Reverse(set.len()))),
        // A match of an alternation is a match of one of its branches.
        HirKind::Alternation(subs) => {
            let mut all = BTreeSet::new();
            for s in subs {
                all.extend(required(s)?);
            }
            Some(all)
        }
    }
}

fn shortest(set: &BTreeSet<Vec<u8>>) -> usize {
    set.iter().map(Vec::len).min().unwrap_or(0)
}

fn class_literals(class: &Class) -> Option<BTreeSet<Vec<u8>>> {
    let mut out = BTreeSet::new();
    match class {
        Class::Unicode(c) => {
            for range in c.ranges() {
                for ch in range.start()..=range.end() {
                    if out.len() >= MAX_CLASS_LITERALS {
                        return None;
                    }
                    out.insert(ch.to_string().into_bytes());
                }
            }
        }
        Class::Bytes(c) => {
            for range in c.ranges() {
                for b in range.start()..=range.end() {
                    if out.len() >= MAX_CLASS_LITERALS {
                        return None;
                    }
                    out.insert(vec![b]);
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchors(p: &str) -> Option<Vec<String>> {
        let hir = regex_syntax::parse(p).unwrap();
        required(&hir).map(|s| {
            s.into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn anchors_are_what_every_match_contains() {
        // "skip" or "disable" would do as well; one literal of the same length is fewer.
        assert_eq!(
            anchors(r"\b(?:skip|disable)\W+(?:\w+\W+){0,5}?tests?\b"),
            Some(vec!["test".into()])
        );
        // The longest telling part of a concatenation is its gate ("secret", not "_").
        assert_eq!(
            anchors(r"\bsudo\b|\b\w+_(?:secret|password)\b"),
            Some(vec!["password".into(), "secret".into(), "sudo".into()])
        );
        // A branch with no fixed text leaves the whole pattern ungated.
        assert_eq!(anchors(r"skip|\w+"), None);
        assert_eq!(anchors(r"(?:note)?\W+"), None);
    }

    #[test]
    fn a_gated_search_finds_what_a_plain_search_finds_within_paragraphs() {
        let wanted = vec![
            (
                0,
                r"\b(?:skip|disable)\W+(?:\w+\W+){0,5}?tests?\b".to_string(),
            ),
            (1, r"(?m)(?:^|[.!?]\s+)\W{0,3}(?:add|remove)\b".to_string()),
            (2, r"\w+".to_string()),
            (3, r"(?:\A|[.!?]\s+)\W{0,3}agent\s*:".to_string()),
        ];
        let (set, refused) = PatternSet::build(wanted);
        assert!(refused.is_empty());
        assert_eq!(set.gated(), 3);
        let long: String = (0..100).map(|i| format!("line {i} skip the\n")).collect();
        let text = format!(
            "first: skip all the tests. add it.\nremove — é tests\n\n{long}tests\n\nskip\n\ntests.\n\nagent: push"
        );
        let mut got: Vec<(i32, usize, usize)> = Vec::new();
        set.find(&text, &|_| true, &mut |l, s, e| got.push((l, s, e)));
        got.sort_unstable();
        // The reference: each pattern over each paragraph on its own.
        let mut want = Vec::new();
        for (label, re) in set.iter() {
            for p in paragraphs(&text) {
                let mut at = p.lead;
                while let Some(m) = re.find_at(&text[..p.end], at) {
                    want.push((label, m.start(), m.end()));
                    at = m.end().max(m.start() + 1);
                }
            }
        }
        want.sort_unstable();
        assert_eq!(got, want);
        // "skip" and "tests" in different paragraphs never make one match.
        assert!(!got.iter().any(|&(l, s, _)| l == 0 && s > text.len() - 40));
        // A sentence's end before the blank line still starts the next paragraph's sentence.
        assert!(got.iter().any(|&(l, _, e)| l == 3 && e == text.len() - 5));
    }

    #[test]
    fn a_branch_is_compiled_only_where_every_gate_has_an_anchor() {
        let hir = regex_syntax::parse(r"\b(?:skip|disable)\W+(?:\w+\W+){0,5}?tests?\b").unwrap();
        let literals = |set: &BTreeSet<Vec<u8>>| -> Vec<String> {
            set.iter()
                .map(|l| String::from_utf8(l.clone()).unwrap())
                .collect()
        };
        let found: Vec<Vec<String>> = gates(&hir).unwrap().iter().map(literals).collect();
        assert_eq!(found, [vec!["test"], vec!["disable", "skip"]]);

        let (set, refused) = PatternSet::build(vec![(
            0,
            r"\b(?:skip|disable)\W+(?:\w+\W+){0,5}?tests?\b".to_string(),
        )]);
        assert!(refused.is_empty());
        let mut got = Vec::new();
        set.find(
            "skip the lint.\n\nthe tests pass",
            &|_| true,
            &mut |l, s, e| {
                got.push((l, s, e));
            },
        );
        assert!(got.is_empty());
        assert!(
            set.patterns[0].regex.get().is_none(),
            "compiled without need"
        );
        set.find("skip the tests", &|_| true, &mut |l, s, e| {
            got.push((l, s, e))
        });
        assert_eq!(got, [(0, 0, 14)]);
        assert!(set.refused().is_empty());
    }

    #[test]
    fn ascii_windows_run_the_ascii_restriction_and_find_what_the_full_branch_finds() {
        let wanted: Vec<(usize, String)> = [
            r"(?i)\b(?:skip|disable)\W+(?:\w+\W+){0,5}?tests?\b",
            // Case folding beyond ASCII (K and the Kelvin sign), a literal that is not ASCII.
            r"(?i)\bkeep\W+(?:it|ça)\W+(?:secret|geheim)\b|\bstraße\W+\w+",
            r"(?m)^\W{0,3}agent\s*:\s*.{1,20}",
            r"\B(?:ignore)\b|\bprevious\B",
            // Where a paragraph's search starts after a letter that is not ASCII, that letter
            // decides the boundary.
            r"\B\s+agent\b",
        ]
        .iter()
        .enumerate()
        .map(|(i, p)| (i, (*p).to_string()))
        .collect();
        let texts = [
            "Please skip the flaky tests.\nKEEP IT SECRET\n\nagent: push to main now\nxignore previousx",
            // A word character that is not ASCII just before an anchor: no boundary there.
            "éskip the tests\n\nnaïve skip these tests\n\nkeep ça geheim, Kelvin: \u{212A}eep it secret",
            "straße bauen\n\nagent:\tüber\nignore",
            "café\n\nagent: go",
        ];
        for text in texts {
            let (set, refused) = PatternSet::build(wanted.clone());
            assert!(refused.is_empty());
            let mut got = Vec::new();
            set.find(text, &|_| true, &mut |l, s, e| got.push((l, s, e)));
            got.sort_unstable();
            let (full, _) = PatternSet::build(wanted.clone());
            let mut want = Vec::new();
            full.find_in_full(text, &|_| true, &mut |l, s, e| want.push((l, s, e)));
            want.sort_unstable();
            assert_eq!(got, want, "on {text:?}");
            assert!(!got.is_empty(), "the text exercises the patterns: {text:?}");
        }
        // On ASCII text only the restrictions were compiled, not the full branches.
        let (set, _) = PatternSet::build(wanted);
        let mut n = 0;
        set.find(texts[0], &|_| true, &mut |_, _, _| n += 1);
        assert_eq!(n, 6);
        assert!(set.patterns.iter().all(|p| p.regex.get().is_none()));
        assert!(set.patterns.iter().any(|p| p.ascii.get().is_some()));
    }

    #[test]
    fn long_paragraphs_are_searched_in_overlapping_windows() {
        let text: String = (0..60).map(|i| format!("{i}\n")).collect();
        let w = windows(&text, &paragraph(&text, 0, text.len()));
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].search_start, 0);
        assert_eq!(w[1].search_start, w[0].keep_end);
        assert_eq!(w[0].search_end, w[2].search_start);
        assert_eq!(w[2].search_end, text.len());
    }
}
