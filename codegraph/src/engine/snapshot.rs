//! One commit's searchable state, built from stored records: its files, the BM25 index over
//! their lexical and structural documents (opened from its saved bundle when one matches), and
//! the lookup tables of the symbol channel.

use crate::files::Language;
use crate::fulltext::{EncodedDocs, FullText, TermCounts};
use crate::store::{BlobRecord, Store};
use crate::tokenize::for_each_term;
use crate::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Path terms count this many times in a file's lexical document.
pub const PATH_TERM_BOOST: u32 = 2;

/// One searchable file of a snapshot.
#[derive(Debug)]
pub(crate) struct SnapFile {
    pub path: String,
    pub blob: String,
    pub language: Option<Language>,
    pub is_test: bool,
    pub is_vendored: bool,
    pub is_docs: bool,
    pub record: Arc<BlobRecord>,
}

/// Everything needed to answer queries on one commit, built from stored records.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub commit: String,
    pub files: Vec<SnapFile>,
    /// BM25 (tantivy) over the lexical and structural channels; document id = file index.
    pub fulltext: FullText,
    /// Defined name -> files defining it (sorted ids).
    pub defs_by_name: HashMap<String, Vec<u32>>,
    /// Lowercased file stem -> files with that stem.
    pub by_stem: HashMap<String, Vec<u32>>,
    /// Each file's path components, lowercased.
    pub components: Vec<Vec<String>>,
}

pub(super) fn term_counts(text: &str) -> Vec<(String, u32)> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for_each_term(text, |t| {
        if let Some(c) = counts.get_mut(t) {
            *c += 1;
        } else {
            counts.insert(t.to_string(), 1);
        }
    });
    counts.into_iter().collect()
}

fn path_terms(path: &str) -> Vec<(String, u32)> {
    term_counts(path)
}

fn stem_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split_once('.').map_or(name, |(s, _)| s);
    stem.to_lowercase()
}

/// Build a commit's snapshot. The commit's tantivy index is opened from its saved
/// bundle when one exists for exactly these documents, and saved after a build otherwise (a
/// failure to save only costs the next process a rebuild).
pub(super) fn build_snapshot(
    store: &Store,
    commit: String,
    files: Vec<SnapFile>,
) -> Result<Snapshot> {
    let path_tf: Vec<Vec<(String, u32)>> = files.iter().map(|f| path_terms(&f.path)).collect();
    let docs = files.iter().zip(&path_tf).map(|(f, p)| {
        let record = &f.record;
        let lexical: TermCounts<'_> = record
            .lexical
            .iter()
            .map(|(t, c)| (t.as_str(), *c))
            .chain(p.iter().map(|(t, c)| (t.as_str(), c * PATH_TERM_BOOST)))
            .collect();
        let mut structural: TermCounts<'_> = record
            .structural
            .iter()
            .map(|(t, c)| (t.as_str(), *c))
            .collect();
        if record.symbols.is_some() {
            structural.extend(p.iter().map(|(t, c)| (t.as_str(), *c)));
        }
        (lexical, structural)
    });
    let encoded = EncodedDocs::new(docs);
    let load_saved = || {
        store
            .load_fulltext(&commit, encoded.digest())
            .and_then(|bundle| FullText::from_bundle(&bundle).ok())
            .filter(|fulltext| fulltext.len() == encoded.len())
    };
    // A saved index is loaded without the build lock, so runs that start together on a built
    // commit do not wait on each other; only a build takes the lock: one process builds and
    // saves, the others wait, then load what it saved.
    let fulltext = match load_saved() {
        Some(fulltext) => fulltext,
        None => {
            let _build = store.lock_build()?;
            match load_saved() {
                Some(fulltext) => fulltext,
                None => {
                    let fulltext = FullText::build_encoded(&encoded)
                        .map_err(|source| Error::FullText { source })?;
                    if let Ok(bundle) = fulltext.to_bundle() {
                        let _ = store.save_fulltext(&commit, encoded.digest(), &bundle);
                    }
                    fulltext
                }
            }
        }
    };
    let mut defs_by_name: HashMap<String, Vec<u32>> = HashMap::new();
    let mut by_stem: HashMap<String, Vec<u32>> = HashMap::new();
    for (id, file) in files.iter().enumerate() {
        let id = id as u32;
        if let Some(symbols) = &file.record.symbols {
            for def in &symbols.defs {
                let list = defs_by_name.entry(def.name.clone()).or_default();
                if list.last() != Some(&id) {
                    list.push(id);
                }
            }
        }
        by_stem.entry(stem_of(&file.path)).or_default().push(id);
    }
    let components = files.iter().map(|f| split_lower(&f.path)).collect();
    Ok(Snapshot {
        commit,
        components,
        files,
        fulltext,
        defs_by_name,
        by_stem,
    })
}

pub(super) fn split_lower(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_lowercase)
        .collect()
}
