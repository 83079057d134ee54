//! Spawn cost of the sandbox as the product pays it: from a process that is already running
//! (the supervisor, the broker), `SandboxBuilder::run_captured(["true"])`, N times in a row.
//! Prints the median and mean wall time per run in milliseconds. Used by `bench/sandbox.sh`.
//!
//!   cargo run --release -p airlock-sandbox --example spawn -- [RUNS]

use airlock_sandbox::SandboxBuilder;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    airlock_sandbox::helper::run_if_requested();
    let runs: usize = match std::env::args().nth(1) {
        Some(n) => n
            .parse()
            .map_err(|e| format!("RUNS must be a positive integer, got {n:?} ({e})"))?,
        None => 200,
    };
    let sandbox = SandboxBuilder::new().system_ro().build()?;
    let true_bin = ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or("no `true` binary in /usr/bin or /bin")?;
    for _ in 0..10 {
        sandbox.run_captured(&[true_bin])?;
    }
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let c = sandbox.run_captured(&[true_bin])?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if c.summary.exit_code != Some(0) {
            return Err(format!(
                "`true` exited with {:?} in the sandbox",
                c.summary.exit_code
            )
            .into());
        }
    }
    ms.sort_by(f64::total_cmp);
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    println!("{:.2} {:.2}", ms[ms.len() / 2], mean);
    Ok(())
}
