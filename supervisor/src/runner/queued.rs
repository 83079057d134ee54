//! The queue item a run's `open_pr` got, kept on the way past: the run's report names it (and
//! the command that shows it) without asking the broker again.

use crate::ports::{
    OpenPrReply, PortResult, PrSink, RunRegistration, RunReport, SubmitReviewReply,
};
use serde_json::Value;
use std::cell::Cell;
use std::rc::Rc;

/// A [`PrSink`] that forwards every call to `inner` and keeps the queue id of the last
/// `open_pr` the broker queued.
pub(super) struct RecordingSink<'a> {
    inner: &'a mut dyn PrSink,
    queued: Rc<Cell<Option<i64>>>,
}

impl<'a> RecordingSink<'a> {
    /// Forward to `inner`; `queued` receives the queue id.
    pub(super) fn new(inner: &'a mut dyn PrSink, queued: Rc<Cell<Option<i64>>>) -> Self {
        RecordingSink { inner, queued }
    }
}

impl PrSink for RecordingSink<'_> {
    fn register_run(&mut self, run: &RunRegistration) -> PortResult<()> {
        self.inner.register_run(run)
    }

    fn open_pr(
        &mut self,
        run_id: &str,
        request_id: &str,
        arguments: &Value,
        report: &RunReport,
    ) -> PortResult<OpenPrReply> {
        let reply = self.inner.open_pr(run_id, request_id, arguments, report)?;
        if let OpenPrReply::Queued { queue_id } = &reply {
            self.queued.set(Some(*queue_id));
        }
        Ok(reply)
    }

    fn report_findings(
        &mut self,
        run_id: &str,
        findings: &[airlock_protocol::ItemFinding],
    ) -> PortResult<airlock_protocol::ReportFindingsReply> {
        self.inner.report_findings(run_id, findings)
    }

    fn submit_review(
        &mut self,
        submission: &airlock_protocol::ReviewSubmission,
    ) -> PortResult<SubmitReviewReply> {
        self.inner.submit_review(submission)
    }
}
