//! The call is this run's: its `issue_id` is the issue the run registered, its `base_commit`
//! the run's pin. Nothing after this stage reads either from the call.

use airlock_schemas::OpenPr;

use super::refusal::Refusal;
use airlock_protocol::RunRegistration;

/// An open_pr call whose issue and pin are the run's own.
pub struct RunCall {
    /// The call, schema-valid.
    pub call: OpenPr,
}

/// Check that `call` names the run's issue and starts from the run's pin.
pub fn of_run(run: &RunRegistration, call: OpenPr) -> Result<RunCall, Refusal> {
    if !run.issue_id.is_empty() && call.issue_id != run.issue_id {
        return Err(Refusal::policy(
            "issue_id",
            "issue_id_is_the_runs",
            &format!(
                "issue_id {:?} is not the run's issue {:?}",
                call.issue_id, run.issue_id
            ),
        ));
    }
    if call.base_commit != run.base_commit {
        return Err(Refusal::policy(
            "base_commit",
            "base_commit_is_the_pin",
            &format!(
                "base_commit {} is not the run's pinned commit {}",
                call.base_commit, run.base_commit
            ),
        ));
    }
    Ok(RunCall { call })
}
