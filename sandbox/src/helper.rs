//! The re-executed set-up helper.

/// If this process was started as the sandbox set-up helper, run it and never return.
pub fn run_if_requested() {}
