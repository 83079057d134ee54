//! The client the supervisor uses to talk to the broker over its Unix socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::error::{Error, Result};
use crate::service::request_id_for;
use airlock_protocol::{BrokerReply, Request, RunRegistration};

/// A connection to the broker.
pub struct BrokerClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl BrokerClient {
    /// Connect to the broker's socket.
    pub fn connect(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let writer = UnixStream::connect(path).map_err(Error::io(format!(
            "connecting to the broker at {}",
            path.display()
        )))?;
        let reader = BufReader::new(
            writer
                .try_clone()
                .map_err(Error::io("cloning the broker connection"))?,
        );
        Ok(BrokerClient { reader, writer })
    }

    /// Send one request and read its reply.
    pub fn request(&mut self, request: &Request) -> Result<BrokerReply> {
        let mut line =
            serde_json::to_string(request).map_err(|e| Error::Protocol(e.to_string()))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(Error::io("sending to the broker"))?;
        let mut reply = String::new();
        let n = self
            .reader
            .read_line(&mut reply)
            .map_err(Error::io("reading the broker's reply"))?;
        if n == 0 {
            return Err(Error::Protocol(
                "the broker closed the connection without a reply".to_owned(),
            ));
        }
        serde_json::from_str(reply.trim_end())
            .map_err(|e| Error::Protocol(format!("bad reply {reply:?}: {e}")))
    }

    /// Send one request and read its reply as the operation's own reply type
    /// ([`airlock_protocol::OpenPrReply`], ...): a status the operation never gets is an error.
    pub fn call<R>(&mut self, request: &Request) -> Result<R>
    where
        R: TryFrom<BrokerReply, Error = airlock_protocol::UnexpectedReply>,
    {
        let reply = self.request(request)?;
        R::try_from(reply).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Register a run (idempotent for identical details).
    pub fn register_run(&mut self, run: &RunRegistration) -> Result<BrokerReply> {
        self.request(&Request::RegisterRun(Box::new(run.clone())))
    }

    /// Submit open_pr arguments keyed by their bytes ([`request_id_for`]): for a caller that
    /// makes each call once (a test), so the same arguments sent again are a resend, answered
    /// once. A caller whose calls may repeat their arguments (the supervisor's model) names each
    /// call itself ([`Self::open_pr_with_request_id`], [`airlock_protocol::open_pr_call_id`]).
    pub fn open_pr(&mut self, run_id: &str, args: serde_json::Value) -> Result<BrokerReply> {
        let text = serde_json::to_string(&args).map_err(|e| Error::Protocol(e.to_string()))?;
        self.open_pr_raw(run_id, &text)
    }

    /// Submit open_pr arguments exactly as written, keyed by their bytes (see [`Self::open_pr`]).
    pub fn open_pr_raw(&mut self, run_id: &str, args: &str) -> Result<BrokerReply> {
        let request_id = request_id_for(run_id, args);
        self.open_pr_with_request_id(run_id, &request_id, args)
    }

    /// Submit open_pr arguments under an explicit idempotency key: the same key resent gets the
    /// stored reply; another key is another call.
    pub fn open_pr_with_request_id(
        &mut self,
        run_id: &str,
        request_id: &str,
        args: &str,
    ) -> Result<BrokerReply> {
        let request = Request::open_pr(run_id, args, request_id).map_err(|e| {
            Error::Protocol(format!("open_pr arguments are not one JSON value: {e}"))
        })?;
        self.request(&request)
    }

    /// The current decision on the run's queued pull request.
    pub fn decision(&mut self, run_id: &str) -> Result<BrokerReply> {
        self.request(&Request::Decision {
            run_id: run_id.to_owned(),
        })
    }
}
