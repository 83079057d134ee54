//! `airlock agents`: the agent definitions an operator can run, listed or checked.

use airlock_supervisor::agents::{self, Agent};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock agents ...`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List the built-in agents: name, autonomy tier, turn cap, trigger, output and tools.
    List {
        /// Print the definitions as JSON (prompts included).
        #[arg(long)]
        json: bool,
    },
    /// Load and validate an agent definition file (unknown keys, unknown tools, a tool list
    /// the autonomy tier does not allow, a missing prompt file are refused, each error naming
    /// the file and the key); print what it defines.
    Check {
        /// The definition file (TOML).
        file: PathBuf,
    },
}

/// Run an `airlock agents` subcommand.
pub fn run(cmd: AgentsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AgentsCommand::List { json } => {
            let all = agents::builtins()?;
            if json {
                let text = serde_json::to_string_pretty(&all)?;
                outln!("{text}");
            } else {
                for agent in &all {
                    describe(agent);
                }
            }
        }
        AgentsCommand::Check { file } => {
            let agent = agents::load_file(&file)?;
            outln!("{}: valid", file.display());
            describe(&agent);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The definition for a person; its texts (operator input, possibly from a shared file) are
/// escaped for the terminal.
fn describe(agent: &Agent) {
    let shown = airlock_policies::terminal::escaped;
    outln!("{}  ({})", shown(&agent.name), shown(&agent.origin));
    outln!("  {}", shown(&agent.description));
    outln!(
        "  autonomy: {}; max iterations: {}; trigger: {}",
        agent.autonomy.as_str(),
        agent.max_iterations,
        shown(&agent.trigger.describe())
    );
    let output = match agent.output.change {
        Some(change) => format!("{} ({})", agent.output.tool.name(), change.as_str()),
        None => agent.output.tool.name().to_string(),
    };
    outln!("  output: {output}");
    outln!("  tools: {}", agent.tool_names());
    let mut writes: Vec<String> = agent
        .write_allowlist
        .iter()
        .flatten()
        .map(|g| shown(g).into_owned())
        .collect();
    if agent.docs_dirs {
        writes.push("[docs] dirs and learnings of airlock.toml".to_string());
    }
    if !writes.is_empty() {
        outln!("  writes: {}", writes.join(", "));
    }
}
