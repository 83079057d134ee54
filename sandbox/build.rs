//! Fingerprints this crate's sources for the helper protocol string.
//!
//! The caller and the set-up helper may be different binaries (the dedicated
//! `airlock-sandbox-helper` beside the caller), so a helper left over from another build could
//! meet a caller whose run specification means something else. Both sides embed a hash of the
//! sandbox sources; a helper whose hash differs refuses the run and the caller falls back to its
//! own binary.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.push(Path::new("Cargo.toml").to_path_buf());
    files.sort();
    // FNV-1a, 64 bits, over each file's path and contents.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        for b in file
            .to_string_lossy()
            .as_bytes()
            .iter()
            .chain([0u8].iter())
            .chain(&bytes)
        {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=AIRLOCK_SANDBOX_SOURCE_HASH={hash:016x}");
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
