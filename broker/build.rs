//! The broker's build script: `AIRLOCK_VERSION` for `--version`, exactly as `airlock`'s
//! (one script for both binaries).

#[path = "../build.rs"]
mod build_commit;

fn main() {
    build_commit::main();
}
