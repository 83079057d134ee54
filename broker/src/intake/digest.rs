//! Every `diff_digest` field the run claims is recomputed from the checked tree against the
//! pin; a claim that differs is DIGEST_MISMATCH, every differing field an integrity record in
//! the audit log, and the refusal names the detectors' findings behind the counted fields. The
//! broker's change set and the recomputed digest must name the same files.

use airlock_audit::Event;
use airlock_policies::{Finding, MoveKind};
use airlock_schemas::{DiffDigest, SchemaViolation};

use super::policy::Allowed;
use super::refusal::{Refusal, Stage};
use super::tree::{clone_at_pin, intake_tree};
use crate::config::BrokerConfig;
use crate::error::Error;
use crate::rules::Rules;
use crate::service::Journal;
use airlock_protocol::{RunRegistration, SubmittedChange};

/// The weakenings the digest counts: its `assertions_removed` and `skip_markers_added`.
const COUNTED: [MoveKind; 2] = [MoveKind::AssertionRemoved, MoveKind::SkipMarkerAdded];

/// An allowed change set whose claimed digest is the broker's.
pub struct Digested {
    /// The allowed change set.
    pub allowed: Allowed,
    /// The digest the broker computed (equal to the claim).
    pub computed: DiffDigest,
    /// The detectors' findings.
    pub findings: Vec<Finding>,
}

/// Recompute the digest and hold the claim to it.
pub fn recompute(
    rules: &dyn Rules,
    journal: &dyn Journal,
    run: &RunRegistration,
    allowed: Allowed,
) -> Stage<Digested> {
    let report = rules.digest(allowed.checkout.tree.path(), &run.base_commit)?;
    let computed = report.to_diff_digest();
    let claimed = &allowed.checkout.call.diff_digest;
    let fields = claimed.mismatched_fields(&computed);
    if !fields.is_empty() {
        let claimed_json = serde_json::to_value(claimed).unwrap_or_default();
        let computed_json = serde_json::to_value(&computed).unwrap_or_default();
        for field in &fields {
            journal.record(
                &run.run_id,
                Event::IntegrityViolation {
                    check: format!("diff_digest.{field}"),
                    claimed: claimed_json
                        .get(field)
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                    computed: computed_json
                        .get(field)
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                },
            )?;
        }
        let weakenings = COUNTED
            .iter()
            .flat_map(|kind| report.findings_of(*kind))
            .cloned()
            .collect();
        return Err(Refusal::DigestMismatch {
            claimed: Box::new(claimed.clone()),
            computed: Box::new(computed),
            weakenings,
        }
        .into());
    }
    let changed: Vec<&str> = allowed
        .changes
        .files
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    let mut digest_files: Vec<&str> = computed.files_changed.iter().map(String::as_str).collect();
    digest_files.sort_unstable();
    digest_files.dedup();
    if digest_files != changed {
        return Err(Error::Witness(format!(
            "the broker's own tree changes {changed:?} but the recomputed digest names {digest_files:?}"
        ))
        .into());
    }
    Ok(Digested {
        findings: report.findings,
        allowed,
        computed,
    })
}

/// For a schema refusal of a bounded digest field (`assertions_removed`, `skip_markers_added`
/// over their maximum of 0): the detectors' findings of that kind in the run's diff, so the
/// refusal names the weakening itself. Best effort: empty when the digest cannot be computed.
pub fn weakenings_behind(
    config: &BrokerConfig,
    rules: &dyn Rules,
    run: &RunRegistration,
    change: Option<&SubmittedChange>,
    violations: &[SchemaViolation],
) -> Vec<Finding> {
    let kinds: Vec<MoveKind> = violations
        .iter()
        .filter_map(|v| match v.pointer.as_str() {
            "/diff_digest/assertions_removed" => Some(MoveKind::AssertionRemoved),
            "/diff_digest/skip_markers_added" => Some(MoveKind::SkipMarkerAdded),
            _ => None,
        })
        .collect();
    if kinds.is_empty() {
        return Vec::new();
    }
    let Ok((repo, pin)) = clone_at_pin(config, run) else {
        return Vec::new();
    };
    let Ok(Ok(tree)) = intake_tree(config, run, &repo, pin, change) else {
        return Vec::new();
    };
    let Ok(report) = rules.digest(tree.path(), &run.base_commit) else {
        return Vec::new();
    };
    report
        .findings
        .into_iter()
        .filter(|f| kinds.contains(&f.kind))
        .collect()
}
