//! airlock-gate-sdk: write one of the organisation's gates in Rust.
//!
//! A gate implements [`Gate`] (one function: a [`Request`] in, a [`Verdict`] out) and exports
//! it with [`export_gate!`]; `cargo build --target wasm32-wasip2 --release` makes the component
//! `airlock-broker` loads (`[[repositories.NAME.gates]]`) and `airlock-broker gate test` runs.
//! The bindings come from the same WIT file as the broker's host (`gates/wit/gate.wit`).
//!
//! ```ignore
//! use airlock_gate_sdk::{Gate, Request, Verdict, export_gate, starts_with_dir};
//!
//! struct VendorFreeze;
//!
//! impl Gate for VendorFreeze {
//!     fn check(request: Request) -> Verdict {
//!         match request.files.iter().find(|f| starts_with_dir(&f.path, "vendor")) {
//!             Some(f) => Verdict::Deny(format!("vendor/ is frozen: {}", f.path)),
//!             None => Verdict::Allow,
//!         }
//!     }
//! }
//!
//! export_gate!(VendorFreeze);
//! ```
//!
//! A gate can read the changed files, and nothing else: [`read_base`] and [`read_patched`]
//! (`/base` and `/patched`, preopened read-only). It has no network, no environment, no
//! arguments, a clock fixed at 2000-01-01 and deterministic random bytes; it runs with a fuel
//! budget, a memory cap and a timeout, and anything that stops it (a panic, an endless loop) is
//! a deny. The crate builds on the host too, so its helpers are tested there; only a
//! `wasm32-wasip2` build is a gate.

// The bindings `wit-bindgen` generates implement the component model's canonical ABI, which is
// `unsafe` by nature (raw pointers handed over by the host); no hand-written code here is.
// `export_gate!` (exported at the crate's root) names this module from the gate's crate.
#[doc(hidden)]
#[allow(unsafe_code, missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../gates/wit",
        world: "gate",
        pub_export_macro: true,
        export_macro_name: "export_gate",
        default_bindings_module: "airlock_gate_sdk::bindings",
    });
}

pub use bindings::Guest as Gate;
pub use bindings::airlock::gate::types::{ChangeStatus, ChangedFile, Digest, Request, Verdict};
pub use bindings::export_gate;

use std::path::Path;

/// Where the pinned side of the changed files is preopened.
pub const BASE_TREE: &str = "/base";
/// Where the patched side of the changed files is preopened.
pub const PATCHED_TREE: &str = "/patched";

/// The file `path` as it is at the pinned commit; `None` when it is added (or unreadable).
pub fn read_base(path: &str) -> Option<Vec<u8>> {
    std::fs::read(Path::new(BASE_TREE).join(path)).ok()
}

/// The file `path` as the run left it; `None` when it is deleted (or unreadable).
pub fn read_patched(path: &str) -> Option<Vec<u8>> {
    std::fs::read(Path::new(PATCHED_TREE).join(path)).ok()
}

/// Whether `path` lies under the top-level directory `dir` (`vendor/x.c` is under `vendor`,
/// `docs/vendor/x` is not).
pub fn starts_with_dir(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether one of `path`'s directories, at any depth, is named `dir`
/// (`shop/migrations/0001.py` has `migrations`; `docs/migrations.md` has not).
pub fn has_dir(path: &str, dir: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    parts.pop();
    parts.contains(&dir)
}

/// How many lines of `text` start a public function at the top level: `pub fn ` (Rust) or
/// `def ` (Python) at the start of the line.
pub fn public_functions(text: &str) -> usize {
    text.lines()
        .filter(|line| line.starts_with("pub fn ") || line.starts_with("def "))
        .count()
}

impl Request {
    /// The changed files that are not deleted (they have a patched side).
    pub fn present_files(&self) -> impl Iterator<Item = &ChangedFile> {
        self.files
            .iter()
            .filter(|f| f.status != ChangeStatus::Deleted)
    }

    /// Whether the change includes `path`.
    pub fn changes(&self, path: &str) -> bool {
        self.files.iter().any(|f| f.path == path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(files: &[(&str, ChangeStatus)]) -> Request {
        Request {
            repository: "acme/widgets".into(),
            issue_id: "W-1".into(),
            base_commit: "a".repeat(40),
            title: "fix: x".into(),
            body: String::new(),
            scope: "source-only".into(),
            test_change_reason: "none".into(),
            before_failing_test: String::new(),
            digest: Digest {
                files_changed: files.iter().map(|(p, _)| (*p).to_owned()).collect(),
                insertions: 0,
                deletions: 0,
                test_files_added: vec![],
                test_files_modified: vec![],
                assertions_removed: 0,
                skip_markers_added: 0,
            },
            files: files
                .iter()
                .map(|(p, s)| ChangedFile {
                    path: (*p).to_owned(),
                    status: *s,
                })
                .collect(),
        }
    }

    #[test]
    fn directories_at_the_top_and_at_any_depth() {
        assert!(starts_with_dir("vendor/x.c", "vendor"));
        assert!(!starts_with_dir("docs/vendor/x", "vendor"));
        assert!(!starts_with_dir("vendored/x", "vendor"));
        assert!(!starts_with_dir("vendor", "vendor"));
        assert!(has_dir("shop/migrations/0001.py", "migrations"));
        assert!(has_dir("migrations/0001.sql", "migrations"));
        assert!(!has_dir("docs/migrations.md", "migrations"));
        assert!(!has_dir("src/my_migrations/mod.rs", "migrations"));
    }

    #[test]
    fn public_functions_are_top_level_pub_fn_and_def_lines() {
        let text = "pub fn a() {}\nfn b() {}\nimpl X {\n    pub fn c() {}\n}\ndef d():\n    def e(): pass\n";
        assert_eq!(public_functions(text), 2);
        assert_eq!(public_functions(""), 0);
    }

    #[test]
    fn a_request_lists_its_present_files() {
        let r = request(&[
            ("a.rs", ChangeStatus::Modified),
            ("b.rs", ChangeStatus::Deleted),
            ("CHANGELOG.md", ChangeStatus::Added),
        ]);
        let present: Vec<&str> = r.present_files().map(|f| f.path.as_str()).collect();
        assert_eq!(present, ["a.rs", "CHANGELOG.md"]);
        assert!(r.changes("CHANGELOG.md") && !r.changes("c.rs"));
    }

    #[test]
    fn the_trees_are_read_from_their_preopens() {
        // On the host there are no /base and /patched: nothing is read.
        assert_eq!(read_base("surely/not/here"), None);
        assert_eq!(read_patched("surely/not/here"), None);
    }
}
