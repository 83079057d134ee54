//! Running a gate: one [`GateEngine`] (wasmtime with fuel metering and epoch interruption, a
//! ticker thread, and a linker holding only the WASI interfaces a gate needs to read files),
//! and per gate a [`LoadedGate`], compiled and pre-instantiated once. Every call gets a fresh
//! instance in a fresh store: a fuel budget, a memory cap over all its linear memories, an
//! epoch deadline, and a WASI context with the two trees preopened read-only, a fixed clock,
//! fixed random bytes, no environment, no arguments, no stdin and discarded output. The linker
//! has no `wasi:sockets` and no `wasi:http` at all, so a component that wants a socket is
//! refused when it loads. Whatever goes wrong inside a call is a deny ([`GateFailure`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasData, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::error::{Error, Result};
use crate::request::{FileStatus, GateRequest, Verdict};
use crate::view::TreeView;

mod bindings {
    wasmtime::component::bindgen!({ path: "wit", world: "gate" });
}

use bindings::airlock::gate::types as wit;

/// How often the ticker advances the engine's epoch: the granularity of a gate's timeout.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The wall clock every gate reads: 2000-01-01T00:00:00Z, whatever the time is.
pub const FIXED_WALL_CLOCK: Duration = Duration::from_secs(946_684_800);

/// The longest message, group or reason kept from a gate, in bytes; longer ones are cut.
pub const MAX_VERDICT_TEXT_BYTES: usize = 2000;

/// The most core instances, linear memories and tables one gate instance may create (a
/// component of a core module and the WASI adapter uses a handful).
const MAX_INSTANCES: usize = 64;
const MAX_MEMORIES: usize = 8;
const MAX_TABLES: usize = 32;
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The fuel of one call when the configuration names none: a fraction of a second of work.
pub const DEFAULT_GATE_FUEL: u64 = 100_000_000;

/// What one call of a gate may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateLimits {
    /// Fuel units (roughly one per WebAssembly instruction).
    pub fuel: u64,
    /// Bytes of linear memory, all memories of the instance together.
    pub memory_bytes: usize,
    /// Wall-clock limit of one call, instantiation included.
    pub timeout: Duration,
}

/// Why a call produced no verdict of the gate's own; each is a deny (fail closed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateFailure {
    /// The fuel budget ran out.
    OutOfFuel {
        /// The budget.
        fuel: u64,
    },
    /// A memory growth past the cap.
    MemoryCap {
        /// The cap in bytes.
        cap: usize,
        /// What the instance asked to hold in all.
        requested: usize,
    },
    /// The timeout passed.
    Timeout {
        /// The timeout.
        timeout: Duration,
    },
    /// The gate trapped (or exited).
    Trap(String),
    /// The gate answered something the broker does not accept (a route to no group).
    BadVerdict(String),
    /// The host could not prepare the call (the two trees could not be written).
    Host(String),
}

impl GateFailure {
    /// A short machine name, as audit records carry it.
    pub fn code(&self) -> &'static str {
        match self {
            GateFailure::OutOfFuel { .. } => "out_of_fuel",
            GateFailure::MemoryCap { .. } => "memory_cap",
            GateFailure::Timeout { .. } => "timeout",
            GateFailure::Trap(_) => "trap",
            GateFailure::BadVerdict(_) => "bad_verdict",
            GateFailure::Host(_) => "host",
        }
    }
}

impl std::fmt::Display for GateFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateFailure::OutOfFuel { fuel } => {
                write!(f, "the gate ran out of fuel (budget {fuel})")
            }
            GateFailure::MemoryCap { cap, requested } => write!(
                f,
                "the gate exceeded its memory cap ({cap} bytes; it asked for {requested})"
            ),
            GateFailure::Timeout { timeout } => {
                write!(f, "the gate timed out after {} ms", timeout.as_millis())
            }
            GateFailure::Trap(message) => write!(f, "the gate trapped: {message}"),
            GateFailure::BadVerdict(message) => {
                write!(f, "the gate's verdict is unusable: {message}")
            }
            GateFailure::Host(message) => write!(f, "the gate could not be run: {message}"),
        }
    }
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRun {
    /// The gate's verdict; a failure is a deny with the failure as its reason.
    pub verdict: Verdict,
    /// Why the gate gave no verdict of its own, if it did not.
    pub failure: Option<GateFailure>,
    /// Fuel the call used.
    pub fuel_consumed: u64,
}

/// The engine every gate of a broker runs on, with its ticker thread (stopped when the last
/// clone is dropped).
#[derive(Clone)]
pub struct GateEngine {
    engine: Engine,
    linker: Arc<Linker<GateState>>,
    _ticker: Arc<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl GateEngine {
    /// A new engine: cranelift, the component model, fuel metering, epoch interruption.
    pub fn new() -> Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.consume_fuel(true);
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| Error::Engine(e.to_string()))?;
        let mut linker = Linker::new(&engine);
        link_wasi(&mut linker).map_err(|e| Error::Engine(format!("linking WASI: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticking = engine.clone();
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("gate-epoch".to_owned())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticking.increment_epoch();
                }
            })
            .map_err(|e| Error::Engine(format!("starting the epoch ticker: {e}")))?;
        Ok(GateEngine {
            engine,
            linker: Arc::new(linker),
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// Compile and link a gate component (`bytes` as built by [`crate::compile`]). Its
    /// examples are not checked here ([`crate::load_gate`] does).
    pub fn prepare(
        &self,
        name: &str,
        path: &Path,
        bytes: &[u8],
        limits: GateLimits,
    ) -> Result<LoadedGate> {
        let refuse = |message: String| Error::Component {
            gate: name.to_owned(),
            path: path.to_owned(),
            message,
        };
        let component =
            Component::new(&self.engine, bytes).map_err(|e| refuse(format!("{e:#}")))?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| refuse(format!("{e:#} (a gate may import only the WASI interfaces for reading files; sockets and HTTP are never linked)")))?;
        let pre = bindings::GatePre::new(pre).map_err(|e| refuse(format!("{e:#}")))?;
        Ok(LoadedGate {
            name: name.to_owned(),
            digest: format!("sha256:{}", hex::encode(Sha256::digest(bytes))),
            limits,
            pre,
            engine: self.clone(),
        })
    }
}

/// A compiled, linked gate, ready to be called any number of times, from any thread.
pub struct LoadedGate {
    name: String,
    digest: String,
    limits: GateLimits,
    pre: bindings::GatePre<GateState>,
    engine: GateEngine,
}

impl std::fmt::Debug for LoadedGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedGate")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl LoadedGate {
    /// The gate's name in the configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `sha256:` of the component's bytes: which gate decided, in the audit log.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Its limits.
    pub fn limits(&self) -> GateLimits {
        self.limits
    }

    /// Ask the gate about `request`, in a fresh instance. Never fails: whatever stops the gate
    /// from answering is a deny naming why.
    pub fn check(&self, request: &GateRequest) -> GateRun {
        match self.call(request) {
            Ok((verdict, fuel_consumed)) => match checked_verdict(verdict) {
                Ok(verdict) => GateRun {
                    verdict,
                    failure: None,
                    fuel_consumed,
                },
                Err(failure) => denied(failure, fuel_consumed),
            },
            Err((failure, fuel_consumed)) => denied(failure, fuel_consumed),
        }
    }

    fn call(
        &self,
        request: &GateRequest,
    ) -> std::result::Result<(Verdict, u64), (GateFailure, u64)> {
        let host = |e: String| (GateFailure::Host(e), 0);
        let view = TreeView::materialize(&request.files).map_err(host)?;
        let wasi = gate_wasi(&view).map_err(host)?;
        let mut store = Store::new(
            &self.engine.engine,
            GateState {
                wasi,
                table: ResourceTable::new(),
                limiter: GateLimiter {
                    cap: self.limits.memory_bytes,
                    in_use: 0,
                    refused: None,
                },
            },
        );
        store.limiter(|state| &mut state.limiter);
        store
            .set_fuel(self.limits.fuel)
            .map_err(|e| host(e.to_string()))?;
        let ticks = self
            .limits
            .timeout
            .as_millis()
            .div_ceil(EPOCH_TICK.as_millis())
            .max(1);
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
        store.epoch_deadline_trap();
        let wit_request = to_wit(request);
        let result = self
            .pre
            .instantiate(&mut store)
            .and_then(|gate| gate.call_check(&mut store, &wit_request));
        let fuel_consumed = self
            .limits
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        match result {
            Ok(verdict) => Ok((from_wit(verdict), fuel_consumed)),
            Err(error) => Err((self.classify(&store, &error), fuel_consumed)),
        }
    }

    fn classify(&self, store: &Store<GateState>, error: &wasmtime::Error) -> GateFailure {
        if let Some(requested) = store.data().limiter.refused {
            return GateFailure::MemoryCap {
                cap: self.limits.memory_bytes,
                requested,
            };
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => GateFailure::OutOfFuel {
                fuel: self.limits.fuel,
            },
            Some(Trap::Interrupt) => GateFailure::Timeout {
                timeout: self.limits.timeout,
            },
            Some(trap) => GateFailure::Trap(trap.to_string()),
            None => match error.downcast_ref::<wasmtime_wasi::I32Exit>() {
                Some(exit) => GateFailure::Trap(format!("the gate exited with status {}", exit.0)),
                None => GateFailure::Trap(error.to_string()),
            },
        }
    }
}

fn denied(failure: GateFailure, fuel_consumed: u64) -> GateRun {
    GateRun {
        verdict: Verdict::Deny(failure.to_string()),
        failure: Some(failure),
        fuel_consumed,
    }
}

/// A route must name a group (letters, digits, `-`, `_`, `.`; at most 64); every text is cut to
/// [`MAX_VERDICT_TEXT_BYTES`].
fn checked_verdict(verdict: Verdict) -> std::result::Result<Verdict, GateFailure> {
    Ok(match verdict {
        Verdict::Allow => Verdict::Allow,
        Verdict::Flag(m) => Verdict::Flag(cut(m)),
        Verdict::Deny(m) => Verdict::Deny(cut(m)),
        Verdict::Route(group) => {
            let valid = !group.is_empty()
                && group.len() <= 64
                && group
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !valid {
                return Err(GateFailure::BadVerdict(format!(
                    "route to {:?}: a group is 1 to 64 letters, digits, '-', '_' or '.'",
                    cut(group)
                )));
            }
            Verdict::Route(group)
        }
    })
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_VERDICT_TEXT_BYTES {
        let mut end = MAX_VERDICT_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// The store's data: the WASI context, its resource table, the memory limiter.
struct GateState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: GateLimiter,
}

impl WasiView for GateState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps the instance's linear memories together; a refused growth traps (and is remembered, so
/// the deny can say it was the cap).
struct GateLimiter {
    cap: usize,
    in_use: usize,
    refused: Option<usize>,
}

impl ResourceLimiter for GateLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.in_use.saturating_add(desired.saturating_sub(current));
        if total > self.cap {
            self.refused = Some(total);
            return Err(wasmtime::format_err!(
                "memory cap of {} bytes exceeded ({total} bytes asked for)",
                self.cap
            ));
        }
        self.in_use = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// The clock every gate sees: wall time [`FIXED_WALL_CLOCK`], monotonic time 0, never moving.
struct FixedClock;

impl wasmtime_wasi::HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        FIXED_WALL_CLOCK
    }
}

impl wasmtime_wasi::HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// The WASI context of one call: the two trees read-only, and nothing else of the host.
fn gate_wasi(view: &TreeView) -> std::result::Result<WasiCtx, String> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .preopened_dir(view.base(), "/base", FsPerms::ReadOnly)
        .map_err(|e| format!("preopening the base tree: {e}"))?;
    builder
        .preopened_dir(view.patched(), "/patched", FsPerms::ReadOnly)
        .map_err(|e| format!("preopening the patched tree: {e}"))?;
    builder
        .allow_blocking_current_thread(true)
        .wall_clock(FixedClock)
        .monotonic_clock(FixedClock)
        .secure_random(wasmtime_wasi::Deterministic::new(vec![0x5a]))
        .insecure_random(wasmtime_wasi::Deterministic::new(vec![0xa5]))
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    Ok(builder.build())
}

/// `wasi:io`'s resources live in the store's table.
struct HasIo;

impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

/// The WASI interfaces a gate may import: files, streams, clocks, random, the CLI basics
/// (an empty environment, exit, closed or discarding stdio). No sockets, no name lookup, no
/// HTTP: a component importing them cannot be instantiated.
fn link_wasi(linker: &mut Linker<GateState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, io, random, sync};
    use wasmtime_wasi::random::WasiRandom;
    let l = linker;
    io::error::add_to_linker::<GateState, HasIo>(l, |t| &mut t.table)?;
    sync::io::poll::add_to_linker::<GateState, HasIo>(l, |t| &mut t.table)?;
    sync::io::streams::add_to_linker::<GateState, HasIo>(l, |t| &mut t.table)?;
    clocks::wall_clock::add_to_linker::<GateState, WasiClocks>(l, GateState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<GateState, WasiClocks>(l, GateState::clocks)?;
    filesystem::preopens::add_to_linker::<GateState, WasiFilesystem>(l, GateState::filesystem)?;
    sync::filesystem::types::add_to_linker::<GateState, WasiFilesystem>(l, GateState::filesystem)?;
    random::random::add_to_linker::<GateState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure::add_to_linker::<GateState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure_seed::add_to_linker::<GateState, WasiRandom>(l, |t| t.wasi.random())?;
    cli::exit::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::environment::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::stdin::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::stdout::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::stderr::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::terminal_input::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::terminal_output::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::terminal_stdin::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::terminal_stdout::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    cli::terminal_stderr::add_to_linker::<GateState, WasiCli>(l, GateState::cli)?;
    Ok(())
}

fn to_wit(request: &GateRequest) -> wit::Request {
    let d = &request.digest;
    wit::Request {
        repository: request.repository.clone(),
        issue_id: request.issue_id.clone(),
        base_commit: request.base_commit.clone(),
        title: request.title.clone(),
        body: request.body.clone(),
        scope: request.scope.clone(),
        test_change_reason: request.test_change_reason.clone(),
        before_failing_test: request.before_failing_test.clone(),
        digest: wit::Digest {
            files_changed: d.files_changed.clone(),
            insertions: d.insertions,
            deletions: d.deletions,
            test_files_added: d.test_files_added.clone(),
            test_files_modified: d.test_files_modified.clone(),
            assertions_removed: d.assertions_removed,
            skip_markers_added: d.skip_markers_added,
        },
        files: request
            .files
            .iter()
            .map(|f| wit::ChangedFile {
                path: f.path.clone(),
                status: match f.status {
                    FileStatus::Added => wit::ChangeStatus::Added,
                    FileStatus::Modified => wit::ChangeStatus::Modified,
                    FileStatus::Deleted => wit::ChangeStatus::Deleted,
                },
            })
            .collect(),
    }
}

fn from_wit(verdict: wit::Verdict) -> Verdict {
    match verdict {
        wit::Verdict::Allow => Verdict::Allow,
        wit::Verdict::Flag(m) => Verdict::Flag(m),
        wit::Verdict::Route(g) => Verdict::Route(g),
        wit::Verdict::Deny(r) => Verdict::Deny(r),
    }
}
