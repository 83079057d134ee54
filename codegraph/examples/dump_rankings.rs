//! Development aid: write every channel's top-100 ranking per instance as JSON lines, to
//! study fusion offline. Usage: dump_rankings INSTANCES.jsonl MIRRORS INDEX_DIR OUT.jsonl
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use airlock_codegraph::{Engine, eval};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let instances = eval::read_instances(&PathBuf::from(&args[1])).unwrap();
    let mirrors = PathBuf::from(&args[2]);
    let index_dir = PathBuf::from(&args[3]);
    let mut out = std::fs::File::create(&args[4]).unwrap();
    let mut engines: HashMap<String, Engine> = HashMap::new();
    for inst in instances {
        let engine = engines.entry(inst.repo.clone()).or_insert_with(|| {
            Engine::open(
                &eval::find_mirror(&mirrors, &inst.repo).unwrap(),
                &index_dir,
            )
            .unwrap()
        });
        engine.index(&inst.base_commit).unwrap();
        let t = std::time::Instant::now();
        let r = engine
            .channel_rankings(&inst.base_commit, &inst.problem_statement, 100)
            .unwrap();
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let line = serde_json::json!({
            "id": inst.instance_id, "gold": eval::gold_files(&inst.patch), "ms": ms,
            "lexical": r.lexical, "structural": r.structural, "symbol": r.symbol, "fused": r.fused,
        });
        writeln!(out, "{line}").unwrap();
        eprintln!("{} {:.1} ms", inst.instance_id, ms);
    }
}
