//! Publication of an approved pull request: the diff committed on the pinned base in the
//! broker's own clone, branch `airlock/<issue-id>-<queue id>` pushed to the configured remote with git2,
//! and, when a forge token is configured, a draft pull request through the GitHub REST API.
//! Every step is idempotent so a publication cut short by a crash can simply run again. The
//! token is read from the environment of the process that publishes (`approve`, `publish`, or
//! `serve` resuming), here and nowhere else, and goes nowhere but the forge: every error text
//! that leaves this module has it replaced by `***`.

use std::time::Duration;

use crate::config::RepositoryConfig;
use crate::error::{Error, Result};
use crate::store::QueueItem;

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
        Ok(t) if !t.trim().is_empty() => Ok(Some(t)),
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

/// The GitHub issue number `Closes #N` names, when the queue item's issue maps to one.
///
/// Hook for GitHub intake: today an issue id maps to a number only when it is one (`123` or
/// `#123`); ids such as `ACME-123` give `None` until intake records the GitHub number beside the
/// id, and then this is the one place to read it.
pub fn github_issue_number(item: &QueueItem) -> Option<u64> {
    let id = item.item.issue_id.trim();
    let digits = id.strip_prefix('#').unwrap_or(id);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Commit the queued diff on the pinned base in the broker's clone and push the branch.
/// The commit is deterministic (author time = queue time), so a repeated call pushes the
/// same commit again, which the remote accepts as a no-op.
pub fn commit_and_push(
    repository: &str,
    cfg: &RepositoryConfig,
    item: &QueueItem,
) -> Result<Pushed> {
    let token = forge_token(repository, cfg)?;
    let shown = token.clone();
    push_with(cfg, item, token).map_err(|e| redact(e, shown.as_deref()))
}

fn push_with(cfg: &RepositoryConfig, item: &QueueItem, token: Option<String>) -> Result<Pushed> {
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
    let branch = branch_name(&item.item.issue_id, item.id);
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

/// The draft pull request's body: the body as the agent wrote it, then the broker's evidence
/// (the fail-to-pass test, each witness step's result, the base inventory's counts, the
/// detectors' flags), `Closes #N` when the issue maps to a GitHub number, and the audit run id.
pub fn pr_body(item: &QueueItem) -> String {
    let args = serde_json::from_str::<serde_json::Value>(&item.item.args).ok();
    let field = |path: &[&str]| {
        let mut v = args.as_ref()?;
        for key in path {
            v = v.get(key)?;
        }
        v.as_str().map(str::to_owned)
    };
    let mut out = field(&["body"]).unwrap_or_default();
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push_str("\n\n---\n\n## Evidence (checked by the airlock broker)\n\n");
    if let Some(test) = field(&["test_evidence", "before_failing_test"]) {
        out.push_str(&format!(
            "- Fail-to-pass test: `{test}` (fails on the pinned base, passes with the diff)\n"
        ));
    }
    for step in &item.item.evidence {
        let result = match &step.grade {
            airlock_policies::testrun::Grade::Ok => "ok".to_owned(),
            airlock_policies::testrun::Grade::NotOk(why) => format!("not ok: {why}"),
            airlock_policies::testrun::Grade::Invalid(why) => format!("invalid: {why}"),
        };
        out.push_str(&format!(
            "- Witness `{}` (expected {}): {result}; {} tests reported\n",
            step.step,
            step.expect,
            step.parsed.tests.len()
        ));
        if let Some(inv) = &step.inventory {
            let passed = inv
                .tests
                .values()
                .filter(|s| matches!(s, airlock_policies::testrun::TestStatus::Passed))
                .count();
            out.push_str(&format!(
                "- Base inventory: {} tests, {passed} passing{}\n",
                inv.tests.len(),
                inv.collected
                    .map(|n| format!(", {n} collected"))
                    .unwrap_or_default()
            ));
        }
        if let Some(full) = &step.full_run {
            out.push_str(&format!(
                "- Full run with the diff: {} ({} ran, {} missing, {} newly skipped, {} regressed, {} new passing, {} new not passing)\n",
                if full.green { "green" } else { "not green" },
                full.ran,
                full.missing.len(),
                full.newly_skipped.len(),
                full.regressed.len(),
                full.new_passing.len(),
                full.new_not_passing.len()
            ));
        }
    }
    if item.item.flags.is_empty() {
        out.push_str("- Detector flags: none\n");
    } else {
        out.push_str("- Detector flags:\n");
        for flag in &item.item.flags {
            out.push_str(&format!("  - {flag}\n"));
        }
    }
    if let Some(n) = github_issue_number(item) {
        out.push_str(&format!("\nCloses #{n}\n"));
    }
    out.push_str(&format!(
        "\nIssue {}; audit run id `{}`; queue item {}.\n",
        item.item.issue_id, item.run_id, item.id
    ));
    out
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
        self.open_with(repository, cfg, item, pushed, &token)
            .map_err(|e| redact(e, Some(&token)))
    }
}

impl GitHubForge {
    fn open_with(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
        token: &str,
    ) -> Result<Option<String>> {
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
        }
    }

    #[test]
    fn the_body_is_the_agents_then_the_evidence_closes_only_a_known_number() {
        let body = pr_body(&item("CALC-42"));
        assert!(body.starts_with("The agent's words.\n\n---\n"), "{body}");
        assert!(body.contains("Fail-to-pass test: `tests.t.T.test_x`"));
        assert!(body.contains("  - assertion_removed tests/t.py:3"));
        assert!(body.contains("audit run id `run-x`"));
        assert!(!body.contains("Closes"));
        assert!(pr_body(&item("#123")).contains("\nCloses #123\n"));
        assert!(pr_body(&item("123")).contains("\nCloses #123\n"));
        assert_eq!(github_issue_number(&item("ACME-12")), None);
        assert_eq!(github_issue_number(&item("#")), None);
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
