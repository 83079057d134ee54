//! The broker's signing key (`[signing]` in `broker.toml`): every commit the broker creates is
//! signed the way git signs with `gpg.format=ssh` (an SSH signature in the commit's `gpgsig`
//! header, namespace `git`), and every witness attestation gets a detached SSH signature
//! (namespace `airlock-attestation`). Both are made and checked by `ssh-keygen -Y sign|verify`,
//! run by the broker itself: the key never enters a sandbox, a supervisor or a command a run
//! chose, and `ssh-keygen` is never allowed to prompt (stdin closed, an empty passphrase given,
//! no askpass), so a key that cannot sign is an error naming it, never a hang.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Deserialize;

use crate::error::{Error, Result};

/// The namespace of a commit signature, as git signs and verifies it.
pub const GIT_NAMESPACE: &str = "git";
/// The namespace of an attestation's signature.
pub const ATTESTATION_NAMESPACE: &str = "airlock-attestation";
/// The only `format` accepted so far.
pub const SSH_FORMAT: &str = "ssh";

/// `[signing]`: the key every commit and attestation is signed with, and the allowed-signers
/// file they are checked against. The signing identity is each repository's `author_email`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningConfig {
    /// An SSH private key file (mode 0600; passphrase-protected only with the key in an agent
    /// that `SSH_AUTH_SOCK` names).
    pub key: PathBuf,
    /// `ssh` (the only format so far).
    #[serde(default = "ssh_format")]
    pub format: String,
    /// A file in ssh's allowed-signers format naming the key for each `author_email`, with
    /// `namespaces="git,airlock-attestation"` when it restricts namespaces.
    pub allowed_signers: PathBuf,
}

fn ssh_format() -> String {
    SSH_FORMAT.to_owned()
}

impl SigningConfig {
    /// The table with its paths resolved by `abs`, or what is wrong with it.
    pub fn resolved(
        self,
        abs: &dyn Fn(PathBuf) -> PathBuf,
    ) -> std::result::Result<SigningConfig, String> {
        if self.format != SSH_FORMAT {
            return Err(format!(
                "signing.format: {:?} is not supported: the only format is \"ssh\" (an SSH key, \
                 signing through ssh-keygen -Y sign)",
                self.format
            ));
        }
        for (name, path) in [
            ("key", &self.key),
            ("allowed_signers", &self.allowed_signers),
        ] {
            if path.as_os_str().is_empty() {
                return Err(format!("signing.{name}: must name a file"));
            }
        }
        Ok(SigningConfig {
            key: abs(self.key),
            format: self.format,
            allowed_signers: abs(self.allowed_signers),
        })
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Signing {
            key: self.key.clone(),
            message: message.into(),
        }
    }

    /// The armored SSH signature (`-----BEGIN SSH SIGNATURE-----`) of `data` in `namespace`.
    pub fn sign(&self, data: &[u8], namespace: &str) -> Result<String> {
        self.check_key_file()?;
        let dir = tempfile::tempdir().map_err(Error::io("creating a folder to sign in"))?;
        let file = dir.path().join("data");
        std::fs::write(&file, data).map_err(Error::io("writing the data to sign"))?;
        let out = ssh_keygen()
            .args(["-Y", "sign", "-n", namespace, "-P", "", "-f"])
            .arg(&self.key)
            .arg(&file)
            .output()
            .map_err(|e| self.error(format!("cannot run ssh-keygen: {e}")))?;
        if !out.status.success() {
            return Err(self.error(format!(
                "ssh-keygen -Y sign failed: {}; {}",
                said(&out.stderr),
                SIGN_HINT
            )));
        }
        std::fs::read_to_string(dir.path().join("data.sig"))
            .map_err(|e| self.error(format!("ssh-keygen wrote no signature: {e}")))
    }

    /// Whether `signature` is a good signature of `data` in `namespace` by a key the
    /// allowed-signers file lists for `identity`, valid now; the error says what ssh-keygen
    /// said (an unknown key, a namespace the file does not allow, an expired key).
    pub fn verify(
        &self,
        data: &[u8],
        signature: &str,
        identity: &str,
        namespace: &str,
    ) -> Result<()> {
        std::fs::File::open(&self.allowed_signers).map_err(|e| {
            self.error(format!(
                "the allowed_signers file {} cannot be read: {e}",
                self.allowed_signers.display()
            ))
        })?;
        let dir = tempfile::tempdir().map_err(Error::io("creating a folder to verify in"))?;
        let sig = dir.path().join("data.sig");
        std::fs::write(&sig, signature).map_err(Error::io("writing the signature to check"))?;
        let mut child = ssh_keygen()
            .args(["-Y", "verify", "-f"])
            .arg(&self.allowed_signers)
            .args(["-I", identity, "-n", namespace, "-s"])
            .arg(&sig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.error(format!("cannot run ssh-keygen: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(data)
                .map_err(Error::io("handing ssh-keygen the signed data"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(Error::io("waiting for ssh-keygen -Y verify"))?;
        if out.status.success() {
            return Ok(());
        }
        let said: Vec<String> = [said(&out.stdout), said(&out.stderr)]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        Err(self.error(format!(
            "a {namespace:?} signature does not verify for {identity} against {}: {}",
            self.allowed_signers.display(),
            said.join(" ")
        )))
    }

    /// `serve`'s start-up check: the key signs a probe in both namespaces, and each signature
    /// verifies against the allowed-signers file for every identity in `identities` now (so a
    /// missing key, a group- or world-readable one, one that needs a passphrase no agent holds,
    /// an unreadable allowed-signers file, a key it does not list or lists as expired keep the
    /// broker from starting).
    pub fn check_can_sign<'a>(&self, identities: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let probe = b"airlock-broker signing probe\n";
        let identities: BTreeSet<&str> = identities.into_iter().collect();
        for namespace in [GIT_NAMESPACE, ATTESTATION_NAMESPACE] {
            let signature = self.sign(probe, namespace)?;
            for identity in &identities {
                self.verify(probe, &signature, identity, namespace)
                    .map_err(|e| match e {
                        Error::Signing { key, message } => Error::Signing {
                            key,
                            message: format!(
                                "{message}; the allowed_signers file must list this key's \
                                 public key for {identity}, for namespaces \"git\" and \
                                 \"airlock-attestation\", valid now"
                            ),
                        },
                        other => other,
                    })?;
            }
        }
        Ok(())
    }

    /// The key file exists and is not readable by its group or others (ssh-keygen would refuse
    /// it with a warning that is easy to miss).
    fn check_key_file(&self) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&self.key).map_err(|e| {
            self.error(format!(
                "the key file cannot be read: {e}; set signing.key to an SSH private key \
                 (ssh-keygen -t ed25519 -N '' -f PATH)"
            ))
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(self.error(format!(
                "the key file has mode {mode:04o}, readable by others: chmod 600 {}",
                self.key.display()
            )));
        }
        Ok(())
    }
}

const SIGN_HINT: &str = "the key must be an unencrypted SSH private key of mode 0600, or one \
                         whose passphrase an ssh-agent (SSH_AUTH_SOCK) holds";

/// `ssh-keygen` that can never ask anything: no stdin, no askpass.
fn ssh_keygen() -> Command {
    let mut cmd = Command::new("ssh-keygen");
    cmd.stdin(Stdio::null())
        .env_remove("SSH_ASKPASS")
        .env_remove("DISPLAY")
        .env("SSH_ASKPASS_REQUIRE", "never");
    cmd
}

/// What a tool said on a stream, trimmed to one bounded line.
fn said(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '@'))
        .collect();
    joined.join(" ").chars().take(600).collect()
}

/// `serve`'s start-up: with `[signing]`, the key must sign for every identity (each
/// repository's `author_email`) or `serve` does not start; without it, say once that commits
/// go out unsigned.
pub fn check_at_start<'a>(
    signing: Option<&SigningConfig>,
    identities: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let Some(signing) = signing else {
        eprintln!(
            "airlock-broker: no [signing] in broker.toml: commits are pushed unsigned and \
             attestations are not signed (set signing.key and signing.allowed_signers)"
        );
        return Ok(());
    };
    let mut identities: Vec<&str> = identities.into_iter().collect();
    if identities.is_empty() {
        identities.push(DEFAULT_IDENTITY);
    }
    signing.check_can_sign(identities)?;
    eprintln!(
        "airlock-broker: commits and attestations are signed with {}",
        signing.key.display()
    );
    Ok(())
}

/// The identity of a broker with no repository configured (the default `author_email`).
const DEFAULT_IDENTITY: &str = "airlock-broker@localhost";

/// Create the commit of `tree` on `parents` in `repo`, signed with `signing` when it is set
/// (the `gpgsig` header git writes with `gpg.format=ssh`), unsigned otherwise. `previous` is a
/// commit an earlier attempt made (the branch's local ref): when its signed content is this
/// very commit, it is reused, so a publication that runs again pushes the same commit even
/// with a key whose signatures are not deterministic.
pub fn create_commit(
    repo: &git2::Repository,
    signing: Option<&SigningConfig>,
    previous: Option<git2::Oid>,
    author: &git2::Signature<'_>,
    message: &str,
    tree: &git2::Tree<'_>,
    parents: &[&git2::Commit<'_>],
) -> Result<git2::Oid> {
    let Some(signing) = signing else {
        return repo
            .commit(None, author, author, message, tree, parents)
            .map_err(Error::git("committing the approved diff"));
    };
    let buffer = repo
        .commit_create_buffer(author, author, message, tree, parents)
        .map_err(Error::git("building the commit to sign"))?;
    let content = buffer
        .as_str()
        .map_err(|_| signing.error("the commit to sign is not UTF-8"))?;
    if let Some(oid) = previous
        && let Ok((_, signed)) = repo.extract_signature(&oid, None)
        && &*signed == content.as_bytes()
    {
        return Ok(oid);
    }
    let signature = signing.sign(content.as_bytes(), GIT_NAMESPACE)?;
    // git writes the armored signature without its final newline (each line continued with a
    // space); libgit2 adds the header's own line end.
    repo.commit_signed(content, signature.trim_end(), None)
        .map_err(Error::git("writing the signed commit"))
}
