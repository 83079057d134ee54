//! Development aid: the retrieval evaluation without the operator CLI (for a release build of
//! this crate alone). Usage: eval_summary INSTANCES.jsonl MIRRORS
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use airlock_codegraph::eval;
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let options = eval::EvalOptions {
        instances: PathBuf::from(&args[1]),
        mirrors: PathBuf::from(&args[2]),
        index_dir: None,
        limit: None,
    };
    let report = eval::run(&options, &mut |r| {
        eprintln!(
            "{}: fused first gold rank {:?}; index {:.0} ms ({} new blobs); query {:.1} ms",
            r.instance_id, r.first_gold_rank["fused"], r.index_ms, r.blobs_new, r.query_ms
        );
    })
    .unwrap();
    for (name, m) in &report.channels {
        println!(
            "{name:<11} r@1 {:.3} r@5 {:.3} r@10 {:.3} MRR {:.3}",
            m.recall_at_1, m.recall_at_5, m.recall_at_10, m.mrr
        );
    }
    println!(
        "full index p50 {:.0} ms; incremental p50 {:.0} ms; query p50 {:.1} ms (max {:.1} ms)",
        report.full_index_ms_p50,
        report.incremental_index_ms_p50,
        report.query_ms_p50,
        report.query_ms_max
    );
}
