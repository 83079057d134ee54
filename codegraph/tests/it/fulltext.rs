//! The tantivy BM25 index: the term-frequency tokenizer, Okapi BM25 scores, document ids in
//! insertion (path) order, ties, weights and per-channel statistics.

use airlock_codegraph::fulltext::{Channel, FullText, TermCounts, TermFrequencyTokenizer};
use tantivy::tokenizer::{TokenStream, Tokenizer};

fn q(terms: &[(&str, f64)]) -> Vec<(String, f64)> {
    terms.iter().map(|(t, w)| (t.to_string(), *w)).collect()
}

/// Okapi BM25 with k1 = 1.2, b = 0.75 and Lucene's idf, computed by hand.
fn bm25(tf: f64, doc_len: f64, avg_len: f64, df: f64, n: f64) -> f64 {
    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * doc_len / avg_len))
}

fn docs() -> Vec<(TermCounts<'static>, TermCounts<'static>)> {
    vec![
        // 0: lexical "parse" x3, "header" x1 (4 tokens); structural "parse" x1.
        (vec![("parse", 3), ("header", 1)], vec![("parse", 1)]),
        // 1: lexical "header" x2, "cart" x2 (4 tokens); no structure.
        (vec![("header", 2), ("cart", 2)], vec![]),
        // 2: lexical "cart" x1 plus "cart" x2 again (a path term): one posting, tf 3.
        (
            vec![("cart", 1), ("total", 5), ("cart", 2)],
            vec![("cart", 4)],
        ),
    ]
}

#[test]
fn the_tokenizer_emits_each_term_as_often_as_it_was_counted() {
    let mut tokenizer = TermFrequencyTokenizer;
    let mut stream = tokenizer.token_stream("parse\t3\nheader\t1\nbad line\nzero\t0\n");
    let mut seen = Vec::new();
    while let Some(token) = stream.next() {
        seen.push(token.text.clone());
    }
    assert_eq!(seen, ["parse", "parse", "parse", "header"]);
}

#[test]
fn scores_are_okapi_bm25_over_the_given_term_counts() {
    let index = FullText::build(docs()).unwrap();
    assert_eq!(index.len(), 3);
    // Lexical lengths 4, 4, 8: average 16/3 (short fields: tantivy's field norms are exact).
    let avg = 16.0 / 3.0;
    let hits = index
        .search(Channel::Lexical, &q(&[("cart", 1.0)]))
        .unwrap();
    let expected_2 = bm25(3.0, 8.0, avg, 2.0, 3.0);
    let expected_1 = bm25(2.0, 4.0, avg, 2.0, 3.0);
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2]);
    assert!(
        (hits[0].1 - expected_1).abs() < 1e-4,
        "{hits:?} vs {expected_1}"
    );
    assert!(
        (hits[1].1 - expected_2).abs() < 1e-4,
        "{hits:?} vs {expected_2}"
    );
    assert!((index.idf(Channel::Lexical, "cart") - (1.0f64 + 1.5 / 2.5).ln()).abs() < 1e-9);
    assert_eq!(index.idf(Channel::Lexical, "unseen"), 0.0);
}

#[test]
fn query_weights_multiply_a_terms_contribution() {
    let index = FullText::build(docs()).unwrap();
    let one = index
        .search(Channel::Lexical, &q(&[("parse", 1.0)]))
        .unwrap();
    let two = index
        .search(Channel::Lexical, &q(&[("parse", 2.0)]))
        .unwrap();
    assert_eq!(one[0].0, 0);
    assert!((two[0].1 - 2.0 * one[0].1).abs() < 1e-4);
    // Non-positive weights and unknown terms add nothing.
    assert!(
        index
            .search(Channel::Lexical, &q(&[("parse", 0.0), ("nothing", 1.0)]))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn channels_keep_their_own_statistics() {
    let index = FullText::build(docs()).unwrap();
    let structural = index
        .search(Channel::Structural, &q(&[("cart", 1.0), ("parse", 1.0)]))
        .unwrap();
    // Document 1 has no structural text; "header" exists only in the lexical field.
    assert_eq!(
        structural.iter().map(|h| h.0).collect::<Vec<_>>(),
        [2, 0],
        "{structural:?}"
    );
    assert!(
        index
            .search(Channel::Structural, &q(&[("header", 1.0)]))
            .unwrap()
            .is_empty()
    );
    // Structural lengths 1, 0, 4 over three documents.
    let avg = 5.0 / 3.0;
    let expected = bm25(4.0, 4.0, avg, 1.0, 3.0);
    assert!((structural[0].1 - expected).abs() < 1e-4);
}

#[test]
fn ties_are_broken_by_document_id_and_builds_are_deterministic() {
    let same: Vec<(TermCounts<'static>, TermCounts<'static>)> = (0..50)
        .map(|i| {
            let filler: &'static str = if i % 2 == 0 { "even" } else { "odd" };
            (vec![("shared", 2), (filler, 3)], vec![])
        })
        .collect();
    let first = FullText::build(same.clone()).unwrap();
    let hits = first
        .search(Channel::Lexical, &q(&[("shared", 1.0)]))
        .unwrap();
    assert_eq!(
        hits.iter().map(|h| h.0).collect::<Vec<_>>(),
        (0..50).collect::<Vec<u32>>()
    );
    let second = FullText::build(same).unwrap();
    let query = q(&[("shared", 1.0), ("odd", 0.5)]);
    assert_eq!(
        first.search(Channel::Lexical, &query).unwrap(),
        second.search(Channel::Lexical, &query).unwrap()
    );
}

#[test]
fn an_empty_index_finds_nothing() {
    let index = FullText::build(Vec::new()).unwrap();
    assert!(index.is_empty());
    assert!(
        index
            .search(Channel::Lexical, &q(&[("x", 1.0)]))
            .unwrap()
            .is_empty()
    );
}
