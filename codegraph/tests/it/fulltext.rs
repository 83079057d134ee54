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

fn every_search(index: &FullText) -> Vec<Vec<(u32, f64)>> {
    let queries = [
        q(&[("cart", 1.0)]),
        q(&[("parse", 2.0), ("header", 1.0)]),
        q(&[("total", 0.5), ("cart", 1.5), ("missing", 1.0)]),
    ];
    let mut out = Vec::new();
    for channel in [Channel::Lexical, Channel::Structural] {
        for query in &queries {
            out.push(index.search(channel, query).unwrap());
        }
    }
    out
}

#[test]
fn a_saved_bundle_opens_to_the_same_index() {
    let built = FullText::build(docs()).unwrap();
    let bundle = built.to_bundle().unwrap();
    let opened = FullText::from_bundle(&bundle).unwrap();
    assert_eq!(opened.len(), built.len());
    assert_eq!(every_search(&opened), every_search(&built));
    for term in ["cart", "parse", "header", "total", "missing"] {
        for channel in [Channel::Lexical, Channel::Structural] {
            assert_eq!(
                opened.idf(channel, term),
                built.idf(channel, term),
                "{term}"
            );
        }
    }
    // The bundle of the reopened index is the same bytes: nothing was lost on the way.
    assert_eq!(opened.to_bundle().unwrap(), bundle);
    // An empty index round-trips too.
    let empty = FullText::build(Vec::new()).unwrap();
    let reopened = FullText::from_bundle(&empty.to_bundle().unwrap()).unwrap();
    assert!(reopened.is_empty());
}

#[test]
fn a_damaged_bundle_is_an_error_not_a_panic() {
    let bundle = FullText::build(docs()).unwrap().to_bundle().unwrap();
    let foreign = b"not a bundle at all".to_vec();
    let mut wrong_version = bundle.clone();
    wrong_version[0] ^= 0xff;
    let mut with_path = bundle.clone();
    // The first file name (after the magic line and its 4-byte length) gets a '/'.
    let magic = bundle.iter().position(|&b| b == b'\n').unwrap() + 1;
    with_path[magic + 4] = b'/';
    let mut cases = vec![
        ("foreign", foreign),
        ("wrong version", wrong_version),
        ("a file name with a path", with_path),
        ("magic only", bundle[..magic].to_vec()),
    ];
    for cut in [magic + 2, magic + 6, bundle.len() / 2, bundle.len() - 1] {
        cases.push(("truncated", bundle[..cut].to_vec()));
    }
    for (what, bytes) in cases {
        let err = FullText::from_bundle(&bytes).err();
        assert!(err.is_some(), "{what}: a damaged bundle was accepted");
    }
    let mut flipped = bundle.clone();
    let middle = bundle.len() / 2;
    flipped[middle] ^= 0x55;
    // A flipped byte inside a segment file may or may not be detected by tantivy; it must not
    // panic either way.
    let _ = std::panic::catch_unwind(|| FullText::from_bundle(&flipped).map(|f| f.len()))
        .expect("no panic on a flipped byte");
}
