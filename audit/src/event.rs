//! The typed events a run records. On disk each becomes `"kind": <snake_case name>` and
//! `"payload": {fields}`.

use crate::detect::{Borderline, HiddenKind, SourceKind};
use crate::error::{Error, Result};
use crate::verdict::{FindingKey, TriageStatus};
use serde::{Deserialize, Serialize};

/// Whether a test run used a narrow selector or the whole suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestScope {
    /// A selector narrower than the whole suite.
    Narrow,
    /// No selector: the whole suite.
    Full,
}

/// How a test run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestResult {
    /// Every selected test passed.
    Passed,
    /// At least one test failed.
    Failed,
    /// The test command could not run or crashed.
    Error,
    /// The sandbox stopped the run at its time limit.
    TimedOut,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// A pull request was submitted to the broker.
    Pr,
    /// The issue was handed back with a reason.
    Escalate,
    /// The run stopped on an internal error.
    Failed,
    /// A budget stopped the run and it was parked: its worktree and conversation are kept
    /// for `airlock resume` (a `run_resumed` record follows when it is).
    Parked,
    /// A review of a pull request was queued for an approver (`airlock review`).
    Review,
}

/// What a security model answered about a span (the second opinion; the rules' finding stands
/// whatever it says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecondVerdict {
    /// The model judged the span an injection attempt.
    Injection,
    /// The model judged it benign.
    Benign,
    /// The model said it could not tell.
    Unsure,
    /// The reply was neither the asked-for JSON nor a guard model's `safe`/`unsafe`.
    Unparseable,
    /// No reply: the endpoint failed or timed out.
    Failed,
}

impl SecondVerdict {
    /// The name on disk and in the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            SecondVerdict::Injection => "injection",
            SecondVerdict::Benign => "benign",
            SecondVerdict::Unsure => "unsure",
            SecondVerdict::Unparseable => "unparseable",
            SecondVerdict::Failed => "failed",
        }
    }
}

/// Who made a read: the supervisor's own model, or a reader worker of one delegation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum ReadBy {
    /// The supervisor's `read_file`.
    Supervisor,
    /// A window of a search candidate the warm start shows before the first turn.
    WarmStart,
    /// A reader worker's `read_file`, checked by the supervisor against its own re-read.
    Reader {
        /// The run's delegation it belonged to, 1-based in the order they were made.
        delegation: u32,
    },
}

impl std::fmt::Display for ReadBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadBy::Supervisor => f.write_str("supervisor"),
            ReadBy::WarmStart => f.write_str("warm-start"),
            ReadBy::Reader { delegation } => write!(f, "reader#{delegation}"),
        }
    }
}

impl std::fmt::Display for SecondVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One repository a skill call loaded: its URL (credentials removed) and the commit it was
/// read at, or the status that kept it from being read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceRepoPin {
    /// The repository's URL as configured, without credentials.
    pub url: String,
    /// The resolved 40-hex commit, when it was resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    /// Why it was not read (`fetch-error`, `ref-not-found`); absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One step of a run. Serialised adjacently tagged: `kind` names the variant, `payload` holds
/// its fields. Nothing here carries a credential: there is no field for one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload", rename_all = "snake_case")]
pub enum Event {
    /// A run began on one issue of one repository at one pinned commit.
    RunStarted {
        /// Repository slug or URL.
        repository: String,
        /// The pinned 40-hex commit.
        commit: String,
        /// The issue identifier.
        issue: String,
        /// SHA-256 of the effective configuration.
        config_digest: String,
    },
    /// One language-model call (never a key, never the prompt).
    ModelCall {
        /// Model identifier.
        model: String,
        /// Prompt tokens.
        input_tokens: u64,
        /// Completion tokens.
        output_tokens: u64,
        /// Of `input_tokens`, those read from the provider's prompt cache.
        #[serde(default, skip_serializing_if = "is_zero")]
        cache_read_tokens: u64,
        /// Of `input_tokens`, those written to the provider's prompt cache.
        #[serde(default, skip_serializing_if = "is_zero")]
        cache_write_tokens: u64,
        /// What the call cost in US dollars, when the model's prices are configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// Wall-clock latency in milliseconds.
        latency_ms: u64,
    },
    /// One tool call made by the model.
    ToolCall {
        /// Tool name (`search_repo`, `read_file`, ...).
        tool: String,
        /// SHA-256 of the canonical JSON arguments.
        args_digest: String,
        /// Size of the result handed to the model, in bytes.
        result_bytes: u64,
        /// Whether the result was cut at a bound.
        truncated: bool,
        /// For reads: the repository-relative path read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// For reads: bytes of file content returned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes_returned: Option<u64>,
    },
    /// One successful bounded read of a file of the tree, by the supervisor or a reader worker:
    /// what the model was shown of it. The figures are the supervisor's own (for a reader's
    /// read, from its re-read of the same window; a worker's claim that differs is an
    /// `integrity_violation`).
    FileRead {
        /// The repository-relative path read.
        path: String,
        /// Who read it.
        reader: ReadBy,
        /// First line returned, 1-based (0 for an empty file).
        line_start: u32,
        /// Last line returned, inclusive (possibly only partly returned when `truncated`).
        line_end: u32,
        /// Bytes of file content returned (not the rendered result with its line numbers).
        content_bytes: u64,
        /// Bytes in the whole file.
        total_bytes: u64,
        /// Whether the read cap cut the requested window short.
        truncated: bool,
    },
    /// A text was about to reach a model with characters that draw nothing (tag characters,
    /// zero-width, bidi controls, ...): it was shown with those characters as visible escapes
    /// and a note line. The text scanned and the file on disk are unchanged.
    HiddenTextRendered {
        /// Where the text came from (a path, `warm_start`, `tool:<name>`, `reader:...`).
        source: String,
        /// How many hidden characters were made visible.
        characters: u64,
        /// Their classes, sorted.
        kinds: Vec<HiddenKind>,
    },
    /// A reader subagent returned its digest.
    ReaderDigest {
        /// SHA-256 of the brief the reader was given.
        brief_digest: String,
        /// SHA-256 of the digest JSON it returned.
        digest_digest: String,
        /// File reads the reader used.
        reads_used: u32,
        /// Whether the reader said it answered completely.
        complete: bool,
        /// Number of anchors returned.
        anchors: u32,
    },
    /// A knowledge skill the run called once before its loop (`knowledge-reference-repos`):
    /// whether it answered, and which repositories it loaded at which commits, so a reviewer
    /// can call it again with identical input. An empty list is recorded too.
    SkillCall {
        /// The skill's name.
        skill: String,
        /// Whether the call answered (`false`: the whole call was refused).
        ok: bool,
        /// Each repository it was configured with that named a URL, in the answer's order.
        reference_repos: Vec<ReferenceRepoPin>,
        /// The answer's reason (`mesh-has-no-reference-repos`, `mesh-config-dir-unreadable`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A sandboxed test run.
    TestRun {
        /// The selector, absent for a full run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// Narrow or full.
        scope: TestScope,
        /// How it ended.
        result: TestResult,
        /// True for the broker's witness run against the pinned test tree.
        #[serde(default, skip_serializing_if = "is_false")]
        witness: bool,
    },
    /// What the egress proxy refused one sandboxed command (a prepare step, a test run, a
    /// witness step), once per host and port.
    NetworkBlocked {
        /// What ran: `prepare`, `narrow`, `full` or a witness step's name.
        command: String,
        /// The refused attempts.
        attempts: Vec<BlockedNetwork>,
    },
    /// A tool call refused by policy (write allowlist, bounded read refusal, ...).
    PolicyRefusal {
        /// The path (or argument) refused; for a read, the path as asked for.
        path: String,
        /// The rule that refused it; for a read, `read:` and the refusal's class
        /// (`read:parent_segment`, `read:read_budget_spent`).
        rule: String,
        /// For a refused read: who asked for it (a reader worker's refusals are recorded by the
        /// supervisor, which checks the class itself). Absent for any other refusal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reader: Option<ReadBy>,
    },
    /// A model reported text that tried to steer it (`injection_observed` in its output).
    InjectionObserved {
        /// Where the text was.
        path: String,
        /// What the model quoted or said about it.
        excerpt: String,
        /// Line, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
    },
    /// The deterministic detector flagged text a tool handed to a model.
    InjectionSuspected {
        /// Where the text came from (file path, `search:<query>`, `issue:<id>`).
        path: String,
        /// 1-based line within that text.
        line: u64,
        /// The detector rule that fired.
        rule: String,
        /// The flagged line, invisible characters shown as `<U+XXXX>`.
        excerpt: String,
        /// What kind of text it was.
        source: SourceKind,
        /// What the finding's dismissal is keyed by besides repository, path and rule: for a
        /// file of the tree (`source: file` and a tracked path), the git blob id of that path at
        /// the run's pinned commit (40 hex); for any other text (the issue body, search
        /// snippets, tool output, a file the run created or wrote) `sha256:` and the SHA-256
        /// of the excerpt's line. Absent in records written before triage existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
        /// Seq of the `injection_triaged` record that had already dismissed this finding's key
        /// when the run recorded it: the finding is kept, but it is not a new one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dismissed_by: Option<u64>,
    },
    /// The operator's security model was asked about a flagged or borderline span and answered
    /// (or failed to). Recorded beside the rules' finding; it never removes, replaces or
    /// downgrades it.
    InjectionSecondOpinion {
        /// Seq of the `injection_suspected` record it is about; absent for a borderline span.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finding: Option<u64>,
        /// Seqs of the other findings on the same line (one question covers a line).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        also: Vec<u64>,
        /// Where the text came from, as in `injection_suspected`.
        path: String,
        /// 1-based line within that text.
        line: u64,
        /// For a borderline span: the rule it nearly fired, how it fell short, and its excerpt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        borderline: Option<Borderline>,
        /// The security model's name (never a key).
        model: String,
        /// Its verdict.
        verdict: SecondVerdict,
        /// The model's reason (untrusted text, kept as data), the start of an unparseable reply
        /// (escaped), or why the call failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Prompt tokens of the call.
        input_tokens: u64,
        /// Completion tokens of the call.
        output_tokens: u64,
        /// Wall-clock latency in milliseconds.
        latency_ms: u64,
    },
    /// The security model's budget ran out: from this span on, nothing more is asked in the run.
    /// Recorded once per run.
    SecondOpinionBudgetSpent {
        /// The security model's name.
        model: String,
        /// `calls` or `tokens`.
        resource: String,
        /// How much was used.
        used: String,
        /// The configured limit.
        limit: String,
        /// The first span left unasked: its text's path.
        path: String,
        /// And its line.
        line: u64,
    },
    /// The security team triaged an injection finding. Recorded under the finding's run; a
    /// later triage of the same finding supersedes this one (both stay in the chain).
    InjectionTriaged {
        /// Seq of the `injection_suspected` or `injection_observed` record triaged.
        finding: u64,
        /// The verdict.
        status: TriageStatus,
        /// Why (required for `confirmed` and `dismissed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// Who triaged it.
        by: String,
        /// The finding's dismissal key, copied from the finding when it has one (detector
        /// findings with a blob id), so a dismissal applies to later runs without re-reading it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<FindingKey>,
    },
    /// The model called `open_pr`; the broker received the submission.
    OpenPrSubmitted {
        /// SHA-256 of the submitted arguments.
        args_digest: String,
        /// The proposed title.
        title: String,
        /// Files the submission claims to change.
        files_changed: Vec<String>,
    },
    /// The broker's decision on a submission: one of the broker's error codes
    /// (`SCHEMA_INVALID`, `DIGEST_MISMATCH`, `POLICY_VIOLATION`, `APPROVAL_DENIED`,
    /// `APPROVAL_TIMEOUT`) or `QUEUED` when it was queued for a human.
    BrokerDecision {
        /// The code.
        code: String,
        /// One line of detail (the failing pointer, offending path, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A human approved the diff.
    Approval {
        /// Who approved.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewer: Option<String>,
        /// Optional note.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A human denied the diff.
    Denial {
        /// Who denied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewer: Option<String>,
        /// The reviewer's one-line reason.
        reason: String,
    },
    /// One of the organisation's gates decided on an `open_pr` (the broker, after the digest
    /// and before the witness). A gate that failed (trap, fuel, memory, timeout) is a deny with
    /// that failure.
    GateVerdict {
        /// The gate's name in `broker.toml`.
        gate: String,
        /// `sha256:` of the component that ran.
        digest: String,
        /// `allow`, `flag`, `route` or `deny`.
        verdict: String,
        /// The flag's message, the route's group or the deny's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Why the gate gave no verdict of its own (`out_of_fuel`, `memory_cap`, `timeout`,
        /// `trap`, `bad_verdict`, `host`), when it did not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        /// Fuel the call used.
        fuel_consumed: u64,
    },
    /// A recomputed value did not match what was claimed (for example a diff digest field).
    IntegrityViolation {
        /// What was checked (`diff_digest.insertions`, `base_commit`, ...).
        check: String,
        /// The claimed value.
        claimed: String,
        /// The recomputed value.
        computed: String,
    },
    /// The judge scored a queued or decided pull request.
    JudgeScore {
        /// The broker's queue id of the scored submission.
        queue_id: i64,
        /// `accept`, `revise`, `reject`, or `failed` when the judge's answer never validated.
        verdict: String,
        /// One line with the five scores, the number of unsupported claims and the judge model.
        detail: String,
        /// SHA-256 of the full judgement stored with the queue entry.
        judgement_sha256: String,
    },
    /// The run ended.
    RunFinished {
        /// How.
        outcome: RunOutcome,
        /// One line of why, for escalations and failures.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The broker's list of named approvers changed. Recorded under the run id
    /// `approver:<name>`; never the approver's token or its hash.
    ApproverChanged {
        /// The approver's name.
        name: String,
        /// Whether they are a senior approver.
        senior: bool,
        /// `added` or `removed`.
        change: String,
    },
    /// The broker changed a claim on an issue (a worker took it, or ended it). Recorded under
    /// the run id `claim:<repository>#<number>`.
    Claim {
        /// The repository's name in `broker.toml`.
        repository: String,
        /// The forge's issue number.
        issue_number: u64,
        /// The worker that holds (or held) it.
        holder: String,
        /// `acquired`, `done` or `abandoned`.
        change: String,
        /// What became of the claim label on the forge (`posted`, `unchanged`,
        /// `not_configured`, `rate_limited`, `failed: ...`).
        label: String,
    },
    /// A parked run was taken up again with more budget (after its `run_finished` record with
    /// outcome `parked`).
    RunResumed {
        /// What the operator added, e.g. `turns +5, usd +1.00`.
        added: String,
    },
    /// Written by the log itself when it found a torn write (a crash mid-append) at its end.
    /// The torn bytes stay in the file where they were; this record names their byte range and
    /// hash so they cannot be changed later unnoticed.
    TailRepaired {
        /// Byte offset where the torn region starts.
        offset: u64,
        /// Length of the torn region in bytes.
        len: u64,
        /// SHA-256 of the torn bytes.
        sha256: String,
        /// The torn bytes as lossy UTF-8, cut at 512 bytes.
        excerpt: String,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One attempt the egress proxy refused: `HOST:PORT` and why, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockedNetwork {
    /// `HOST:PORT` as the command asked for it (printable ASCII).
    pub target: String,
    /// Why it was refused.
    pub reason: String,
}

impl Event {
    /// The on-disk `kind` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::ModelCall { .. } => "model_call",
            Event::ToolCall { .. } => "tool_call",
            Event::FileRead { .. } => "file_read",
            Event::HiddenTextRendered { .. } => "hidden_text_rendered",
            Event::ReaderDigest { .. } => "reader_digest",
            Event::SkillCall { .. } => "skill_call",
            Event::TestRun { .. } => "test_run",
            Event::NetworkBlocked { .. } => "network_blocked",
            Event::PolicyRefusal { .. } => "policy_refusal",
            Event::InjectionObserved { .. } => "injection_observed",
            Event::InjectionSuspected { .. } => "injection_suspected",
            Event::InjectionSecondOpinion { .. } => "injection_second_opinion",
            Event::SecondOpinionBudgetSpent { .. } => "second_opinion_budget_spent",
            Event::InjectionTriaged { .. } => "injection_triaged",
            Event::OpenPrSubmitted { .. } => "open_pr_submitted",
            Event::BrokerDecision { .. } => "broker_decision",
            Event::Approval { .. } => "approval",
            Event::Denial { .. } => "denial",
            Event::GateVerdict { .. } => "gate_verdict",
            Event::IntegrityViolation { .. } => "integrity_violation",
            Event::JudgeScore { .. } => "judge_score",
            Event::RunFinished { .. } => "run_finished",
            Event::RunResumed { .. } => "run_resumed",
            Event::Claim { .. } => "claim",
            Event::ApproverChanged { .. } => "approver_changed",
            Event::TailRepaired { .. } => "tail_repaired",
        }
    }

    /// Records that must survive a power cut once `append` returns: decisions a human or the
    /// broker made, and the ends of runs.
    pub fn must_sync(&self) -> bool {
        matches!(
            self,
            Event::OpenPrSubmitted { .. }
                | Event::BrokerDecision { .. }
                | Event::Approval { .. }
                | Event::Denial { .. }
                | Event::GateVerdict { .. }
                | Event::IntegrityViolation { .. }
                | Event::JudgeScore { .. }
                | Event::InjectionTriaged { .. }
                | Event::RunFinished { .. }
                | Event::Claim { .. }
                | Event::ApproverChanged { .. }
                | Event::TailRepaired { .. }
        )
    }

    /// Split into the on-disk `kind` and `payload`, refusing values that must never be logged.
    pub(crate) fn to_kind_payload(&self) -> Result<(&'static str, serde_json::Value)> {
        let kind = self.kind();
        if let Event::ModelCall { model, .. }
        | Event::InjectionSecondOpinion { model, .. }
        | Event::SecondOpinionBudgetSpent { model, .. } = self
            && looks_like_secret(model)
        {
            return Err(Error::RejectedField {
                kind,
                field: "model",
                reason: "looks like a credential, not a model name",
            });
        }
        let mut value =
            serde_json::to_value(self).map_err(|source| Error::Serialize { kind, source })?;
        let payload = value
            .get_mut("payload")
            .map(serde_json::Value::take)
            .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()));
        Ok((kind, payload))
    }

    /// Rebuild an event from a record's `kind` and `payload`.
    pub fn from_kind_payload(seq: u64, kind: &str, payload: &serde_json::Value) -> Result<Event> {
        let wrapped = serde_json::json!({ "kind": kind, "payload": payload });
        serde_json::from_value(wrapped).map_err(|source| Error::Payload {
            seq,
            kind: kind.to_string(),
            source,
        })
    }
}

/// Shapes of well-known API keys and tokens; a model name never looks like this.
fn looks_like_secret(s: &str) -> bool {
    let prefixes = [
        "sk-",
        "sk_",
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "xoxb-",
        "AKIA",
        "AIza",
        "Bearer ",
    ];
    // Random tokens have long unbroken alphanumeric runs; model names are short hyphenated parts.
    let longest_run = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::len)
        .max()
        .unwrap_or(0);
    let long_token = longest_run >= 24;
    prefixes.iter().any(|p| s.starts_with(p)) || long_token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_matches_serde_tag() {
        let e = Event::Denial {
            reviewer: None,
            reason: "touches CI".into(),
        };
        let (kind, payload) = e.to_kind_payload().unwrap();
        assert_eq!(kind, "denial");
        assert_eq!(payload, serde_json::json!({"reason": "touches CI"}));
        assert_eq!(Event::from_kind_payload(1, kind, &payload).unwrap(), e);
    }

    #[test]
    fn a_file_read_names_its_reader_and_round_trips() {
        let e = Event::FileRead {
            path: "src/big.py".into(),
            reader: ReadBy::Reader { delegation: 2 },
            line_start: 1,
            line_end: 300,
            content_bytes: 10_218,
            total_bytes: 20_000,
            truncated: true,
        };
        let (kind, payload) = e.to_kind_payload().unwrap();
        assert_eq!(kind, "file_read");
        assert_eq!(
            payload["reader"],
            serde_json::json!({"by": "reader", "delegation": 2})
        );
        assert_eq!(Event::from_kind_payload(1, kind, &payload).unwrap(), e);
        assert_eq!(ReadBy::Supervisor.to_string(), "supervisor");
    }

    #[test]
    fn a_refused_read_names_its_reader_and_other_refusals_decode_as_before() {
        let e = Event::PolicyRefusal {
            path: "../secrets".into(),
            rule: "read:parent_segment".into(),
            reader: Some(ReadBy::Reader { delegation: 1 }),
        };
        let (kind, payload) = e.to_kind_payload().unwrap();
        assert_eq!(kind, "policy_refusal");
        assert_eq!(
            payload["reader"],
            serde_json::json!({"by": "reader", "delegation": 1})
        );
        assert_eq!(Event::from_kind_payload(1, kind, &payload).unwrap(), e);
        let old = serde_json::json!({"path": ".github/ci.yml", "rule": "dot-directory"});
        let decoded = Event::from_kind_payload(1, "policy_refusal", &old).unwrap();
        assert_eq!(
            decoded,
            Event::PolicyRefusal {
                path: ".github/ci.yml".into(),
                rule: "dot-directory".into(),
                reader: None,
            }
        );
        assert_eq!(decoded.to_kind_payload().unwrap().1, old);
    }

    #[test]
    fn model_call_refuses_a_key() {
        let e = Event::ModelCall {
            model: "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789".into(),
            input_tokens: 1,
            output_tokens: 1,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: None,
            latency_ms: 1,
        };
        assert!(matches!(
            e.to_kind_payload(),
            Err(Error::RejectedField { field: "model", .. })
        ));
        let ok = Event::ModelCall {
            model: "claude-sonnet-4-5-20250929".into(),
            input_tokens: 1,
            output_tokens: 1,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: None,
            latency_ms: 1,
        };
        assert!(ok.to_kind_payload().is_ok());
    }
}
