//! Claims through the broker: the worker's side of `claim`, `renew_claim` and
//! `release_claim`. A [`Lease`] renews itself on a thread while the run goes on, so a live
//! worker keeps its issue however long the run takes and a dead one loses it one lease later.

use std::sync::mpsc;
use std::time::Duration;

use airlock_protocol::{
    BrokerReply, ClaimEnd, ClaimRelease, ClaimReply, ClaimRequest, ClaimStatus, ForgeMark,
    IssueKey, ReleaseReply, Request, UnexpectedReply,
};

use super::{Result, TriggerError};
use crate::adapters::BrokerSocket;
use crate::transport::BrokerEndpoint;

/// How long a claim holds without a renewal, by default.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(120);

/// What a claim attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This worker holds the issue.
    Claimed {
        /// The claim.
        claim: ClaimStatus,
        /// The label on the forge.
        forge: ForgeMark,
    },
    /// Another worker holds it, or its run is done.
    Taken(ClaimStatus),
}

/// A worker's client of the broker's claims.
pub struct ClaimClient {
    socket: BrokerSocket,
    holder: String,
}

impl ClaimClient {
    /// A client for `holder` on the broker at `endpoint` (a socket path or a
    /// [`BrokerEndpoint`]).
    pub fn new(endpoint: impl Into<BrokerEndpoint>, holder: &str) -> ClaimClient {
        ClaimClient {
            socket: BrokerSocket::new(endpoint, Duration::from_secs(60)),
            holder: holder.to_owned(),
        }
    }

    /// This worker's id.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn ask<R: TryFrom<BrokerReply, Error = UnexpectedReply>>(
        &self,
        request: &Request,
    ) -> Result<R> {
        self.socket
            .request(request)
            .and_then(crate::adapters::typed)
            .map_err(|f| TriggerError::Broker(f.to_string()))
    }

    fn request(&self, issue: &IssueKey, lease: Duration) -> ClaimRequest {
        ClaimRequest {
            issue: issue.clone(),
            holder: self.holder.clone(),
            lease_secs: lease.as_secs().max(1),
        }
    }

    /// Claim `issue` for `lease`.
    pub fn claim(&self, issue: &IssueKey, lease: Duration) -> Result<ClaimOutcome> {
        claim_outcome(
            "claim",
            self.ask(&Request::Claim(self.request(issue, lease)))?,
        )
    }

    /// Extend the lease; `Taken` when another worker took the issue meanwhile.
    pub fn renew(&self, issue: &IssueKey, lease: Duration) -> Result<ClaimOutcome> {
        claim_outcome(
            "renew_claim",
            self.ask(&Request::RenewClaim(self.request(issue, lease)))?,
        )
    }

    /// End the claim.
    pub fn release(&self, issue: &IssueKey, end: ClaimEnd) -> Result<ClaimStatus> {
        let request = Request::ReleaseClaim(ClaimRelease {
            issue: issue.clone(),
            holder: self.holder.clone(),
            end,
        });
        match self.ask(&request)? {
            ReleaseReply::Released { claim, .. } => Ok(claim),
            ReleaseReply::Failed { message } => Err(failed("release_claim", &message)),
        }
    }
}

impl ClaimClient {
    /// End the claim, asking again while the broker is out of reach (a restart), for up to
    /// `patience`: a run that ended must not see its issue handed out again because its
    /// release met a broker that was away for a moment. A refusal (the claim is no longer
    /// this worker's) is not asked again.
    pub fn release_patiently(
        &self,
        issue: &IssueKey,
        end: ClaimEnd,
        patience: Duration,
    ) -> Result<ClaimStatus> {
        let request = Request::ReleaseClaim(ClaimRelease {
            issue: issue.clone(),
            holder: self.holder.clone(),
            end,
        });
        let deadline = std::time::Instant::now() + patience;
        let mut pause = Duration::from_millis(200);
        loop {
            match self.socket.request(&request) {
                Ok(reply) => {
                    return match crate::adapters::typed(reply) {
                        Ok(ReleaseReply::Released { claim, .. }) => Ok(claim),
                        Ok(ReleaseReply::Failed { message }) => {
                            Err(failed("release_claim", &message))
                        }
                        Err(e) => Err(TriggerError::Broker(e.to_string())),
                    };
                }
                Err(failure) if std::time::Instant::now() >= deadline => {
                    return Err(TriggerError::Broker(failure.to_string()));
                }
                Err(_) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

fn claim_outcome(op: &str, reply: ClaimReply) -> Result<ClaimOutcome> {
    match reply {
        ClaimReply::Claimed { claim, forge, .. } => Ok(ClaimOutcome::Claimed { claim, forge }),
        ClaimReply::ClaimTaken { claim } => Ok(ClaimOutcome::Taken(claim)),
        ClaimReply::Failed { message } => Err(failed(op, &message)),
    }
}

fn failed(op: &str, message: &str) -> TriggerError {
    TriggerError::Broker(format!("{op}: {message}"))
}

/// A held claim renewed every third of its lease on a thread of its own until it is ended.
pub struct Lease {
    stop: mpsc::Sender<()>,
    renewer: Option<std::thread::JoinHandle<Option<String>>>,
}

impl Lease {
    /// Keep renewing `issue` for `holder` through the broker at `endpoint`.
    pub fn keep(
        endpoint: impl Into<BrokerEndpoint>,
        holder: &str,
        issue: &IssueKey,
        lease: Duration,
    ) -> Lease {
        let (stop, stopped) = mpsc::channel::<()>();
        let client = ClaimClient::new(endpoint, holder);
        let issue = issue.clone();
        let every = (lease / 3).max(Duration::from_millis(300));
        let renewer = std::thread::spawn(move || {
            loop {
                match stopped.recv_timeout(every) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return None,
                }
                match client.renew(&issue, lease) {
                    Ok(ClaimOutcome::Claimed { .. }) => {}
                    // Lost: the run goes on to its end (its pull request still goes through
                    // the broker's checks), and the loss is reported with the outcome.
                    Ok(ClaimOutcome::Taken(c)) => {
                        return Some(format!("the claim was taken over by {:?}", c.holder));
                    }
                    // A broker that is away for a moment is retried at the next tick.
                    Err(e) => tracing::warn!("renewing the claim on #{}: {e}", issue.issue_number),
                }
            }
        });
        Lease {
            stop,
            renewer: Some(renewer),
        }
    }

    /// Stop renewing; says whether the claim was lost while the run went on.
    pub fn stop(mut self) -> Option<String> {
        let _ = self.stop.send(());
        self.renewer.take().and_then(|h| h.join().ok()).flatten()
    }
}

/// A worker id unique per process: the host, the process id and its start time.
pub fn worker_id(kind: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{kind}-{host}-{}-{started}", std::process::id())
}
