//! Hostile gates: each tries one thing a gate must never do, and the host refuses it. Probing
//! gates report what they saw as a flag, so the test reads the host's answer from inside the
//! gate; the runaway ones are denied with the limit that stopped them.

use std::time::Duration;

use airlock_gates::{
    FIXED_WALL_CLOCK, FileStatus, GateFailure, GateFile, GateLimits, GateSpec, Verdict, load_gate,
    load_unchecked,
};

use super::*;

/// Imports a probe may use, then memory, a bump allocator and `$verdict` / `$num` / `$report`:
/// `$num` appends a number and a space to the report, `$report` returns it as a flag.
const PRELUDE: &str = r#"
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get"
    (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get"
    (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (global $heap_end (mut i32) (i32.const 65536))
  (global $out (mut i32) (i32.const 0))
  (global $pos (mut i32) (i32.const 0))
  (func $alloc (param $size i32) (result i32)
    (local $ptr i32) (local $pages i32) (local $old i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (i32.add (local.get $ptr) (local.get $size)) (global.get $heap_end))
      (then
        (local.set $pages (i32.shr_u (i32.add (local.get $size) (i32.const 65535)) (i32.const 16)))
        (local.set $old (memory.grow (local.get $pages)))
        (if (i32.eq (local.get $old) (i32.const -1)) (then unreachable))
        (local.set $ptr (i32.shl (local.get $old) (i32.const 16)))
        (global.set $heap_end (i32.add (local.get $ptr) (i32.shl (local.get $pages) (i32.const 16))))))
    (global.set $heap (i32.add (local.get $ptr) (local.get $size)))
    (local.get $ptr))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (call $alloc (local.get 3)))
  (func $verdict (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (local $v i32)
    (local.set $v (call $alloc (i32.const 12)))
    (i32.store8 (local.get $v) (local.get $tag))
    (i32.store offset=4 (local.get $v) (local.get $ptr))
    (i32.store offset=8 (local.get $v) (local.get $len))
    (local.get $v))
  (func $num (param $v i64)
    (local $tmp i32) (local $n i32)
    (if (i32.eqz (global.get $out)) (then (global.set $out (call $alloc (i32.const 1024)))))
    (local.set $tmp (call $alloc (i32.const 24)))
    (loop $digits
      (i32.store8 (i32.add (local.get $tmp) (local.get $n))
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digits (i64.ne (local.get $v) (i64.const 0))))
    (loop $copy
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (i32.store8 (i32.add (global.get $out) (global.get $pos))
        (i32.load8_u (i32.add (local.get $tmp) (local.get $n))))
      (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
      (br_if $copy (local.get $n)))
    (i32.store8 (i32.add (global.get $out) (global.get $pos)) (i32.const 32))
    (global.set $pos (i32.add (global.get $pos) (i32.const 1))))
  (func $report (result i32)
    (call $verdict (i32.const 1) (global.get $out) (global.get $pos)))
  ;; errno of opening $path (at $p, $len bytes) under $fd, following links when $follow is 1.
  (func $open (param $fd i32) (param $follow i32) (param $p i32) (param $len i32) (result i64)
    (i64.extend_i32_u (call $path_open (local.get $fd) (local.get $follow) (local.get $p)
      (local.get $len) (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0)
      (call $alloc (i32.const 8)))))
"#;

/// A probe gate: the prelude, `data`, and `body` as the function `check` (which must return
/// a verdict pointer, usually `(call $report)`).
fn probe(data: &str, body: &str) -> String {
    format!(
        "(module {PRELUDE}\n{data}\n(func (export \"check\") (param $request i32) (result i32)\n{body})\n)"
    )
}

/// Examples any probe passes: it flags everything.
const FLAGS_EVERYTHING: &str = r#"
[[match]]
name = "anything is flagged"
verdict = "flag"
files = [{ path = "a.txt", status = "added", patched = "a" }]
[[not_match]]
name = "never allowed: an examples file needs one"
files = [{ path = "b.txt", status = "added", patched = "b" }]
"#;

/// Load a probe without checking its examples (it flags everything) and run it once over a
/// request changing `src/a.rs`.
fn run_probe(text: &str, limits: GateLimits) -> airlock_gates::GateRun {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_in(dir.path(), "probe", text, FLAGS_EVERYTHING, limits);
    let (gate, _) = load_unchecked(&engine(), &spec).unwrap();
    gate.check(&request(vec![modified(
        "src/a.rs",
        "base side\n",
        "patched side\n",
    )]))
}

fn flagged(run: &airlock_gates::GateRun) -> Vec<u64> {
    let Verdict::Flag(text) = &run.verdict else {
        panic!("expected the probe's report, got {run:?}");
    };
    text.split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn a_file_outside_the_view_cannot_be_opened() {
    // Each path is one the host has: `../patched/src/a.rs` from /base names the view's other
    // tree on the host's disk, `/etc/passwd` and the climbs the host's own file. The control
    // (`src/a.rs` under /patched) shows that the probe does open what it may.
    let data = r#"
      (data (i32.const 100) "src/a.rs")
      (data (i32.const 120) "../patched/src/a.rs")
      (data (i32.const 150) "/etc/passwd")
      (data (i32.const 170) "../../../../../../etc/passwd")
      (data (i32.const 200) "etc/passwd")"#;
    let body = r#"
      (call $num (call $open (i32.const 4) (i32.const 0) (i32.const 100) (i32.const 8)))
      (call $num (call $open (i32.const 3) (i32.const 0) (i32.const 120) (i32.const 19)))
      (call $num (call $open (i32.const 3) (i32.const 1) (i32.const 150) (i32.const 11)))
      (call $num (call $open (i32.const 4) (i32.const 1) (i32.const 170) (i32.const 28)))
      (call $num (call $open (i32.const 5) (i32.const 1) (i32.const 200) (i32.const 10)))
      (call $report)"#;
    let errnos = flagged(&run_probe(&probe(data, body), test_limits()));
    assert_eq!(errnos.len(), 5, "{errnos:?}");
    assert_eq!(
        errnos[0], 0,
        "the control open of src/a.rs failed: {errnos:?}"
    );
    // The host refuses each climb and the absolute path as leaving the directory (preview1's
    // EPERM, 63), not merely as missing: `../patched/src/a.rs` exists on the host's disk.
    assert_eq!(errnos[1..4], [63, 63, 63], "{errnos:?}");
    // fd 5 is no directory of the gate's at all.
    assert_ne!(errnos[4], 0, "{errnos:?}");
}

#[test]
fn only_the_two_trees_are_preopened() {
    // fd_prestat_get: 0 for the two preopens (3 and 4), EBADF (8) for fd 5.
    let body = r#"
      (call $num (i64.extend_i32_u (call $fd_prestat_get (i32.const 3) (call $alloc (i32.const 8)))))
      (call $num (i64.extend_i32_u (call $fd_prestat_get (i32.const 4) (call $alloc (i32.const 8)))))
      (call $num (i64.extend_i32_u (call $fd_prestat_get (i32.const 5) (call $alloc (i32.const 8)))))
      (call $report)"#;
    assert_eq!(
        flagged(&run_probe(&probe("", body), test_limits())),
        vec![0, 0, 8]
    );
}

#[test]
fn the_clock_is_fixed() {
    // Realtime (0) and monotonic (1), twice each, with spinning in between.
    let body = r#"
      (local $at i32) (local $i i32)
      (local.set $at (call $alloc (i32.const 8)))
      (call $num (i64.extend_i32_u (call $clock_time_get (i32.const 0) (i64.const 1) (local.get $at))))
      (call $num (i64.load (local.get $at)))
      (call $num (i64.extend_i32_u (call $clock_time_get (i32.const 1) (i64.const 1) (local.get $at))))
      (call $num (i64.load (local.get $at)))
      (loop $spin
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $spin (i32.lt_u (local.get $i) (i32.const 100000))))
      (drop (call $clock_time_get (i32.const 0) (i64.const 1) (local.get $at)))
      (call $num (i64.load (local.get $at)))
      (drop (call $clock_time_get (i32.const 1) (i64.const 1) (local.get $at)))
      (call $num (i64.load (local.get $at)))
      (call $report)"#;
    let fixed = u64::try_from(FIXED_WALL_CLOCK.as_nanos()).unwrap();
    assert_eq!(
        flagged(&run_probe(&probe("", body), test_limits())),
        vec![0, fixed, 0, 0, fixed, 0]
    );
}

#[test]
fn the_environment_and_the_arguments_are_empty() {
    // This process has an environment and arguments: a gate sees none of them.
    let body = r#"
      (local $sizes i32)
      (local.set $sizes (call $alloc (i32.const 8)))
      (call $num (i64.extend_i32_u (call $environ_sizes_get (local.get $sizes)
        (i32.add (local.get $sizes) (i32.const 4)))))
      (call $num (i64.extend_i32_u (i32.load (local.get $sizes))))
      (call $num (i64.extend_i32_u (i32.load offset=4 (local.get $sizes))))
      (call $num (i64.extend_i32_u (call $args_sizes_get (local.get $sizes)
        (i32.add (local.get $sizes) (i32.const 4)))))
      (call $num (i64.extend_i32_u (i32.load (local.get $sizes))))
      (call $num (i64.extend_i32_u (i32.load offset=4 (local.get $sizes))))
      (call $report)"#;
    assert!(
        std::env::vars().count() > 0,
        "the test process has an environment to leak"
    );
    assert_eq!(
        flagged(&run_probe(&probe("", body), test_limits())),
        vec![0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn a_gate_that_wants_a_socket_is_refused_at_load() {
    // A whole component, in the component model's text format: it imports the WASI sockets
    // `network` interface every socket needs. The host links no socket interface at all.
    let text = r#"(component
      (import "wasi:sockets/network@0.2.6" (instance
        (export "network" (type (sub resource)))))
    )"#;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_in(dir.path(), "netcat", text, FLAGS_EVERYTHING, test_limits());
    let err = load_gate(&engine(), &spec).unwrap_err().to_string();
    assert!(err.contains("gate netcat"), "{err}");
    assert!(err.contains("wasi:sockets/"), "{err}");
    assert!(err.contains("sockets and HTTP are never linked"), "{err}");
}

#[test]
fn an_endless_loop_runs_out_of_fuel_and_is_denied() {
    let run = run_probe(
        &probe("", "(loop $forever (br $forever)) (call $report)"),
        test_limits(),
    );
    assert_eq!(
        run.failure,
        Some(GateFailure::OutOfFuel {
            fuel: test_limits().fuel
        })
    );
    assert!(
        matches!(&run.verdict, Verdict::Deny(r) if r.contains("ran out of fuel")),
        "{run:?}"
    );
}

#[test]
fn an_endless_loop_with_fuel_to_spare_times_out_and_is_denied() {
    let limits = GateLimits {
        fuel: u64::MAX / 2,
        timeout: Duration::from_millis(200),
        ..test_limits()
    };
    let run = run_probe(
        &probe("", "(loop $forever (br $forever)) (call $report)"),
        limits,
    );
    assert_eq!(
        run.failure,
        Some(GateFailure::Timeout {
            timeout: limits.timeout
        })
    );
    assert!(
        matches!(&run.verdict, Verdict::Deny(r) if r.contains("timed out")),
        "{run:?}"
    );
}

#[test]
fn a_memory_bomb_hits_the_cap_and_is_denied() {
    // Grow by 1 MiB until refused; a refusal that returned -1 instead of trapping would be
    // reported (and fail the test).
    let body = r#"
      (loop $more
        (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
      (call $num (i64.const 1))
      (call $report)"#;
    let run = run_probe(&probe("", body), test_limits());
    let Some(GateFailure::MemoryCap { cap, requested }) = run.failure else {
        panic!("expected the memory cap, got {run:?}");
    };
    assert_eq!(cap, test_limits().memory_bytes);
    assert!(requested > cap, "{requested} <= {cap}");
    assert!(
        matches!(&run.verdict, Verdict::Deny(r) if r.contains("memory cap")),
        "{run:?}"
    );
}

#[test]
fn a_trap_is_a_deny() {
    let run = run_probe(&probe("", "unreachable"), test_limits());
    assert!(matches!(run.failure, Some(GateFailure::Trap(_))), "{run:?}");
    assert!(
        matches!(&run.verdict, Verdict::Deny(r) if r.starts_with("the gate trapped")),
        "{run:?}"
    );
}

#[test]
fn a_route_to_no_group_is_a_deny_and_long_texts_are_cut() {
    let data = r#"(data (i32.const 100) "to nowhere")"#;
    let run = run_probe(
        &probe(
            data,
            "(call $verdict (i32.const 2) (i32.const 100) (i32.const 10))",
        ),
        test_limits(),
    );
    assert!(
        matches!(run.failure, Some(GateFailure::BadVerdict(_))),
        "{run:?}"
    );
    assert!(matches!(run.verdict, Verdict::Deny(_)), "{run:?}");
    // A 100 KB flag (the bytes of a grown page) is cut to the kept length.
    let body =
        r#"(call $verdict (i32.const 1) (call $alloc (i32.const 100000)) (i32.const 100000))"#;
    let run = run_probe(&probe("", body), test_limits());
    let Verdict::Flag(text) = run.verdict else {
        panic!("{:?}", run.verdict);
    };
    assert_eq!(text.len(), airlock_gates::MAX_VERDICT_TEXT_BYTES + 3);
}

#[test]
fn each_call_gets_a_fresh_instance() {
    // A counter in a global: were the instance reused, the second call would report 2.
    let text = probe(
        "(global $calls (mut i64) (i64.const 0))",
        r#"(global.set $calls (i64.add (global.get $calls) (i64.const 1)))
           (call $num (global.get $calls)) (call $report)"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_in(
        dir.path(),
        "counter",
        &text,
        FLAGS_EVERYTHING,
        test_limits(),
    );
    let (gate, _) = load_unchecked(&engine(), &spec).unwrap();
    let req = request(vec![GateFile {
        path: "x".into(),
        status: FileStatus::Added,
        base: None,
        patched: Some(b"x".to_vec()),
    }]);
    assert_eq!(flagged(&gate.check(&req)), vec![1]);
    assert_eq!(flagged(&gate.check(&req)), vec![1]);
}

#[test]
fn a_probe_spec_without_examples_that_pass_is_not_loaded() {
    // The probes flag everything, so their not_match example fails: load_gate refuses them
    // (the tests above load them with load_unchecked on purpose).
    let dir = tempfile::tempdir().unwrap();
    let spec: GateSpec = spec_in(
        dir.path(),
        "probe",
        &probe("", "(call $report)"),
        FLAGS_EVERYTHING,
        test_limits(),
    );
    let err = load_gate(&engine(), &spec).unwrap_err().to_string();
    assert!(err.contains("not_match"), "{err}");
}
