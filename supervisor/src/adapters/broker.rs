//! The broker client over its Unix socket or TLS (`crate::transport`): one request line per
//! connection, the reply typed per operation, a broken connection retried within the run's
//! reconnect window.

use crate::ports::{
    BrokerReply, OpenPrReply, PortResult, PrSink, RunRegistration, SubmitReviewReply, ToolFailure,
};
use crate::transport::{BrokerEndpoint, ConnectError, is_tls_refusal};
use airlock_protocol::{FollowUpReply, RegisterRunReply, UnexpectedReply};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

/// The broker client: one JSON request line per connection to the broker (its Unix socket, or
/// TLS to a broker on another host), one reply line back. It carries no forge credential; the
/// broker holds those.
pub struct BrokerSocket {
    endpoint: BrokerEndpoint,
    timeout: Duration,
    reconnect: Duration,
    requests: u64,
    /// The worktree and pin whose change every `open_pr` carries (`tree = "bytes"`).
    change_of: Option<(PathBuf, String)>,
}

/// The longest pause between two attempts to reach a broker that went away.
const RECONNECT_PAUSE_MAX: Duration = Duration::from_secs(2);
/// Extra time beyond the reconnect window: the broker judges the window from when the request
/// arrived, the supervisor from when the connection broke (later), and a broker that came back
/// just inside the window must still be reached by the next attempt.
const RECONNECT_GRACE: Duration = Duration::from_secs(5);

impl BrokerSocket {
    /// A client of the broker listening at `endpoint` (a socket path, or a
    /// [`BrokerEndpoint`]). `timeout` bounds each exchange (a queued `open_pr` answers as soon
    /// as it is queued, not when a human decides). An `open_pr` whose connection breaks is not
    /// resent.
    pub fn new(endpoint: impl Into<BrokerEndpoint>, timeout: Duration) -> Self {
        BrokerSocket {
            endpoint: endpoint.into(),
            timeout,
            reconnect: Duration::ZERO,
            requests: 0,
            change_of: None,
        }
    }

    /// Send the run's change with every `open_pr`: the patch of `worktree` against `pin`
    /// ([`airlock_policies::change_patch`], the files the digest covers), for a broker that does
    /// not read this host's files (`[broker] tree = "bytes"`).
    pub fn sending_change_of(mut self, worktree: &Path, pin: &str) -> Self {
        self.change_of = Some((worktree.to_path_buf(), pin.to_owned()));
        self
    }

    /// Keep reconnecting for `window` when an `open_pr` exchange breaks (the broker stopped or
    /// restarted), resending the same request with the same idempotency key: a restarted broker
    /// answers it once, from the intake it resumed. The window is also what the run registers,
    /// so the broker abandons an intake it takes up later than that.
    pub fn reconnecting_for(mut self, window: Duration) -> Self {
        self.reconnect = window;
        self
    }

    /// One typed request and its typed reply, without resending (claims: a claim whose
    /// connection broke is simply asked again by the worker).
    pub fn request(&self, request: &airlock_protocol::Request) -> PortResult<BrokerReply> {
        self.exchange(&wire(request)?)
    }

    fn exchange(&self, request: &Value) -> PortResult<BrokerReply> {
        self.attempt(request)
            .map_err(|(failure, _)| failure)
            .and_then(typed_reply)
    }

    /// One exchange. On failure, also says how far it got: whether the broker accepted the
    /// connection (a broker that is up but slower than the reply timeout is not retried).
    fn attempt(&self, request: &Value) -> Result<Value, (ToolFailure, Reached)> {
        let fail = |what: &str, e: &dyn std::fmt::Display, reached: Reached| {
            (
                ToolFailure::new(
                    "broker_unreachable",
                    format!("{what} {}: {e}", self.endpoint),
                ),
                reached,
            )
        };
        let mut stream = self.endpoint.connect(self.timeout).map_err(|e| match e {
            ConnectError::Unreachable(e) => {
                fail("cannot connect to the broker at", &e, Reached::Nothing)
            }
            ConnectError::Broken(e) => fail("connection broken to", &e, Reached::Connected),
            e @ ConnectError::HandshakeTimedOut => fail("no answer from", &e, Reached::TimedOut),
            e @ (ConnectError::Refused(_) | ConnectError::Unusable(_)) => {
                fail("cannot reach the broker at", &e, Reached::Refused)
            }
        })?;
        // A TLS refusal (the broker's alert on this worker's certificate) shows on the first
        // read or write: trying again would meet it again.
        let broke = |e: &std::io::Error| {
            if is_tls_refusal(e) {
                Reached::Refused
            } else {
                Reached::Connected
            }
        };
        let mut line = request.to_string();
        line.push('\n');
        stream
            .write_all(line.as_bytes())
            .map_err(|e| fail("cannot write to", &e, broke(&e)))?;
        let mut reply = String::new();
        match BufReader::new(&mut stream).read_line(&mut reply) {
            Ok(0) => {
                return Err(fail(
                    "no reply from",
                    &"the broker closed the connection (it stopped or restarted)",
                    Reached::Connected,
                ));
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(fail(
                    &format!("no reply within {} s from", self.timeout.as_secs()),
                    &e,
                    Reached::TimedOut,
                ));
            }
            Err(e) => return Err(fail("no reply from", &e, broke(&e))),
        }
        serde_json::from_str(reply.trim())
            .map_err(|e| fail("malformed reply from", &e, Reached::Connected))
    }

    /// [`Self::attempt`], retried while the broker is unreachable: until it has been out of
    /// reach for the whole reconnect window (the clock restarts whenever a connection is made).
    fn exchange_reconnecting(&self, request: &Value) -> PortResult<BrokerReply> {
        let mut lost: Option<std::time::Instant> = None;
        let mut pause = Duration::from_millis(100);
        let mut attempts = 0u32;
        loop {
            let (failure, reached) = match self.attempt(request) {
                Ok(reply) => return typed_reply(reply),
                Err(failed) => failed,
            };
            attempts += 1;
            if reached != Reached::Nothing {
                lost = None;
            }
            let since = *lost.get_or_insert_with(std::time::Instant::now);
            let final_failure = matches!(reached, Reached::TimedOut | Reached::Refused);
            let give_up = self.reconnect.is_zero()
                || final_failure
                || since.elapsed() >= self.reconnect + RECONNECT_GRACE;
            if give_up {
                let message = if self.reconnect.is_zero() || final_failure {
                    failure.message
                } else {
                    format!(
                        "{}; {attempts} attempts with the same request, the broker out of reach \
                         for the whole reconnect window of {} s: a broker that takes this intake \
                         up later abandons it, so nothing is queued for this run",
                        failure.message,
                        self.reconnect.as_secs()
                    )
                };
                return Err(ToolFailure::new(failure.code, message));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
        }
    }
}

/// How far one exchange with the broker got before it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// No connection: the broker is not listening.
    Nothing,
    /// Connected, then the connection broke or the reply was unreadable.
    Connected,
    /// Connected, and no reply came within the reply timeout.
    TimedOut,
    /// TLS refused this worker's certificate (or this worker the broker's), or this worker's
    /// TLS files are unusable: another attempt would meet the same refusal.
    Refused,
}

impl BrokerSocket {
    /// Tell the broker a reviewer acted on one of its pull requests (the `pr_feedback`
    /// operation); it reads the review from the forge, checks it, records the change request
    /// and answers what the follow-up run starts from, or refuses with the reason.
    pub fn pr_feedback(
        &self,
        feedback: airlock_protocol::PrFeedback,
    ) -> PortResult<airlock_protocol::FollowUpBrief> {
        self.brief(&airlock_protocol::Request::PrFeedback(feedback))
    }

    /// Ask the broker what a follow-up run on queue item `queue_id` starts from (the
    /// `follow_up` operation): the branch head, the issue and the reviewer's feedback.
    pub fn follow_up(&self, queue_id: i64) -> PortResult<airlock_protocol::FollowUpBrief> {
        self.brief(&airlock_protocol::Request::FollowUp { queue_id })
    }

    /// Send `request`, whose answer is a follow-up brief.
    fn brief(
        &self,
        request: &airlock_protocol::Request,
    ) -> PortResult<airlock_protocol::FollowUpBrief> {
        match self
            .exchange(&wire(request)?)
            .and_then(typed::<FollowUpReply>)?
        {
            FollowUpReply::FollowUp { brief } => Ok(*brief),
            FollowUpReply::Failed { message } => Err(ToolFailure::new("broker_refused", message)),
        }
    }
}

impl PrSink for BrokerSocket {
    fn register_run(&mut self, run: &RunRegistration) -> PortResult<()> {
        // The typed registration: optional fields (the GitHub number, the reconnect window)
        // are left out when absent, so an older broker still takes the runs of issue files.
        let request = airlock_protocol::Request::RegisterRun(Box::new(run.clone()));
        match self
            .exchange(&wire(&request)?)
            .and_then(typed::<RegisterRunReply>)?
        {
            RegisterRunReply::Registered { .. } => Ok(()),
            RegisterRunReply::Failed { message } => {
                Err(ToolFailure::new("broker_refused", message))
            }
        }
    }

    fn open_pr(
        &mut self,
        run_id: &str,
        request_id: &str,
        arguments: &Value,
        report: &crate::ports::RunReport,
    ) -> PortResult<OpenPrReply> {
        self.requests += 1;
        // The call's own key: the request built here is the one every resend after a broken
        // connection sends again (`exchange_reconnecting`), so a restarted broker answers it
        // once, while the model's next call, with the same arguments or not, is another key.
        let args_text = arguments.to_string();
        let request = match &self.change_of {
            None => airlock_protocol::Request::open_pr(run_id, &args_text, request_id),
            Some((worktree, pin)) => {
                let patch = airlock_policies::change_patch(worktree, pin).map_err(|e| {
                    ToolFailure::new(
                        "change_patch",
                        format!("making the patch of the worktree against {pin}: {e}"),
                    )
                })?;
                if patch.len() > airlock_protocol::MAX_PATCH_BYTES {
                    return Err(ToolFailure::new(
                        "change_too_large",
                        format!(
                            "the change is a patch of {} bytes; the broker takes at most {}",
                            patch.len(),
                            airlock_protocol::MAX_PATCH_BYTES
                        ),
                    ));
                }
                let change = airlock_protocol::SubmittedChange::new(pin, &patch);
                airlock_protocol::Request::open_pr_with_change(
                    run_id, &args_text, change, request_id,
                )
            }
        }
        .map_err(|e| ToolFailure::new("broker_protocol", e.to_string()))?
        .with_network_blocked(report.network_blocked.clone())
        .with_findings(report.findings.clone());
        self.exchange_reconnecting(&wire(&request)?).and_then(typed)
    }

    fn report_findings(
        &mut self,
        run_id: &str,
        findings: &[airlock_protocol::ItemFinding],
    ) -> PortResult<airlock_protocol::ReportFindingsReply> {
        self.requests += 1;
        let request = airlock_protocol::Request::ReportFindings {
            run_id: run_id.to_owned(),
            findings: findings.to_vec(),
        };
        self.exchange_reconnecting(&wire(&request)?).and_then(typed)
    }

    fn submit_review(
        &mut self,
        submission: &airlock_protocol::ReviewSubmission,
    ) -> PortResult<SubmitReviewReply> {
        self.requests += 1;
        // A resend is answered with the item the first one queued (one review per run).
        let request = airlock_protocol::Request::SubmitReview(Box::new(submission.clone()));
        self.exchange_reconnecting(&wire(&request)?).and_then(typed)
    }
}

/// A reply line read as the protocol's reply. A JSON line that is not one is the broker's
/// failure, not a reason to resend.
fn typed_reply(reply: Value) -> PortResult<BrokerReply> {
    serde_json::from_value(reply.clone()).map_err(|e| {
        ToolFailure::new(
            "broker_protocol",
            format!("the broker's reply is not a protocol reply ({e}): {reply}"),
        )
    })
}

/// The reply as its operation's own type: a status the operation never gets is the broker's
/// failure to keep the protocol.
pub fn typed<R: TryFrom<BrokerReply, Error = UnexpectedReply>>(
    reply: BrokerReply,
) -> PortResult<R> {
    R::try_from(reply).map_err(|e| ToolFailure::new("broker_protocol", e.to_string()))
}

/// A protocol request as the JSON object sent on the socket.
fn wire(request: &airlock_protocol::Request) -> PortResult<Value> {
    serde_json::to_value(request).map_err(|e| ToolFailure::new("broker_protocol", e.to_string()))
}
