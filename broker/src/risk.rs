//! What makes a queue item risky, decided once from what the broker stored: the approver's
//! views show it, and a decision on a risky item needs more of the approver (a typed
//! confirmation and a reason; for a senior route, two named approvers, one of them senior).

use serde::Serialize;

use crate::store::QueueItem;

/// The approver group a senior route names: a gate (or a policy rule) that routes an item to
/// it makes the item need two approvals by two named approvers, one of them senior.
pub const SENIOR_GROUP: &str = "senior";

/// What a policy rule's senior route records in place of a gate component's digest.
pub const POLICY_ROUTE_DIGEST: &str = "policy";

/// The risk signals of one queue item, as counted from its stored record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Risk {
    /// Findings screened for the approver (the broker's own and the run's reported ones).
    pub findings: usize,
    /// The intake's flags (detectors, test code, body URLs, the senior route's own flag).
    pub flags: usize,
    /// The gates' flags and routes.
    pub gate_notes: usize,
    /// The `test_change_reason` the call gave, when it is not `none`.
    pub test_change_reason: Option<String>,
    /// The gates and policy rules that routed the item to the senior group.
    pub senior_routes: Vec<String>,
}

impl Risk {
    /// The signals of `item`. An item queued before findings were stored counts none of them
    /// here (its page screens its texts again).
    pub fn of(item: &QueueItem) -> Risk {
        let test_change_reason = serde_json::from_str::<airlock_schemas::OpenPr>(&item.item.args)
            .ok()
            .map(|call| call.test_change_reason)
            .filter(|r| *r != airlock_schemas::TestChangeReason::None)
            .map(|r| {
                serde_json::to_value(r)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{r:?}"))
            });
        Risk {
            findings: item.item.findings.as_ref().map_or(0, Vec::len),
            flags: item.item.flags.len(),
            gate_notes: item
                .item
                .gates
                .iter()
                .filter(|n| !matches!(n.verdict, airlock_gates::Verdict::Allow))
                .count(),
            test_change_reason,
            senior_routes: item
                .item
                .gates
                .iter()
                .filter(
                    |n| matches!(&n.verdict, airlock_gates::Verdict::Route(g) if g == SENIOR_GROUP),
                )
                .map(|n| n.gate.clone())
                .collect(),
        }
    }

    /// Any finding, any flag (the intake's or a gate's), or a `test_change_reason` other than
    /// `none`: approving needs a typed confirmation and a one-line reason.
    pub fn is_risky(&self) -> bool {
        self.findings > 0 || self.flags > 0 || self.gate_notes > 0 || self.needs_senior()
    }

    /// A `test_change_reason` other than `none`, or a gate's or policy rule's route to
    /// [`SENIOR_GROUP`], routes the item to a senior approver: it needs two approvals by two
    /// named approvers, at least one of them senior.
    pub fn needs_senior(&self) -> bool {
        self.test_change_reason.is_some() || !self.senior_routes.is_empty()
    }

    /// The signals in words, for a refusal or a page's summary: `2 findings, 1 flag, ...`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let plural = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        if self.findings > 0 {
            parts.push(plural(self.findings, "finding"));
        }
        if self.flags > 0 {
            parts.push(plural(self.flags, "flag"));
        }
        if self.gate_notes > 0 {
            parts.push(plural(self.gate_notes, "gate note"));
        }
        if let Some(reason) = &self.test_change_reason {
            parts.push(format!("test_change_reason {reason} (senior route)"));
        }
        if !self.senior_routes.is_empty() {
            parts.push(format!(
                "routed to a senior approver by {}",
                self.senior_routes.join(", ")
            ));
        }
        if parts.is_empty() {
            "no risk signals".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// Whether a senior-route item's approvals decide it: two different approvers (the store
/// refuses a second approval by one), at least one of them senior.
pub fn senior_route_complete(approvals: &[crate::store::ApprovalRecord]) -> bool {
    approvals.len() >= 2 && approvals.iter().any(|a| a.senior)
}

/// Where a senior-route item stands, in words: `1 of 2 approvals; needs another approver, one
/// of them senior (so far: alice)`. Names raw: escape them where they are shown.
pub fn pending_words(approvals: &[crate::store::ApprovalRecord]) -> String {
    let names: Vec<String> = approvals
        .iter()
        .map(|a| {
            if a.senior {
                format!("{}, senior", a.approver)
            } else {
                a.approver.clone()
            }
        })
        .collect();
    let so_far = format!(" (so far: {})", names.join("; "));
    match approvals.len() {
        0 => "0 of 2 approvals; needs two approvers, one of them senior".to_owned(),
        1 => format!("1 of 2 approvals; needs another approver, one of them senior{so_far}"),
        n if senior_route_complete(approvals) => format!("{n} approvals; complete{so_far}"),
        n => format!("{n} approvals, none senior; needs a senior approver{so_far}"),
    }
}
