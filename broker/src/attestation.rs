//! The witness attestation: what the broker verified about a queue item, as an in-toto
//! Statement v1 ([`Statement`]) whose subject is the patched tree (a git tree id, and the
//! published commit once there is one) and whose predicate ([`WitnessPredicate`],
//! [`PREDICATE_TYPE`]) is built from the same stored record `show --json` prints: the pin, the
//! recomputed digest, the policy, the gates' notes, each witness step, the judge's score and
//! the decision. Serialised in a fixed field order with no clock but the recorded times, so
//! the broker rebuilds the same bytes; signed with `[signing]`'s key in the
//! `airlock-attestation` namespace ([`crate::signing`]); checked by `attest --verify`; and
//! posted on the pull request when the item is published ([`comment_on_publication`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use airlock_audit::Event;
use airlock_policies::testrun::Grade;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::error::{Error, Result};
use crate::service::Broker;
use crate::store::{ApprovalRecord, QueueItem, QueueStatus};
use crate::view::{ItemView, TestCounts};

/// `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// `predicateType` of airlock's witness predicate.
pub const PREDICATE_TYPE: &str = "https://airlock.dev/witness/v1";
/// The subject naming the patched tree (`digest.gitTree`).
pub const TREE_SUBJECT: &str = "patched-tree";
/// The subject naming the published commit (`digest.gitCommit`), once there is one.
pub const COMMIT_SUBJECT: &str = "published-commit";
/// The longest statement a pull-request comment shows whole (GitHub takes 65,536 characters).
pub const COMMENT_STATEMENT_MAX_CHARS: usize = 60_000;

/// An in-toto Statement v1 about one queue item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The patched tree, then the published commit when there is one.
    pub subject: Vec<Subject>,
    /// [`PREDICATE_TYPE`].
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// What the broker verified.
    pub predicate: WitnessPredicate,
}

/// An in-toto resource descriptor: a name and its digests (`gitTree`, `gitCommit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// [`TREE_SUBJECT`] or [`COMMIT_SUBJECT`].
    pub name: String,
    /// Algorithm to lowercase hex.
    pub digest: BTreeMap<String, String>,
}

/// airlock's witness predicate: the stored record of the item, as `show --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessPredicate {
    /// The queue item.
    pub queue_item: i64,
    /// The run it came from (the audit log's key).
    pub run_id: String,
    /// The repository as broker.toml names it.
    pub repository: String,
    /// The issue id the run gave.
    pub issue_id: String,
    /// The pinned base commit the diff applies to and the witness ran against.
    pub base_commit: String,
    /// SHA-256 of the unified diff the broker computed (`show --json`'s `diff`).
    pub diff_sha256: String,
    /// The diff digest the broker recomputed (`computed_digest`).
    pub computed_digest: serde_json::Value,
    /// The detectors' flags.
    pub flags: Vec<String>,
    /// The policy file the broker is configured with.
    pub policy: PolicyRef,
    /// The gates' flags and routes (a gate that allowed leaves no note).
    pub gates: Vec<crate::gates::GateNote>,
    /// The test that fails on the pin and passes with the diff, when the change claims one.
    pub fail_to_pass_test: Option<String>,
    /// Each witness step, in order.
    pub witness: Vec<AttestedStep>,
    /// The judge's stored score, when `airlock judge` has run.
    pub judge: Option<serde_json::Value>,
    /// The human decision, once there is one.
    pub decision: Option<Decision>,
}

/// The policy file: where it is, its SHA-256 and its `version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRef {
    /// The configured path, or `builtin` for the embedded `policies/default.toml`.
    pub origin: String,
    /// SHA-256 of the file's bytes.
    pub sha256: String,
    /// Its `version`, when it has one.
    pub version: Option<i64>,
}

/// One witness step as the broker ran it in the sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttestedStep {
    /// `pinned_selected`, `patched_selected`, `base_full` or `patched_full`.
    pub step: String,
    /// What it had to show (`fail`, `pass`, `inventory`, `green`).
    pub expect: String,
    /// The tree it ran at the root of.
    pub tree: String,
    /// The command as executed.
    pub argv: Vec<String>,
    /// Its environment.
    pub env: BTreeMap<String, String>,
    /// Its exit code, `None` when killed.
    pub exit_code: Option<i32>,
    /// The tests it reported, counted.
    pub tests: TestCounts,
    /// The grade.
    pub grade: Grade,
}

/// A decision on the item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// `approved`, `denied` or `expired`.
    pub verdict: String,
    /// Who decided (the last approver of a two-approval route).
    pub decided_by: Option<String>,
    /// Unix seconds of the decision.
    pub decided_at: Option<i64>,
    /// The reason given with a denial.
    pub reason: Option<String>,
    /// Every approval, oldest first, each with who, when and why.
    pub approvals: Vec<ApprovalRecord>,
}

impl Statement {
    /// The statement of `view` (and its stored `item`), whose queued diff makes `tree` of the
    /// pin, under `policy`.
    pub fn of(view: &ItemView, item: &QueueItem, tree: &str, policy: PolicyRef) -> Statement {
        let mut subjects = vec![subject(TREE_SUBJECT, "gitTree", tree)];
        if let Some(commit) = &view.commit {
            subjects.push(subject(COMMIT_SUBJECT, "gitCommit", commit));
        }
        let call: Option<airlock_schemas::OpenPr> = serde_json::from_str(&view.arguments).ok();
        let verdict = match item.status {
            QueueStatus::Queued => None,
            QueueStatus::Approved
            | QueueStatus::Published
            | QueueStatus::PublishFailed
            | QueueStatus::Abandoned => Some("approved"),
            QueueStatus::Denied => Some("denied"),
            QueueStatus::Expired => Some("expired"),
        };
        Statement {
            statement_type: STATEMENT_TYPE.to_owned(),
            subject: subjects,
            predicate_type: PREDICATE_TYPE.to_owned(),
            predicate: WitnessPredicate {
                queue_item: view.id,
                run_id: view.run_id.clone(),
                repository: view.repository.clone(),
                issue_id: view.issue_id.clone(),
                base_commit: view.base_commit.clone(),
                diff_sha256: hex::encode(sha2::Sha256::digest(view.diff.as_bytes())),
                computed_digest: view.computed_digest.clone(),
                flags: view.flags.clone(),
                policy,
                gates: view.gates.clone(),
                fail_to_pass_test: call
                    .map(|c| c.test_evidence.before_failing_test)
                    .filter(|t| !t.is_empty()),
                witness: view
                    .witness
                    .iter()
                    .map(|s| AttestedStep {
                        step: s.step.step.clone(),
                        expect: s.step.expect.clone(),
                        tree: s.step.tree.clone(),
                        argv: s.step.argv.clone(),
                        env: s.step.env.clone(),
                        exit_code: s.step.exit_code,
                        tests: s.tests,
                        grade: s.step.grade.clone(),
                    })
                    .collect(),
                judge: view.judge.clone(),
                decision: verdict.map(|verdict| Decision {
                    verdict: verdict.to_owned(),
                    decided_by: view.decided_by.clone(),
                    decided_at: item.decided_at,
                    reason: view.reason.clone(),
                    approvals: view.approvals.clone(),
                }),
            },
        }
    }

    /// The statement as written to `N.intoto.json` and signed: pretty JSON in the structs'
    /// field order, non-ASCII as `\u` escapes, one final newline.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let text = crate::view::to_ascii_json(self).map_err(|e| Error::Io {
            context: "serializing the attestation".to_owned(),
            source: e.into(),
        })?;
        Ok(format!("{text}\n").into_bytes())
    }
}

fn subject(name: &str, algorithm: &str, digest: &str) -> Subject {
    Subject {
        name: name.to_owned(),
        digest: BTreeMap::from([(algorithm.to_owned(), digest.to_owned())]),
    }
}

/// The policy the broker is configured with: `path`, or the built-in one.
pub fn policy_ref(path: Option<&Path>) -> Result<PolicyRef> {
    let (origin, text) = match path {
        Some(p) => (
            p.display().to_string(),
            std::fs::read_to_string(p).map_err(Error::io(format!(
                "reading the policy file {}",
                p.display()
            )))?,
        ),
        None => (
            "builtin".to_owned(),
            airlock_policies::Policy::default_toml().to_owned(),
        ),
    };
    #[derive(Deserialize)]
    struct Versioned {
        version: Option<i64>,
    }
    let version = toml::from_str::<Versioned>(&text)
        .ok()
        .and_then(|v| v.version);
    Ok(PolicyRef {
        origin,
        sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
        version,
    })
}

/// The statement of queue item `id` as the broker's store and clone have it now. A review
/// (a comment on someone's pull request) has no tree to attest: refused.
pub fn statement(broker: &Broker, id: i64) -> Result<Statement> {
    let item = broker.queue_item(id)?;
    if item.review.is_some() {
        return Err(Error::WrongState {
            id,
            status: "review".to_owned(),
            action: "attest (a review changes no tree)".to_owned(),
        });
    }
    let (view, _) = crate::approver::item_view(broker, id)?;
    let cfg = broker
        .config()
        .repositories
        .get(&item.item.repository)
        .ok_or_else(|| {
            Error::Dependency(format!(
                "queue item {id}: repository {:?} is not in broker.toml",
                item.item.repository
            ))
        })?;
    let repo = crate::publish::open_clone(&cfg.clone)?;
    let (_, tree) = crate::publish::patched_tree(&repo, &item)?;
    let policy = policy_ref(broker.config().policy.as_deref())?;
    Ok(Statement::of(&view, &item, &tree.to_string(), policy))
}

/// The identity an item's signatures are made and checked for: its repository's
/// `author_email`.
fn identity(broker: &Broker, statement: &Statement) -> Result<String> {
    broker
        .config()
        .repositories
        .get(&statement.predicate.repository)
        .map(|r| r.author_email.clone())
        .ok_or_else(|| {
            Error::Dependency(format!(
                "repository {:?} is not in broker.toml",
                statement.predicate.repository
            ))
        })
}

/// What `attest N --out DIR` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `DIR/N.intoto.json`.
    pub statement: PathBuf,
    /// `DIR/N.intoto.json.sig`, `None` without `[signing]`.
    pub signature: Option<PathBuf>,
}

/// Write item `id`'s statement to `DIR/N.intoto.json` and, with `[signing]`, its SSH signature
/// (namespace `airlock-attestation`) to `DIR/N.intoto.json.sig`.
pub fn write(broker: &Broker, id: i64, dir: &Path) -> Result<Written> {
    let statement = statement(broker, id)?;
    let bytes = statement.to_bytes()?;
    let signature = match &broker.config().signing {
        Some(signing) => Some(signing.sign(&bytes, crate::signing::ATTESTATION_NAMESPACE)?),
        None => None,
    };
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let path = dir.join(format!("{id}.intoto.json"));
    std::fs::write(&path, &bytes).map_err(Error::io(format!("writing {}", path.display())))?;
    let sig_path = sig_path(&path);
    let signature = match signature {
        Some(text) => {
            std::fs::write(&sig_path, text)
                .map_err(Error::io(format!("writing {}", sig_path.display())))?;
            Some(sig_path)
        }
        None => {
            // A signature of an earlier run of this command would no longer match.
            let _ = std::fs::remove_file(&sig_path);
            None
        }
    };
    Ok(Written {
        statement: path,
        signature,
    })
}

fn sig_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// `attest N --verify FILE`: FILE's signature (`FILE.sig`) verifies against allowed_signers
/// for the repository's `author_email`, and FILE is the statement the broker rebuilds for item
/// `id` now, but for what is only ever added later (the decision, the judge's score, the
/// published commit), which an earlier statement may lack. Every refusal is audited and names
/// what differs.
pub fn verify(broker: &Broker, id: i64, file: &Path) -> Result<Statement> {
    let signing = broker
        .config()
        .signing
        .as_ref()
        .ok_or_else(|| Error::SigningNotConfigured {
            action: "attest --verify".to_owned(),
        })?;
    let item = broker.queue_item(id)?;
    let refuse = |problem: String| {
        let _ = broker.journal.record(
            &item.run_id,
            Event::BrokerDecision {
                code: "ATTESTATION_REFUSED".to_owned(),
                detail: Some(format!("queue item {id}: {}: {problem}", file.display())),
            },
        );
        Error::AttestationRefused {
            file: file.to_owned(),
            problem,
        }
    };
    let bytes = std::fs::read(file).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    let sig_file = sig_path(file);
    let signature = std::fs::read_to_string(&sig_file).map_err(|e| {
        refuse(format!(
            "its signature {} cannot be read: {e}",
            sig_file.display()
        ))
    })?;
    let rebuilt = statement(broker, id)?;
    let who = identity(broker, &rebuilt)?;
    let mut problems = Vec::new();
    if let Err(e) = signing.verify(
        &bytes,
        &signature,
        &who,
        crate::signing::ATTESTATION_NAMESPACE,
    ) {
        problems.push(e.to_string());
    }
    let claimed = match serde_json::from_slice::<Statement>(&bytes) {
        Ok(claimed) => claimed,
        Err(e) => {
            problems.push(format!("it is not an airlock witness statement: {e}"));
            return Err(refuse(problems.join("; ")));
        }
    };
    let differences = differences(&claimed, &as_of(rebuilt, &claimed));
    if !differences.is_empty() {
        problems.push(format!(
            "it is not the broker's statement of queue item {id}: {} differ",
            differences.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(refuse(problems.join("; ")));
    }
    Ok(claimed)
}

/// `rebuilt` without what `earlier` could not have had yet: the decision, the judge's score
/// and the published commit are only ever added after an item is queued.
fn as_of(mut rebuilt: Statement, earlier: &Statement) -> Statement {
    let p = &mut rebuilt.predicate;
    if earlier.predicate.decision.is_none() {
        p.decision = None;
    }
    if earlier.predicate.judge.is_none() {
        p.judge = None;
    }
    if !earlier.subject.iter().any(|s| s.name == COMMIT_SUBJECT) {
        rebuilt.subject.retain(|s| s.name != COMMIT_SUBJECT);
    }
    rebuilt
}

/// The JSON pointers where `a` and `b` differ (at most 20 named).
fn differences(a: &Statement, b: &Statement) -> Vec<String> {
    fn walk(a: &serde_json::Value, b: &serde_json::Value, at: String, out: &mut Vec<String>) {
        use serde_json::Value;
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let null = Value::Null;
                    let (l, r) = (x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null));
                    walk(l, r, format!("{at}/{k}"), out);
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (l, r)) in x.iter().zip(y).enumerate() {
                    walk(l, r, format!("{at}/{i}"), out);
                }
            }
            _ if a != b => out.push(if at.is_empty() { "/".to_owned() } else { at }),
            _ => {}
        }
    }
    let (Ok(a), Ok(b)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return vec!["/".to_owned()];
    };
    let mut out = Vec::new();
    walk(&a, &b, String::new(), &mut out);
    if out.len() > 20 {
        let more = out.len() - 20;
        out.truncate(20);
        out.push(format!("and {more} more"));
    }
    out
}

/// After item `id` is published on pull request `pr_url`: post its attestation's summary and
/// the statement (with its signature when `[signing]` is set) as a comment. Never fails the
/// publication: a comment the forge refuses is reported on stderr and audited
/// (`ATTESTATION_COMMENT_FAILED`), a posted one audited with the statement's SHA-256.
pub fn comment_on_publication(
    broker: &Broker,
    repository: &str,
    cfg: &crate::config::RepositoryConfig,
    item: &QueueItem,
    pr_url: &str,
) {
    let posted = (|| {
        let number = pull_number(pr_url).ok_or_else(|| {
            Error::Forge(format!("{pr_url:?} does not end in a pull request number"))
        })?;
        let statement = statement(broker, item.id)?;
        let bytes = statement.to_bytes()?;
        let signature = match &broker.config().signing {
            Some(s) => Some(s.sign(&bytes, crate::signing::ATTESTATION_NAMESPACE)?),
            None => None,
        };
        let body = comment_body(&statement, &bytes, signature.as_deref());
        let url = broker
            .forge
            .post_pull_comment(repository, cfg, number, &body)?;
        Ok::<_, Error>((url, hex::encode(sha2::Sha256::digest(&bytes))))
    })();
    let event = match posted {
        Ok((url, sha)) => Event::BrokerDecision {
            code: "ATTESTATION_POSTED".to_owned(),
            detail: Some(format!(
                "queue item {}: statement sha256:{sha} on {pr_url}{}",
                item.id,
                url.map(|u| format!(" ({u})")).unwrap_or_default()
            )),
        },
        Err(e) => {
            eprintln!(
                "airlock-broker: queue item {} is published, but its attestation comment was not posted: {}",
                item.id,
                airlock_policies::terminal::escaped(&e.to_string())
            );
            Event::BrokerDecision {
                code: "ATTESTATION_COMMENT_FAILED".to_owned(),
                detail: Some(format!("queue item {}: {e}", item.id)),
            }
        }
    };
    if let Err(e) = broker.journal.record(&item.run_id, event) {
        eprintln!("airlock-broker: auditing the attestation comment: {e}");
    }
}

/// `https://github.com/O/R/pull/12` → 12.
fn pull_number(url: &str) -> Option<u64> {
    let (_, tail) = url
        .rsplit_once("/pull/")
        .or_else(|| url.rsplit_once("/-/merge_requests/"))?;
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The comment: a summary in the broker's words (the agent's and the repository's text
/// escaped), then the statement and its signature, each in a fence longer than any backtick
/// run inside it. A statement over [`COMMENT_STATEMENT_MAX_CHARS`] is cut, and the comment
/// says so.
pub fn comment_body(statement: &Statement, bytes: &[u8], signature: Option<&str>) -> String {
    let esc = crate::pr_text::markdown_text;
    let p = &statement.predicate;
    let mut out = format!(
        "{}\n### airlock/witness\n\n",
        crate::pr_text::ATTESTATION_COMMENT_MARKER
    );
    let tree = statement.subject.iter().find(|s| s.name == TREE_SUBJECT);
    let tree = tree
        .and_then(|s| s.digest.get("gitTree"))
        .map_or("?", |t| t);
    out.push_str(&format!(
        "The airlock broker witnessed tree `{tree}` (queue item {}, the queued diff on the \
         pinned commit `{}`) against the pinned tests:\n\n",
        p.queue_item, p.base_commit
    ));
    if let Some(test) = &p.fail_to_pass_test {
        out.push_str(&format!("- Fail-to-pass test: {}\n", esc(test)));
    }
    for step in &p.witness {
        let grade = match &step.grade {
            Grade::Ok => "ok".to_owned(),
            Grade::NotOk(why) => format!("not ok: {}", esc(why)),
            Grade::Invalid(why) => format!("invalid: {}", esc(why)),
        };
        out.push_str(&format!(
            "- Witness {} (expected {}): {grade}; exit {}; {} passed, {} failed, {} errors, {} \
             skipped\n",
            esc(&step.step),
            esc(&step.expect),
            step.exit_code
                .map_or("none (killed)".to_owned(), |c| c.to_string()),
            step.tests.passed,
            step.tests.failed,
            step.tests.errors,
            step.tests.skipped
        ));
    }
    out.push_str(&format!(
        "- Policy: {} version {} (sha256 `{}`); {} detector flags; {} gate notes\n",
        esc(&p.policy.origin),
        p.policy
            .version
            .map_or("none".to_owned(), |v| v.to_string()),
        p.policy.sha256,
        p.flags.len(),
        p.gates.len()
    ));
    if let Some(d) = &p.decision {
        let approvers: Vec<String> = d.approvals.iter().map(|a| esc(&a.approver)).collect();
        out.push_str(&format!(
            "- Decision: {} by {}\n",
            esc(&d.verdict),
            if approvers.is_empty() {
                d.decided_by.as_deref().map_or("?".to_owned(), esc)
            } else {
                approvers.join(", ")
            }
        ));
    }
    out.push_str(
        "\nThis proves what the broker checked with its key, not that the tests are adequate \
         or the change correct.\n\n",
    );
    let text = String::from_utf8_lossy(bytes);
    let cut = text.chars().count() > COMMENT_STATEMENT_MAX_CHARS;
    let shown: String = text.chars().take(COMMENT_STATEMENT_MAX_CHARS).collect();
    out.push_str(&format!(
        "<details><summary>in-toto statement ({} bytes{})</summary>\n\n",
        bytes.len(),
        if cut {
            ", cut here: `airlock-broker attest N` prints it whole"
        } else {
            ""
        }
    ));
    out.push_str(&fenced("json", &shown));
    match signature {
        Some(sig) if !cut => {
            out.push_str(
                "\nSignature (`ssh-keygen -Y verify -n airlock-attestation`, over the block \
                 above as a file ending in one newline):\n\n",
            );
            out.push_str(&fenced("", sig));
        }
        Some(_) => out.push_str("\nThe signature is over the whole statement: not shown.\n"),
        None => out.push_str("\nUnsigned: the broker has no `[signing]` key.\n"),
    }
    out.push_str("</details>\n");
    out
}

/// `text` in a fenced block whose fence is longer than any backtick run in it.
fn fenced(info: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.strip_suffix('\n').unwrap_or(text);
    format!("{fence}{info}\n{body}\n{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_outruns_any_backticks_inside_it() {
        assert_eq!(fenced("json", "{}\n"), "```json\n{}\n```\n");
        assert_eq!(fenced("", "a ```` b"), "`````\na ```` b\n`````\n");
    }

    #[test]
    fn pull_numbers_come_from_the_pull_requests_address() {
        assert_eq!(pull_number("https://github.com/o/r/pull/12"), Some(12));
        assert_eq!(pull_number("https://forge.example/o/r/pull/3#x"), Some(3));
        assert_eq!(pull_number("https://github.com/o/r/issues/12"), None);
        assert_eq!(
            pull_number("https://gitlab.example/g/s/r/-/merge_requests/4"),
            Some(4)
        );
        assert_eq!(pull_number("https://gitlab.example/g/r/-/issues/4"), None);
    }

    #[test]
    fn the_builtin_policy_has_a_version_and_a_hash() {
        let p = policy_ref(None).unwrap();
        assert_eq!(p.origin, "builtin");
        assert_eq!(p.version, Some(1));
        assert_eq!(p.sha256.len(), 64);
    }
}
