//! Publication of an approved pull request: the diff committed on the pinned base in the
//! broker's own clone, branch `airlock/<issue-id>` pushed to the configured remote with git2,
//! and, when a forge token is configured, a draft pull request through the GitHub REST API.
//! Every step is idempotent so a publication cut short by a crash can simply run again. The
//! token is read from the broker's environment here and goes nowhere but the forge.

use std::time::Duration;

use crate::config::RepositoryConfig;
use crate::error::{Error, Result};
use crate::store::QueueItem;

/// What was pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `airlock/<issue-id>`.
    pub branch: String,
    /// The commit id.
    pub commit: String,
}

/// The branch an approved pull request is pushed to.
pub fn branch_name(issue_id: &str) -> String {
    format!("airlock/{issue_id}")
}

fn forge_token(cfg: &RepositoryConfig) -> Option<String> {
    cfg.forge_token_env
        .as_ref()
        .and_then(|name| std::env::var(name).ok())
        .filter(|t| !t.trim().is_empty())
}

/// Commit the queued diff on the pinned base in the broker's clone and push the branch.
/// The commit is deterministic (author time = queue time), so a repeated call pushes the
/// same commit again, which the remote accepts as a no-op.
pub fn commit_and_push(cfg: &RepositoryConfig, item: &QueueItem) -> Result<Pushed> {
    let repo = crate::service::open_clone(&cfg.clone)?;
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
        .write_tree_to(&repo)
        .map_err(Error::git("writing the approved tree"))?;
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
    let commit = repo
        .commit(None, &sig, &sig, &message, &tree, &[&base])
        .map_err(Error::git("committing the approved diff"))?;
    let branch = branch_name(&item.item.issue_id);
    let refname = format!("refs/heads/{branch}");
    repo.reference(
        &refname,
        commit,
        true,
        "airlock-broker: approved pull request",
    )
    .map_err(Error::git(format!("updating {refname}")))?;

    let mut remote = match repo.find_remote(&cfg.remote) {
        Ok(r) => r,
        Err(_) => repo
            .remote_anonymous(&cfg.remote)
            .map_err(Error::git(format!("using remote {}", cfg.remote)))?,
    };
    let rejected = std::cell::RefCell::new(None::<String>);
    let token = forge_token(cfg);
    let mut callbacks = git2::RemoteCallbacks::new();
    callbacks.credentials(move |_url, _user, _allowed| match &token {
        Some(t) => git2::Cred::userpass_plaintext("x-access-token", t),
        None => Err(git2::Error::from_str(
            "no forge token configured for this remote",
        )),
    });
    callbacks.push_update_reference(|name, status| {
        if let Some(msg) = status {
            *rejected.borrow_mut() = Some(format!("{name}: {msg}"));
        }
        Ok(())
    });
    let mut opts = git2::PushOptions::new();
    opts.remote_callbacks(callbacks);
    remote
        .push(&[format!("{refname}:{refname}")], Some(&mut opts))
        .map_err(Error::git(format!("pushing {branch} to {}", cfg.remote)))?;
    drop(opts);
    let rejected = rejected.borrow().clone();
    if let Some(why) = rejected {
        return Err(Error::Forge(format!("the remote rejected {branch}: {why}")));
    }
    Ok(Pushed {
        branch,
        commit: commit.to_string(),
    })
}

/// Opens draft pull requests. Production: [`GitHubForge`].
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
}

/// The GitHub REST API (`POST /repos/{owner}/{repo}/pulls` with `draft: true`).
pub struct GitHubForge {
    agent: ureq::Agent,
}

impl Default for GitHubForge {
    fn default() -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build();
        GitHubForge {
            agent: ureq::Agent::new_with_config(config),
        }
    }
}

fn pr_body(item: &QueueItem) -> String {
    serde_json::from_str::<serde_json::Value>(&item.item.args)
        .ok()
        .and_then(|v| v.get("body").and_then(|b| b.as_str()).map(str::to_owned))
        .unwrap_or_default()
}

impl Forge for GitHubForge {
    fn open_draft(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
    ) -> Result<Option<String>> {
        let Some(token) = forge_token(cfg) else {
            return Ok(None);
        };
        let slug = cfg.forge_slug(repository);
        let owner = slug.split('/').next().unwrap_or_default();
        let api = cfg.github_api.trim_end_matches('/');
        let auth = format!("Bearer {token}");
        // An earlier attempt may have opened it before the broker died: look first.
        let list_url = format!(
            "{api}/repos/{slug}/pulls?state=all&head={owner}:{}",
            pushed.branch
        );
        let mut resp = self
            .agent
            .get(&list_url)
            .header("Authorization", &auth)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header("User-Agent", "airlock-broker")
            .call()
            .map_err(|e| Error::Forge(format!("GET {list_url}: {e}")))?;
        if resp.status().is_success() {
            let text = resp
                .body_mut()
                .read_to_string()
                .map_err(|e| Error::Forge(format!("GET {list_url}: {e}")))?;
            if let Ok(serde_json::Value::Array(prs)) =
                serde_json::from_str::<serde_json::Value>(&text)
                && let Some(url) = prs
                    .iter()
                    .find_map(|p| p.get("html_url").and_then(|u| u.as_str()))
            {
                return Ok(Some(url.to_owned()));
            }
        }
        let url = format!("{api}/repos/{slug}/pulls");
        let request = serde_json::json!({
            "title": item.item.title,
            "head": pushed.branch,
            "base": cfg.base_branch,
            "body": pr_body(item),
            "draft": true,
        });
        let mut resp = self
            .agent
            .post(&url)
            .header("Authorization", &auth)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header("User-Agent", "airlock-broker")
            .header("Content-Type", "application/json")
            .send(request.to_string())
            .map_err(|e| Error::Forge(format!("POST {url}: {e}")))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| Error::Forge(format!("POST {url}: {e}")))?;
        if !status.is_success() {
            return Err(Error::Forge(format!(
                "POST {url} answered {status}: {}",
                text.chars().take(500).collect::<String>()
            )));
        }
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::Forge(format!("POST {url}: reply is not JSON: {e}")))?;
        let html = value
            .get("html_url")
            .and_then(|u| u.as_str())
            .ok_or_else(|| Error::Forge(format!("POST {url}: reply has no html_url")))?;
        Ok(Some(html.to_owned()))
    }
}
