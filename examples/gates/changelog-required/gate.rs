//! Gate "changelog-required", with the Rust SDK: the same rule as gate.wat beside it. Build it
//! with `cargo build -p airlock-gate-sdk --example changelog-required --target wasm32-wasip2
//! --release`.

use airlock_gate_sdk::{
    ChangeStatus, Gate, Request, Verdict, export_gate, public_functions, read_base, read_patched,
};

struct ChangelogRequired;

fn count(content: Option<Vec<u8>>) -> usize {
    content.map_or(0, |bytes| {
        public_functions(&String::from_utf8_lossy(&bytes))
    })
}

impl Gate for ChangelogRequired {
    fn check(request: Request) -> Verdict {
        if request.changes("CHANGELOG.md") {
            return Verdict::Allow;
        }
        let new_api = request.present_files().find(|f| {
            let source = f.path.ends_with(".rs") || f.path.ends_with(".py");
            let before = match f.status {
                ChangeStatus::Modified => count(read_base(&f.path)),
                _ => 0,
            };
            source && count(read_patched(&f.path)) > before
        });
        match new_api {
            Some(file) => Verdict::Flag(format!(
                "a new public function in {} without a CHANGELOG.md entry",
                file.path
            )),
            None => Verdict::Allow,
        }
    }
}

export_gate!(ChangelogRequired);
