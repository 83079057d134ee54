//! The labelled corpora of `bench/injection/`: the detector's recall on the set its rules were
//! written against and no flag on any of its benign near-misses. The held-out set
//! (`bench/injection/heldout/`, written separately and never tuned against) is measured by
//! `airlock eval injection` and reported in bench/README.md, not asserted here.

use airlock_audit::{InjectionEval, evaluate, load_labelled};
use std::path::PathBuf;

fn corpus(name: &str) -> InjectionEval {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/injection")
        .join(name);
    let items = load_labelled(&dir).unwrap_or_else(|e| panic!("{e}"));
    evaluate(&items)
}

fn describe(r: &InjectionEval) -> String {
    let mut out = format!(
        "recall {}/{}; benign flagged {}/{}\n",
        r.injections.right,
        r.injections.items,
        r.benign.items - r.benign.right,
        r.benign.items
    );
    for m in &r.missed {
        out.push_str(&format!(
            "  missed {} ({}, {})\n",
            m.id, m.language, m.place
        ));
    }
    for m in &r.false_positives {
        for f in &m.findings {
            out.push_str(&format!(
                "  false positive {}:{} {}: {}\n",
                m.id, f.line, f.rule, f.excerpt
            ));
        }
    }
    out
}

#[test]
fn the_corpus_is_large_and_varied_enough() {
    let r = corpus("corpus");
    assert!(r.injections.items >= 300, "{}", r.injections.items);
    assert!(r.by_category.len() >= 16, "{:?}", r.by_category.keys());
    let other_languages = r.by_language.keys().filter(|l| *l != "en").count();
    assert!(other_languages >= 6, "{:?}", r.by_language.keys());
    assert!(r.benign.items >= 60, "{}", r.benign.items);
}

/// Recall measured when this floor was set (340 of 355); above the issue's target of 0.95 on
/// this set (the held-out set, never tuned against, is far lower). The floor only rises: a
/// change that loses recall on the corpus fails here.
const RECALL_FLOOR: f64 = 0.955;

#[test]
fn recall_holds_its_floor_and_no_benign_item_is_flagged() {
    let r = corpus("corpus");
    let report = describe(&r);
    println!("{report}");
    assert!(r.injections.rate() >= RECALL_FLOOR, "{report}");
    assert!(r.false_positives.is_empty(), "{report}");
}

/// Borderline spans are a by-product of the same scan: they never change the findings, and on
/// the corpora they stay few on benign text while covering some of what the rules miss. The
/// figures are printed (and reported in bench/README.md), not asserted beyond "bounded".
#[test]
fn borderline_spans_leave_findings_alone_and_stay_few_on_benign_text() {
    use airlock_audit::{Expect, ItemSource, SourceKind, detect, screen};
    for name in ["corpus", "heldout"] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../bench/injection")
            .join(name);
        let items = load_labelled(&dir).unwrap();
        let (mut benign, mut benign_with, mut benign_spans) = (0, 0, 0);
        let (mut missed, mut missed_with) = (0, 0);
        for item in &items {
            let kind = match item.source {
                ItemSource::File => SourceKind::File,
                ItemSource::Issue => SourceKind::IssueBody,
            };
            let s = screen(&item.text, kind, Some(&item.path));
            assert_eq!(s.findings, detect(&item.text, kind, Some(&item.path)));
            for b in &s.borderline {
                assert!(
                    !s.findings.iter().any(|f| f.line == b.line),
                    "{}: borderline on a flagged line {}",
                    item.id,
                    b.line
                );
            }
            match item.expect {
                Expect::Clean => {
                    benign += 1;
                    benign_spans += s.borderline.len();
                    benign_with += usize::from(!s.borderline.is_empty());
                }
                _ if s.findings.is_empty() => {
                    missed += 1;
                    missed_with += usize::from(!s.borderline.is_empty());
                }
                _ => {}
            }
        }
        println!(
            "{name}: benign items with a borderline span {benign_with}/{benign} \
             ({benign_spans} spans); missed injections with one {missed_with}/{missed}"
        );
        assert!(
            benign_spans <= benign,
            "{name}: {benign_spans} spans on {benign} benign items"
        );
    }
}
