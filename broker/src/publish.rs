//! Publication of an approved pull request: the diff committed on the pinned base in the
//! broker's own clone with git2, branch `airlock/<issue-id>-<queue id>` pushed to the configured
//! remote with the git CLI (HTTPS with the forge token through a credential helper, SSH with the
//! configured key, or a local path), and, when a forge token is configured, a draft pull
//! request through the GitHub REST API (`airlock_forge::github`, the one GitHub client).
//! Every step is idempotent so a publication cut short by a crash can simply run again. The
//! token is read from the environment of the process that publishes (`approve`, `publish`, or
//! `serve` resuming), here and nowhere else, and goes nowhere but the forge: every error text
//! that leaves this module has it replaced by `***`.

use airlock_forge::github::{GitHub, GitHubApi};
use airlock_forge::{DraftRequest, Error as ForgeError, Forge as _, TokenSource};
use airlock_protocol::{FeedbackKind, FeedbackSource};

use crate::config::RepositoryConfig;
use crate::error::{Error, Result};
use crate::store::{QueueItem, ReviewItem};

pub use crate::pr_text::{github_issue_number, pr_body};

/// What was pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `airlock/<issue-id>-<queue id>`.
    pub branch: String,
    /// The commit id.
    pub commit: String,
}

/// The branch an approved pull request is pushed to: one per queue item, so two runs on one
/// issue never push to the same branch.
pub fn branch_name(issue_id: &str, queue_id: i64) -> String {
    format!("airlock/{issue_id}-{queue_id}")
}

/// The forge token of `repository`, read from this process's environment: `None` when no
/// `forge_token_env` is configured; an error naming the variable (never a value) when it is
/// configured but unset or empty.
pub fn forge_token(repository: &str, cfg: &RepositoryConfig) -> Result<Option<String>> {
    let Some(name) = cfg.forge_token_env.as_ref() else {
        return Ok(None);
    };
    match std::env::var(name) {
        Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_owned())),
        _ => Err(Error::MissingForgeToken {
            repository: repository.to_owned(),
            var: name.clone(),
        }),
    }
}

/// `err` with every occurrence of the token replaced by `***`.
fn redact(err: Error, token: Option<&str>) -> Error {
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return err;
    };
    let text = err.to_string();
    if text.contains(token) {
        Error::Forge(text.replace(token, "***"))
    } else {
        err
    }
}

/// Commit the queued diff on the pinned base in the broker's clone and push the branch: the
/// item's own (`airlock/<issue-id>-<queue id>`), or `branch` for a follow-up, whose pin is that
/// branch's head, so the commit lands on it as a fast-forward (never forced).
/// The commit is deterministic (author time = queue time), so a repeated call pushes the
/// same commit again, which the remote accepts as a no-op. With `signing` it is signed
/// ([`crate::signing::create_commit`]).
pub fn commit_and_push(
    repository: &str,
    cfg: &RepositoryConfig,
    item: &QueueItem,
    branch: Option<&str>,
    signing: Option<&crate::signing::SigningConfig>,
) -> Result<Pushed> {
    let token = forge_token(repository, cfg)?;
    push_with(repository, cfg, item, branch, signing, token.as_deref())
        .map_err(|e| redact(e, token.as_deref()))
}

/// The pinned commit of `item` and the tree its queued diff makes of it, written in `repo`.
pub fn patched_tree<'r>(
    repo: &'r git2::Repository,
    item: &QueueItem,
) -> Result<(git2::Commit<'r>, git2::Oid)> {
    let pin = git2::Oid::from_str(&item.item.base_commit).map_err(Error::git("parsing the pin"))?;
    let base = repo
        .find_commit(pin)
        .map_err(Error::git(format!("finding pinned commit {pin}")))?;
    let base_tree = base.tree().map_err(Error::git("reading the pinned tree"))?;
    let diff = git2::Diff::from_buffer(item.item.diff.as_bytes())
        .map_err(Error::git("reading the queued diff"))?;
    let mut index = repo
        .apply_to_tree(&base_tree, &diff, None)
        .map_err(Error::git("applying the queued diff to the pinned tree"))?;
    let tree_id = index
        .write_tree_to(repo)
        .map_err(Error::git("writing the approved tree"))?;
    Ok((base, tree_id))
}

fn push_with(
    repository: &str,
    cfg: &RepositoryConfig,
    item: &QueueItem,
    branch: Option<&str>,
    signing: Option<&crate::signing::SigningConfig>,
    token: Option<&str>,
) -> Result<Pushed> {
    let repo = open_clone(&cfg.clone)?;
    let (base, tree_id) = patched_tree(&repo, item)?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(Error::git("reading the approved tree"))?;
    let when = git2::Time::new(item.queued_at, 0);
    let sig = git2::Signature::new(&cfg.author_name, &cfg.author_email, &when)
        .map_err(Error::git("building the commit signature"))?;
    let message = format!(
        "{}\n\nQueued by the airlock broker from run {} (queue item {}).\n",
        item.item.title, item.run_id, item.id
    );
    let branch = branch
        .map(str::to_owned)
        .unwrap_or_else(|| branch_name(&item.item.issue_id, item.id));
    let refname = format!("refs/heads/{branch}");
    let previous = repo.refname_to_id(&refname).ok();
    let commit =
        crate::signing::create_commit(&repo, signing, previous, &sig, &message, &tree, &[&base])?;
    repo.reference(
        &refname,
        commit,
        true,
        "airlock-broker: approved pull request",
    )
    .map_err(Error::git(format!("updating {refname}")))?;

    push_branch(repository, cfg, &branch, token)?;
    Ok(Pushed {
        branch,
        commit: commit.to_string(),
    })
}

/// The variable the push's credential helper reads the token from. It is set on the `git push`
/// child only, so the token is in no argv, and the helper below names the variable, not the value.
const PUSH_TOKEN_VAR: &str = "AIRLOCK_BROKER_PUSH_TOKEN";

/// A credential helper (git runs it with `sh`, the action appended) that answers `get` with the
/// token from [`PUSH_TOKEN_VAR`] under the forge's token user name (`user`, a fixed word of
/// [`crate::config::forge::push_user`]) and ignores `store`/`erase`.
fn token_credential_helper(user: &str) -> String {
    format!(
        "!f() {{ test \"$1\" = get || exit 0; echo username={user}; printf 'password=%s\\n' \"$AIRLOCK_BROKER_PUSH_TOKEN\"; }}; f"
    )
}

/// `ssh_key` as `GIT_SSH_COMMAND`: only that key, and never a prompt.
fn ssh_command(key: &std::path::Path) -> String {
    let quoted = key.display().to_string().replace('\'', "'\\''");
    format!("ssh -i '{quoted}' -o IdentitiesOnly=yes -o BatchMode=yes")
}

/// The `git push` of `branch` from the clone to the configured remote. With a token or an SSH
/// key configured, the host's and the user's git configuration are left out (no helper, URL
/// rewriting or proxy of theirs takes part; the clone's own configuration, which the operator
/// keeps for the broker, still applies, but not its credential helpers) and only the broker's
/// credential is offered; without either, git pushes with the operator's whole configuration.
/// Never a prompt: a missing credential is an error, not a hang.
fn push_command(
    cfg: &RepositoryConfig,
    branch: &str,
    token: Option<&str>,
) -> std::process::Command {
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let mut cmd = remote_git(cfg, token);
    cmd.args(["push", "--porcelain", "--", &cfg.remote, &refspec])
        .stdin(std::process::Stdio::null());
    cmd
}

/// The git CLI in the broker's clone, set up to talk to the configured remote: never a prompt,
/// a stalled transfer fails, and with a token or an SSH key only the broker's credential is
/// offered (see [`push_command`]).
fn remote_git(cfg: &RepositoryConfig, token: Option<&str>) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C").arg(&cfg.clone);
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never")
        // A stalled HTTPS transfer (under 1 byte/s for a minute) fails instead of hanging the
        // publishing process, which for `serve` resuming would keep it from listening.
        .env("GIT_HTTP_LOW_SPEED_LIMIT", "1")
        .env("GIT_HTTP_LOW_SPEED_TIME", "60")
        // The clone named by -C, whatever repository the broker was started from.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .env_remove(PUSH_TOKEN_VAR);
    if token.is_some() || cfg.ssh_key.is_some() {
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
    }
    if let Some(token) = token {
        // The first, empty value resets any helper of the clone's own configuration.
        cmd.args(["-c", "credential.helper="])
            .arg("-c")
            .arg(format!(
                "credential.helper={}",
                token_credential_helper(crate::config::forge::push_user(cfg.forge_kind()))
            ))
            .env(PUSH_TOKEN_VAR, token);
    }
    if let Some(key) = &cfg.ssh_key {
        cmd.env("GIT_SSH_COMMAND", ssh_command(key));
    }
    cmd
}

/// The local ref a pull request's fetched head is kept under in the broker's clone.
pub fn review_head_ref(number: u64) -> String {
    format!("refs/airlock/pulls/{number}/head")
}

/// Fetch pull request `number`'s head (`refs/pull/N/head`, as GitHub publishes it) and its
/// base branch from the configured remote into the broker's clone, with the git CLI and the
/// token when there is one (as a push does). The broker computes a review's diff from these
/// objects, never from what a supervisor sent.
pub fn fetch_pull_request(
    cfg: &RepositoryConfig,
    number: u64,
    base_ref: &str,
    token: Option<&str>,
) -> Result<()> {
    let refspecs = [
        format!("+refs/pull/{number}/head:{}", review_head_ref(number)),
        format!("+refs/heads/{base_ref}:refs/airlock/pulls/{number}/base"),
    ];
    fetch(cfg, token, &refspecs).map_err(|detail| {
        Error::Forge(format!(
            "git fetch of pull request {number} (refs/pull/{number}/head and {base_ref:?}) from \
             {} failed: {detail}",
            cfg.remote
        ))
    })
}

/// `git fetch` of `refspecs` from the configured remote, with the token when there is one;
/// what git said, the token replaced by `***`, when it fails.
fn fetch(
    cfg: &RepositoryConfig,
    token: Option<&str>,
    refspecs: &[String],
) -> std::result::Result<(), String> {
    let out = remote_git(cfg, token)
        .args(["fetch", "--no-tags", "--quiet", "--", &cfg.remote])
        .args(refspecs)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git fetch: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if let Some(t) = token.filter(|t| !t.is_empty()) {
        stderr = stderr.replace(t, "***");
    }
    Err(stderr.chars().take(1500).collect())
}

/// Fetch every branch of the configured remote into the broker's clone (under
/// `refs/airlock/remote/`), with the git CLI and the token when there is one (as a push does):
/// a run on another host pins the forge's head, which the clone may not have yet.
pub fn fetch_branches(cfg: &RepositoryConfig, token: Option<&str>) -> Result<()> {
    fetch(
        cfg,
        token,
        &["+refs/heads/*:refs/airlock/remote/*".to_owned()],
    )
    .map_err(|detail| {
        Error::Forge(format!(
            "git fetch of the branches of {} failed: {detail}",
            cfg.remote
        ))
    })
}

/// Push `branch` with the git CLI (it brings HTTPS, SSH, proxies and the operator's credential
/// helpers; the broker's git2 is built without network transports). What git prints has the
/// token replaced by `***` before it goes into an error.
fn push_branch(
    repository: &str,
    cfg: &RepositoryConfig,
    branch: &str,
    token: Option<&str>,
) -> Result<()> {
    let out = push_command(cfg, branch, token)
        .output()
        .map_err(|e| Error::PushFailed {
            branch: branch.to_owned(),
            remote: cfg.remote.clone(),
            detail: format!("cannot run git: {e}"),
        })?;
    if out.status.success() {
        return Ok(());
    }
    let scrub = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).into_owned();
        match token.filter(|t| !t.is_empty()) {
            Some(t) => text.replace(t, "***"),
            None => text,
        }
    };
    let (stdout, stderr) = (scrub(&out.stdout), scrub(&out.stderr));
    // `--porcelain` reports each ref on stdout: `!<TAB>src:dst<TAB>[rejected] (why)`.
    let refused: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with('!'))
        .map(|l| l.rsplit('\t').next().unwrap_or(l).trim())
        .collect();
    let stderr_lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("To ") && !l.starts_with("hint:") && *l != "Done"
        })
        .collect();
    let mut detail = refused.join("; ");
    if !stderr_lines.is_empty() {
        if !detail.is_empty() {
            detail.push_str("; ");
        }
        let mut tail = stderr_lines.join(" | ");
        if tail.len() > 1500 {
            let cut = (0..=1500)
                .rev()
                .find(|i| tail.is_char_boundary(*i))
                .unwrap_or(0);
            tail.truncate(cut);
            tail.push_str(" ...");
        }
        detail.push_str(&tail);
    }
    if detail.is_empty() {
        detail = format!("git push exited with {}", out.status);
    }
    if credentials_refused(&stderr) {
        let credential = match (&cfg.forge_token_env, &cfg.ssh_key) {
            (Some(var), _) if token.is_some() => format!("the token in {var}"),
            (_, Some(key)) => format!("the SSH key {}", key.display()),
            _ => "none configured: set forge_token_env for HTTPS or ssh_key for SSH".to_owned(),
        };
        return Err(Error::PushCredentialsRejected {
            repository: repository.to_owned(),
            branch: branch.to_owned(),
            remote: cfg.remote.clone(),
            credential,
            detail,
        });
    }
    Err(Error::PushFailed {
        branch: branch.to_owned(),
        remote: cfg.remote.clone(),
        detail,
    })
}

/// Whether git's stderr says the remote refused (or asked in vain for) credentials.
fn credentials_refused(stderr: &str) -> bool {
    [
        "Authentication failed",
        "could not read Username",
        "could not read Password",
        "returned error: 401",
        "returned error: 403",
        "Permission denied (publickey",
        "Host key verification failed",
    ]
    .iter()
    .any(|needle| stderr.contains(needle))
}

/// Opens draft pull requests. Production: [`crate::forges::Forges`], which forwards each
/// method to [`GitHubForge`] or [`crate::forge_gitlab::GitLabForge`] (a new method is forwarded
/// there too).
pub trait Forge: Send + Sync {
    /// Open (or find the already opened) draft pull request for `item`; `None` when no token
    /// is configured for the repository.
    fn open_draft(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
    ) -> Result<Option<String>>;

    /// Put [`crate::claims::CLAIM_LABEL`] on issue `issue_number` (`claimed`) or take it off;
    /// `false` when no token is configured. The one write on an issue the broker makes, with
    /// a text fixed by airlock.
    fn mark_claimed(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        claimed: bool,
    ) -> Result<bool> {
        let _ = (repository, cfg, issue_number, claimed);
        Ok(false)
    }

    /// Put `label` (a text fixed by airlock: [`airlock_protocol::NEEDS_INFO_LABEL`]) on issue
    /// `issue_number` (`on`) or take it off; `false` when no token is configured.
    fn set_issue_label(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        label: &'static str,
        on: bool,
    ) -> Result<bool> {
        let _ = (repository, cfg, issue_number, label, on);
        Ok(false)
    }

    /// Read a reviewer's review (with its inline comments) or conversation comment on pull
    /// request `pull_request`, as the forge has it; `None` when no token is configured. The
    /// only reviewer text a follow-up starts from is what this returns.
    fn read_feedback(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        pull_request: u64,
        source: FeedbackSource,
    ) -> Result<Option<ForgeFeedback>> {
        let _ = (repository, cfg, pull_request, source);
        Ok(None)
    }
    /// Pull request `number` as the forge has it now: its base and head commits and base
    /// branch (`GET /repos/{owner}/{repo}/pulls/{n}`), with `token` when there is one.
    fn pull_request(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        number: u64,
        token: Option<&str>,
    ) -> Result<ForgePull>;

    /// Post an approved review (`POST /repos/{owner}/{repo}/pulls/{n}/reviews`); returns the
    /// review's web address. Needs the forge token.
    fn post_review(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        item: &ReviewItem,
    ) -> Result<String>;

    /// Post `body` as a comment on issue `number` (on GitHub also a pull request:
    /// `POST /repos/{owner}/{repo}/issues/{n}/comments`); its web address, `None` when no
    /// token is configured.
    fn post_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        let _ = (repository, cfg, number, body);
        Ok(None)
    }

    /// Post `body` as a comment on pull request `number` (GitLab numbers merge requests apart
    /// from issues); [`Forge::post_comment`] where the numbers are shared, as on GitHub.
    fn post_pull_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        self.post_comment(repository, cfg, number, body)
    }

    /// Issue `issue_number` as the forge has it now, with its comments and each author's
    /// standing, read with the broker's token; `None` when no token is configured. What
    /// decides whether a reply may answer a question.
    fn issue_thread(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
    ) -> Result<Option<crate::issue_thread::IssueThread>> {
        let _ = (repository, cfg, issue_number);
        Ok(None)
    }
}

/// A pull request as the forge describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgePull {
    /// The base commit (`base.sha`).
    pub base_sha: String,
    /// The base branch (`base.ref`).
    pub base_ref: String,
    /// The head commit (`head.sha`).
    pub head_sha: String,
    /// The title, repository text (shown escaped).
    pub title: String,
}

/// The body of GitHub's create-review call for `review` at `commit_id`: `commit_id`, `body`,
/// `event` and `comments[{path, line, side, body}]`.
pub fn review_request(item: &ReviewItem) -> serde_json::Value {
    let review = &item.review;
    let comments: Vec<serde_json::Value> = review
        .comments
        .iter()
        .map(|c| {
            serde_json::json!({
                "path": c.path,
                "line": c.line,
                "side": airlock_policies::diffmap::side_name(c.side),
                "body": c.body,
            })
        })
        .collect();
    serde_json::json!({
        "commit_id": item.pull.head_sha,
        "body": review.summary,
        "event": review.verdict.github_event(),
        "comments": comments,
    })
}

/// A review or comment as the forge returned it (a person's text: data, never an instruction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeFeedback {
    /// The author's login.
    pub author: String,
    /// GitHub's `author_association` (`OWNER`, `MEMBER`, `COLLABORATOR`, `NONE`, ...); on
    /// GitLab the name of `access`.
    pub association: String,
    /// GitLab: the author's access level in the project (`None`: no member); `None` on GitHub,
    /// where `association` decides.
    pub access: Option<airlock_forge::AccessLevel>,
    /// A review's state (`CHANGES_REQUESTED`, `COMMENTED`, `APPROVED`); `None` for a comment.
    pub state: Option<String>,
    /// The review's body or the comment.
    pub body: String,
    /// A review's inline comments: path, line (when on a line) and text.
    pub comments: Vec<(String, Option<u64>, String)>,
}

impl ForgeFeedback {
    /// The feedback a follow-up run is shown: the body, then each inline comment under its
    /// `path:line`.
    pub fn text(&self) -> String {
        let mut out = self.body.trim().to_owned();
        for (path, line, body) in &self.comments {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            match line {
                Some(line) => out.push_str(&format!("On {path}:{line}:\n{}", body.trim())),
                None => out.push_str(&format!("On {path}:\n{}", body.trim())),
            }
        }
        out
    }
}

/// The GitHub REST API (`POST /repos/{owner}/{repo}/pulls` with `draft: true`), spoken
/// through `airlock_forge::github` with the token each call reads.
#[derive(Debug, Default)]
pub struct GitHubForge {
    /// Nothing held: each call reads its token and builds its client.
    _private: (),
}

impl Forge for GitHubForge {
    fn open_draft(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
    ) -> Result<Option<String>> {
        let Some(token) = forge_token(repository, cfg)? else {
            return Ok(None);
        };
        let github = github(repository, cfg, &token)?;
        self.open_with(&github, cfg, item, pushed)
            .map_err(|e| redact(e, Some(&token)))
    }

    fn mark_claimed(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        claimed: bool,
    ) -> Result<bool> {
        let Some(token) = forge_token(repository, cfg)? else {
            return Ok(false);
        };
        label_with(
            &github(repository, cfg, &token)?,
            issue_number,
            (crate::claims::CLAIM_LABEL, claimed),
        )
        .map_err(|e| redact(e, Some(&token)))?;
        Ok(true)
    }

    fn set_issue_label(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        label: &'static str,
        on: bool,
    ) -> Result<bool> {
        let Some(token) = forge_token(repository, cfg)? else {
            return Ok(false);
        };
        label_with(&github(repository, cfg, &token)?, issue_number, (label, on))
            .map_err(|e| redact(e, Some(&token)))?;
        Ok(true)
    }

    fn read_feedback(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        pull_request: u64,
        source: FeedbackSource,
    ) -> Result<Option<ForgeFeedback>> {
        let Some(token) = forge_token(repository, cfg)? else {
            return Ok(None);
        };
        self.feedback_with(repository, cfg, pull_request, source, &token)
            .map(Some)
            .map_err(|e| redact(e, Some(&token)))
    }

    fn pull_request(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        number: u64,
        token: Option<&str>,
    ) -> Result<ForgePull> {
        let path = format!("/repos/{}/pulls/{number}", cfg.forge_slug(repository));
        let result = (|| {
            let api = github_api(cfg, token)?;
            let url = api.url(&path);
            let v: serde_json::Value = api.get_json(&path).map_err(forge_error)?;
            let field = |path: [&str; 2]| {
                v.get(path[0])
                    .and_then(|o| {
                        if path[1].is_empty() {
                            Some(o)
                        } else {
                            o.get(path[1])
                        }
                    })
                    .and_then(|s| s.as_str())
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        Error::Forge(format!(
                            "GET {url}: the pull request has no {}",
                            path.join(".").trim_end_matches('.')
                        ))
                    })
            };
            Ok(ForgePull {
                base_sha: field(["base", "sha"])?,
                base_ref: field(["base", "ref"])?,
                head_sha: field(["head", "sha"])?,
                title: field(["title", ""]).unwrap_or_default(),
            })
        })();
        result.map_err(|e| redact(e, token))
    }

    fn post_review(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        item: &ReviewItem,
    ) -> Result<String> {
        let token = forge_token(repository, cfg)?.ok_or_else(|| {
            Error::Forge(format!(
                "repository {repository:?} has no forge_token_env: a review is posted with the \
                 forge token; set forge_token_env in broker.toml"
            ))
        })?;
        let path = format!(
            "/repos/{}/pulls/{}/reviews",
            cfg.forge_slug(repository),
            item.pull.number
        );
        let api = github_api(cfg, Some(&token))?;
        let created: Created = api
            .post_json(&path, &review_request(item))
            .map_err(|e| redact(forge_error(e), Some(&token)))?;
        created
            .html_url
            .ok_or_else(|| Error::Forge(format!("POST {}: reply has no html_url", api.url(&path))))
    }

    fn post_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        let Some(token) = forge_token(repository, cfg)? else {
            return Ok(None);
        };
        github(repository, cfg, &token)?
            .post_comment(number, body)
            .map(|posted| Some(posted.web_url))
            .map_err(|e| redact(forge_error(e), Some(&token)))
    }

    fn issue_thread(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
    ) -> Result<Option<crate::issue_thread::IssueThread>> {
        let Some(token) = forge_token(repository, cfg)? else {
            return Ok(None);
        };
        let api = github_api(cfg, Some(&token))?;
        crate::issue_thread::github_issue_thread(&api, &cfg.forge_slug(repository), issue_number)
            .map(Some)
            .map_err(|e| redact(e, Some(&token)))
    }
}

/// The fields of a GitHub review or comment the broker reads.
#[derive(serde::Deserialize)]
struct GhText {
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<GhUser>,
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    issue_url: Option<String>,
}

#[derive(serde::Deserialize)]
struct GhUser {
    login: String,
}

/// What GitHub answers to a created review: where it is shown.
#[derive(serde::Deserialize)]
struct Created {
    #[serde(default)]
    html_url: Option<String>,
}

/// Most inline comments of one review a follow-up is shown.
const MAX_REVIEW_COMMENTS: usize = 50;

impl GitHubForge {
    /// A review (`/pulls/{n}/reviews/{id}` and its `/comments`) or a conversation comment
    /// (`/issues/comments/{id}`, which must belong to pull request `n`).
    fn feedback_with(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        pull_request: u64,
        source: FeedbackSource,
        token: &str,
    ) -> Result<ForgeFeedback> {
        let slug = cfg.forge_slug(repository);
        let api = github_api(cfg, Some(token))?;
        let id = source.id;
        let author = |t: &GhText| t.user.as_ref().map(|u| u.login.clone()).unwrap_or_default();
        match source.kind {
            FeedbackKind::Review => {
                let path = format!("/repos/{slug}/pulls/{pull_request}/reviews/{id}");
                let review: GhText = api.get_json(&path).map_err(forge_error)?;
                let path = format!("{path}/comments?per_page={MAX_REVIEW_COMMENTS}");
                let comments: Vec<GhText> = api.get_json(&path).map_err(forge_error)?;
                Ok(ForgeFeedback {
                    author: author(&review),
                    association: review.author_association.clone().unwrap_or_default(),
                    access: None,
                    state: Some(review.state.clone().unwrap_or_default()),
                    body: review.body.unwrap_or_default(),
                    comments: comments
                        .into_iter()
                        .take(MAX_REVIEW_COMMENTS)
                        .map(|c| {
                            (
                                c.path.unwrap_or_default(),
                                c.line,
                                c.body.unwrap_or_default(),
                            )
                        })
                        .collect(),
                })
            }
            FeedbackKind::IssueComment => {
                let path = format!("/repos/{slug}/issues/comments/{id}");
                let comment: GhText = api.get_json(&path).map_err(forge_error)?;
                let on = comment
                    .issue_url
                    .as_deref()
                    .and_then(|u| u.rsplit('/').next())
                    .and_then(|n| n.parse::<u64>().ok());
                if on != Some(pull_request) {
                    return Err(Error::Forge(format!(
                        "comment {id} of {slug} is not on pull request #{pull_request}"
                    )));
                }
                let body = comment.body.as_deref().unwrap_or_default();
                if body.starts_with(crate::pr_text::OWN_COMMENT_PREFIX) {
                    let what = if body.starts_with(crate::pr_text::ATTESTATION_COMMENT_MARKER) {
                        "the broker's own witness attestation"
                    } else {
                        "one airlock posted (a CI check's or a question)"
                    };
                    return Err(Error::FeedbackRefused(format!(
                        "comment {id} is {what}, not feedback"
                    )));
                }
                Ok(ForgeFeedback {
                    author: author(&comment),
                    association: comment.author_association.clone().unwrap_or_default(),
                    access: None,
                    state: None,
                    body: comment.body.unwrap_or_default(),
                    comments: Vec::new(),
                })
            }
            // A check's output is no person's feedback: `ci_checks` reads it.
            FeedbackKind::CheckRun | FeedbackKind::HeadChecks => Err(Error::FeedbackRefused(
                format!("{id} names a CI check, not a review or a comment"),
            )),
        }
    }

    /// The draft pull request of `pushed.branch`: one an earlier attempt opened (in any
    /// state), or a new one (`POST /repos/{slug}/pulls` with `draft: true`).
    fn open_with(
        &self,
        github: &GitHub,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
    ) -> Result<Option<String>> {
        // An earlier attempt may have opened it before the broker died: look first. A list
        // the forge refuses or garbles is no answer, and the pull request is opened.
        match github.find_pull(&pushed.branch, true) {
            Ok(Some(pull)) => return Ok(Some(pull.web_url)),
            Ok(None) | Err(ForgeError::Status { .. } | ForgeError::Shape { .. }) => {}
            Err(e) => return Err(forge_error(e)),
        }
        let request = DraftRequest {
            title: item.item.title.clone(),
            description: pr_body(item),
            source_branch: pushed.branch.clone(),
            target_branch: cfg.base_branch.clone(),
        };
        github
            .open_draft(&request)
            .map(|pull| Some(pull.web_url))
            .map_err(forge_error)
    }
}

/// The token one call read (from `forge_token_env`), handed to the forge crate for that
/// call's requests only.
struct CallToken {
    token: Option<String>,
    var: String,
}

impl TokenSource for CallToken {
    fn token(&self) -> airlock_forge::Result<Option<String>> {
        Ok(self.token.clone())
    }

    fn describe(&self) -> String {
        self.var.clone()
    }
}

/// The repository's GitHub API through `airlock_forge`, sending `token` when there is one.
pub(crate) fn github_api(cfg: &RepositoryConfig, token: Option<&str>) -> Result<GitHubApi> {
    let token = CallToken {
        token: token.map(str::to_owned),
        var: cfg.forge_token_env.clone().unwrap_or_default(),
    };
    GitHubApi::new(&cfg.github_api, Box::new(token))
        .map(|api| api.with_user_agent("airlock-broker"))
        .map_err(forge_error)
}

/// The repository's GitHub through `airlock_forge`, with the token the call read.
fn github(repository: &str, cfg: &RepositoryConfig, token: &str) -> Result<GitHub> {
    let slug = cfg.forge_slug(repository);
    let (owner, repo) = slug.split_once('/').unwrap_or((&slug, ""));
    github_api(cfg, Some(token))?
        .repository(owner, repo)
        .map_err(forge_error)
}

/// A forge error as the broker reports it (it names no token: the forge crate redacts).
fn forge_error(e: ForgeError) -> Error {
    Error::Forge(e.to_string())
}

/// Put `label` on issue `issue_number` (when `on`: `POST .../issues/{n}/labels`) or take it
/// off (`DELETE .../labels/{label}`; a label already gone is not an error).
fn label_with(github: &GitHub, issue_number: u64, (label, on): (&str, bool)) -> Result<()> {
    let done = if on {
        github.add_label(issue_number, label)
    } else {
        github.remove_label(issue_number, label)
    };
    done.map_err(forge_error)
}

/// Open the broker's own clone.
pub fn open_clone(path: &std::path::Path) -> Result<git2::Repository> {
    // libgit2 says only `class=Os (2); code=NotFound (-3)`: say which setting to fix.
    if !path.exists() {
        return Err(Error::CloneMissing {
            path: path.to_path_buf(),
        });
    }
    git2::Repository::open(path).map_err(Error::git(format!(
        "opening the broker's clone {}",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewQueueItem, QueueStatus};

    fn item(issue_id: &str) -> QueueItem {
        QueueItem {
            id: 7,
            run_id: "run-x".to_owned(),
            request_id: "q".to_owned(),
            item: NewQueueItem {
                repository: "acme/calc".to_owned(),
                base_commit: "a".repeat(40),
                issue_id: issue_id.to_owned(),
                title: "fix: t".to_owned(),
                args: serde_json::json!({
                    "body": "The agent's words.\n\n",
                    "test_evidence": {"before_failing_test": "tests.t.T.test_x"}
                })
                .to_string(),
                diff: String::new(),
                digest: serde_json::json!({}),
                evidence: vec![],
                flags: vec!["assertion_removed tests/t.py:3".to_owned()],
                gates: vec![crate::gates::GateNote {
                    gate: "changelog-required".to_owned(),
                    digest: "sha256:0f".to_owned(),
                    verdict: airlock_gates::Verdict::Flag(
                        "a new public function in src/<b>x</b>.py without a CHANGELOG.md entry"
                            .to_owned(),
                    ),
                }],
                network_blocked: Vec::new(),
                findings: None,
            },
            status: QueueStatus::Approved,
            queued_at: 1,
            decided_at: None,
            decided_by: None,
            reason: None,
            branch: None,
            commit: None,
            pr_url: None,
            publish_error: None,
            abandoned_by: None,
            abandon_reason: None,
            abandoned_at: None,
            issue_number: None,
            review: None,
        }
    }

    #[test]
    fn the_body_is_the_agents_then_the_evidence_closes_only_a_known_number() {
        let body = pr_body(&item("CALC-42"));
        assert!(body.starts_with("The agent's words.\n\n---\n"), "{body}");
        assert!(body.contains("Fail-to-pass test: `tests.t.T.test_x`"));
        assert!(body.contains("  - assertion_removed tests/t.py:3"));
        assert!(body.contains("audit run id `run-x`"));
        // A gate's text is data: its markup shows as text, never as HTML or Markdown.
        assert!(
            body.contains(
                "- Gate: flag: a new public function in src/&lt;b&gt;x&lt;/b&gt;\\.py without a \
                 CHANGELOG\\.md entry \\(gate changelog\\-required sha256:0f\\)\n"
            ),
            "{body}"
        );
        assert!(!body.contains("<b>"), "{body}");
        assert!(!body.contains("Closes"));
        assert!(pr_body(&item("#123")).contains("\nCloses #123\n"));
        assert!(pr_body(&item("123")).contains("\nCloses #123\n"));
        assert_eq!(github_issue_number(&item("ACME-12")), None);
        assert_eq!(github_issue_number(&item("#")), None);
        let mut registered = item("ACME-12");
        registered.issue_number = Some(512);
        assert!(pr_body(&registered).contains("\nCloses #512\n"));
    }

    #[test]
    fn branches_are_per_queue_item_and_errors_never_carry_the_token() {
        assert_eq!(branch_name("CALC-42", 7), "airlock/CALC-42-7");
        let err = redact(
            Error::Forge("auth tok-123 refused".to_owned()),
            Some("tok-123"),
        );
        let text = err.to_string();
        assert!(
            text.contains("auth *** refused") && !text.contains("tok-123"),
            "{text}"
        );
    }

    #[test]
    fn the_push_command_carries_the_token_in_its_environment_only() {
        let cfg: RepositoryConfig = toml::from_str(
            "clone = \"/c\"\nremote = \"https://github.com/acme/calc.git\"\nforge_token_env = \"T\"\nssh_key = \"/keys/it's\"\n",
        )
        .unwrap();
        let cmd = push_command(&cfg, "airlock/X-1", Some("tok-secret"));
        let argv: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(argv.iter().all(|a| !a.contains("tok-secret")), "{argv:?}");
        assert!(argv.ends_with(&[
            "push".to_owned(),
            "--porcelain".to_owned(),
            "--".to_owned(),
            "https://github.com/acme/calc.git".to_owned(),
            "refs/heads/airlock/X-1:refs/heads/airlock/X-1".to_owned()
        ]));
        let env: std::collections::BTreeMap<String, Option<String>> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert_eq!(env[PUSH_TOKEN_VAR].as_deref(), Some("tok-secret"));
        assert_eq!(env["GIT_TERMINAL_PROMPT"].as_deref(), Some("0"));
        assert_eq!(env["GIT_CONFIG_GLOBAL"].as_deref(), Some("/dev/null"));
        assert_eq!(
            env["GIT_SSH_COMMAND"].as_deref(),
            Some("ssh -i '/keys/it'\\''s' -o IdentitiesOnly=yes -o BatchMode=yes")
        );
        // Without a credential of its own, git uses the operator's configuration.
        let plain: RepositoryConfig =
            toml::from_str("clone = \"/c\"\nremote = \"origin\"\n").unwrap();
        let cmd = push_command(&plain, "b", None);
        assert!(
            cmd.get_envs()
                .all(|(k, _)| k != "GIT_CONFIG_GLOBAL" && k != "GIT_SSH_COMMAND")
        );
        assert!(credentials_refused(
            "fatal: Authentication failed for 'http://127.0.0.1/r.git/'"
        ));
        assert!(!credentials_refused(
            " ! [remote rejected] b -> b (pre-receive hook declined)"
        ));
    }

    #[test]
    fn a_configured_token_variable_that_is_unset_is_named() {
        let cfg: RepositoryConfig = toml::from_str(
            "clone = \"/c\"\nremote = \"origin\"\nforge_token_env = \"AIRLOCK_UNIT_SURELY_UNSET\"\n",
        )
        .unwrap();
        let err = forge_token("acme/calc", &cfg).unwrap_err();
        assert!(
            err.to_string().contains("AIRLOCK_UNIT_SURELY_UNSET"),
            "{err}"
        );
        let none: RepositoryConfig =
            toml::from_str("clone = \"/c\"\nremote = \"origin\"\n").unwrap();
        assert_eq!(forge_token("acme/calc", &none).unwrap(), None);
    }
}
