//! Operational errors of the broker: the things that go wrong around a submission (bad
//! configuration, storage, git, the socket), as opposed to the agent-facing refusal codes of the
//! open_pr error contract, which are replies and live in `airlock-schemas`.

use std::path::PathBuf;

/// Everything that can stop the broker from doing its own job.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file could not be read.
    #[error("cannot read broker config {path}: {source}")]
    ConfigRead {
        /// The file that was read.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The configuration file is not valid.
    #[error("invalid broker config {path}: {message}")]
    ConfigInvalid {
        /// The file that was read.
        path: PathBuf,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The state database failed.
    #[error("state database ({context}): {source}")]
    Store {
        /// What the broker was doing.
        context: String,
        /// The SQLite failure.
        source: rusqlite::Error,
    },
    /// The PostgreSQL state database failed (or could not be reached).
    #[error("state database ({context}): {source}")]
    Postgres {
        /// What the broker was doing.
        context: String,
        /// The PostgreSQL client's failure (it names the server's error code and message).
        source: postgres::Error,
    },
    /// `state_db_password_env` names a variable that is unset or empty in this process.
    #[error(
        "the state database password variable {var} (state_db_password_env) is unset or empty in this process: set it and try again"
    )]
    MissingStatePassword {
        /// The variable's name (never its value).
        var: String,
    },
    /// A value stored in the state database does not have the expected shape.
    #[error("state database holds a malformed {what}: {message}")]
    StoreCorrupt {
        /// Which stored value.
        what: String,
        /// Why it could not be read.
        message: String,
    },
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the broker was doing, naming the path.
        context: String,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// A git operation in the broker's own clone failed.
    #[error("git ({context}): {source}")]
    Git {
        /// What the broker was doing.
        context: String,
        /// The libgit2 failure.
        source: git2::Error,
    },
    /// A peer sent something that is not a protocol message, or replied out of contract.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A run registration was refused.
    #[error("run registration refused: {0}")]
    Registration(String),
    /// The named run is not registered.
    #[error("run {0:?} is not registered with this broker")]
    UnknownRun(String),
    /// The named queue item does not exist.
    #[error("no queue item with id {0}")]
    UnknownQueueItem(i64),
    /// The queue item is not in a state that allows the requested action.
    #[error("queue item {id} is {status}: {action} is not possible")]
    WrongState {
        /// The queue item.
        id: i64,
        /// Its current status.
        status: String,
        /// What was attempted.
        action: String,
    },
    /// A denial needs a one-line, non-empty reason.
    #[error("a denial needs a reason on one line (non-empty, no newline)")]
    BadReason,
    /// An approval's reason, when given, is one line.
    #[error("an approval's reason must be one line (no newline)")]
    BadApprovalReason,
    /// Nobody to record as the decider: no `--by` and no `$USER`.
    #[error(
        "no name to record as the approver: pass --by NAME, or set $USER (or $AIRLOCK_REVIEWER)"
    )]
    NoDecider,
    /// Approvers are registered and the decider is not one of them.
    #[error(
        "{0:?} is not a registered approver: pass --by with a name `airlock-broker approver list` shows"
    )]
    UnknownApprover(String),
    /// `approver add` with a name that is taken.
    #[error(
        "an approver named {0:?} already exists: remove it first (`airlock-broker approver remove NAME`)"
    )]
    ApproverExists(String),
    /// An approver's name that cannot be recorded.
    #[error("approver name refused: {0}")]
    BadApproverName(String),
    /// A risky item's approval without the confirmation or the reason it needs.
    #[error(
        "queue item {id} is risky ({summary}): approving it needs {missing}; nothing was recorded"
    )]
    RiskNotConfirmed {
        /// The queue item.
        id: i64,
        /// The risk signals (`Risk::summary`).
        summary: String,
        /// What the approval lacked, in words.
        missing: String,
    },
    /// A senior-route item while no approver is registered.
    #[error(
        "queue item {id} takes the senior route ({summary}): it needs two approvals by two named approvers, one of them senior, and none is registered: add them with `airlock-broker approver add NAME --senior`"
    )]
    SeniorRouteWithoutApprovers {
        /// The queue item.
        id: i64,
        /// The risk signals.
        summary: String,
    },
    /// The same approver approved the item before.
    #[error(
        "{by:?} already approved queue item {id}: its senior route needs another approver, one of them senior"
    )]
    AlreadyApproved {
        /// The queue item.
        id: i64,
        /// The approver.
        by: String,
    },
    /// `publish N` on an item that is published already: nothing is pushed again.
    #[error("queue item {id} is published already ({what}): nothing to publish again")]
    AlreadyPublished {
        /// The queue item.
        id: i64,
        /// What was published: the branch and commit, and the pull request or why none.
        what: String,
    },
    /// A repository's `clone` in broker.toml names a directory that does not exist.
    #[error(
        "the broker's clone {} does not exist: create it with `git clone REMOTE {}` (the \
         repository's remote) or fix `clone` in broker.toml",
        path.display(),
        path.display()
    )]
    CloneMissing {
        /// The configured clone.
        path: PathBuf,
    },
    /// A reviewer's action on a pull request does not start a follow-up, and why.
    #[error("pull request feedback refused: {0}")]
    FeedbackRefused(String),
    /// A request for changes needs feedback.
    #[error("a request for changes needs feedback: non-empty, at most {max} characters")]
    BadFeedback {
        /// The longest feedback taken.
        max: usize,
    },
    /// A follow-up's base is no longer the head of the branch it is to be pushed to (another
    /// commit was published there since it started).
    #[error(
        "queue item {id} follows up on branch {branch} at {base}, but the branch head is now {head}: \
         it cannot be pushed as a fast-forward; deny it and start a new follow-up"
    )]
    FollowUpStale {
        /// The queue item.
        id: i64,
        /// The branch.
        branch: String,
        /// The commit the follow-up was made on.
        base: String,
        /// The branch's head now.
        head: String,
    },
    /// A command-line value is not valid (the message names the flag).
    #[error("{0}")]
    BadArgument(String),
    /// A gate of `broker.toml` could not be loaded (unreadable, not a gate component, or one of
    /// its examples got another verdict).
    #[error(transparent)]
    Gate(#[from] airlock_gates::Error),
    /// The witness run could not be carried out at all (not the same as a red witness).
    #[error("witness could not run: {0}")]
    Witness(String),
    /// `forge_token_env` names a variable that is unset or empty where publication happens.
    #[error(
        "the forge token variable {var} (forge_token_env of repository {repository:?}) is unset or empty in this process: set it and try again (nothing was pushed)"
    )]
    MissingForgeToken {
        /// The repository.
        repository: String,
        /// The variable's name (never its value).
        var: String,
    },
    /// The remote refused the push's credentials (HTTPS token or SSH key).
    #[error(
        "the remote {remote} refused the credentials of repository {repository:?} ({credential}) when pushing {branch}: check that it is valid and may push there; git said: {detail}"
    )]
    PushCredentialsRejected {
        /// The repository.
        repository: String,
        /// The branch.
        branch: String,
        /// The remote as configured.
        remote: String,
        /// Which credential: the token variable's name or the key's path (never a secret).
        credential: String,
        /// What git reported (with any token replaced by `***`).
        detail: String,
    },
    /// `git push` failed or the remote rejected the branch.
    #[error("pushing {branch} to {remote} failed: {detail}")]
    PushFailed {
        /// The branch.
        branch: String,
        /// The remote as configured.
        remote: String,
        /// What git reported (with any token replaced by `***`).
        detail: String,
    },
    /// A publication failed; the item is left `publish_failed` with `message`.
    #[error(
        "publication of queue item {id} failed; it is now publish_failed (`airlock-broker publish {id}` retries, `airlock-broker abandon {id} --reason ...` ends it): {message}"
    )]
    PublishFailed {
        /// The queue item.
        id: i64,
        /// The error, as stored with the item.
        message: String,
    },
    /// The forge refused or failed the pull-request request.
    #[error("forge: {0}")]
    Forge(String),
    /// A forge reached through `airlock_forge` (GitLab) refused or failed a request (the error
    /// names the request and what to do; it never carries the token).
    #[error("forge: {0}")]
    ForgeApi(#[from] airlock_forge::Error),
    /// A claim request was refused (unknown repository, bad holder or lease).
    #[error("claim refused: {0}")]
    Claim(String),
    /// A renewal or release by a worker that does not hold the claim.
    #[error(
        "issue #{} of {:?} is not held by {holder:?} (it is {state}): that worker must stop working on it",
        .issue.issue_number,
        .issue.repository
    )]
    ClaimNotHeld {
        /// The issue.
        issue: airlock_protocol::IssueKey,
        /// Who asked.
        holder: String,
        /// Where the claim stands instead.
        state: String,
    },
    /// The audit log refused an event.
    #[error("audit log: {0}")]
    Audit(String),
    /// The web page (`airlock-broker ui`) could not start or answer: what went wrong.
    #[error("ui: {0}")]
    Ui(String),
    /// A PEM file of `[tls]` is missing or unusable: `serve` does not start.
    #[error("broker config [tls]: {0}")]
    TlsFile(#[from] airlock_protocol::tls::PemError),
    /// The TLS listener could not be set up from `[tls]` (the key does not match the
    /// certificate, the client CA is unusable).
    #[error("broker config [tls]: {0}")]
    TlsSetup(String),
    /// A shared rule or contract crate reported an operational failure.
    #[error("{0}")]
    Dependency(String),
    /// The `[signing]` key cannot sign, or a signature made with it does not verify.
    #[error("signing key {key}: {message}")]
    Signing {
        /// The key file of `[signing]`.
        key: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
    /// An attestation is not the broker's unchanged statement of its item.
    #[error("attestation {file} is refused: {problem}")]
    AttestationRefused {
        /// The statement file checked.
        file: PathBuf,
        /// What differs or does not verify.
        problem: String,
    },
    /// An operation needs `[signing]`, which broker.toml does not have.
    #[error(
        "{action} needs a [signing] table in broker.toml (key, format = \"ssh\", allowed_signers)"
    )]
    SigningNotConfigured {
        /// What was asked.
        action: String,
    },
}

/// Result of broker operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wrap an I/O error with what the broker was doing.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    /// Wrap a libgit2 error with what the broker was doing.
    pub(crate) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> Error {
        let context = context.into();
        move |source| Error::Git { context, source }
    }

    /// Wrap a PostgreSQL error with what the broker was doing.
    pub(crate) fn postgres(context: impl Into<String>) -> impl FnOnce(postgres::Error) -> Error {
        let context = context.into();
        move |source| Error::Postgres { context, source }
    }

    /// Wrap an SQLite error with what the broker was doing.
    pub(crate) fn store(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Error {
        let context = context.into();
        move |source| Error::Store { context, source }
    }
}
