//! Unit tests of the mount plan (its order, its entries and lower layers, the mounts below a
//! read-only grant), the landlock roots, and the path helpers.

use super::paths::under;
use super::plan::{Entry, plan_entries, unescape_mountinfo};
use super::*;
use crate::spec::Limits;
use crate::spec::{BindAtSpec, OverlaySpec};

fn spec(ro: &[&str], rw: &[&str]) -> Spec {
    Spec {
        argv: vec!["true".into()],
        ro: ro.iter().map(PathBuf::from).collect(),
        rw: rw.iter().map(PathBuf::from).collect(),
        overlays: Vec::new(),
        binds_at: Vec::new(),
        network: crate::spec::NetworkAccess::None,
        env: Vec::new(),
        cwd: PathBuf::from("/"),
        limits: Limits {
            timeout_ms: 1000,
            memory_mb: 64,
            max_procs: 8,
            cpu_secs: 1,
            open_files: 64,
            file_size_mb: 1,
            tmp_size_mb: 1,
        },
        allow_degraded: false,
        pretend_missing: Vec::new(),
        services: Vec::new(),
        host: crate::identity::HostIdentity {
            uid: 1000,
            gid: 1000,
            source: crate::identity::IdentitySource::Caller,
        },
    }
}

#[test]
fn parents_are_mounted_before_children() {
    let (entries, _, _) = plan_entries(&spec(&["/definitely/not/here/a/b", "/"], &["/tmp/x"]), "");
    let paths: Vec<_> = entries.iter().map(|e| e.path().to_path_buf()).collect();
    let pos = |p: &str| paths.iter().position(|x| x == Path::new(p)).unwrap();
    assert!(pos("/") < pos("/tmp"));
    assert!(pos("/tmp") < pos("/tmp/x"));
    assert!(pos("/tmp/x") < pos("/definitely/not/here/a/b"));
}

#[test]
fn grants_at_another_path_come_after_the_overlays_and_grants_they_lie_in() {
    let mut s = spec(&["/cache/env1", "/x/wt/node_modules/.bin"], &["/x"]);
    s.overlays.push(OverlaySpec {
        lower: PathBuf::from("/work/wt"),
        mountpoint: PathBuf::from("/x/wt"),
        upper: PathBuf::from("/scratch/upper"),
        work: PathBuf::from("/scratch/work"),
    });
    for target in ["/x/wt/node_modules", "/x/wt/Cargo.lock"] {
        s.binds_at.push(BindAtSpec {
            source: PathBuf::from("/cache/env1").join(Path::new(target).file_name().unwrap()),
            target: PathBuf::from(target),
            writable: false,
        });
    }
    let (entries, _, _) = plan_entries(&s, "");
    let pos = |p: &str| {
        entries
            .iter()
            .position(|e| e.path() == Path::new(p))
            .unwrap()
    };
    assert!(pos("/x") < pos("/x/wt"));
    assert!(pos("/x/wt") < pos("/x/wt/node_modules"));
    assert!(pos("/x/wt") < pos("/x/wt/Cargo.lock"));
    assert!(pos("/x/wt/node_modules") < pos("/x/wt/node_modules/.bin"));
    assert!(matches!(
        entries[pos("/x/wt/node_modules")],
        Entry::BindAt {
            spec: BindAtSpec {
                writable: false,
                ..
            },
            ..
        }
    ));
    let roots = landlock_roots(&s, true);
    assert!(roots.contains(&(PathBuf::from("/x/wt/node_modules"), false)));
    // Without a mount namespace nothing is mounted there, so nothing is granted.
    let roots = landlock_roots(&s, false);
    assert!(
        !roots
            .iter()
            .any(|(p, _)| p == Path::new("/x/wt/node_modules"))
    );
}

#[test]
fn granting_tmp_replaces_the_private_tmp() {
    let (entries, _, _) = plan_entries(&spec(&[], &["/tmp"]), "");
    let tmp: Vec<_> = entries
        .iter()
        .filter(|e| e.path() == Path::new("/tmp"))
        .collect();
    assert_eq!(tmp.len(), 1);
    assert!(matches!(tmp[0], Entry::Bind { ro: false, .. }));
}

#[test]
fn read_only_directories_are_overlays_and_files_binds_with_their_lower_layers() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("dir");
    let file = d.path().join("file");
    let fifo = d.path().join("fifo");
    let rw = d.path().join("rw");
    for p in [&dir, &rw] {
        std::fs::create_dir(p).unwrap();
    }
    std::fs::write(&file, "").unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let text = |p: &Path| p.to_str().unwrap().to_string();
    let mut s = spec(&[&text(&dir), &text(&file), &text(&fifo)], &[&text(&rw)]);
    s.overlays.push(OverlaySpec {
        lower: dir.clone(),
        mountpoint: PathBuf::from("/work/tree"),
        upper: d.path().join("upper"),
        work: d.path().join("work"),
    });
    let (entries, lowers, _) = plan_entries(&s, "");
    let find = |p: &Path| entries.iter().find(|e| e.path() == p).unwrap();
    let Entry::ReadOnlyDir { lower, source, .. } = find(&dir) else {
        panic!("{:?}", find(&dir))
    };
    assert_eq!(source, &dir);
    assert_eq!(lowers[*lower].source, dir);
    assert!(!lowers[*lower].required && !lowers[*lower].fifo);
    let Entry::Bind {
        ro: true,
        idmapped: Some(file_lower),
        ..
    } = find(&file)
    else {
        panic!("{:?}", find(&file))
    };
    assert!(!lowers[*file_lower].fifo);
    let Entry::Bind {
        idmapped: Some(fifo_lower),
        ..
    } = find(&fifo)
    else {
        panic!("{:?}", find(&fifo))
    };
    assert!(
        lowers[*fifo_lower].fifo,
        "a FIFO is shown with only the command's id"
    );
    assert!(matches!(
        find(&rw),
        Entry::Bind {
            ro: false,
            idmapped: None,
            ..
        }
    ));
    let Entry::Overlay { lower, .. } = find(Path::new("/work/tree")) else {
        panic!()
    };
    assert!(
        lowers[*lower].required,
        "an overlay needs its idmapped lower"
    );
}

#[test]
fn the_mounts_below_a_read_only_directory_follow_it_unless_hidden() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("g");
    for sub in [
        "data",
        "data/deeper",
        "proc",
        "granted",
        "granted/inner",
        "with space",
    ] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("hosts"), "").unwrap();
    let g = root.to_str().unwrap();
    let line = |id: u32, point: &str, fstype: &str| {
        format!("{id} 1 0:1 / {point} rw,relatime shared:1 - {fstype} none rw\n")
    };
    let mountinfo = [
        line(20, "/", "ext4"),
        line(21, g, "ext4"),
        line(22, &format!("{g}/data"), "tmpfs"),
        line(23, &format!("{g}/data/deeper"), "xfs"),
        line(24, &format!("{g}/proc"), "proc"),
        line(25, &format!("{g}/hosts"), "ext4"),
        line(26, &format!("{g}/granted/inner"), "tmpfs"),
        line(27, &format!("{g}/with\\040space"), "tmpfs"),
        line(28, &format!("{g}/gone"), "tmpfs"),
        line(29, &format!("{g}x/sibling"), "tmpfs"),
        // Below a left-out filesystem (as cgroup v1's tmpfs lies below /sys): left out.
        line(30, &format!("{g}/proc/sub"), "tmpfs"),
    ]
    .concat();
    let granted = format!("{g}/granted");
    let (entries, lowers, below) = plan_entries(&spec(&[g], &[&granted]), &mountinfo);
    let shown: Vec<String> = entries
        .iter()
        .map(|e| e.path().to_str().unwrap().to_string())
        .filter(|p| p.starts_with(g))
        .collect();
    assert_eq!(
        shown,
        vec![
            g.to_string(),
            format!("{g}/granted"),
            format!("{g}/data"),
            format!("{g}/hosts"),
            format!("{g}/with space"),
            format!("{g}/data/deeper"),
        ]
    );
    assert!(matches!(
        entries.iter().find(|e| e.path() == root.join("hosts")),
        Some(Entry::Bind { ro: true, .. })
    ));
    assert!(lowers.iter().any(|l| l.source == root.join("data/deeper")));
    // The mounts below the grant, and only those, may be left out at set-up.
    assert_eq!(below.len(), 4, "{below:?}");
    assert!(!below.contains(&root));
}

#[test]
fn mountinfo_paths_are_unescaped() {
    assert_eq!(unescape_mountinfo(r"/a\040b\011c\134d"), "/a b\tc\\d");
    assert_eq!(unescape_mountinfo(r"/trailing\04"), r"/trailing\04");
    assert_eq!(unescape_mountinfo("/plain"), "/plain");
}

#[test]
fn under_strips_the_leading_slash_and_dots() {
    assert_eq!(
        under("/oldroot", Path::new("/a/b")),
        PathBuf::from("/oldroot/a/b")
    );
    assert_eq!(under("/newroot", Path::new("/")), PathBuf::from("/newroot"));
}
