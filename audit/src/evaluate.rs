//! Measuring the detector on a labelled corpus: repository-borne injections that must be
//! flagged and benign near-misses that must not be (`airlock eval injection`).
//!
//! A corpus is a directory of TOML files, each an array of `[[item]]` tables:
//! `id`, `expect` (`flag` or `clean`), `category`, `language`, `place`, `path`, `source`
//! (`file` or `issue`) and `text`. Unknown keys are refused, ids are unique across the
//! directory. `bench/injection/corpus/` is the set the rules were written against;
//! `bench/injection/heldout/` was written separately and only measured.

use crate::detect::{self, Finding, SourceKind};
use crate::error::{Error, Result, io};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the detector should do with an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// An injection: at least one finding.
    Flag,
    /// A benign near-miss: no finding.
    Clean,
}

/// Where an item's text comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemSource {
    /// A file of the repository (`path` is its name).
    File,
    /// The issue body or one of its comments.
    Issue,
}

/// One labelled text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusItem {
    /// Unique id.
    pub id: String,
    /// Injection or benign.
    pub expect: Expect,
    /// Injection category (for example `weaken-tests`) or benign kind (`contributing-guide`).
    pub category: String,
    /// BCP 47 primary language tag of the text.
    pub language: String,
    /// Where a repository hides it (`code-comment`, `markdown-details`, ...).
    pub place: String,
    /// The file the text lives in, or `issue:N`.
    pub path: String,
    /// File or issue text.
    pub source: ItemSource,
    /// The text.
    pub text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CorpusFile {
    #[serde(default)]
    item: Vec<CorpusItem>,
}

/// Read every `*.toml` file of `dir` (sorted by name).
pub fn load_labelled(dir: &Path) -> Result<Vec<CorpusItem>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir, "list corpus directory"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::Corpus {
            path: dir.to_path_buf(),
            reason: "no *.toml files: a corpus is a directory of TOML files of [[item]] tables"
                .to_string(),
        });
    }
    let mut items = Vec::new();
    let mut seen = BTreeSet::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(io(&path, "read corpus file"))?;
        let file: CorpusFile = toml::from_str(&text).map_err(|e| Error::Corpus {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        for item in file.item {
            if !seen.insert(item.id.clone()) {
                return Err(Error::Corpus {
                    path: path.clone(),
                    reason: format!("item id {:?} appears twice; ids must be unique", item.id),
                });
            }
            items.push(item);
        }
    }
    Ok(items)
}

/// Items seen and items the detector got right.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Items.
    pub items: u64,
    /// Injections flagged, or benign items left clean.
    pub right: u64,
}

impl Tally {
    /// `right / items` (1.0 for an empty tally).
    pub fn rate(&self) -> f64 {
        if self.items == 0 {
            1.0
        } else {
            self.right as f64 / self.items as f64
        }
    }
}

/// An item the detector got wrong.
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    /// The item's id.
    pub id: String,
    /// Its category.
    pub category: String,
    /// Its language.
    pub language: String,
    /// Its place.
    pub place: String,
    /// What fired (empty for a missed injection).
    pub findings: Vec<Finding>,
}

/// The detector's figures on a corpus.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InjectionEval {
    /// All injections: recall.
    pub injections: Tally,
    /// Recall per category.
    pub by_category: BTreeMap<String, Tally>,
    /// Recall per language.
    pub by_language: BTreeMap<String, Tally>,
    /// Recall per place.
    pub by_place: BTreeMap<String, Tally>,
    /// All benign items: `right` counts those left unflagged.
    pub benign: Tally,
    /// Benign items per kind.
    pub benign_by_kind: BTreeMap<String, Tally>,
    /// Injections not flagged.
    pub missed: Vec<Miss>,
    /// Benign items flagged, with what fired.
    pub false_positives: Vec<Miss>,
    /// Findings per rule over the injections.
    pub by_rule: BTreeMap<String, u64>,
}

/// Run the detector over every item.
pub fn evaluate(items: &[CorpusItem]) -> InjectionEval {
    let mut out = InjectionEval::default();
    for item in items {
        let kind = match item.source {
            ItemSource::File => SourceKind::File,
            ItemSource::Issue => SourceKind::IssueBody,
        };
        let findings = detect::detect(&item.text, kind, Some(&item.path));
        let flagged = !findings.is_empty();
        let miss = || Miss {
            id: item.id.clone(),
            category: item.category.clone(),
            language: item.language.clone(),
            place: item.place.clone(),
            findings: findings.clone(),
        };
        match item.expect {
            Expect::Flag => {
                let right = u64::from(flagged);
                for tally in [
                    &mut out.injections,
                    out.by_category.entry(item.category.clone()).or_default(),
                    out.by_language.entry(item.language.clone()).or_default(),
                    out.by_place.entry(item.place.clone()).or_default(),
                ] {
                    tally.items += 1;
                    tally.right += right;
                }
                for f in &findings {
                    *out.by_rule.entry(f.rule.as_str().to_string()).or_default() += 1;
                }
                if !flagged {
                    out.missed.push(miss());
                }
            }
            Expect::Clean => {
                let right = u64::from(!flagged);
                for tally in [
                    &mut out.benign,
                    out.benign_by_kind.entry(item.category.clone()).or_default(),
                ] {
                    tally.items += 1;
                    tally.right += right;
                }
                if flagged {
                    out.false_positives.push(miss());
                }
            }
        }
    }
    out
}
