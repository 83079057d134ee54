//! Bounded reads and path-safe writes: every refusal, the cap and line windows.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use airlock_checkout::{BoundedReader, READ_CAP_BYTES, ReadOutcome, RefusalCode};

/// `outside/secret.txt` next to `root/`, and inside root: ordinary files, a binary, a large
/// file, and symlinks that escape (relative, absolute, in the middle of a path, dangling) or
/// stay inside.
struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "TOP SECRET\n").unwrap();
    let root = tmp.path().join("root");
    fs::create_dir_all(root.join("src/deep")).unwrap();
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::write(root.join(".git/config"), "[core]\n").unwrap();
    fs::write(root.join("src/a.py"), "def a():\n    return 1\n\n# end\n").unwrap();
    fs::write(root.join("src/deep/b.rs"), "fn b() {}").unwrap();
    fs::write(root.join("empty.txt"), "").unwrap();
    let mut binary = b"PK\x03\x04".to_vec();
    binary.extend_from_slice(&[0u8; 16]);
    binary.extend_from_slice(b"text after nul\n");
    fs::write(root.join("bin.dat"), binary).unwrap();
    symlink("../outside/secret.txt", root.join("esc")).unwrap();
    symlink("/etc/passwd", root.join("abs")).unwrap();
    symlink("../outside", root.join("mid")).unwrap();
    symlink("../../outside", root.join("src/up")).unwrap();
    symlink("src", root.join("inner")).unwrap();
    symlink("deep/../a.py", root.join("src/alias.py")).unwrap();
    symlink("../outside/new.txt", root.join("dangle")).unwrap();
    symlink("loop2", root.join("loop1")).unwrap();
    symlink("loop1", root.join("loop2")).unwrap();
    Tree {
        _tmp: tmp,
        root,
        outside,
    }
}

fn reader(t: &Tree) -> BoundedReader {
    BoundedReader::open(&t.root).unwrap()
}

type Case<'a> = (&'a str, Option<(u32, u32)>, RefusalCode);

fn refusal(reader: &BoundedReader, path: &str, lines: Option<(u32, u32)>) -> RefusalCode {
    match reader.read(path, lines) {
        Ok(outcome) => panic!("{path:?} should be refused, read {outcome:?}"),
        Err(r) => {
            assert_eq!(r.path(), path);
            assert!(!r.to_string().is_empty());
            r.code()
        }
    }
}

#[test]
fn every_read_refusal_has_its_code() {
    let t = tree();
    let r = reader(&t);
    let absolute_inside = format!("{}/src/a.py", t.root.display());
    let cases: Vec<Case<'_>> = vec![
        ("/etc/passwd", None, RefusalCode::AbsolutePath),
        (&absolute_inside, None, RefusalCode::AbsolutePath),
        ("../outside/secret.txt", None, RefusalCode::ParentSegment),
        (
            "src/../../outside/secret.txt",
            None,
            RefusalCode::ParentSegment,
        ),
        ("src/..", None, RefusalCode::ParentSegment),
        ("esc", None, RefusalCode::EscapesRoot),
        ("abs", None, RefusalCode::EscapesRoot),
        ("mid/secret.txt", None, RefusalCode::EscapesRoot),
        ("inner/up/secret.txt", None, RefusalCode::EscapesRoot),
        ("dangle", None, RefusalCode::EscapesRoot),
        ("nope.txt", None, RefusalCode::NotFound),
        ("src/nope/x.py", None, RefusalCode::NotFound),
        ("src/a.py/x", None, RefusalCode::NotFound),
        ("src", None, RefusalCode::IsDirectory),
        ("src/deep/", None, RefusalCode::IsDirectory),
        (".", None, RefusalCode::IsDirectory),
        ("bin.dat", None, RefusalCode::Binary),
        ("src/a.py", Some((0, 2)), RefusalCode::InvalidRange),
        ("src/a.py", Some((3, 2)), RefusalCode::InvalidRange),
        ("src/a.py", Some((5, 9)), RefusalCode::InvalidRange),
        ("", None, RefusalCode::InvalidPath),
        ("src/a\0.py", None, RefusalCode::InvalidPath),
        ("loop1", None, RefusalCode::Io),
    ];
    for (path, lines, code) in cases {
        if path.contains('\0') {
            // The refusal shows the NUL escaped, so compare codes only.
            assert_eq!(r.read(path, lines).unwrap_err().code(), code);
            continue;
        }
        assert_eq!(refusal(&r, path, lines), code, "{path:?} {lines:?}");
    }
}

#[test]
fn refusal_messages_say_how_to_fix_the_call() {
    let t = tree();
    let r = reader(&t);
    let msg = |p: &str| r.read(p, None).unwrap_err().to_string();
    assert!(msg("/etc/passwd").contains("relative to the repository root"));
    assert!(msg("../x").contains("without `..`"));
    let escape = r.read("mid/secret.txt", None).unwrap_err();
    assert!(
        escape.to_string().contains("`mid`"),
        "names the symlink: {escape}"
    );
    let missing = r.read("src/nope/x.py", None).unwrap_err();
    assert!(missing.to_string().contains("(`src` does)"), "{missing}");
    assert!(msg("src").contains("file tree"));
    assert!(msg("bin.dat").contains("binary"));
    let json = serde_json::to_value(r.read("esc", None).unwrap_err()).unwrap();
    assert_eq!(json["code"], "escapes_root");
    assert_eq!(json["path"], "esc");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("leaves the repository")
    );
}

#[test]
fn in_tree_symlinks_are_followed() {
    let t = tree();
    let r = reader(&t);
    let via_dir = r.read("inner/a.py", None).unwrap();
    let direct = r.read("src/a.py", None).unwrap();
    assert_eq!(via_dir.content, direct.content);
    assert_eq!(via_dir.path, "inner/a.py");
    assert_eq!(via_dir.language, "python");
    let alias = r.read("src/alias.py", None).unwrap();
    assert_eq!(alias.content, direct.content);
    assert_eq!(r.resolve("inner/alias.py").unwrap(), "src/a.py");
    assert_eq!(
        r.read("./src//deep/b.rs", None).unwrap().path,
        "src/deep/b.rs"
    );
}

#[test]
fn whole_file_read_reports_every_field() {
    let t = tree();
    let r = reader(&t);
    let out = r.read("src/a.py", None).unwrap();
    assert_eq!(
        out,
        ReadOutcome {
            path: "src/a.py".into(),
            content: "def a():\n    return 1\n\n# end\n".into(),
            language: "python".into(),
            line_count: 4,
            line_start: 1,
            line_end: 4,
            truncated: false,
            bytes_returned: 29,
            bytes_total: 29,
        }
    );
    let json = serde_json::to_value(&out).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "bytes_returned",
            "bytes_total",
            "content",
            "language",
            "line_count",
            "line_end",
            "line_start",
            "path",
            "truncated"
        ]
    );
    // No trailing newline: the last line still counts.
    let b = r.read("src/deep/b.rs", None).unwrap();
    assert_eq!(
        (b.line_count, b.line_end, b.language.as_str()),
        (1, 1, "rust")
    );
    let empty = r.read("empty.txt", None).unwrap();
    assert_eq!(
        (
            empty.line_count,
            empty.line_start,
            empty.line_end,
            empty.bytes_total
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(empty.content, "");
}

fn numbered_lines(n: usize, width: usize) -> String {
    (1..=n)
        .map(|i| format!("{:0>width$}\n", i, width = width - 1))
        .collect()
}

#[test]
fn content_is_capped_at_10_kb_on_a_line_boundary() {
    let t = tree();
    // 300 lines of 100 bytes: 30,000 bytes.
    fs::write(t.root.join("big.txt"), numbered_lines(300, 100)).unwrap();
    let r = reader(&t);
    let out = r.read("big.txt", None).unwrap();
    assert_eq!(READ_CAP_BYTES, 10240);
    assert!(out.truncated);
    assert_eq!(out.bytes_total, 30_000);
    assert_eq!(
        out.bytes_returned, 10_200,
        "102 whole lines fit in 10,240 bytes"
    );
    assert_eq!(out.content.len(), 10_200);
    assert!(out.content.ends_with('\n'));
    assert_eq!(
        (out.line_start, out.line_end, out.line_count),
        (1, 102, 300)
    );

    // Continue from where it stopped.
    let next = r.read("big.txt", Some((103, 400))).unwrap();
    assert_eq!(next.line_start, 103);
    assert!(next.content.starts_with(&format!("{:0>99}\n", 103)));

    // Exactly at the cap is not truncated.
    fs::write(t.root.join("exact.txt"), numbered_lines(128, 80)).unwrap();
    let exact = r.read("exact.txt", None).unwrap();
    assert_eq!(exact.bytes_total, 10_240);
    assert!(!exact.truncated);
    assert_eq!(exact.bytes_returned, 10_240);
}

#[test]
fn a_single_long_line_is_cut_at_a_character_boundary() {
    let t = tree();
    let line = "ü".repeat(8000) + "\nsecond\n"; // 16,000 bytes then a short line
    fs::write(t.root.join("long.txt"), &line).unwrap();
    let out = reader(&t).read("long.txt", None).unwrap();
    assert!(out.truncated);
    assert_eq!(out.bytes_returned, 10_240);
    assert!(out.content.chars().all(|c| c == 'ü'));
    assert_eq!((out.line_start, out.line_end, out.line_count), (1, 1, 2));
}

#[test]
fn line_windows_return_exactly_the_lines_asked_for() {
    let t = tree();
    fs::write(t.root.join("big.txt"), numbered_lines(300, 10)).unwrap();
    let r = reader(&t);
    let out = r.read("big.txt", Some((200, 204))).unwrap();
    assert_eq!(
        out.content,
        "000000200\n000000201\n000000202\n000000203\n000000204\n"
    );
    assert_eq!(
        (out.line_start, out.line_end, out.line_count),
        (200, 204, 300)
    );
    assert!(!out.truncated);
    assert_eq!(out.bytes_returned, 50);
    assert_eq!(out.bytes_total, 3000);
    let clamped = r.read("big.txt", Some((299, 10_000))).unwrap();
    assert_eq!(clamped.content, "000000299\n000000300\n");
    assert_eq!(clamped.line_end, 300);
    let single = r.read("src/a.py", Some((2, 2))).unwrap();
    assert_eq!(single.content, "    return 1\n");
}

#[test]
fn reads_are_deterministic() {
    let t = tree();
    fs::write(t.root.join("big.txt"), numbered_lines(500, 64)).unwrap();
    let a = serde_json::to_string(&reader(&t).read("big.txt", Some((7, 400))).unwrap()).unwrap();
    let b = serde_json::to_string(&reader(&t).read("big.txt", Some((7, 400))).unwrap()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn fifos_are_refused_without_blocking() {
    let t = tree();
    let fifo = t.root.join("pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(
        status.success(),
        "mkfifo (coreutils) is needed for this test"
    );
    assert_eq!(refusal(&reader(&t), "pipe", None), RefusalCode::SpecialFile);
}

fn outside_untouched(outside: &Path) {
    let names: Vec<_> = fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret.txt"]);
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "TOP SECRET\n"
    );
}

#[test]
fn writes_stay_inside_and_never_go_through_symlinks() {
    let t = tree();
    let r = reader(&t);
    let created = r.write("src/new/mod.py", b"x = 1\n").unwrap();
    assert!(created.created);
    assert_eq!(created.bytes_written, 6);
    assert_eq!(
        fs::read_to_string(t.root.join("src/new/mod.py")).unwrap(),
        "x = 1\n"
    );
    let replaced = r.write("./src/a.py", b"def a():\n    return 2\n").unwrap();
    assert!(!replaced.created);
    assert_eq!(replaced.path, "src/a.py");

    let cases: &[(&str, RefusalCode)] = &[
        ("/tmp/airlock-write-test", RefusalCode::AbsolutePath),
        ("../outside/secret.txt", RefusalCode::ParentSegment),
        ("esc", RefusalCode::EscapesRoot),
        ("abs", RefusalCode::EscapesRoot),
        ("dangle", RefusalCode::EscapesRoot),
        ("mid/secret.txt", RefusalCode::EscapesRoot),
        ("mid/new.txt", RefusalCode::EscapesRoot),
        ("inner/up/new.txt", RefusalCode::EscapesRoot),
        ("inner/a.py", RefusalCode::WriteThroughSymlink),
        ("src/alias.py", RefusalCode::WriteThroughSymlink),
        (".git/config", RefusalCode::GitMetadata),
        (".git/hooks/pre-commit", RefusalCode::GitMetadata),
        ("src", RefusalCode::IsDirectory),
        ("src/a.py/child", RefusalCode::InvalidPath),
        ("", RefusalCode::InvalidPath),
    ];
    for (path, code) in cases {
        let refused = r.write(path, b"pwned\n").unwrap_err();
        assert_eq!(refused.code(), *code, "{path:?}: {refused}");
    }
    let through = r.write("inner/a.py", b"x").unwrap_err();
    assert!(
        through.to_string().contains("`src/a.py`"),
        "names the real target: {through}"
    );
    outside_untouched(&t.outside);
    assert!(!Path::new("/tmp/airlock-write-test").exists());
    assert_eq!(
        fs::read_to_string(t.root.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        fs::read_to_string(t.root.join("src/a.py")).unwrap(),
        "def a():\n    return 2\n"
    );
}

#[test]
fn removals_have_the_same_guards() {
    let t = tree();
    let r = reader(&t);
    r.remove("src/deep/b.rs").unwrap();
    assert!(!t.root.join("src/deep/b.rs").exists());
    for (path, code) in [
        ("src/deep/b.rs", RefusalCode::NotFound),
        ("mid/secret.txt", RefusalCode::EscapesRoot),
        ("inner/a.py", RefusalCode::WriteThroughSymlink),
        (".git/config", RefusalCode::GitMetadata),
        ("src", RefusalCode::IsDirectory),
    ] {
        assert_eq!(r.remove(path).unwrap_err().code(), code, "{path}");
    }
    outside_untouched(&t.outside);
}
