//! Progress of a run as it happens, for the operator's terminal: turn N of M with the tokens and
//! cost so far, each tool with its one-line result, and how the run stopped. Emitted by the
//! ledger; rendered here as human lines or JSON lines, or not at all.
//!
//! Tool names, results and stop reasons carry repository and agent text, so both renderers
//! escape it by the shared rule of `airlock_policies::terminal`: a human line shows control and
//! invisible characters as `\u{..}`, a JSON line is ASCII with `\u` escapes. Progress is
//! best-effort: a closed stderr never stops a run.

use airlock_policies::terminal;
use serde::Serialize;
use std::io::Write;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// One readable line per event (the default, on stderr).
    #[default]
    Human,
    /// One JSON object per line.
    Json,
    /// Nothing.
    Quiet,
}

/// Tokens and cost of every model call so far (the supervisor's and its readers').
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct UsageSoFar {
    /// Model calls made.
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Of the prompt tokens, those read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Of the prompt tokens, those written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Dollars of the priced calls; `None` while no call had a price.
    pub cost_usd: Option<f64>,
}

impl UsageSoFar {
    /// Add one call.
    pub fn add(&mut self, usage: &airlock_model::Usage, cost_usd: Option<f64>) {
        self.calls += 1;
        self.input_tokens += usage.input_tokens;
        self.cache_read_tokens += usage.cache_read_tokens;
        self.cache_write_tokens += usage.cache_write_tokens;
        self.output_tokens += usage.output_tokens;
        if let Some(c) = cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
    }
}

/// One thing worth telling the operator while the run goes on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProgressEvent {
    /// The model answered turn `turn` of `max_turns`.
    Turn {
        /// The turn, from 1.
        turn: u32,
        /// The turn budget.
        max_turns: u32,
        /// Usage so far, this turn included.
        usage: UsageSoFar,
    },
    /// A tool call finished.
    Tool {
        /// The turn it was made in.
        turn: u32,
        /// The tool's name (as the model called it: agent text).
        tool: String,
        /// True when the result is an error result.
        is_error: bool,
        /// The first line of the result.
        result: String,
    },
    /// The loop stopped.
    Finished {
        /// Why (`final_message`, `budget: ...`).
        stop: String,
        /// Turns used.
        turns: u32,
        /// Usage of the whole run.
        usage: UsageSoFar,
    },
}

/// Most characters of a tool result shown in a human line.
const RESULT_CHARS: usize = 120;

/// The first line of `text`, cut to `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("");
    if first.chars().count() <= max {
        first.to_string()
    } else {
        let cut: String = first.chars().take(max).collect();
        format!("{cut}...")
    }
}

/// `event` as the line `mode` shows (no newline), `None` in quiet mode.
pub fn render(mode: ProgressMode, event: &ProgressEvent) -> Option<String> {
    match mode {
        ProgressMode::Quiet => None,
        ProgressMode::Json => terminal::to_ascii_json_line(event).ok(),
        ProgressMode::Human => Some(render_human(event)),
    }
}

fn render_human(event: &ProgressEvent) -> String {
    match event {
        ProgressEvent::Turn {
            turn,
            max_turns,
            usage,
        } => format!("turn {turn} of {max_turns}: {}", describe_usage(usage)),
        ProgressEvent::Tool {
            tool,
            is_error,
            result,
            ..
        } => format!(
            "  {} -> {}: {}",
            terminal::escaped_line(tool),
            if *is_error { "error" } else { "ok" },
            terminal::escaped_line(&one_line(result, RESULT_CHARS))
        ),
        ProgressEvent::Finished { stop, turns, usage } => format!(
            "stopped after {turns} turns ({}): {}",
            describe_usage(usage),
            terminal::escaped_line(stop)
        ),
    }
}

fn describe_usage(usage: &UsageSoFar) -> String {
    let cost = match usage.cost_usd {
        Some(c) => format!("${c:.4}"),
        None => "cost unknown".to_string(),
    };
    let cached = if usage.cache_read_tokens > 0 {
        format!(" ({} from the cache)", usage.cache_read_tokens)
    } else {
        String::new()
    };
    format!(
        "{} tokens in{cached}, {} out, {cost} so far",
        usage.input_tokens, usage.output_tokens
    )
}

/// Where progress goes: a mode and a writer (stderr for `airlock run`).
pub struct Progress {
    mode: ProgressMode,
    out: Box<dyn Write>,
}

impl Progress {
    /// Progress in `mode` written to `out`.
    pub fn new(mode: ProgressMode, out: Box<dyn Write>) -> Self {
        Progress { mode, out }
    }

    /// Progress in `mode` on stderr.
    pub fn stderr(mode: ProgressMode) -> Self {
        Progress::new(mode, Box::new(std::io::stderr()))
    }

    /// No progress at all.
    pub fn quiet() -> Self {
        Progress::new(ProgressMode::Quiet, Box::new(std::io::sink()))
    }

    /// Show one event. A failed write is ignored: progress must never stop a run.
    pub fn emit(&mut self, event: &ProgressEvent) {
        if let Some(line) = render(self.mode, event) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("mode", &self.mode)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn events() -> Vec<ProgressEvent> {
        let mut usage = UsageSoFar::default();
        usage.add(&airlock_model::Usage::new(1200, 80), Some(0.0125));
        vec![
            ProgressEvent::Turn {
                turn: 2,
                max_turns: 12,
                usage,
            },
            ProgressEvent::Tool {
                turn: 2,
                tool: "read_file".into(),
                is_error: false,
                result: "calc/ops.py lines 1-10 of 10\u{1b}[2K\n1| \"\"\"Arithmetic\"\"\"".into(),
            },
            ProgressEvent::Finished {
                stop: "final_message".into(),
                turns: 2,
                usage,
            },
        ]
    }

    fn shown(mode: ProgressMode) -> String {
        let out = Shared::default();
        let mut progress = Progress::new(mode, Box::new(out.clone()));
        for e in events() {
            progress.emit(&e);
        }
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn human_lines_say_the_turn_the_tool_and_the_usage_with_agent_text_escaped() {
        assert_eq!(
            shown(ProgressMode::Human),
            "turn 2 of 12: 1200 tokens in, 80 out, $0.0125 so far\n  read_file -> ok: calc/ops.py \
             lines 1-10 of 10\\u{1b}[2K\nstopped after 2 turns (1200 tokens in, 80 out, $0.0125 so \
             far): final_message\n"
        );
    }

    #[test]
    fn tokens_read_from_the_cache_are_said() {
        let mut usage = UsageSoFar::default();
        let call = airlock_model::Usage {
            cache_read_tokens: 900,
            cache_write_tokens: 200,
            ..airlock_model::Usage::new(1200, 80)
        };
        usage.add(&call, None);
        usage.add(&call, Some(0.5));
        assert_eq!(
            describe_usage(&usage),
            "2400 tokens in (1800 from the cache), 160 out, $0.5000 so far"
        );
        assert_eq!(usage.cache_write_tokens, 400);
    }

    #[test]
    fn json_lines_are_one_object_each_in_ascii() {
        let text = shown(ProgressMode::Json);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(text.is_ascii() && !text.contains('\u{1b}'));
        let tool: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(tool["event"], "tool");
        assert_eq!(tool["tool"], "read_file");
        let turn: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(turn["usage"]["input_tokens"], 1200);
        assert_eq!(turn["max_turns"], 12);
    }

    #[test]
    fn quiet_mode_prints_nothing() {
        assert_eq!(shown(ProgressMode::Quiet), "");
        assert!(
            events()
                .iter()
                .all(|e| render(ProgressMode::Quiet, e).is_none())
        );
    }
}
