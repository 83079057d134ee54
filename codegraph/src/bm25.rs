//! Okapi BM25 over in-memory postings, with the statistics of exactly one commit's files.
//!
//! Documents are numbered 0..n in path order, so ties broken by document number are ties
//! broken by path.

use std::collections::HashMap;

/// Term-frequency saturation.
pub const K1: f64 = 1.2;
/// Length normalisation.
pub const B: f64 = 0.75;

/// An inverted index over documents given as term-frequency lists.
#[derive(Debug, Default)]
pub struct Bm25 {
    postings: HashMap<String, Vec<(u32, u32)>>,
    doc_len: Vec<u32>,
    avg_len: f64,
}

impl Bm25 {
    /// Build from one term-frequency list per document (document id = position).
    pub fn build<'a, I, T>(docs: I) -> Bm25
    where
        I: IntoIterator<Item = T>,
        T: IntoIterator<Item = (&'a str, u32)>,
    {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut doc_len = Vec::new();
        for (doc, terms) in docs.into_iter().enumerate() {
            let mut len = 0u32;
            for (term, tf) in terms {
                if tf == 0 {
                    continue;
                }
                len += tf;
                match postings.get_mut(term) {
                    // The same term twice in one document (text and path): one posting.
                    Some(list) => match list.last_mut() {
                        Some(last) if last.0 == doc as u32 => last.1 += tf,
                        _ => list.push((doc as u32, tf)),
                    },
                    None => {
                        postings.insert(term.to_string(), vec![(doc as u32, tf)]);
                    }
                }
            }
            doc_len.push(len);
        }
        let total: u64 = doc_len.iter().map(|&l| u64::from(l)).sum();
        let avg_len = if doc_len.is_empty() {
            0.0
        } else {
            total as f64 / doc_len.len() as f64
        };
        Bm25 {
            postings,
            doc_len,
            avg_len,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// Whether there are no documents.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// Inverse document frequency of a term (Lucene's non-negative form); 0 if unseen.
    pub fn idf(&self, term: &str) -> f64 {
        let Some(list) = self.postings.get(term) else {
            return 0.0;
        };
        let n = self.doc_len.len() as f64;
        let df = list.len() as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Score every document matching at least one query term. `query` holds (term, weight)
    /// pairs; each distinct term should appear once. Result: best first, ties by document id.
    pub fn search(&self, query: &[(String, f64)]) -> Vec<(u32, f64)> {
        // Dense accumulators: one slot per document, plus the list of documents touched.
        let mut scores = vec![0.0f64; self.doc_len.len()];
        let mut touched: Vec<u32> = Vec::new();
        for (term, weight) in query {
            let Some(list) = self.postings.get(term) else {
                continue;
            };
            let idf = self.idf(term) * weight;
            for &(doc, tf) in list {
                let tf = f64::from(tf);
                let dl = f64::from(self.doc_len[doc as usize]);
                let norm = if self.avg_len > 0.0 {
                    1.0 - B + B * dl / self.avg_len
                } else {
                    1.0
                };
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        let mut ranked: Vec<(u32, f64)> = touched
            .into_iter()
            .map(|d| (d, scores[d as usize]))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}
