//! WebAssembly text shared by the tests' hand-written gates (`airlock-gates`, `airlock-broker`):
//! the smallest pieces a core module needs to implement the gate world's canonical ABI.

/// An exported one-page memory and a bump `cabi_realloc` (no growth: a test gate's requests are
/// small), to splice into a `(module ...)`.
pub const BUMP_ALLOCATOR: &str = r#"
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (local.get $p))
"#;
