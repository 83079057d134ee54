//! A run as the broker knows it: its registration (pin, issue, tests, write allowlist, test
//! environment), how its tree reaches the broker, the kind of change it submits, and the
//! `open_pr` idempotency key.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{TestEnvironment, TestRunner};

/// What a supervisor tells the broker about a run when the run starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRegistration {
    /// The run's id (unique per broker).
    pub run_id: String,
    /// Repository name as configured in `broker.toml`.
    pub repository: String,
    /// The pinned base commit, 40 lower-case hex digits.
    pub base_commit: String,
    /// The issue the run works on: an `open_pr` must name it. Required at registration (the
    /// default only reads registrations stored before the field existed).
    #[serde(default)]
    pub issue_id: String,
    /// The GitHub issue number the issue id stands for (`ACME-123` taken from GitHub issue
    /// 123), when intake knows one: the draft pull request then says `Closes #N`. Optional, so
    /// supervisors that do not send it still register.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_number: Option<u64>,
    /// The run's worktree; must lie under the configured runs root.
    pub worktree: String,
    /// The operator's full-suite test command (argv), run with the tree as working directory.
    pub test_command: Vec<String>,
    /// How that command selects one test and reports results.
    pub test_runner: TestRunner,
    /// The run's write allowlist (glob patterns, interpreted by `airlock-policies`).
    pub write_allowlist: Vec<String>,
    /// The environment of every test command (read-only grants, variables, prepared links);
    /// each granted path must be allowed by `broker.toml`.
    #[serde(default)]
    pub test_env: TestEnvironment,
    /// How long, in seconds, the supervisor keeps reconnecting and resending an `open_pr` whose
    /// connection broke (a broker restart). An intake cut short by a crash and taken up again
    /// later than this after the request arrived is abandoned, not queued: the supervisor has
    /// given up by then, and the run's outcome and the queue must agree. Absent:
    /// [`DEFAULT_RECONNECT_SECS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_secs: Option<u64>,
    /// The issue as the supervisor read it, shown to the approver by `airlock-broker show`
    /// (escaped: it is repository text). Absent in registrations from supervisors that predate
    /// it; the broker never acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueText>,
    /// For a follow-up run: the queue item a reviewer requested changes on. The broker checks
    /// that `base_commit` is the head of the branch it pushed for that item (its pin when it
    /// was never published), queues the run's pull request as a follow-up of it, and on
    /// approval pushes a new commit to the same branch instead of opening a new pull request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up_of: Option<i64>,
    /// What kind of change the run submits, which decides the witness its `open_pr` gets.
    /// Absent: [`ChangeKind::Fix`] (registrations from before the field existed).
    #[serde(default, skip_serializing_if = "ChangeKind::is_fix")]
    pub change: ChangeKind,
    /// How the broker gets the run's tree: from `worktree` on its own filesystem (the default,
    /// a run on the broker's host), or as bytes with every `open_pr` (a run on another host).
    #[serde(default, skip_serializing_if = "TreeTransfer::is_shared")]
    pub tree: TreeTransfer,
}

/// How the broker gets a run's tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeTransfer {
    /// The broker reads the run's worktree, which must lie under its runs root.
    #[default]
    Shared,
    /// Every `open_pr` carries the run's change ([`SubmittedChange`]): the broker rebuilds the
    /// tree from its own clone at the pin and checks that, never a path of the run's host.
    /// The registration's `worktree` is then only the run's own record of where it worked.
    Bytes,
}

impl TreeTransfer {
    /// Whether the broker reads the run's worktree itself.
    pub fn is_shared(&self) -> bool {
        *self == TreeTransfer::Shared
    }
}

/// The largest patch (decoded) an `open_pr` may carry.
pub const MAX_PATCH_BYTES: usize = 8 * 1024 * 1024;

/// A run's change as bytes: a git patch (the `git diff --binary` format: binary files as
/// `GIT binary patch` hunks, modes and symlinks included) from the pinned commit to the run's
/// tree. The broker applies it to its own clone's pin; nothing else of the run's is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedChange {
    /// The commit the patch applies to: the run's pin.
    pub base_commit: String,
    /// The patch, standard base64 (a patch need not be UTF-8).
    pub patch_base64: String,
}

impl SubmittedChange {
    /// The change for `patch` against `base_commit`.
    pub fn new(base_commit: &str, patch: &[u8]) -> SubmittedChange {
        use base64::Engine as _;
        SubmittedChange {
            base_commit: base_commit.to_owned(),
            patch_base64: base64::engine::general_purpose::STANDARD.encode(patch),
        }
    }

    /// The patch's bytes; an error says what is wrong with the encoding or the size.
    pub fn patch(&self) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        if self.patch_base64.len() / 4 * 3 > MAX_PATCH_BYTES + 3 {
            return Err(format!(
                "the patch is larger than {MAX_PATCH_BYTES} bytes: split the change"
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.patch_base64.as_bytes())
            .map_err(|e| format!("patch_base64 is not standard base64: {e}"))?;
        if bytes.len() > MAX_PATCH_BYTES {
            return Err(format!(
                "the patch is larger than {MAX_PATCH_BYTES} bytes: split the change"
            ));
        }
        Ok(bytes)
    }
}

/// What kind of change a run submits (the agent definition's `output.change`), and so what
/// the broker's witness proves about it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// A fix: a claimed test fails on the pin and passes patched, and the patched full run
    /// keeps every test that passed at base.
    #[default]
    Fix,
    /// Documentation: no test is claimed or touched; the patched full run keeps every test
    /// that passed at base.
    Docs,
}

impl ChangeKind {
    /// Whether this is [`ChangeKind::Fix`] (the default, left out on the wire).
    pub fn is_fix(&self) -> bool {
        *self == ChangeKind::Fix
    }

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Fix => "fix",
            ChangeKind::Docs => "docs",
        }
    }
}

/// The text of the issue a run works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueText {
    /// One-line title.
    pub title: String,
    /// Free-text body.
    #[serde(default)]
    pub body: String,
}

/// The reconnect window of a registration that does not state one, in seconds.
pub const DEFAULT_RECONNECT_SECS: u64 = 600;

impl RunRegistration {
    /// The run's reconnect window in seconds.
    pub fn reconnect_window(&self) -> u64 {
        self.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS)
    }
}

/// The idempotency key of a run's `call`-th `open_pr` call (counted from 1 over the whole run,
/// a resumed run's included): SHA-256 of the run id, a NUL byte, `open_pr`, a NUL byte and the
/// call's number. The key names the call, not its bytes: a supervisor that resends a call after
/// a broken connection sends the same key and is answered once, while a second call with the
/// same arguments is another request, which the broker refuses when the first was accepted.
pub fn open_pr_call_id(run_id: &str, call: u32) -> String {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0u8]);
    h.update(b"open_pr");
    h.update([0u8]);
    h.update(call.to_string().as_bytes());
    hex::encode(h.finalize())
}

/// A key derived from a submission's bytes: SHA-256 of the run id, a NUL byte and the exact
/// argument bytes. For a sender that makes each submission once and resends only that one (a
/// reviewer's `submit_review`, a test's client); a run's `open_pr` calls are keyed by
/// [`open_pr_call_id`], since a model may make the same call twice.
pub fn request_id_for(run_id: &str, args: &str) -> String {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0u8]);
    h.update(args.as_bytes());
    hex::encode(h.finalize())
}
