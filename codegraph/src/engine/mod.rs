//! The engine: indexing a commit (incrementally, by blob id), searching it through the
//! lexical, structural and symbol channels fused by RRF, and handing snapshots to the map.
//!
//! Layering, lowest first; a module imports only from those listed before it:
//! - `git`: opening the repository, resolving revisions, walking a commit's tree.
//! - `snapshot`: one commit's searchable files, their BM25 index and symbol tables.
//! - `ranking`: the three channels of a query on a snapshot, fused by RRF.
//! - `hit_window`: the window of lines a hit shows and the definition it lies in.
//! - `handle`: the [`Engine`] value and opening it.
//! - `indexing`: extracting blob records, writing a commit's manifest, loading its snapshot.
//! - `proximity`: the proximity stage over the top fused files' blobs.
//! - this file: the query API ([`Engine::search`], [`Engine::channel_rankings`]) and its
//!   result types. The repo map ([`Engine::repo_map`]) is `crate::map`'s, which reads the
//!   snapshots this module hands out; nothing here calls the map.

mod git;
mod handle;
mod hit_window;
mod indexing;
mod proximity;
mod ranking;
mod snapshot;

pub(crate) use git::{open_repository, resolve_reason, walk_tree};
pub use handle::Engine;
pub use hit_window::WINDOW_LINES;
use hit_window::best_window;
pub use indexing::{IndexProgress, IndexStats};
pub use proximity::{PROXIMITY_DEPTH, PROXIMITY_LINES, PROXIMITY_WEIGHT};
use proximity::{scan_blob, term_matcher};
pub use ranking::{CHANNEL_WEIGHTS, DOCS_FACTOR, TEST_FACTOR, VENDORED_FACTOR};
pub(crate) use ranking::{rank, symbol_scores};
pub(crate) use snapshot::Snapshot;

use crate::Result;
use crate::files::Language;
use crate::query::QueryAnalysis;
use serde::{Deserialize, Serialize};

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Path relative to the repository root.
    pub path: String,
    /// Fused score (RRF, after the test/vendored/docs factors); higher is better.
    pub score: f64,
    /// 1-based rank in the lexical (BM25 over text and path) channel, if ranked there.
    pub lexical_rank: Option<u32>,
    /// 1-based rank in the structural (BM25 over signatures, docs, imports, calls) channel.
    pub structural_rank: Option<u32>,
    /// 1-based rank in the symbol channel (paths, modules and defined names the query names).
    pub symbol_rank: Option<u32>,
    /// 1-based rank in the proximity stage (the top fused files re-ranked by their densest
    /// window of query terms), if the file was among them and holds a query term.
    #[serde(default)]
    pub proximity_rank: Option<u32>,
    /// First line of the best-matching window, 1-based.
    pub line_start: u32,
    /// Last line of the best-matching window, 1-based, inclusive.
    pub line_end: u32,
    /// The definition the window starts in, dotted from the outermost (`Rule_L031._eval`),
    /// when the window starts inside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Language with a structural channel, if any.
    pub language: Option<Language>,
    /// The file is a test file.
    pub is_test: bool,
    /// The file is vendored or third-party.
    pub is_vendored: bool,
}

/// Each channel's ranking of a query, best first (paths), for evaluation and debugging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelRankings {
    /// Lexical channel.
    pub lexical: Vec<String>,
    /// Structural channel.
    pub structural: Vec<String>,
    /// Symbol channel.
    pub symbol: Vec<String>,
    /// Proximity stage (only files among the first-stage fused top [`PROXIMITY_DEPTH`]).
    pub proximity: Vec<String>,
    /// Fused ranking (what [`Engine::search`] returns).
    pub fused: Vec<String>,
}

impl Engine {
    /// Make sure a commit is indexed and loaded, so the next queries on it are fast.
    pub fn prepare(&mut self, commit: &str) -> Result<()> {
        self.snapshot(commit).map(|_| ())
    }

    /// Search a commit with the fused channels; at most `k` hits, best first, ties by path.
    /// Indexes the commit first if it was never indexed.
    pub fn search(&mut self, commit: &str, query: &str, k: usize) -> Result<Vec<Hit>> {
        let snap = self.snapshot(commit)?;
        let analysis = QueryAnalysis::new(query);
        let matcher = term_matcher(&snap, &analysis);
        let (ranked, mut scanned) = self.rank_with_proximity(&snap, &analysis, &matcher)?;
        let mut hits = Vec::new();
        for &(doc, score) in ranked.fused.iter().take(k) {
            let file = &snap.files[doc as usize];
            let occurrences = scanned
                .remove(&doc)
                .or_else(|| scan_blob(&self.repo, file, &matcher));
            let ((line_start, line_end), symbol) =
                best_window(file, &analysis, &matcher, occurrences);
            let position = |list: &[u32]| list.iter().position(|&d| d == doc).map(|p| p as u32 + 1);
            hits.push(Hit {
                path: file.path.clone(),
                score,
                lexical_rank: position(&ranked.lexical),
                structural_rank: position(&ranked.structural),
                symbol_rank: position(&ranked.symbol),
                proximity_rank: position(&ranked.proximity),
                line_start,
                line_end,
                symbol,
                language: file.language,
                is_test: file.is_test,
                is_vendored: file.is_vendored,
            });
        }
        Ok(hits)
    }

    /// Every channel's ranking of a query (paths, at most `depth` each), for evaluation.
    pub fn channel_rankings(
        &mut self,
        commit: &str,
        query: &str,
        depth: usize,
    ) -> Result<ChannelRankings> {
        let snap = self.snapshot(commit)?;
        let analysis = QueryAnalysis::new(query);
        let matcher = term_matcher(&snap, &analysis);
        let (ranked, _) = self.rank_with_proximity(&snap, &analysis, &matcher)?;
        let paths = |list: &[u32]| -> Vec<String> {
            list.iter()
                .take(depth)
                .map(|&d| snap.files[d as usize].path.clone())
                .collect()
        };
        let fused: Vec<u32> = ranked.fused.iter().map(|&(d, _)| d).collect();
        Ok(ChannelRankings {
            lexical: paths(&ranked.lexical),
            structural: paths(&ranked.structural),
            symbol: paths(&ranked.symbol),
            proximity: paths(&ranked.proximity),
            fused: paths(&fused),
        })
    }
}
