//! Gate "migrations-route", with the Rust SDK: the same rule as gate.wat beside it. Build it
//! with `cargo build -p airlock-gate-sdk --example migrations-route --target wasm32-wasip2
//! --release`.

use airlock_gate_sdk::{Gate, Request, Verdict, export_gate, has_dir};

struct MigrationsRoute;

impl Gate for MigrationsRoute {
    fn check(request: Request) -> Verdict {
        if request.files.iter().any(|f| has_dir(&f.path, "migrations")) {
            Verdict::Route("database".to_owned())
        } else {
            Verdict::Allow
        }
    }
}

export_gate!(MigrationsRoute);
