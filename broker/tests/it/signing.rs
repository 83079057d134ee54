//! `[signing]`: an approved item's commit, pushed over a real smart-HTTP git server, verifies
//! with `git verify-commit` (`gpg.format=ssh`, the test's allowed signers); the witness
//! attestation (`attest N --out DIR`) verifies with `ssh-keygen -Y verify`, stops verifying
//! when one byte changes, matches `show --json`, and is posted on the pull request; a key that
//! cannot sign keeps `serve` from starting, naming the key; no `[signing]` means unsigned
//! commits, said once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::*;
use airlock_testkit::githttp::GitHttpServer;
use serde_json::Value;

const VAR: &str = "AIRLOCK_IT_SIGNING_TOKEN";
const TOKEN: &str = "tok-signing-4c1e";
const IDENTITY: &str = "airlock-broker@localhost";

/// A fresh ed25519 key (`passphrase` empty for none) and an allowed-signers file naming it for
/// the broker's identity in both namespaces, with `options` added (e.g. `valid-before=...`).
struct Keys {
    _dir: tempfile::TempDir,
    key: PathBuf,
    allowed: PathBuf,
}

fn keys(passphrase: &str, options: &str) -> Keys {
    let dir = tempfile::Builder::new()
        .prefix("signing-keys-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let key = dir.path().join("broker_key");
    let out = Command::new("ssh-keygen")
        .args([
            "-q", "-t", "ed25519", "-C", "broker", "-N", passphrase, "-f",
        ])
        .arg(&key)
        .stdin(Stdio::null())
        .output()
        .expect("ssh-keygen is needed for the signing tests");
    assert!(out.status.success(), "{out:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = dir.path().join("allowed_signers");
    std::fs::write(
        &allowed,
        format!(
            "{IDENTITY} namespaces=\"git,airlock-attestation\"{options} {}",
            public.trim()
        ),
    )
    .unwrap();
    Keys {
        _dir: dir,
        key,
        allowed,
    }
}

fn signing_table(keys: &Keys) -> String {
    format!(
        "[signing]\nkey = \"{}\"\nformat = \"ssh\"\nallowed_signers = \"{}\"\n",
        keys.key.display(),
        keys.allowed.display()
    )
}

/// A fixture pushing over HTTP to `remote.git`, with the forge mock and `[signing]`.
fn signed_fixture(keys: &Keys) -> (Fixture, GitHttpServer, MockForge) {
    let forge = MockForge::start();
    let fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), VAR.into())),
        extra_config: signing_table(keys),
        ..Options::default()
    });
    let server = GitHttpServer::start(fx.dir.path(), "x-access-token", TOKEN);
    fx.use_remote(&server.url("remote.git"));
    (fx, server, forge)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `ssh-keygen -Y verify` of `file` with `file.sig`, as a verifier without airlock runs it.
fn ssh_verify(allowed: &Path, file: &Path) -> std::process::Output {
    let sig = PathBuf::from(format!("{}.sig", file.display()));
    Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(allowed)
        .args(["-I", IDENTITY, "-n", "airlock-attestation", "-s"])
        .arg(&sig)
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .unwrap()
}

#[test]
fn an_approved_commit_verifies_with_git_and_its_attestation_with_ssh_keygen() {
    let keys = keys("", "");
    let (mut fx, server, forge) = signed_fixture(&keys);
    fx.start_with_env(&[(VAR, TOKEN)]);
    let id = queue_honest_numbered(&fx, "run-signed-1", 42);
    let out = fx.cli_env(&["approve", &id.to_string()], &[(VAR, TOKEN)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let commit = fx
        .remote_ref(&format!("airlock/CALC-42-{id}"))
        .expect("pushed over HTTP");

    // A clone of the HTTP remote, as a reviewer would make it, verifies the commit.
    let url = server
        .url("remote.git")
        .replacen("://", &format!("://x-access-token:{TOKEN}@"), 1);
    let clone = fx.dir.path().join("reviewer");
    git(
        fx.dir.path(),
        &["clone", "-q", &url, clone.to_str().unwrap()],
    );
    git(&clone, &["fetch", "-q", "origin", &commit]);
    let allowed = format!("gpg.ssh.allowedSignersFile={}", keys.allowed.display());
    let verified = Command::new("git")
        .arg("-C")
        .arg(&clone)
        .args(["-c", "gpg.format=ssh", "-c", &allowed])
        .args(["verify-commit", "-v", &commit])
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "git verify-commit: {}",
        text(&verified.stderr)
    );
    assert!(
        text(&verified.stderr).contains(&format!("Good \"git\" signature for {IDENTITY}")),
        "{}",
        text(&verified.stderr)
    );

    // The attestation, written and signed.
    let dir = fx.dir.path().join("attestations");
    let out = fx.cli(&["attest", &id.to_string(), "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = dir.join(format!("{id}.intoto.json"));
    let checked = ssh_verify(&keys.allowed, &file);
    assert!(checked.status.success(), "{}", text(&checked.stderr));
    let out = fx.cli(&[
        "attest",
        &id.to_string(),
        "--verify",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Its subject and predicate are what `show --json` says.
    let statement: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let shown = fx.cli(&["show", &id.to_string(), "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["predicateType"], "https://airlock.dev/witness/v1");
    let tree = git(&clone, &["rev-parse", &format!("{commit}^{{tree}}")]);
    assert_eq!(statement["subject"][0]["digest"]["gitTree"], tree.as_str());
    assert_eq!(
        statement["subject"][1]["digest"]["gitCommit"],
        commit.as_str()
    );
    let p = &statement["predicate"];
    assert_eq!(p["queue_item"], id);
    assert_eq!(p["base_commit"], shown["base_commit"]);
    assert_eq!(p["base_commit"], fx.pin.as_str());
    assert_eq!(p["computed_digest"], shown["computed_digest"]);
    assert_eq!(p["flags"], shown["flags"]);
    assert_eq!(p["gates"], shown["gates"]);
    assert_eq!(p["judge"], shown["judge"]);
    assert_eq!(p["fail_to_pass_test"], NEW_TEST_NAME);
    let steps = shown["witness"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert_eq!(p["witness"].as_array().unwrap().len(), steps.len());
    for (attested, step) in p["witness"].as_array().unwrap().iter().zip(steps) {
        for field in ["step", "expect", "argv", "exit_code", "tests"] {
            assert_eq!(attested[field], step[field], "{field}");
        }
        let env = step.get("env").cloned().unwrap_or(serde_json::json!({}));
        assert_eq!(attested["env"], env);
    }
    assert_eq!(p["decision"]["verdict"], "approved");
    assert_eq!(p["decision"]["decided_by"], shown["decided_by"]);
    assert_eq!(p["decision"]["approvals"], shown["approvals"]);
    assert_eq!(p["policy"]["origin"], "builtin");
    assert_eq!(p["policy"]["version"], 1);

    // The pull request got the attestation, the same statement, with its signature.
    let comments: Vec<SeenRequest> = forge
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/repos/acme/calc/issues/1/comments")
        .collect();
    assert_eq!(comments.len(), 1, "one attestation comment");
    let body: Value = serde_json::from_str(&comments[0].body).unwrap();
    let body = body["body"].as_str().unwrap();
    assert!(
        body.starts_with("<!-- airlock:witness-attestation -->\n### airlock/witness\n"),
        "{body}"
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(body.contains(&format!("```json\n{written}```\n")), "{body}");
    assert!(body.contains("-----BEGIN SSH SIGNATURE-----"), "{body}");
    assert!(
        fx.audit_kinds()
            .iter()
            .any(|(_, p)| p["code"] == "ATTESTATION_POSTED"),
        "the posted attestation is audited"
    );
    // Its own comment, seen again through a webhook, is never a reviewer's feedback.
    forge.route(
        "/repos/acme/calc/issues/comments/77",
        200,
        serde_json::json!({
            "body": body, "user": {"login": "broker-bot"}, "author_association": "MEMBER",
            "issue_url": "https://api.forge.example/repos/acme/calc/issues/1",
        }),
    );
    let reply = fx
        .client()
        .request(&airlock_protocol::Request::PrFeedback(
            airlock_protocol::PrFeedback {
                forge_repo: "acme/calc".to_owned(),
                pull_request: 1,
                source: airlock_protocol::FeedbackSource {
                    kind: airlock_protocol::FeedbackKind::IssueComment,
                    id: 77,
                },
            },
        ))
        .unwrap();
    let airlock_broker::BrokerReply::Failed { message } = reply else {
        panic!("{reply:?}")
    };
    assert!(message.contains("own witness attestation"), "{message}");

    // One byte changed: ssh-keygen and `attest --verify` both refuse it.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = written.find("\"exit_code\": ").unwrap() + "\"exit_code\": ".len();
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(&file, &bytes).unwrap();
    let checked = ssh_verify(&keys.allowed, &file);
    assert!(!checked.status.success(), "an edited statement verified");
    let out = fx.cli(&[
        "attest",
        &id.to_string(),
        "--verify",
        file.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/predicate/witness/0/exit_code"),
        "{stderr}"
    );
    assert!(stderr.contains("does not verify"), "{stderr}");
    assert!(
        fx.audit_kinds()
            .iter()
            .any(|(_, p)| p["code"] == "ATTESTATION_REFUSED"),
        "the refusal is audited"
    );
}

/// `airlock-broker serve` that must not start: its exit code and stderr.
fn serve_refused(fx: &Fixture) -> (Option<i32>, String) {
    let log = fx.dir.path().join("serve.stderr");
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .arg("serve")
        .env_remove("SSH_AUTH_SOCK")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline || fx.socket.exists() {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "serve started with a key that cannot sign: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.code(), std::fs::read_to_string(&log).unwrap())
}

fn fixture_signing(keys: &Keys) -> Fixture {
    Fixture::with(Options {
        extra_config: signing_table(keys),
        ..Options::default()
    })
}

#[test]
fn serve_refuses_a_key_that_cannot_sign_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let key_name = |keys: &Keys| keys.key.display().to_string();

    let missing = keys("", "");
    std::fs::remove_file(&missing.key).unwrap();
    let (code, stderr) = serve_refused(&fixture_signing(&missing));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&key_name(&missing)), "{stderr}");
    assert!(stderr.contains("cannot be read"), "{stderr}");

    let open = keys("", "");
    std::fs::set_permissions(&open.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, stderr) = serve_refused(&fixture_signing(&open));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&key_name(&open)), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");

    let locked = keys("secret-passphrase", "");
    let (code, stderr) = serve_refused(&fixture_signing(&locked));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&key_name(&locked)), "{stderr}");
    assert!(stderr.contains("passphrase"), "{stderr}");

    let expired = keys("", ",valid-before=\"20200101\"");
    let (code, stderr) = serve_refused(&fixture_signing(&expired));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&key_name(&expired)), "{stderr}");
    assert!(stderr.contains("expired"), "{stderr}");

    let unlisted = keys("", "");
    std::fs::write(&unlisted.allowed, "").unwrap();
    let (code, stderr) = serve_refused(&fixture_signing(&unlisted));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not verify"), "{stderr}");

    let gpg = keys("", "");
    let fx = fixture_signing(&gpg);
    let config = std::fs::read_to_string(&fx.config).unwrap();
    std::fs::write(
        &fx.config,
        config.replace("format = \"ssh\"", "format = \"openpgp\""),
    )
    .unwrap();
    let (code, stderr) = serve_refused(&fx);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("\"openpgp\" is not supported"), "{stderr}");
}

#[test]
fn without_signing_serve_says_commits_are_unsigned_and_attest_writes_an_unsigned_statement() {
    let mut fx = Fixture::new();
    let log = fx.dir.path().join("serve.stderr");
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    fx.server = Some(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(&fx.socket).is_err() {
        assert!(Instant::now() < deadline, "serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        stderr.matches("commits are pushed unsigned").count(),
        1,
        "{stderr}"
    );

    let id = queue_honest(&fx, "run-unsigned-1");
    let dir = fx.dir.path().join("attestations");
    let out = fx.cli(&["attest", &id.to_string(), "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("unsigned"),
        "{}",
        text(&out.stdout)
    );
    let file = dir.join(format!("{id}.intoto.json"));
    assert!(file.exists() && !dir.join(format!("{id}.intoto.json.sig")).exists());
    let statement: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        statement["predicate"]["decision"],
        Value::Null,
        "still queued"
    );
    assert_eq!(statement["subject"].as_array().unwrap().len(), 1);
    // Printed without --out: the same statement.
    let printed = fx.cli(&["attest", &id.to_string()]);
    assert_eq!(printed.stdout, std::fs::read(&file).unwrap());
    let out = fx.cli(&[
        "attest",
        &id.to_string(),
        "--verify",
        file.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("[signing]"), "{stderr}");

    // Approved, the commit is unsigned as before.
    let out = fx.cli(&["approve", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let commit = fx.remote_ref(&format!("airlock/CALC-42-{id}")).unwrap();
    let raw = git(&fx.remote, &["cat-file", "commit", &commit]);
    assert!(!raw.contains("gpgsig"), "{raw}");
}

#[test]
fn a_statement_of_a_queued_item_still_verifies_after_its_approval() {
    let keys = keys("", "");
    let mut fx = fixture_signing(&keys);
    fx.start();
    let id = queue_honest(&fx, "run-signed-early");
    let dir = fx.dir.path().join("early");
    let out = fx.cli(&["attest", &id.to_string(), "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = dir.join(format!("{id}.intoto.json"));
    let out = fx.cli(&["approve", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The decision and the commit came later; what the statement says is still the record.
    let out = fx.cli(&[
        "attest",
        &id.to_string(),
        "--verify",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The pushed commit to a local remote is signed too.
    let commit = fx.remote_ref(&format!("airlock/CALC-42-{id}")).unwrap();
    let allowed = format!("gpg.ssh.allowedSignersFile={}", keys.allowed.display());
    let verified = Command::new("git")
        .arg("-C")
        .arg(&fx.remote)
        .args([
            "-c",
            "gpg.format=ssh",
            "-c",
            &allowed,
            "verify-commit",
            &commit,
        ])
        .output()
        .unwrap();
    assert!(verified.status.success(), "{}", text(&verified.stderr));
}
