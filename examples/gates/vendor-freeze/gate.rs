//! Gate "vendor-freeze", with the Rust SDK: the same rule as gate.wat beside it. Build it with
//! `cargo build -p airlock-gate-sdk --example vendor-freeze --target wasm32-wasip2 --release`.

use airlock_gate_sdk::{Gate, Request, Verdict, export_gate, starts_with_dir};

struct VendorFreeze;

impl Gate for VendorFreeze {
    fn check(request: Request) -> Verdict {
        match request
            .files
            .iter()
            .find(|f| starts_with_dir(&f.path, "vendor"))
        {
            Some(file) => Verdict::Deny(format!(
                "vendor/ is frozen (vendored code changes upstream first); the diff changes {}",
                file.path
            )),
            None => Verdict::Allow,
        }
    }
}

export_gate!(VendorFreeze);
