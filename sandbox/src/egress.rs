//! The hand-off of a `proxy` run's loopback listener to the caller's egress proxy: the
//! caller's accept loop ([`EgressServe`]) runs on a thread of its own for the length of the
//! run ([`EgressRun`]), and is stopped by shutting the listener down.

use crate::sys;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// The caller's egress proxy for a run with [`crate::NetworkAccess::Proxy`]: called once per run, on
/// a thread of its own, with the loopback listener the sandbox's init made inside the run's
/// network namespace. It accepts the command's connections on it from outside the sandbox
/// and must return once `accept` fails: the sandbox shuts the listener down when the run
/// ends, and waits for it to return.
#[derive(Clone)]
pub struct EgressServe(Arc<dyn Fn(TcpListener) + Send + Sync>);

impl EgressServe {
    /// Wrap the proxy's accept loop.
    pub fn new(serve: impl Fn(TcpListener) + Send + Sync + 'static) -> Self {
        EgressServe(Arc::new(serve))
    }
}

impl std::fmt::Debug for EgressServe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EgressServe(..)")
    }
}

/// One run's proxy thread: on drop the listener is shut down and the thread joined.
pub(crate) struct EgressRun {
    listener: TcpListener,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EgressRun {
    pub(crate) fn start(serve: &EgressServe, fd: OwnedFd) -> std::io::Result<EgressRun> {
        let listener = TcpListener::from(fd);
        listener.set_nonblocking(false)?;
        let handed = listener.try_clone()?;
        let serve = serve.0.clone();
        let thread = std::thread::Builder::new()
            .name("airlock-egress".into())
            .spawn(move || serve(handed))?;
        Ok(EgressRun {
            listener,
            thread: Some(thread),
        })
    }
}

impl Drop for EgressRun {
    fn drop(&mut self) {
        let _ = sys::shutdown(&self.listener);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
