//! Mirror cache, ref resolution and worktree materialisation.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Barrier};

use airlock_checkout::{
    CheckoutError, CommitId, FileTreeOptions, Mirror, MirrorCache, MirrorOptions, MirrorOrigin,
    file_tree,
};

use crate::fixtures::{commit, git, git_raw, history, init, snapshot};

fn id(s: &str) -> CommitId {
    CommitId::parse(s).unwrap()
}

#[test]
fn resolves_branches_tags_head_and_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let mirror = cache.mirror(h.repo.to_str().unwrap()).unwrap();

    assert_eq!(mirror.resolve("main").unwrap(), id(&h.second));
    assert_eq!(mirror.resolve("refs/heads/main").unwrap(), id(&h.second));
    assert_eq!(mirror.resolve("feature").unwrap(), id(&h.feature));
    assert_eq!(
        mirror.resolve("HEAD").unwrap(),
        id(&h.second),
        "HEAD follows the source's HEAD"
    );
    assert_eq!(
        mirror.resolve("v1").unwrap(),
        id(&h.first),
        "annotated tag is peeled"
    );
    assert_eq!(mirror.resolve("light").unwrap(), id(&h.first));
    assert_eq!(mirror.resolve(&h.first[..7]).unwrap(), id(&h.first));
    assert_eq!(mirror.resolve(&h.first).unwrap(), id(&h.first));
    assert_eq!(mirror.resolve("main~1").unwrap(), id(&h.first));
}

#[test]
fn unknown_and_invalid_revisions_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let mirror = cache.mirror(h.repo.to_str().unwrap()).unwrap();

    for rev in [
        "no-such-branch",
        "0123456789abcdef0123456789abcdef01234567",
        "",
        "main..feature",
        "--all",
    ] {
        let err = mirror.resolve(rev).unwrap_err();
        assert!(
            matches!(err, CheckoutError::UnknownRevision { .. }),
            "{rev:?}: {err:?}"
        );
        assert!(err.to_string().contains("not found"), "{err}");
    }
    let err = mirror.resolve("v1^{tree}").unwrap_err();
    assert!(matches!(err, CheckoutError::NotACommit { .. }), "{err:?}");
}

#[test]
fn ambiguous_short_id_is_reported_as_ambiguous() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = init(&tmp.path().join("many"));
    // 1,500 distinct blobs make two objects sharing a 4-hex prefix all but certain; the
    // contents are fixed, so the ids (and the collision) are the same on every run.
    let files: Vec<(String, String)> = (0..1500)
        .map(|i| (format!("f/{i}.txt"), format!("blob number {i}\n")))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    commit(&repo, &refs, "many blobs");
    let objects = git(&repo, &["rev-list", "--objects", "--all"]);
    let mut by_prefix: BTreeMap<&str, usize> = BTreeMap::new();
    for line in objects.lines() {
        *by_prefix.entry(&line[..4]).or_default() += 1;
    }
    let (prefix, _) = by_prefix
        .iter()
        .find(|(_, n)| **n > 1)
        .expect("fixture should contain two objects with a common 4-hex prefix");

    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let mirror = cache.mirror(repo.to_str().unwrap()).unwrap();
    let err = mirror.resolve(prefix).unwrap_err();
    assert!(
        matches!(err, CheckoutError::AmbiguousRevision { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("more hex digits"), "{err}");
}

#[test]
fn clones_once_and_reuses_without_touching_the_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let source = h.repo.to_str().unwrap();

    let first = cache.mirror(source).unwrap();
    assert_eq!(first.origin(), MirrorOrigin::Cloned);
    let marker = first.path().join("airlock-mirror.json");
    let before = fs::metadata(&marker).unwrap();
    let refs_before = snapshot(&first.path().join("refs"));
    let packed_before = fs::read(first.path().join("packed-refs")).ok();
    drop(first);

    // Equivalent spellings of the same source hit the same mirror.
    for spelling in [
        source.to_owned(),
        format!("{source}/"),
        format!("{source}/.git"),
        format!("file://{source}"),
    ] {
        let again = cache.mirror(&spelling).unwrap();
        assert_eq!(again.origin(), MirrorOrigin::Reused, "{spelling}");
    }
    let after = fs::metadata(&marker).unwrap();
    assert_eq!(before.ino(), after.ino(), "mirror was re-created");
    assert_eq!(before.mtime_nsec(), after.mtime_nsec());
    let again = cache.mirror(source).unwrap();
    assert_eq!(snapshot(&again.path().join("refs")), refs_before);
    assert_eq!(
        fs::read(again.path().join("packed-refs")).ok(),
        packed_before
    );

    // Reuse needs no source at all: remove it and the mirror still answers.
    fs::remove_dir_all(&h.repo).unwrap();
    fs::create_dir_all(&h.repo).unwrap();
    let reused = cache.mirror(source).unwrap();
    assert_eq!(reused.origin(), MirrorOrigin::Reused);
    assert_eq!(reused.resolve("main").unwrap(), id(&h.second));

    let entries: Vec<String> = fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert_eq!(entries.len(), 1, "one mirror per source: {entries:?}");
}

#[test]
fn refresh_fetches_new_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let source = h.repo.to_str().unwrap();
    cache.mirror(source).unwrap();
    let third = commit(&h.repo, &[("NEW.md", "new\n")], "third");

    let stale = cache.mirror(source).unwrap();
    assert_eq!(
        stale.resolve("main").unwrap(),
        id(&h.second),
        "no fetch without refresh"
    );
    assert!(stale.resolve(&third).is_err());

    let fresh = cache
        .mirror_with(
            source,
            &MirrorOptions {
                refresh: true,
                ..MirrorOptions::default()
            },
        )
        .unwrap();
    assert_eq!(fresh.origin(), MirrorOrigin::Refreshed);
    assert_eq!(fresh.resolve("main").unwrap(), id(&third));
}

#[test]
fn concurrent_calls_clone_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let source = h.repo.to_str().unwrap().to_owned();
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let cache = cache.clone();
            let source = source.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mirror = cache.mirror(&source).unwrap();
                (mirror.origin(), mirror.resolve("main").unwrap())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let cloned = results
        .iter()
        .filter(|(o, _)| *o == MirrorOrigin::Cloned)
        .count();
    assert_eq!(cloned, 1, "{results:?}");
    assert!(results.iter().all(|(_, c)| *c == id(&h.second)));
}

#[test]
fn worktree_is_pinned_detached_clean_and_has_no_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    // Give the source a remote with a credential in its URL and a credential helper: none
    // of it may reach the worktree.
    git(
        &h.repo,
        &[
            "remote",
            "add",
            "origin",
            "https://user:s3cret-token@example.invalid/o/r.git",
        ],
    );
    git(&h.repo, &["config", "credential.helper", "store"]);
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let mirror = cache.mirror(h.repo.to_str().unwrap()).unwrap();
    let pinned = mirror.resolve("v1").unwrap();
    let dest = tmp.path().join("run-1");
    let wt = mirror.materialize(&pinned, &dest).unwrap();

    assert_eq!(wt.commit(), &pinned);
    assert_eq!(git(&dest, &["rev-parse", "HEAD"]), h.first);
    assert!(
        !git_raw(&dest, &["symbolic-ref", "-q", "HEAD"])
            .status
            .success(),
        "HEAD must be detached"
    );
    assert_eq!(
        git(&dest, &["status", "--porcelain"]),
        "",
        "fresh worktree is clean"
    );
    assert_eq!(
        fs::read_to_string(dest.join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 {\n    42\n}\n"
    );
    assert!(!dest.join("src/feature.rs").exists());

    let config = fs::read_to_string(dest.join(".git/config")).unwrap();
    for needle in [
        "remote",
        "url",
        "credential",
        "s3cret",
        "example.invalid",
        "pushurl",
    ] {
        assert!(
            !config.contains(needle),
            "`{needle}` in worktree config:\n{config}"
        );
    }
    assert_eq!(git(&dest, &["remote"]), "");
    // Only the pinned commit is present: no later history leaks into the run.
    assert_eq!(git(&dest, &["log", "--all", "--format=%H"]), h.first);
    assert_eq!(git(&dest, &["for-each-ref"]), "", "no branches or tags");
    assert_eq!(
        git(&dest, &["fsck", "--no-dangling", "--connectivity-only"]),
        ""
    );
    // The mirror's config holds no URL either.
    let mirror_config = fs::read_to_string(mirror.path().join("config")).unwrap();
    assert!(!mirror_config.contains("s3cret"), "{mirror_config}");
}

#[test]
fn materialize_refuses_non_empty_destination_and_foreign_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let mirror = cache.mirror(h.repo.to_str().unwrap()).unwrap();
    let busy = tmp.path().join("busy");
    fs::create_dir_all(&busy).unwrap();
    fs::write(busy.join("x"), "x").unwrap();
    let err = mirror.materialize(&id(&h.first), &busy).unwrap_err();
    assert!(
        matches!(err, CheckoutError::DestinationNotEmpty { .. }),
        "{err:?}"
    );

    let foreign = id("0123456789abcdef0123456789abcdef01234567");
    let err = mirror
        .materialize(&foreign, &tmp.path().join("fresh"))
        .unwrap_err();
    assert!(
        matches!(err, CheckoutError::CommitNotFound { .. }),
        "{err:?}"
    );

    // An existing empty directory is fine.
    let empty = tmp.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    mirror.materialize(&id(&h.first), &empty).unwrap();
}

#[test]
fn same_commit_gives_byte_identical_results() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let source = h.repo.to_str().unwrap();
    let mut runs = Vec::new();
    for run in 0..2 {
        let cache = MirrorCache::new(tmp.path().join(format!("cache-{run}"))).unwrap();
        let mirror = cache.mirror(source).unwrap();
        let commit = mirror.resolve("main").unwrap();
        let wt = mirror
            .materialize(&commit, &tmp.path().join(format!("wt-{run}")))
            .unwrap();
        let options = FileTreeOptions {
            char_budget: 200,
            query: Some("tokenizer"),
        };
        let reader = wt.reader().unwrap();
        let read =
            serde_json::to_string(&reader.read("src/lib.rs", Some((1, 2))).unwrap()).unwrap();
        let refusal = serde_json::to_string(&reader.read("nope/x.rs", None).unwrap_err()).unwrap();
        runs.push((
            commit,
            mirror
                .tracked_files(&mirror.resolve("main").unwrap())
                .unwrap(),
            mirror.file_tree(wt.commit(), &options).unwrap(),
            wt.file_tree(&options).unwrap(),
            file_tree(wt.path(), wt.commit(), &options).unwrap(),
            read,
            refusal,
            snapshot(wt.path()),
            git(wt.path(), &["ls-files", "--stage"]),
        ));
    }
    assert_eq!(runs[0], runs[1]);
    let (_, files, tree, wt_tree, path_tree, ..) = &runs[0];
    assert_eq!(
        files,
        &[
            "README.md",
            "src/lib.rs",
            "src/parser/mod.rs",
            "src/parser/tokenizer.rs",
            "tests/basic.rs"
        ]
    );
    assert_eq!(tree, wt_tree);
    assert_eq!(tree, path_tree);
}

#[test]
fn opens_existing_repositories_outside_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let bare = tmp.path().join("bare.git");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            h.repo.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    for path in [&h.repo, &bare] {
        let mirror = Mirror::open(path).unwrap();
        assert_eq!(mirror.origin(), MirrorOrigin::Opened);
        assert_eq!(mirror.resolve("feature").unwrap(), id(&h.feature));
        let wt = mirror
            .materialize(
                &id(&h.feature),
                &tmp.path().join(format!(
                    "wt-{}",
                    path.file_name().unwrap().to_string_lossy()
                )),
            )
            .unwrap();
        assert!(wt.path().join("src/feature.rs").is_file());
    }
}

#[test]
fn symlinks_in_the_repository_are_checked_out_as_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = init(&tmp.path().join("links"));
    fs::create_dir_all(repo.join("src")).unwrap();
    fs::write(repo.join("src/a.py"), "print('a')\n").unwrap();
    std::os::unix::fs::symlink("../../../etc/passwd", repo.join("src/evil")).unwrap();
    let c = commit(&repo, &[], "links");
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let mirror = cache.mirror(repo.to_str().unwrap()).unwrap();
    let wt = mirror.materialize(&id(&c), &tmp.path().join("wt")).unwrap();
    assert!(
        fs::symlink_metadata(wt.path().join("src/evil"))
            .unwrap()
            .is_symlink()
    );
    let refusal = wt.reader().unwrap().read("src/evil", None).unwrap_err();
    assert_eq!(refusal.code().as_str(), "escapes_root");
}

#[test]
fn invalid_sources_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let missing = tmp.path().join("missing");
    let err = cache.mirror(missing.to_str().unwrap()).unwrap_err();
    assert!(
        matches!(err, CheckoutError::InvalidSource { .. }),
        "{err:?}"
    );
    let not_repo = tmp.path().join("plain");
    fs::create_dir_all(&not_repo).unwrap();
    let err = cache.mirror(not_repo.to_str().unwrap()).unwrap_err();
    assert!(matches!(err, CheckoutError::CloneFailed { .. }), "{err:?}");
    // A failed clone leaves nothing behind that a later call could mistake for a mirror.
    let leftovers: Vec<_> = fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Serves `base` over the git protocol on a free local port; killed on drop.
struct GitDaemon {
    child: std::process::Child,
    port: u16,
}

impl GitDaemon {
    fn start(base: &std::path::Path) -> GitDaemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Run git-daemon itself, not through the `git` wrapper, so that killing the child
        // stops the server rather than orphaning it.
        let exec_path = git(base, &["--exec-path"]);
        let child = std::process::Command::new(std::path::Path::new(&exec_path).join("git-daemon"))
            .args([
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", base.display()),
                &base.display().to_string(),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git-daemon (part of the git package) is needed for URL clone tests");
        // Wait until it accepts connections (bounded; no timing is asserted).
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return GitDaemon { child, port };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!("git daemon did not start listening on port {port}");
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn url_sources_clone_through_the_git_cli_and_keep_no_url() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served");
    fs::create_dir_all(&served).unwrap();
    let h = history(&served);
    let daemon = GitDaemon::start(&served);
    let url = format!("git://127.0.0.1:{}/project", daemon.port);
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();

    let mirror = cache.mirror(&url).unwrap();
    assert_eq!(mirror.origin(), MirrorOrigin::Cloned);
    assert_eq!(mirror.source(), url);
    assert_eq!(mirror.resolve("main").unwrap(), id(&h.second));
    assert_eq!(mirror.resolve("HEAD").unwrap(), id(&h.second));
    assert_eq!(mirror.resolve("v1").unwrap(), id(&h.first));
    let config = fs::read_to_string(mirror.path().join("config")).unwrap();
    assert!(
        !config.contains("127.0.0.1"),
        "mirror config keeps no URL:\n{config}"
    );

    // Same repository, other spelling: reused.
    let again = cache.mirror(&format!("{url}.git/")).unwrap();
    assert_eq!(again.origin(), MirrorOrigin::Reused);

    let third = commit(&h.repo, &[("NEW.md", "new\n")], "third");
    let fresh = cache
        .mirror_with(
            &url,
            &MirrorOptions {
                refresh: true,
                ..MirrorOptions::default()
            },
        )
        .unwrap();
    assert_eq!(fresh.origin(), MirrorOrigin::Refreshed);
    assert_eq!(fresh.resolve("main").unwrap(), id(&third));

    let wt = fresh
        .materialize(&id(&third), &tmp.path().join("wt"))
        .unwrap();
    let wt_config = fs::read_to_string(wt.path().join(".git/config")).unwrap();
    assert!(
        !wt_config.contains("remote") && !wt_config.contains("url"),
        "{wt_config}"
    );

    let missing = format!("git://127.0.0.1:{}/no-such-repo", daemon.port);
    let err = cache.mirror(&missing).unwrap_err();
    assert!(matches!(err, CheckoutError::CloneFailed { .. }), "{err:?}");
}

#[test]
fn an_https_token_reaches_git_through_a_credential_helper_and_nowhere_else() {
    const TOKEN: &str = "ghr-mirror-8d21e4";
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served");
    fs::create_dir_all(&served).unwrap();
    let h = history(&served);
    git(
        &served,
        &["clone", "-q", "--bare", "project", "project.git"],
    );
    let server = airlock_testkit::githttp::GitHttpServer::start(&served, "x-access-token", TOKEN);
    let url = server.url("project.git");
    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();

    // No token: git is not prompted, the clone fails and says why.
    let err = cache.mirror(&url).unwrap_err().to_string();
    assert!(err.contains("git clone exited"), "{err}");
    // A wrong token: refused, and the token is not in the error.
    let wrong = MirrorOptions {
        http_token: Some("ghr-wrong-token".into()),
        ..MirrorOptions::default()
    };
    let err = cache.mirror_with(&url, &wrong).unwrap_err().to_string();
    assert!(!err.contains("ghr-wrong-token"), "{err}");
    // The right one: cloned, then refreshed with it.
    let right = MirrorOptions {
        refresh: true,
        http_token: Some(TOKEN.into()),
    };
    assert!(!format!("{right:?}").contains(TOKEN));
    let mirror = cache.mirror_with(&url, &right).unwrap();
    assert_eq!(mirror.origin(), MirrorOrigin::Cloned);
    assert_eq!(mirror.resolve("main").unwrap(), id(&h.second));
    let third = commit(&served.join("project"), &[("NEW.md", "new\n")], "third");
    git(
        &served.join("project"),
        &["push", "-q", "../project.git", "main"],
    );
    let again = cache.mirror_with(&url, &right).unwrap();
    assert_eq!(again.origin(), MirrorOrigin::Refreshed);
    assert_eq!(again.resolve("main").unwrap(), id(&third));
    assert!(server.requests().iter().any(|r| r.authorized));
    // The token is in no file of the cache.
    let mut stack = vec![tmp.path().join("cache")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(TOKEN),
                    "{} holds the token",
                    p.display()
                );
            }
        }
    }
}
