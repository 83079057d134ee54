//! What a run reports after its accepted `open_pr` (`report_findings`): the model's own
//! `injection_observed` in its final message comes after the call, so it joins the run's
//! queued item here, as data attributed to the run, one finding per place. Once the item is
//! decided, nothing is added: what the approver decided on is not changed after.

use airlock_audit::Event;
use airlock_protocol::{BrokerReply, ItemFinding};

use crate::error::{Error, Result};
use crate::service::Broker;

impl Broker {
    /// Add what run `run_id` reports to its queued item; each reported place is recorded in
    /// the broker's audit log as observed by the run.
    pub fn report_findings(&self, run_id: &str, reported: &[ItemFinding]) -> Result<BrokerReply> {
        let Some(item) = self.store().queue_item_for_run(run_id)? else {
            if self.store().run(run_id)?.is_none() {
                return Err(Error::UnknownRun(run_id.to_owned()));
            }
            return Err(Error::Protocol(format!(
                "run {run_id:?} has no queued pull request to report findings on"
            )));
        };
        let before = item.item.findings.clone().unwrap_or_default();
        let merged = crate::screening::merged(before, reported);
        if !self.store().set_queued_findings(item.id, &merged)? {
            let status = self
                .store()
                .queue_item(item.id)?
                .map_or_else(|| "gone".to_owned(), |i| i.status.as_str().to_owned());
            return Err(Error::WrongState {
                id: item.id,
                status,
                action: "adding the run's findings".to_owned(),
            });
        }
        for f in reported.iter().take(airlock_protocol::MAX_FINDINGS) {
            self.journal.record(
                run_id,
                Event::InjectionObserved {
                    path: f.path.clone(),
                    excerpt: format!(
                        "reported by the run after its open_pr (queue item {}): {}",
                        item.id, f.excerpt
                    ),
                    line: f.line_start,
                },
            )?;
        }
        Ok(BrokerReply::FindingsRecorded {
            queue_id: item.id,
            findings: merged.len(),
        })
    }
}
