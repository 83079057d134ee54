//! The broker's view of the shared rules in `airlock-policies`: which paths are tests, which
//! writes the run's allowlist and the always-refused classes permit, the recomputed diff digest
//! and the detectors' findings. The broker never decides these itself; [`Rules`] is the seam.
//! Findings stay typed ([`airlock_policies::Finding`]) through the intake; [`finding_flag`] is
//! the one place they become the text an approver or a model reads.

use std::path::Path;

use airlock_policies::{DigestReport, Finding, Policy, TestCodeFinding, WriteDecision};

use crate::changes::ChangeSet;
use crate::error::{Error, Result};

/// A write the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRefusal {
    /// The offending path.
    pub path: String,
    /// The rule that refused it.
    pub rule: String,
    /// Why, for a person.
    pub reason: String,
}

/// The shared rules, as the broker needs them.
pub trait Rules: Send + Sync {
    /// Whether `path` (repository-relative) is a test file.
    fn is_test_file(&self, path: &str) -> bool;
    /// The first changed path the allowlist or an always-refused class refuses, if any; then
    /// the first whose new content is refused: a symlink whose target leaves the tree or lands
    /// in a refused class, a file that is binary or not UTF-8.
    fn check_writes(
        &self,
        allowlist: &[String],
        changes: &ChangeSet,
    ) -> Result<Option<PathRefusal>>;
    /// Every diff_digest field recomputed from the worktree against the pin, with the
    /// detectors' findings.
    fn digest(&self, worktree: &Path, base_commit: &str) -> Result<DigestReport>;
    /// The test-code rules that fire on the lines a change adds to the test file `path`
    /// (`old`: its text at the pin, `None` when new): refusals and flags, sorted.
    fn check_test_code(&self, path: &str, old: Option<&str>, new: &str) -> Vec<TestCodeFinding>;
}

/// [`Rules`] backed by an `airlock-policies` [`Policy`].
pub struct PolicyRules {
    policy: Policy,
}

impl PolicyRules {
    /// The built-in policy, or the policy file at `path`.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let policy = match path {
            Some(p) => Policy::load(p),
            None => Policy::default(),
        }
        .map_err(|e| Error::Dependency(format!("loading the write policy: {e}")))?;
        Ok(PolicyRules { policy })
    }
}

impl Rules for PolicyRules {
    fn is_test_file(&self, path: &str) -> bool {
        self.policy.is_test_path(path)
    }

    fn check_writes(
        &self,
        allowlist: &[String],
        changes: &ChangeSet,
    ) -> Result<Option<PathRefusal>> {
        let policy = if allowlist.is_empty() {
            self.policy.clone()
        } else {
            self.policy
                .with_allowlist(allowlist)
                .map_err(|e| Error::Dependency(format!("the run's write allowlist: {e}")))?
        };
        for change in &changes.files {
            if let WriteDecision::Refused { rule, reason } = policy.check_write(&change.path) {
                return Ok(Some(PathRefusal {
                    path: change.path.clone(),
                    rule,
                    reason,
                }));
            }
        }
        // What the changed paths now hold: a symlink's target, a file's bytes, both sides of
        // a text diff. A deletion holds nothing (deleting a binary file is allowed).
        let link_at = |path: &str| changes.symlinks.get(path).cloned();
        for change in &changes.files {
            let decision = match &change.content {
                Some(target) if change.filemode == 0o120000 => {
                    policy.check_symlink(&change.path, &String::from_utf8_lossy(target), &link_at)
                }
                content => airlock_policies::check_change(
                    &change.path,
                    change.pinned_content.as_deref(),
                    content.as_deref(),
                ),
            };
            if let WriteDecision::Refused { rule, reason } = decision {
                return Ok(Some(PathRefusal {
                    path: change.path.clone(),
                    rule,
                    reason,
                }));
            }
        }
        Ok(None)
    }

    fn digest(&self, worktree: &Path, base_commit: &str) -> Result<DigestReport> {
        self.policy
            .compute_digest(worktree, base_commit)
            .map_err(|e| Error::Dependency(format!("recomputing the diff digest: {e}")))
    }

    fn check_test_code(&self, path: &str, old: Option<&str>, new: &str) -> Vec<TestCodeFinding> {
        self.policy.check_test_code(path, old, new)
    }
}

/// A detector finding as the approver and the model read it: `kind file:line (rule): excerpt`.
pub fn finding_flag(finding: &Finding) -> String {
    format!(
        "{} {}:{} ({}): {}",
        finding.kind.as_str(),
        finding.file,
        finding.line,
        finding.rule,
        finding.excerpt
    )
}

/// Findings as flags, sorted as text (the order the queue item and the refusals show).
pub fn finding_flags<'f>(findings: impl IntoIterator<Item = &'f Finding>) -> Vec<String> {
    let mut flags: Vec<String> = findings.into_iter().map(finding_flag).collect();
    flags.sort();
    flags
}

/// The URLs in a pull request body (`scheme://...` for web and file schemes, and bare `www.`
/// hosts), in order, each at most 200 characters. The open_pr schema allows none but the
/// issue link, which a run does not register yet, so every one is shown to the approver.
pub fn body_urls(body: &str) -> Vec<String> {
    const STARTS: [&str; 6] = ["https://", "http://", "ftp://", "file://", "ssh://", "www."];
    let lower = body.to_ascii_lowercase();
    let mut urls = Vec::new();
    let mut at = 0;
    while at < lower.len() {
        let next = STARTS
            .iter()
            .filter_map(|s| lower[at..].find(s).map(|i| at + i))
            .min();
        let Some(start) = next else { break };
        // `www.` inside a longer word (`awww.`) is not a host.
        let inside_word = lower[..start]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric())
            && lower[start..].starts_with("www.");
        let end = body[start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '"' | '`' | ')' | ']'))
            .map_or(body.len(), |i| start + i);
        if !inside_word && end > start + 4 {
            let url: String = body[start..end]
                .trim_end_matches(['.', ',', ';', ':', '!', '?'])
                .chars()
                .take(200)
                .collect();
            urls.push(url);
        }
        at = end.max(start + 1);
        while !body.is_char_boundary(at) && at < body.len() {
            at += 1;
        }
    }
    urls
}

#[cfg(test)]
mod url_tests {
    use super::body_urls;

    #[test]
    fn urls_in_a_body_are_found() {
        assert_eq!(
            body_urls(
                "Fixes the parser (see https://evil.example/x?a=1). Also www.example.org, and \
                 [a link](http://b.example/p) but not awww.no or plain text."
            ),
            [
                "https://evil.example/x?a=1",
                "www.example.org",
                "http://b.example/p"
            ]
        );
        assert!(body_urls("clamp ignored hi; it now clamps both ends.").is_empty());
        assert_eq!(body_urls("HTTPS://X.EXAMPLE/Y"), ["HTTPS://X.EXAMPLE/Y"]);
    }
}
