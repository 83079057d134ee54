//! The queue: what the approver is shown (the broker's diff, digest, witness outputs, the
//! detectors', test-code and gates' flags, the run's reported network refusals), and the rule
//! that a run gets one accepted open_pr. The rule is decided here only: asked before the
//! pipeline, from the run's state, so a second call costs no witness run, and asked again
//! of the store's answer when the item is recorded, inside its transaction, so two concurrent
//! calls of one run cannot both be accepted. The stores only say whether the run has an item.

use super::RunReport;
use super::refusal::Refusal;
use super::witness::Witnessed;
use crate::rules::finding_flag;
use crate::screening;
use crate::store::{IntakeOutcome, IntakeReply, NewQueueItem, QueueInsert, Store};
use airlock_protocol::RunRegistration;

/// The rule: one accepted open_pr per run, whatever its arguments. `accepted_before`: the
/// run already has an accepted open_pr (its state, or the store's queue).
pub fn one_open_pr_per_run(accepted_before: bool) -> Result<(), Refusal> {
    if accepted_before {
        return Err(Refusal::policy(
            "second_open_pr",
            "one_open_pr_per_run",
            "this run already has an accepted open_pr",
        ));
    }
    Ok(())
}

/// The queue item a green intake assembles: the broker's own flags as the approver reads
/// them, sorted; its own screening of the texts and files it can see, with what the run
/// reported, one finding per place.
pub fn assemble(
    run: &RunRegistration,
    args: &str,
    reported: RunReport<'_>,
    witnessed: Witnessed,
) -> NewQueueItem {
    let Witnessed { gated, report } = witnessed;
    let evidence = report.outputs();
    let collected = collected_test_file_flags(
        &report.collected_test_files,
        &gated.digested.allowed.changes.diff,
    );
    let findings = screen(run, &gated.digested.allowed, reported.findings);
    let notes = gated.notes;
    let digested = gated.digested;
    let (call, changes, test_code) = (
        digested.allowed.checkout.call,
        digested.allowed.changes,
        digested.allowed.test_code,
    );
    let mut flags: Vec<String> = digested.findings.iter().map(finding_flag).collect();
    flags.extend(test_code_flags(&test_code));
    flags.extend(collected);
    let mut notes = notes;
    notes.extend(senior_routes(&test_code));
    for url in crate::rules::body_urls(&call.body) {
        flags.push(format!(
            "body-url: the body links to {url:?}; open_pr allows no URL other than the issue \
             link"
        ));
    }
    if call.test_change_reason != airlock_schemas::TestChangeReason::None {
        flags.push(format!(
            "senior-review: test_change_reason is {}",
            serde_json::to_value(call.test_change_reason).unwrap_or_default()
        ));
    }
    flags.sort();
    NewQueueItem {
        repository: run.repository.clone(),
        base_commit: run.base_commit.clone(),
        issue_id: call.issue_id,
        title: call.title,
        args: args.to_owned(),
        diff: changes.diff,
        digest: serde_json::to_value(&digested.computed).unwrap_or_default(),
        evidence,
        flags,
        gates: notes,
        findings: Some(findings),
        network_blocked: reported
            .network_blocked
            .iter()
            .take(airlock_policies::network::MAX_BLOCKED_ATTEMPTS)
            .cloned()
            .collect(),
    }
}

/// The broker's screening of what it sees without trusting the run (the registered issue, the
/// call's title and body, the diff's added lines, the touched files at the pin), merged with
/// what the run reported.
fn screen(
    run: &RunRegistration,
    allowed: &super::policy::Allowed,
    reported: &[airlock_protocol::ItemFinding],
) -> Vec<airlock_protocol::ItemFinding> {
    let files = airlock_policies::parse_unified_diff(&allowed.changes.diff).unwrap_or_default();
    let call = &allowed.checkout.call;
    let mut own = screening::text_findings(&screening::Screened {
        issue: run.issue.as_ref(),
        title: &call.title,
        body: Some(&call.body),
        files: &files,
    });
    own.extend(screening::pinned_file_findings(
        &allowed.checkout.repo,
        allowed.checkout.pin,
        &files,
    ));
    screening::merged(own, reported)
}

/// Record the intake's outcome and answer the run: queued, or refused.
pub fn record(
    store: &mut dyn Store,
    run_id: &str,
    request_id: &str,
    outcome: IntakeOutcome,
    now: i64,
) -> crate::error::Result<IntakeReply> {
    store.record_intake(run_id, request_id, outcome, &answer, now)
}

/// A store's [`Store::record_intake`] answered under the broker's rule ([`answer`]): of the
/// accepted open_pr calls of a run, the first is queued and the others are refused. The rule
/// lives here, above the stores, which only say what they found.
pub trait FinishIntake {
    /// Record the outcome of intake `request_id` of `run_id` and answer it.
    fn finish_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        outcome: IntakeOutcome,
        now: i64,
    ) -> crate::error::Result<IntakeReply>;
}

impl<S: Store + ?Sized> FinishIntake for S {
    fn finish_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        outcome: IntakeOutcome,
        now: i64,
    ) -> crate::error::Result<IntakeReply> {
        self.record_intake(run_id, request_id, outcome, &answer, now)
    }
}

/// The answer to what the store found when it queued an accepted intake, under
/// [`one_open_pr_per_run`]; the store records it in the same transaction.
pub fn answer(found: QueueInsert) -> IntakeReply {
    let (accepted_before, queue_id) = match found {
        QueueInsert::Inserted { queue_id } => (false, queue_id),
        QueueInsert::RunAlreadyQueued { queue_id } => (true, queue_id),
    };
    match one_open_pr_per_run(accepted_before) {
        Ok(()) => IntakeReply::Queued { queue_id },
        Err(refusal) => IntakeReply::Refused {
            error: refusal.into_broker_error(),
        },
    }
}

/// One flag per file the change edited that the runner collected tests from at base although
/// no test pattern of the policy names it (`app/tests.py`): the witness ran it as pinned, so
/// the change's edits to it never ran, and the approver reads how many lines they remove.
fn collected_test_file_flags(paths: &[String], diff: &str) -> Vec<String> {
    paths
        .iter()
        .map(|path| {
            let (removed, added) = lines_changed_in(diff, path);
            format!(
                "test-file-by-inventory: {path} holds tests the runner collected at base, though \
                 no test pattern of the policy names it: the witness ran it as pinned, not as \
                 changed (lines the change removes from it: {removed}; adds: {added})"
            )
        })
        .collect()
}

/// The lines a unified diff removes from and adds to `path`.
fn lines_changed_in(diff: &str, path: &str) -> (usize, usize) {
    let header = format!("diff --git a/{path} b/");
    let (mut inside, mut removed, mut added) = (false, 0, 0);
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            inside = line.starts_with(&header);
            continue;
        }
        if !inside || line.starts_with("--- ") || line.starts_with("+++ ") {
            continue;
        }
        if line.starts_with('-') {
            removed += 1;
        } else if line.starts_with('+') {
            added += 1;
        }
    }
    (removed, added)
}

/// The flagging test-code findings, as the approver reads them: `rule: file:line: excerpt
/// (reason)`.
fn test_code_flags(findings: &[airlock_policies::TestCodeFinding]) -> Vec<String> {
    use airlock_policies::TestCodeAction;
    findings
        .iter()
        .filter(|f| matches!(f.action, TestCodeAction::Flag | TestCodeAction::Senior))
        .map(|f| {
            format!(
                "{}: {}:{}: `{}` ({}){}",
                f.rule,
                f.file,
                f.line,
                f.excerpt,
                f.reason,
                if f.action == TestCodeAction::Senior {
                    "; routed to a senior approver"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// The senior route of every rule whose findings route the item to a senior approver, once
/// per rule, as the gates' routes are recorded: the item then needs two approvals, one of them
/// senior ([`crate::risk::Risk::needs_senior`]).
fn senior_routes(findings: &[airlock_policies::TestCodeFinding]) -> Vec<crate::gates::GateNote> {
    let mut rules: Vec<&str> = findings
        .iter()
        .filter(|f| f.action == airlock_policies::TestCodeAction::Senior)
        .map(|f| f.rule.as_str())
        .collect();
    rules.sort_unstable();
    rules.dedup();
    rules
        .into_iter()
        .map(|rule| crate::gates::GateNote {
            gate: format!("policy:{rule}"),
            digest: crate::risk::POLICY_ROUTE_DIGEST.to_owned(),
            verdict: airlock_gates::Verdict::Route(crate::risk::SENIOR_GROUP.to_owned()),
        })
        .collect()
}
