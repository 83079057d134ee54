//! What a run's collection gathered ([`Collected`]) and how the helper's report lines become
//! the [`RunSummary`]: a refusal or set-up failure the helper reported becomes the error, the
//! layers are merged, and a missing required layer is refused unless the run may be degraded.

use crate::egress::EgressRun;
use crate::error::{Error, Result};
use crate::report::Report;
use crate::spec::Spec;
use crate::summary::RunSummary;
use crate::types::Layer;
use std::time::Duration;

#[derive(Default)]
pub(super) struct Collected {
    pub(super) report: Vec<u8>,
    pub(super) stdout_bytes: u64,
    pub(super) stderr_bytes: u64,
    pub(super) dropped: u64,
    pub(super) drain_timed_out: bool,
    pub(super) backstop_killed: bool,
    pub(super) cpu_ms: u64,
    pub(super) max_rss_bytes: u64,
    /// The helper's own exit code.
    pub(super) helper_exit: Option<i32>,
    /// The egress proxy's threads, stopped when the collection is dropped.
    pub(super) egress: Vec<EgressRun>,
}

pub(super) fn summarize(
    spec: &Spec,
    c: Collected,
    wall: Duration,
    allow_degraded: bool,
) -> Result<RunSummary> {
    let mut applied: Vec<Layer> = Vec::new();
    let mut missing: Vec<Layer> = Vec::new();
    let mut exited: Option<(Option<i32>, Option<i32>)> = None;
    let mut target_rss: Option<u64> = None;
    let mut supervisor: Option<(bool, Option<u64>)> = None;
    let mut landlock_abi = 0;
    for line in c.report.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let msg: Report = serde_json::from_slice(line)
            .map_err(|e| Error::Protocol(format!("bad report line ({e})")))?;
        match msg {
            Report::Failed {
                feature: Some(feature),
                detail,
                stage,
            } => {
                return Err(Error::Refused {
                    feature,
                    detail: format!("{stage}: {detail}"),
                });
            }
            Report::Failed {
                feature: None,
                stage,
                detail,
            } => return Err(Error::Setup { stage, detail }),
            Report::Layers {
                applied: a,
                missing: m,
                landlock_abi: abi,
            } => {
                applied.extend(a);
                missing.extend(m);
                if let Some(abi) = abi {
                    landlock_abi = abi;
                }
            }
            Report::Exited {
                code,
                signal,
                max_rss_bytes,
            } => {
                exited = Some((code, signal));
                target_rss = max_rss_bytes;
            }
            Report::Supervisor {
                timed_out,
                peak_memory_bytes,
                ..
            } => supervisor = Some((timed_out, peak_memory_bytes)),
            Report::Proxy { .. } => {}
        }
    }
    let timed_out = supervisor.map(|s| s.0).unwrap_or(false) || c.backstop_killed;
    let (exit_code, signal) = match exited {
        Some(e) => e,
        None if timed_out => (None, Some(libc::SIGKILL)),
        None => {
            return Err(Error::Protocol(
                "the helper ended without reporting the child's exit".into(),
            ));
        }
    };
    applied.sort();
    applied.dedup();
    missing.sort();
    missing.dedup();
    applied.retain(|l| !missing.contains(l));
    // Layers the caller waived (the network ones, with the host's network) are neither
    // applied nor missing, and never a reason to refuse.
    applied.retain(|l| !spec.network.waives(*l));
    missing.retain(|l| !spec.network.waives(*l));
    if !allow_degraded && let Some(layer) = missing.iter().find(|l| l.required()) {
        return Err(Error::Refused {
            feature: *layer,
            detail: "reported missing by the helper".into(),
        });
    }
    if spec.overlays.is_empty() {
        applied.retain(|l| *l != Layer::Overlay);
    }
    let cgroup_peak = supervisor.and_then(|s| s.1);
    let (peak_memory_bytes, peak_memory_source) = match cgroup_peak {
        Some(p) => (Some(p), Some("cgroup".to_string())),
        // The command's own processes, as init measured them; else the whole tree's largest
        // process (which may be the set-up helper itself).
        None => match target_rss.filter(|b| *b > 0) {
            Some(b) => (Some(b), Some("max_rss".to_string())),
            None if c.max_rss_bytes > 0 => (Some(c.max_rss_bytes), Some("max_rss".to_string())),
            None => (None, None),
        },
    };
    Ok(RunSummary {
        exit_code,
        signal,
        timed_out,
        wall_ms: wall.as_millis() as u64,
        cpu_ms: c.cpu_ms,
        peak_memory_bytes,
        peak_memory_source,
        stdout_bytes: c.stdout_bytes,
        stderr_bytes: c.stderr_bytes,
        output_bytes_dropped: c.dropped,
        drain_timed_out: c.drain_timed_out,
        layers_applied: applied,
        layers_missing: missing,
        landlock_abi,
        network: spec.network,
        host_uid: Some(spec.host.uid),
        host_gid: Some(spec.host.gid),
    })
}
