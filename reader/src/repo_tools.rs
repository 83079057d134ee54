//! The real read tools over a checkout: the bounded reader of `airlock-checkout` and the
//! retrieval engine of `airlock-codegraph`, rendered the same way for the supervisor and the
//! reader so both see identical text for identical calls.

use crate::tools::{ReadRefused, ReaderTools, RefusalClass};
use airlock_checkout::{BoundedReader, ReadOutcome, ReadRefusal};
use airlock_codegraph::files::printable_path;
use airlock_codegraph::{Engine, Hit};
use std::path::Path;
use std::sync::Mutex;

/// Render a bounded read for a model: a header line, then each line as `N| text`.
pub fn render_read(out: &ReadOutcome) -> String {
    let mut text = format!(
        "{} lines {}-{} of {}{}\n",
        out.path,
        out.line_start,
        out.line_end,
        out.line_count,
        if out.truncated {
            " (cut at the 10 KB read cap: read on from the last line shown)"
        } else {
            ""
        }
    );
    for (i, line) in out.content.lines().enumerate() {
        let n = u64::from(out.line_start) + i as u64;
        text.push_str(&format!("{n}| {line}\n"));
    }
    text
}

/// What [`render_hits`] shows for an empty result.
pub const NO_HITS: &str = "no hits";

/// Render search hits for a model, one per line: `path:start-end score ... [test]`. The one
/// renderer of hits: the supervisor and the reader hand a model exactly this text, and nothing
/// parses it back (the hits travel typed).
pub fn render_hits(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return NO_HITS.to_string();
    }
    let mut text = String::new();
    for (i, h) in hits.iter().enumerate() {
        text.push_str(&render_hit(i + 1, h));
        text.push('\n');
    }
    text
}

/// One line of [`render_hits`] (without its newline): the hit at 1-based `rank`.
pub fn render_hit(rank: usize, h: &Hit) -> String {
    let within = h
        .symbol
        .as_deref()
        .map_or(String::new(), |s| format!(" in {}", printable_path(s)));
    format!(
        "{rank}. {}:{}-{}{} score {:.4}{}{}",
        h.path,
        h.line_start,
        h.line_end,
        within,
        h.score,
        if h.is_test { " [test]" } else { "" },
        if h.is_vendored { " [vendored]" } else { "" },
    )
}

/// Read lines `start..=end` of a file through the bounded reader, typed (render it with
/// [`render_read`] at the edge); the refusal's code and text on failure.
pub fn read_window(
    reader: &BoundedReader,
    path: &str,
    start: usize,
    end: usize,
) -> Result<ReadOutcome, (String, String)> {
    bounded_window(reader, path, start, end)
        .map_err(|refusal| (refusal.code().as_str().to_string(), refusal.to_string()))
}

/// Lines `start..=end` of a file through the bounded reader, its typed refusal on failure.
fn bounded_window(
    reader: &BoundedReader,
    path: &str,
    start: usize,
    end: usize,
) -> Result<ReadOutcome, ReadRefusal> {
    let start = u32::try_from(start).unwrap_or(u32::MAX);
    let end = u32::try_from(end).unwrap_or(u32::MAX);
    reader.read(path, Some((start, end)))
}

/// Search and map over one pinned commit of a repository.
pub struct CodegraphSearch {
    engine: Mutex<Engine>,
    commit: String,
}

impl CodegraphSearch {
    /// Open the engine over `repo` (a worktree or a `.git` directory) with its index under
    /// `index_dir`, for `commit`; the index is the one named `index_key` when given (a run's
    /// worktree shares its mirror's index: see [`Engine::open_keyed`]), else `repo`'s own.
    pub fn open(
        repo: &Path,
        index_dir: &Path,
        index_key: Option<&str>,
        commit: &str,
    ) -> Result<Self, String> {
        let engine = match index_key {
            Some(key) => Engine::open_keyed(repo, index_dir, key),
            None => Engine::open(repo, index_dir),
        }
        .map_err(|e| e.to_string())?;
        Ok(CodegraphSearch {
            engine: Mutex::new(engine),
            commit: commit.to_string(),
        })
    }

    /// Index the commit now (incremental), so later searches do not write the index.
    pub fn prepare(&self) -> Result<(), String> {
        let mut engine = self
            .engine
            .lock()
            .map_err(|_| "search engine poisoned".to_string())?;
        engine.prepare(&self.commit).map_err(|e| e.to_string())
    }

    /// Ranked hits, typed (render them with [`render_hits`] at the edge that shows them).
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, String> {
        let mut engine = self
            .engine
            .lock()
            .map_err(|_| "search engine poisoned".to_string())?;
        engine
            .search(&self.commit, query, limit)
            .map_err(|e| e.to_string())
    }

    /// The repository map within about `token_budget` tokens, personalised by `query`.
    pub fn repo_map(&self, query: &str, token_budget: usize) -> Result<String, String> {
        let mut engine = self
            .engine
            .lock()
            .map_err(|_| "search engine poisoned".to_string())?;
        engine
            .repo_map(&self.commit, query, token_budget)
            .map_err(|e| e.to_string())
    }
}

/// How a path names a file of a reference repository (an exemplar the agent reads, never
/// edits): `@reference/<slug>/<path>`. The one spelling of the prefix.
pub const REFERENCE_PREFIX: &str = "@reference/";

/// `@reference/<slug>/<path>` split into slug and path; `None` for any other path.
pub fn split_reference_path(path: &str) -> Option<(&str, &str)> {
    let rest = path
        .trim_start_matches("./")
        .trim_start_matches('/')
        .strip_prefix(REFERENCE_PREFIX)?;
    let (slug, inner) = rest.split_once('/')?;
    (!slug.is_empty() && !inner.is_empty()).then_some((slug, inner))
}

/// The reader's tools over a checkout: bounded reads and codegraph search, nothing else; and
/// bounded reads of the run's reference repositories (`@reference/<slug>/<path>`).
pub struct CheckoutTools {
    reader: BoundedReader,
    search: CodegraphSearch,
    references: Vec<(String, BoundedReader)>,
}

impl CheckoutTools {
    /// Tools over the checkout at `root` pinned at `commit`, with the index under `index_dir`
    /// (the one named `index_key` when given, see [`CodegraphSearch::open`]).
    pub fn open(
        root: &Path,
        index_dir: &Path,
        index_key: Option<&str>,
        commit: &str,
    ) -> Result<Self, String> {
        let reader = BoundedReader::open(root).map_err(|e| e.to_string())?;
        let search = CodegraphSearch::open(root, index_dir, index_key, commit)?;
        Ok(CheckoutTools {
            reader,
            search,
            references: Vec::new(),
        })
    }

    /// Add the reference repository `slug`, materialised at `root`, to what `read_file`
    /// reads (as `@reference/<slug>/<path>`).
    pub fn with_reference(mut self, slug: &str, root: &Path) -> Result<Self, String> {
        let valid = !slug.is_empty()
            && slug
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !slug.starts_with('.');
        if !valid {
            return Err(format!(
                "reference slug {slug:?}: use letters, digits, `-`, `_` and `.`, not first"
            ));
        }
        if self.references.iter().any(|(s, _)| s == slug) {
            return Err(format!("reference slug {slug:?} is given twice"));
        }
        let reader = BoundedReader::open(root)
            .map_err(|e| format!("reference {slug} at {}: {e}", root.display()))?;
        self.references.push((slug.to_owned(), reader));
        Ok(self)
    }
}

impl ReaderTools for CheckoutTools {
    fn search(&self, query: &str, limit: usize) -> Result<String, String> {
        // The worker's model is the edge: the hits are rendered here, once.
        self.search
            .search(query, limit)
            .map(|hits| render_hits(&hits))
    }

    fn read_lines(&self, path: &str, start: usize, end: usize) -> Result<ReadOutcome, ReadRefused> {
        let Some((slug, inner)) = split_reference_path(path) else {
            return Ok(bounded_window(&self.reader, path, start, end)?);
        };
        let Some((_, reader)) = self.references.iter().find(|(s, _)| s == slug) else {
            let known: Vec<&str> = self.references.iter().map(|(s, _)| s.as_str()).collect();
            let class = RefusalClass::UnknownReference;
            return Err(ReadRefused::new(
                class,
                format!(
                    "{class}: no reference repository `{slug}`; {}",
                    if known.is_empty() {
                        "this run has none".to_owned()
                    } else {
                        format!("this run has {}", known.join(", "))
                    }
                ),
            ));
        };
        let mut read = bounded_window(reader, inner, start, end)?;
        read.path = format!("{REFERENCE_PREFIX}{slug}/{}", read.path);
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_paths_split_into_slug_and_path_and_nothing_else_does() {
        assert_eq!(
            split_reference_path("@reference/svc/src/a.js"),
            Some(("svc", "src/a.js"))
        );
        assert_eq!(
            split_reference_path("./@reference/svc/a"),
            Some(("svc", "a"))
        );
        assert_eq!(split_reference_path("@reference/svc/"), None);
        assert_eq!(split_reference_path("@reference/svc"), None);
        assert_eq!(split_reference_path("src/@reference/svc/a"), None);
    }
}
