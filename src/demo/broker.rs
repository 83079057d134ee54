//! The demo's broker: the real `airlock-broker serve` started on the work directory's
//! configuration, and a queue item read back through `airlock-broker show --json` into a typed
//! [`ShownItem`] (the witness steps and the diff), never from the text `show` prints.

use airlock_broker::witness::WitnessOutput;
use anyhow::{Context, bail};
use serde::Deserialize;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::fixtures::write;

/// How long the broker may take to create its socket.
const BROKER_START_TIMEOUT: Duration = Duration::from_secs(15);

/// A running broker; killed and reaped when dropped.
pub(super) struct BrokerProcess {
    child: Child,
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `airlock-broker --config CONFIG serve`, its log in `workdir/broker.log`, and wait
/// until it listens on `workdir/broker.sock`.
pub(super) fn start_broker(
    broker_exe: &Path,
    config: &Path,
    workdir: &Path,
) -> anyhow::Result<BrokerProcess> {
    let log = std::fs::File::create(workdir.join("broker.log")).context("creating broker.log")?;
    let child = Command::new(broker_exe)
        .arg("--config")
        .arg(config)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", broker_exe.display()))?;
    let mut broker = BrokerProcess { child };
    let socket = workdir.join("broker.sock");
    let deadline = Instant::now() + BROKER_START_TIMEOUT;
    while !socket.exists() {
        if let Some(status) = broker.child.try_wait().context("watching the broker")? {
            let log = std::fs::read_to_string(workdir.join("broker.log")).unwrap_or_default();
            bail!("the broker exited with {status} before listening: {log}");
        }
        if Instant::now() > deadline {
            bail!(
                "the broker did not create {} within {}s",
                socket.display(),
                BROKER_START_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(broker)
}

/// What the demo reads of one queue item: the fields of the broker's `ItemView` it needs, as
/// `show --json` serializes them.
#[derive(Debug, Deserialize)]
pub(super) struct ShownItem {
    /// The witness steps in order (`show --json` adds each step's test counts beside it).
    witness: Vec<WitnessOutput>,
    /// The full unified diff the broker computed, raw.
    diff: String,
    /// Every finding the approver is shown, one per place (the broker's and the run's).
    findings: Vec<airlock_protocol::ItemFinding>,
}

impl ShownItem {
    /// One line per witness step with what it must show, as `show` heads the step's test
    /// evidence (the broker's own renderer).
    pub(super) fn evidence_lines(&self) -> Vec<String> {
        self.witness
            .iter()
            .map(airlock_broker::view::evidence_heading)
            .collect()
    }

    /// The diff as `show` prints it without colour (the broker's own renderer), line by line.
    pub(super) fn diff_lines(&self) -> Vec<String> {
        airlock_broker::view::render_diff(&self.diff, false)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The findings as `show` lists them (the broker's own renderer), one line each.
    pub(super) fn finding_lines(&self) -> Vec<String> {
        self.findings
            .iter()
            .map(airlock_broker::view::finding_line)
            .collect()
    }

    /// Whether the approver is shown a finding on a line of `path`.
    pub(super) fn has_finding_on_a_line_of(&self, path: &str) -> bool {
        self.findings
            .iter()
            .any(|f| f.path == path && f.line_start.is_some())
    }

    /// Whether the run's model's own report on `path` reached the approver.
    pub(super) fn model_reported(&self, path: &str) -> bool {
        self.findings
            .iter()
            .any(|f| f.path == path && f.source == airlock_protocol::FindingSource::Model)
    }

    /// Whether the diff adds a line containing `text`.
    pub(super) fn adds_line_containing(&self, text: &str) -> bool {
        self.diff
            .lines()
            .any(|l| l.starts_with('+') && l.contains(text))
    }
}

/// Queue item `id` of the broker configured by `broker_toml`: `show` for a person written to
/// `show_txt`, and `show --json` read into a [`ShownItem`]. `Err` only when the broker binary
/// cannot be run; `Ok(Err(why))` when it ran and gave no item.
pub(super) fn show_item(
    broker_exe: &Path,
    broker_toml: &Path,
    id: i64,
    show_txt: &Path,
) -> anyhow::Result<Result<ShownItem, String>> {
    let id = id.to_string();
    // Both at once: each is a process start and a read of the store.
    let show = |format: &[&str]| {
        Command::new(broker_exe)
            .arg("--config")
            .arg(broker_toml)
            .args(["show", &id])
            .args(format)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let text = show(&["--color", "never"]).context("running airlock-broker show")?;
    let json = show(&["--json"]).context("running airlock-broker show --json")?;
    let text = text
        .wait_with_output()
        .context("running airlock-broker show")?;
    let json = json
        .wait_with_output()
        .context("running airlock-broker show --json")?;
    write(show_txt, &String::from_utf8_lossy(&text.stdout))?;
    if !json.status.success() {
        return Ok(Err(format!(
            "airlock-broker show {id} --json exited {:?}: {}",
            json.status.code(),
            String::from_utf8_lossy(&json.stderr).trim()
        )));
    }
    Ok(serde_json::from_slice(&json.stdout)
        .map_err(|e| format!("airlock-broker show {id} --json: not a queue item: {e}")))
}
