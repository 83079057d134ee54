//! The repository map: a definitions/references graph between files, ranked by PageRank
//! personalised by what the query names, rendered as a signature outline within a budget.
//!
//! Tokens are estimated as one token per [`CHARS_PER_TOKEN`] characters (rounded up), the
//! usual rule of thumb for code and English with current tokenizers; the rendering is the
//! longest prefix of the ranked definitions whose outline fits the budget.

use crate::engine::{Engine, Snapshot, rank, symbol_scores};
use crate::query::QueryAnalysis;
use crate::rank::pagerank;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Characters per estimated token.
pub const CHARS_PER_TOKEN: usize = 4;
/// Identifiers defined in more files than this are too generic to be edges.
const MAX_DEFINERS: usize = 20;
/// How much of its own file's rank a file's definitions get on top of the rank flowing into
/// them along references (divided among them by [`own_shares`]). The files the query points
/// at (personalisation) have a high rank of their own, but their definitions are often
/// referenced by nothing (a rule class loaded by name, a command's handler), so without this
/// share the map showed the files that are referenced everywhere and not the ones the search
/// found. Measured with `airlock eval retrieval` (`map_hit_rate`, 302 instances of 8 sets):
/// a share of 0.05 divided evenly named a gold file in 0.76 of the maps, 1.0 evenly (with
/// [`NON_SOURCE_FACTOR`] on documentation files too) in 0.84, 2.0 by query terms in the names
/// in 0.88 (1.0: 0.87, 3.0: 0.88, 5.0: 0.87), by query terms in the files the query points
/// at and evenly elsewhere in 0.90.
const OWN_RANK_SHARE: f64 = 2.0;
/// The score multiplier of test, vendored and documentation files' definitions (examples,
/// `docs/conf.py`): the map is an outline of the product's code.
const NON_SOURCE_FACTOR: f64 = 0.1;

/// Estimated tokens of a text: `ceil(chars / CHARS_PER_TOKEN)`.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(CHARS_PER_TOKEN)
}

/// A ranked definition: (file id, index into that file's defs, score).
struct RankedDef {
    file: u32,
    def: usize,
    score: f64,
}

impl Engine {
    /// Render the repository map of a commit within `token_budget` tokens (see
    /// [`crate::map`]), personalised by the identifiers and paths in `query`.
    pub fn repo_map(
        &mut self,
        commit: &str,
        query: &str,
        token_budget: usize,
    ) -> crate::Result<String> {
        let snap = self.snapshot(commit)?;
        render(&snap, &QueryAnalysis::new(query), token_budget)
    }

    /// The files [`Engine::repo_map`] shows for the same arguments, in its order.
    pub fn repo_map_files(
        &mut self,
        commit: &str,
        query: &str,
        token_budget: usize,
    ) -> crate::Result<Vec<String>> {
        let snap = self.snapshot(commit)?;
        files(&snap, &QueryAnalysis::new(query), token_budget)
    }
}

pub(crate) fn render(
    snap: &Snapshot,
    analysis: &QueryAnalysis,
    token_budget: usize,
) -> crate::Result<String> {
    let defs = ranked_defs(snap, analysis)?;
    Ok(outline(snap, &defs[..fitting(snap, &defs, token_budget)]))
}

/// The files [`render`] shows, in its order.
pub(crate) fn files(
    snap: &Snapshot,
    analysis: &QueryAnalysis,
    token_budget: usize,
) -> crate::Result<Vec<String>> {
    let defs = ranked_defs(snap, analysis)?;
    let mut seen = HashSet::new();
    Ok(defs[..fitting(snap, &defs, token_budget)]
        .iter()
        .filter(|d| seen.insert(d.file))
        .map(|d| snap.files[d.file as usize].path.clone())
        .collect())
}

/// Every definition, best first.
fn ranked_defs(snap: &Snapshot, analysis: &QueryAnalysis) -> crate::Result<Vec<RankedDef>> {
    let n = snap.files.len();
    let mentioned: HashSet<&str> = analysis
        .identifiers
        .iter()
        .map(|(i, _)| i.as_str())
        .collect();

    // Edges: file that uses an identifier -> file that defines it.
    let mut edges: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    let mut def_edges: Vec<(u32, u32, String, f64)> = Vec::new();
    for (from, file) in snap.files.iter().enumerate() {
        let Some(symbols) = &file.record.symbols else {
            continue;
        };
        for (ident, count) in &symbols.idents {
            let Some(definers) = snap.defs_by_name.get(ident) else {
                continue;
            };
            let others: Vec<u32> = definers
                .iter()
                .copied()
                .filter(|&d| d as usize != from)
                .collect();
            if others.is_empty() || others.len() > MAX_DEFINERS {
                continue;
            }
            let mut mul = 1.0;
            if mentioned.contains(ident.as_str()) {
                mul *= 10.0;
            }
            if ident.starts_with('_') {
                mul *= 0.1;
            }
            let w = mul * f64::from(*count).sqrt() / others.len() as f64;
            for to in others {
                *edges.entry((from as u32, to)).or_insert(0.0) += w;
                def_edges.push((from as u32, to, ident.clone(), w));
            }
        }
    }
    let edge_list: Vec<(usize, usize, f64)> = edges
        .iter()
        .map(|(&(f, t), &w)| (f as usize, t as usize, w))
        .collect();

    // Personalisation: what the query names, plus the top fused search results.
    let mut personal = vec![0.0; n];
    let mut any = false;
    if !analysis.terms.is_empty() {
        for (id, score) in symbol_scores(snap, analysis) {
            personal[id as usize] += score;
            any = true;
        }
        let ranked = rank(snap, analysis)?;
        for (i, (id, _)) in ranked.fused.iter().take(10).enumerate() {
            personal[*id as usize] += 1.0 / (i as f64 + 1.0);
            any = true;
        }
    }
    let file_rank = pagerank(n, &edge_list, any.then_some(&personal[..]));

    // A definition's score: the rank flowing into it along its identifier's edges, plus a
    // small share of its own file's rank so unreferenced definitions still order sensibly.
    let mut out_weight = vec![0.0; n];
    for &(f, _, w) in &edge_list {
        out_weight[f] += w;
    }
    let mut def_score: HashMap<(u32, &str), f64> = HashMap::new();
    for (from, to, ident, w) in &def_edges {
        let share = file_rank[*from as usize] * w / out_weight[*from as usize];
        *def_score.entry((*to, ident.as_str())).or_insert(0.0) += share;
    }
    let query_terms: HashSet<&str> = analysis.terms.iter().map(|(t, _)| t.as_str()).collect();
    let no_terms: HashSet<&str> = HashSet::new();
    let mut defs: Vec<RankedDef> = Vec::new();
    for (id, file) in snap.files.iter().enumerate() {
        let Some(symbols) = &file.record.symbols else {
            continue;
        };
        // Only the files the query points at divide their share by the query's terms: in the
        // others a name that shares a common word with the query (`search`, `line`) is chance.
        let terms = if personal[id] > 0.0 {
            &query_terms
        } else {
            &no_terms
        };
        let own = own_shares(&symbols.defs, terms, file_rank[id] * OWN_RANK_SHARE);
        let factor = if file.is_test || file.is_vendored || file.is_docs {
            NON_SOURCE_FACTOR
        } else {
            1.0
        };
        for (i, def) in symbols.defs.iter().enumerate() {
            let flow = def_score
                .get(&(id as u32, def.name.as_str()))
                .copied()
                .unwrap_or(0.0);
            let mut score = (flow + own[i]) * factor;
            // A definition the query names is what the reader wants to see first.
            if mentioned.contains(def.name.as_str()) {
                score = score * 10.0 + file_rank[id];
            }
            defs.push(RankedDef {
                file: id as u32,
                def: i,
                score,
            });
        }
    }
    defs.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| {
                snap.files[a.file as usize]
                    .path
                    .cmp(&snap.files[b.file as usize].path)
            })
            .then(a.def.cmp(&b.def))
    });
    Ok(defs)
}

/// A file's own rank `total` divided among its definitions: by how many distinct `query_terms`
/// each one's name holds (`_print_Subs` for "latex printing of Subs"), or evenly when no name
/// holds one (or no terms are given). A large file the query points at then shows the few
/// definitions it is about instead of filling the budget with all of them.
fn own_shares(defs: &[crate::extract::Def], query_terms: &HashSet<&str>, total: f64) -> Vec<f64> {
    let evenly = || vec![total / defs.len().max(1) as f64; defs.len()];
    // Most files are not personalised: no names to split.
    if query_terms.is_empty() {
        return evenly();
    }
    let hits: Vec<f64> = defs
        .iter()
        .map(|def| {
            let mut found: HashSet<String> = HashSet::new();
            crate::tokenize::for_each_term(&def.name, |t| {
                if query_terms.contains(t) {
                    found.insert(t.to_string());
                }
            });
            found.len() as f64
        })
        .collect();
    let sum: f64 = hits.iter().sum();
    if sum > 0.0 {
        hits.iter().map(|h| total * h / sum).collect()
    } else {
        evenly()
    }
}

/// The length of the largest prefix of `defs` whose rendering fits `token_budget` (the
/// rendering grows with the prefix).
fn fitting(snap: &Snapshot, defs: &[RankedDef], token_budget: usize) -> usize {
    let max_chars = token_budget.saturating_mul(CHARS_PER_TOKEN);
    let (mut lo, mut hi) = (0usize, defs.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if outline(snap, &defs[..mid]).chars().count() <= max_chars {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Render chosen definitions grouped by file: files in order of their best definition, each
/// file's definitions (and the enclosing definitions of nested ones) in line order.
fn outline(snap: &Snapshot, chosen: &[RankedDef]) -> String {
    let mut order: Vec<u32> = Vec::new();
    let mut per_file: HashMap<u32, BTreeSet<usize>> = HashMap::new();
    for d in chosen {
        let set = per_file.entry(d.file).or_insert_with(|| {
            order.push(d.file);
            BTreeSet::new()
        });
        set.insert(d.def);
    }
    let mut out = String::new();
    for file_id in order {
        let file = &snap.files[file_id as usize];
        let Some(symbols) = &file.record.symbols else {
            continue;
        };
        let Some(chosen_defs) = per_file.get(&file_id) else {
            continue;
        };
        // Add enclosing definitions so a method is shown inside its class.
        let mut shown: BTreeSet<usize> = chosen_defs.clone();
        for &i in chosen_defs {
            let mut depth = symbols.defs[i].depth;
            let mut j = i;
            while depth > 0 && j > 0 {
                j -= 1;
                if symbols.defs[j].depth < depth {
                    shown.insert(j);
                    depth = symbols.defs[j].depth;
                }
            }
        }
        out.push_str(&crate::files::printable_path(&file.path));
        out.push_str(":\n");
        for i in shown {
            let def = &symbols.defs[i];
            out.push_str(&format!(
                "{:>5}: {}{}\n",
                def.line,
                "  ".repeat(def.depth as usize),
                def.signature
            ));
        }
    }
    out
}
