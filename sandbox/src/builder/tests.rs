//! Unit tests of the caller's side: the summary made from report lines, and the
//! configuration checks of `build()`.

use super::report::{Collected, summarize};
use super::*;
use crate::report::Report;
use crate::spec::Spec;
use crate::types::Layer;

fn spec() -> Spec {
    Spec {
        argv: vec!["true".into()],
        ro: Vec::new(),
        rw: Vec::new(),
        overlays: Vec::new(),
        binds_at: Vec::new(),
        network: NetworkAccess::None,
        env: Vec::new(),
        cwd: PathBuf::from("/"),
        limits: Limits {
            timeout_ms: 1000,
            memory_mb: 64,
            max_procs: 8,
            cpu_secs: 2,
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

fn collected(lines: &[Report]) -> Collected {
    let mut c = Collected::default();
    for l in lines {
        c.report.extend(serde_json::to_vec(l).unwrap());
        c.report.push(b'\n');
    }
    c
}

fn layers(applied: &[Layer], missing: &[Layer]) -> Report {
    Report::Layers {
        applied: applied.to_vec(),
        missing: missing.to_vec(),
        landlock_abi: Some(7),
    }
}

#[test]
fn a_failure_naming_a_feature_is_a_refusal() {
    let c = collected(&[Report::Failed {
        feature: Some(Layer::LandlockFs),
        stage: "landlock".into(),
        detail: "no ABI".into(),
    }]);
    let err = summarize(&spec(), c, Duration::ZERO, false).unwrap_err();
    assert!(matches!(
        err,
        Error::Refused {
            feature: Layer::LandlockFs,
            ..
        }
    ));
    assert!(err.to_string().contains("landlock"));
}

#[test]
fn a_failure_without_a_feature_is_a_setup_error() {
    let c = collected(&[
        Report::Failed {
            feature: None,
            stage: "exec".into(),
            detail: "not found".into(),
        },
        Report::Exited {
            code: Some(127),
            signal: None,
            max_rss_bytes: None,
        },
    ]);
    let err = summarize(&spec(), c, Duration::ZERO, false).unwrap_err();
    assert!(matches!(err, Error::Setup { ref stage, .. } if stage == "exec"));
}

#[test]
fn a_timeout_without_an_exit_report_is_a_kill_not_an_error() {
    let c = collected(&[
        layers(&[Layer::Seccomp], &[]),
        Report::Supervisor {
            timed_out: true,
            peak_memory_bytes: Some(4096),
            init_signal: Some(9),
        },
    ]);
    let s = summarize(&spec(), c, Duration::ZERO, false).unwrap();
    assert!(s.timed_out);
    assert_eq!(s.signal, Some(9));
    assert_eq!(s.exit_code, None);
    assert_eq!(s.peak_memory_bytes, Some(4096));
    assert_eq!(s.peak_memory_source.as_deref(), Some("cgroup"));
    assert!(!s.success());
}

#[test]
fn layers_are_merged_sorted_and_missing_ones_removed_from_applied() {
    let c = collected(&[
        layers(&[Layer::CgroupPids], &[Layer::CgroupMemory]),
        layers(&[Layer::Seccomp, Layer::UserNamespace, Layer::Overlay], &[]),
        Report::Exited {
            code: Some(0),
            signal: None,
            max_rss_bytes: None,
        },
    ]);
    let s = summarize(&spec(), c, Duration::ZERO, false).unwrap();
    // No overlay was requested, so none is claimed.
    assert_eq!(
        s.layers_applied,
        vec![Layer::UserNamespace, Layer::Seccomp, Layer::CgroupPids]
    );
    assert_eq!(s.layers_missing, vec![Layer::CgroupMemory]);
    assert!(s.success());
}

#[test]
fn a_missing_required_layer_is_refused_unless_degraded() {
    let lines = [
        layers(&[], &[Layer::Seccomp]),
        Report::Exited {
            code: Some(0),
            signal: None,
            max_rss_bytes: None,
        },
    ];
    assert!(summarize(&spec(), collected(&lines), Duration::ZERO, false).is_err());
    let s = summarize(&spec(), collected(&lines), Duration::ZERO, true).unwrap();
    assert_eq!(s.layers_missing, vec![Layer::Seccomp]);
}

#[test]
fn variable_names_are_letters_digits_and_underscores() {
    for ok in ["PATH", "_x", "A1_B"] {
        assert!(valid_env_name(ok), "{ok}");
    }
    for bad in ["", "1A", "A B", "A=B", "A-B"] {
        assert!(!valid_env_name(bad), "{bad}");
    }
    let err = SandboxBuilder::new().env("A B", "1").build().unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
}

#[test]
fn a_helper_that_vanishes_is_a_protocol_error() {
    let c = collected(&[layers(&[Layer::Seccomp], &[])]);
    assert!(matches!(
        summarize(&spec(), c, Duration::ZERO, false),
        Err(Error::Protocol(_))
    ));
}

#[test]
fn the_builder_rejects_parent_components_and_forbidden_grants() {
    let exe = std::env::current_exe().unwrap();
    let err = SandboxBuilder::new()
        .helper_exe(&exe)
        .ro("/usr/../etc")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Path { .. }));
    let err = SandboxBuilder::new()
        .helper_exe(&exe)
        .ro("/proc")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("/proc"));
    let err = SandboxBuilder::new()
        .helper_exe(&exe)
        .ro("/definitely/not/here")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Path { .. }));
}

#[test]
fn a_grant_at_a_relative_or_dotted_path_is_a_configuration_error() {
    let source = tempfile::tempdir().unwrap();
    for target in ["node_modules", "/work/tree/../etc", ""] {
        let err = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .ro_at(source.path(), target)
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{target:?}: {err}");
        assert!(err.to_string().contains("absolute path"), "{err}");
    }
    for target in ["/", "/proc/x", "/dev/shm/x"] {
        let err = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .rw_at(source.path(), target)
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::Path { .. }), "{target:?}: {err}");
    }
    let err = SandboxBuilder::new()
        .helper_exe("/bin/true")
        .ro_at("/definitely/not/here", "/work/x")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Path { .. }), "{err}");
}

#[test]
fn a_grant_at_another_path_inside_a_host_grant_needs_its_mount_point_on_the_host() {
    let d = tempfile::tempdir().unwrap();
    let granted = d.path().join("granted");
    let cache = d.path().join("cache");
    std::fs::create_dir_all(granted.join("present")).unwrap();
    std::fs::write(granted.join("file"), "").unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("lock"), "").unwrap();
    let build = |b: SandboxBuilder| b.helper_exe("/bin/true").build();
    // Missing inside a read-only (or read-write) grant: refused, and nothing is created.
    for writable in [false, true] {
        let b = if writable {
            SandboxBuilder::new().rw(&granted)
        } else {
            SandboxBuilder::new().ro(&granted)
        };
        let err = build(b.ro_at(&cache, granted.join("missing/deeper"))).unwrap_err();
        assert!(err.to_string().contains("create"), "{err}");
        assert!(!granted.join("missing").exists());
    }
    // Present, of the same kind: accepted.
    build(
        SandboxBuilder::new()
            .ro(&granted)
            .ro_at(&cache, granted.join("present")),
    )
    .unwrap();
    build(
        SandboxBuilder::new()
            .ro(&granted)
            .ro_at(cache.join("lock"), granted.join("file")),
    )
    .unwrap();
    // Of another kind: refused.
    let err = build(
        SandboxBuilder::new()
            .ro(&granted)
            .ro_at(&cache, granted.join("file")),
    )
    .unwrap_err();
    assert!(err.to_string().contains("is a file"), "{err}");
    // Inside an overlay, the private /tmp or the sandbox's root: created when the run sets
    // up, so accepted here.
    let sandbox = build(
        SandboxBuilder::new()
            .overlay(&granted, "/work/tree")
            .ro_at(&cache, "/work/tree/node_modules")
            .ro_at(cache.join("lock"), "/work/tree/Cargo.lock")
            .ro_at(&cache, "/tmp/cache")
            .ro_at(&cache, "/opt/cache"),
    )
    .unwrap();
    assert_eq!(sandbox.binds_at.len(), 4);
    assert!(sandbox.binds_at.iter().all(|b| !b.writable));
    // Inside another grant at another path, whichever comes first: its mount point must
    // exist in that grant's source.
    for b in [
        SandboxBuilder::new()
            .ro_at(&cache, "/opt/c")
            .ro_at(&cache, "/opt/c/missing"),
        SandboxBuilder::new()
            .ro_at(&cache, "/opt/c/missing")
            .ro_at(&cache, "/opt/c"),
    ] {
        let err = build(b).unwrap_err();
        assert!(err.to_string().contains("create"), "{err}");
    }
    assert!(!cache.join("missing").exists());
    build(
        SandboxBuilder::new()
            .ro_at(cache.join("lock"), "/opt/c/lock")
            .ro_at(&cache, "/opt/c"),
    )
    .unwrap();
    // The same place twice, or an overlay's own mount point: refused.
    for b in [
        SandboxBuilder::new()
            .ro_at(&cache, "/opt/x")
            .rw_at(&cache, "/opt/x"),
        SandboxBuilder::new()
            .overlay(&granted, "/work/tree")
            .ro_at(&cache, "/work/tree"),
        SandboxBuilder::new().ro(&granted).ro_at(&cache, &granted),
    ] {
        assert!(matches!(build(b), Err(Error::Path { .. })));
    }
}

#[test]
fn the_host_network_grants_the_resolver_files_unless_a_grant_covers_them() {
    let existing: Vec<PathBuf> = NETWORK_ETC_RO
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let none = SandboxBuilder::new()
        .helper_exe("/bin/true")
        .build()
        .unwrap();
    assert_eq!(none.network, NetworkAccess::None);
    assert!(none.ro.is_empty());
    let host = SandboxBuilder::new()
        .helper_exe("/bin/true")
        .network(NetworkAccess::Host)
        .build()
        .unwrap();
    assert_eq!(host.network, NetworkAccess::Host);
    for path in &existing {
        assert!(host.ro.contains(path), "{} not granted", path.display());
    }
    assert!(!host.ro.iter().any(|p| p.ends_with("private")));
    // Granting /etc covers them all.
    let etc = SandboxBuilder::new()
        .helper_exe("/bin/true")
        .ro("/etc")
        .network(NetworkAccess::Host)
        .build()
        .unwrap();
    assert!(
        etc.ro
            .iter()
            .all(|p| !p.starts_with("/etc") || p == Path::new("/etc"))
    );
}

#[test]
fn layers_waived_by_the_host_network_are_neither_applied_nor_missing() {
    let mut spec = spec();
    spec.network = NetworkAccess::Host;
    let c = collected(&[
        layers(
            &[Layer::UserNamespace, Layer::Seccomp],
            &[Layer::LandlockNet],
        ),
        Report::Exited {
            code: Some(0),
            signal: None,
            max_rss_bytes: None,
        },
    ]);
    let s = summarize(&spec, c, Duration::ZERO, false).unwrap();
    assert_eq!(s.layers_applied, vec![Layer::UserNamespace, Layer::Seccomp]);
    assert!(s.layers_missing.is_empty());
    assert_eq!(s.network, NetworkAccess::Host);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["network"], "host");
}

#[test]
fn the_environment_is_an_allowlist_with_defaults_and_sorted() {
    let sandbox = SandboxBuilder::new()
        .helper_exe("/bin/true")
        .env("ZED", "1")
        .env("A", "2")
        .pass_env("AIRLOCK_SURELY_UNSET_VARIABLE")
        .build()
        .unwrap();
    let names: Vec<&str> = sandbox.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, vec!["A", "HOME", "PATH", "ZED"]);
}
