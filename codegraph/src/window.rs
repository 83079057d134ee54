//! Where a query's terms occur in a file, and the windows of lines where they meet: the
//! proximity stage of a search and a hit's best-matching window both read them.
//!
//! Terms match whole words only (a word is a run of ASCII letters, digits, `_` and non-ASCII
//! bytes), ASCII case-insensitively, without identifier splitting: `parse_header` in the text
//! matches the term `parse_header`, not `parse`. One Aho-Corasick pass finds every term, so a
//! scan costs about the same for ten terms or two hundred.

use aho_corasick::{AhoCorasick, MatchKind};

/// One occurrence of a query term: its 0-based line and the term's index in the matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    /// 0-based line of the occurrence.
    pub line: u32,
    /// Index of the term (see [`TermMatcher::term`]).
    pub term: u32,
}

/// A query's terms with their weights, compiled for scanning file text.
#[derive(Debug, Clone)]
pub struct TermMatcher {
    automaton: Option<AhoCorasick>,
    terms: Vec<String>,
    weights: Vec<f64>,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

impl TermMatcher {
    /// Compile `(term, weight)` pairs. Terms shorter than two bytes, terms that are not one
    /// word, terms without positive weight and repeated terms (the first wins) are left out.
    pub fn new<'a>(terms: impl IntoIterator<Item = (&'a str, f64)>) -> TermMatcher {
        let mut kept: Vec<String> = Vec::new();
        let mut weights = Vec::new();
        for (term, weight) in terms {
            let term = term.to_ascii_lowercase();
            if term.len() < 2
                || !term.bytes().all(is_word_byte)
                || weight.is_nan()
                || weight <= 0.0
                || kept.contains(&term)
            {
                continue;
            }
            kept.push(term);
            weights.push(weight);
        }
        let automaton = if kept.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostLongest)
                .build(&kept)
                .ok()
        };
        TermMatcher {
            automaton,
            terms: kept,
            weights,
        }
    }

    /// Number of terms kept.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// No term was kept: nothing can match.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The term with index `index` (lowercase).
    pub fn term(&self, index: u32) -> &str {
        &self.terms[index as usize]
    }

    /// The weight of the term with index `index`.
    pub fn weight(&self, index: u32) -> f64 {
        self.weights[index as usize]
    }

    /// Every whole-word occurrence of a term in `text`, in text order.
    pub fn occurrences(&self, text: &[u8]) -> Vec<Occurrence> {
        let Some(automaton) = &self.automaton else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let (mut line, mut counted_to) = (0u32, 0usize);
        for m in automaton.find_iter(text) {
            let (start, end) = (m.start(), m.end());
            if (start > 0 && is_word_byte(text[start - 1]))
                || (end < text.len() && is_word_byte(text[end]))
            {
                continue;
            }
            line += memchr::memchr_iter(b'\n', &text[counted_to..start]).count() as u32;
            counted_to = start;
            out.push(Occurrence {
                line,
                term: m.pattern().as_u32(),
            });
        }
        out
    }

    /// The largest total weight of distinct terms found together within `width` consecutive
    /// lines (a term counts once per window, however often it occurs). 0 without occurrences.
    pub fn densest_window(&self, occurrences: &[Occurrence], width: u32) -> f64 {
        let width = width.max(1);
        let mut present = vec![0u32; self.terms.len()];
        let (mut current, mut best) = (0.0_f64, 0.0_f64);
        let mut left = 0;
        for occ in occurrences {
            let count = &mut present[occ.term as usize];
            if *count == 0 {
                current += self.weights[occ.term as usize];
            }
            *count += 1;
            while occurrences[left].line + width <= occ.line {
                let gone = occurrences[left];
                let count = &mut present[gone.term as usize];
                *count -= 1;
                if *count == 0 {
                    current -= self.weights[gone.term as usize];
                }
                left += 1;
            }
            best = best.max(current);
        }
        best
    }

    /// Per line (of `lines` lines), the total weight of the distinct terms on it.
    /// Occurrences past the last line are ignored.
    pub fn line_scores(&self, occurrences: &[Occurrence], lines: usize) -> Vec<f64> {
        let mut scores = vec![0.0; lines];
        let mut last_line_seen = vec![u32::MAX; self.terms.len()];
        for occ in occurrences {
            let Some(score) = scores.get_mut(occ.line as usize) else {
                continue;
            };
            let seen = &mut last_line_seen[occ.term as usize];
            if *seen != occ.line {
                *seen = occ.line;
                *score += self.weights[occ.term as usize];
            }
        }
        scores
    }
}
