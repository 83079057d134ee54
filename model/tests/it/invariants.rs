//! Code-map invariants: airlock-model depends on no other airlock crate and runs no processes.

#[test]
fn depends_on_no_other_airlock_crate() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let table: toml::Table = toml::from_str(&manifest).unwrap();
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(deps) = table.get(section).and_then(|d| d.as_table()) {
            for name in deps.keys() {
                assert!(!name.starts_with("airlock"), "{section} has {name}");
            }
        }
    }
}

#[test]
fn library_code_spawns_no_processes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("std::process"),
            "{} spawns processes",
            path.display()
        );
        assert!(
            !text.contains("Command::new"),
            "{} spawns processes",
            path.display()
        );
    }
}
