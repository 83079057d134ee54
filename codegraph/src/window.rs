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

/// A function or method a hit's window can be aligned to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Block {
    /// First line, 1-based.
    pub first: u32,
    /// Last line, 1-based, inclusive.
    pub last: u32,
    /// Extra weight, e.g. when the query names the function.
    pub bonus: f64,
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

    /// The window of `width` lines (1-based, inclusive) a reader of a hit should see first, in
    /// a file of `lines` lines, from `occurrences` in text order; `None` when no term occurs
    /// and no line has extra weight.
    ///
    /// Changes land inside functions, so the window is aligned to one: each line belongs to the
    /// innermost of `blocks` around it, and the block whose lines hold the most distinct query
    /// terms by weight (plus its bonus; ties to the earlier block) wins. A block that fits is
    /// shown from its first line; a longer one at its `width` lines with the most term weight
    /// line by line. When no block holds a term, the window with the most distinct term weight
    /// (plus `extra`, per 0-based line) wins, ties to the one with more weight line by line,
    /// then to the earlier one.
    pub fn best_window(
        &self,
        occurrences: &[Occurrence],
        lines: usize,
        extra: &[f64],
        blocks: &[Block],
        width: u32,
    ) -> Option<(u32, u32)> {
        self.best_window_in(occurrences, lines, extra, blocks, width)
            .map(|(window, _)| window)
    }

    /// [`TermMatcher::best_window`], with the index in `blocks` of the block the window was
    /// aligned to (`None` when no block held a term).
    pub fn best_window_in(
        &self,
        occurrences: &[Occurrence],
        lines: usize,
        extra: &[f64],
        blocks: &[Block],
        width: u32,
    ) -> Option<((u32, u32), Option<usize>)> {
        if lines == 0 {
            return None;
        }
        let width = (width.max(1) as usize).min(lines);
        let extra_at = |l: usize| extra.get(l).copied().unwrap_or(0.0);
        let mut line_scores = self.line_scores(occurrences, lines);
        for (l, score) in line_scores.iter_mut().enumerate() {
            *score += extra_at(l);
        }
        // In text order (as [`TermMatcher::occurrences`] gives them), so any past the last line
        // are at the end.
        let occ = &occurrences[..occurrences.partition_point(|o| (o.line as usize) < lines)];

        // The innermost block of each line: wider blocks first, narrower ones overwrite.
        let mut owner: Vec<Option<usize>> = vec![None; lines];
        let mut order: Vec<usize> = (0..blocks.len())
            .filter(|&b| blocks[b].first >= 1 && blocks[b].last >= blocks[b].first)
            .collect();
        order.sort_by_key(|&b| std::cmp::Reverse((blocks[b].last - blocks[b].first, b)));
        for b in order {
            let (lo, hi) = (
                blocks[b].first as usize - 1,
                (blocks[b].last as usize).min(lines),
            );
            for slot in owner.iter_mut().take(hi).skip(lo) {
                *slot = Some(b);
            }
        }
        let mut block_terms: Vec<Vec<u32>> = vec![Vec::new(); blocks.len()];
        for o in occ {
            if let Some(b) = owner[o.line as usize]
                && !block_terms[b].contains(&o.term)
            {
                block_terms[b].push(o.term);
            }
        }
        let mut best_block: Option<(f64, usize)> = None;
        for (b, terms) in block_terms.iter().enumerate() {
            if terms.is_empty() {
                continue;
            }
            let score = terms.iter().map(|&t| self.weight(t)).sum::<f64>() + blocks[b].bonus;
            let better = best_block.is_none_or(|(best, other)| {
                score > best + 1e-9
                    || (score > best - 1e-9 && blocks[b].first < blocks[other].first)
            });
            if better {
                best_block = Some((score, b));
            }
        }
        if let Some((_, b)) = best_block {
            let (lo, hi) = (
                blocks[b].first as usize - 1,
                (blocks[b].last as usize).min(lines),
            );
            let start = if hi.saturating_sub(lo) <= width {
                lo.min(lines - width)
            } else {
                let mut sum: f64 = line_scores[lo..lo + width].iter().sum();
                let mut best = (sum, lo);
                for start in lo + 1..=hi - width {
                    sum += line_scores[start + width - 1] - line_scores[start - 1];
                    if sum > best.0 + 1e-9 {
                        best = (sum, start);
                    }
                }
                best.1
            };
            return Some(((start as u32 + 1, (start + width) as u32), Some(b)));
        }

        // No block holds a term: slide over the file, distinct weight first.
        let mut present = vec![0u32; self.terms.len()];
        let (mut distinct, mut line_sum, mut extra_sum) = (0.0_f64, 0.0_f64, 0.0_f64);
        let (mut added, mut removed) = (0usize, 0usize);
        let mut best: Option<(f64, f64, usize)> = None;
        for start in 0..=lines - width {
            let end = start + width;
            if start == 0 {
                line_sum = line_scores[..width].iter().sum();
                extra_sum = (0..width).map(extra_at).sum();
            } else {
                line_sum += line_scores[end - 1] - line_scores[start - 1];
                extra_sum += extra_at(end - 1) - extra_at(start - 1);
            }
            while added < occ.len() && (occ[added].line as usize) < end {
                let count = &mut present[occ[added].term as usize];
                if *count == 0 {
                    distinct += self.weights[occ[added].term as usize];
                }
                *count += 1;
                added += 1;
            }
            while removed < added && (occ[removed].line as usize) < start {
                let count = &mut present[occ[removed].term as usize];
                *count -= 1;
                if *count == 0 {
                    distinct -= self.weights[occ[removed].term as usize];
                }
                removed += 1;
            }
            let score = distinct + extra_sum;
            let better = best.is_none_or(|(best_score, best_sum, _)| {
                score > best_score + 1e-9
                    || (score > best_score - 1e-9 && line_sum > best_sum + 1e-9)
            });
            if better {
                best = Some((score, line_sum, start));
            }
        }
        let (score, _, start) = best?;
        (score > 1e-9).then_some(((start as u32 + 1, (start + width) as u32), None))
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
