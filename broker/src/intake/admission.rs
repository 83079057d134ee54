//! Whether the run may still submit: it has no accepted open_pr (the queue's rule, asked of the
//! run's state before any work), no final refusal ended it, and a follow-up still starts from
//! the head of the branch the broker pushed (nothing was published there since it registered).

use super::queue::one_open_pr_per_run;
use super::refusal::{Refusal, Stage};
use crate::service::Broker;
use crate::store::RunState;
use airlock_protocol::RunRegistration;

/// Admit the run in `state` to an intake, whatever its call's arguments.
pub fn admit(broker: &Broker, run: &RunRegistration, state: RunState) -> Stage<()> {
    one_open_pr_per_run(state == RunState::Queued)?;
    if state == RunState::Ended {
        return Err(Refusal::policy(
            "run_ended",
            "final_refusal_ends_run",
            "an earlier final refusal ended this run",
        )
        .into());
    }
    if let Some(queue_id) = run.follow_up_of
        && let Err(e) = broker.check_follow_up(run, queue_id)
    {
        return Err(
            Refusal::policy("base_commit", "follow_up_on_branch_head", &e.to_string()).into(),
        );
    }
    Ok(())
}
