//! Command-line surface of `airlock`. Each area owns one module here.

/// `println!` for command output. A reader that goes away (`airlock audit injections | head`)
/// ends the program quietly with status 141, as a process killed by SIGPIPE would, instead of
/// the panic `println!` raises; any other write error is reported and exits with status 74.
macro_rules! outln {
    () => {
        $crate::cli::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for command output; see [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!($($arg)*))
    };
}

mod agents;
mod audit;
mod demo;
mod eval_injection;
mod history;
mod init;
mod judge;
mod pair;
mod reference_repos;
mod retrieval;
mod review;
mod run;
mod sandbox;
mod triggers;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Write command output to stdout; see [`outln!`].
pub(crate) fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141)
        }
        eprintln!("airlock: cannot write the output: {e}");
        std::process::exit(74)
    }
}

/// Exit code for a usage error or an operational failure that is not a refusal.
pub const EXIT_ERROR: u8 = 2;

/// `--version`: the crate version and the commit it was built from (`build.rs`).
const VERSION: &str = env!("AIRLOCK_VERSION");

/// Every exit status `airlock` uses, shown at the end of `--help` (and in docs/cli.md).
const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    done: a pull request or review queued, a check passed
  1    a check failed: doctor (runs would be refused), audit verify (tampering), audit
       detect (an injection found), audit fp-scan, judge, demo, eval injection
  2    error: a usage mistake, a configuration or operational failure
  3    run, resume: escalated; review: no review queued; audit verify: only a torn tail;
       reference-repos: the directory cannot be read
  4    run: the issue is not ready (triage)
  5    run, resume: parked, a budget stopped it (see `airlock resume`)
  74   the output could not be written
  141  the output's reader went away (a closed pipe)
`batch` exits with the worst of its runs' codes (2, 3, 5, 4, then 0); `sandbox run` with its
command's own (124 timed out, 125 refused by the sandbox, 126 cannot run, 127 not found, 128+N
killed by signal N).";

#[derive(Debug, Parser)]
#[command(
    name = "airlock",
    version = VERSION,
    about = "One issue on one pinned commit in, one reviewable pull request (or an escalation) out.",
    after_help = EXIT_CODES_HELP
)]
struct Cli {
    /// Log more on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, display_order = 900)]
    verbose: u8,
    /// Log only errors, and print no progress while a run goes on.
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        display_order = 901
    )]
    quiet: bool,
    /// Log lines on stderr as `text` or `json` (one object a line, for machines).
    #[arg(
        long,
        global = true,
        default_value = "text",
        value_name = "FORMAT",
        display_order = 902
    )]
    log_format: airlock_policies::terminal::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Report, layer by layer, what this host supports and whether sandboxed runs would be refused.
    Doctor(sandbox::DoctorArgs),
    /// Write a commented airlock.toml for a repository from its working tree, and print the
    /// matching [repositories."NAME"] block for broker.toml. Exit codes: 0 written, 2 error.
    Init(init::InitArgs),
    /// Run a command inside the sandbox.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// Build (or incrementally update) the retrieval index of a repository at a commit.
    Index(retrieval::IndexArgs),
    /// Search a repository with the fused lexical + structural retrieval engine.
    Search(retrieval::SearchArgs),
    /// Render the repository map (PageRank over definitions and references) within a token budget.
    Map(retrieval::MapArgs),
    /// The memory of merged pull requests: "have we fixed something like this before?".
    #[command(subcommand)]
    History(history::HistoryCommand),
    /// Benchmarks of the product's parts.
    #[command(subcommand)]
    Eval(retrieval::EvalCommand),
    /// Print the operator's reference repositories (exemplars an agent reads, never edits) as
    /// JSON: each pinned to a commit with its structure, or its failing status. Exit codes: 0
    /// answered, 3 the directory cannot be read, 2 error.
    ReferenceRepos(reference_repos::ReferenceReposArgs),
    /// Query and verify the tamper-evident audit log.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Turn one issue on one pinned commit into a queued pull request or an escalation.
    /// Exit codes: 0 pull request queued, 3 escalated, 4 issue not ready, 5 parked (a budget
    /// stopped it; see `airlock resume`), 2 error.
    Run(run::RunArgs),
    /// Run many issues of one repository on one pin: one mirror and index, triage of every
    /// issue first, then the ready ones N at a time, and a summary table. Exit codes: the worst
    /// outcome: 2 an error, 3 an escalation, 5 a run parked, 4 an issue skipped, 0 every issue
    /// queued.
    Batch(triggers::BatchArgs),
    /// Poll GitHub or GitLab for open issues with a label and run each (claimed through the
    /// broker, so several watchers never run one issue twice). Exit codes: 0 stopped, 2 error.
    Watch(triggers::WatchArgs),
    /// Take ready issues from the broker's shared work queue (`airlock-broker work add`) and
    /// run each, on this host or any other: the broker gives each issue to one worker at a
    /// time, and a worker that dies loses its issue at its lease's end. Exit codes: 0 stopped
    /// (with --once: the queue had nothing ready), 2 error.
    Worker(triggers::QueueWorkerArgs),
    /// Receive GitHub and GitLab webhooks (signature or token checked, replays ignored): a
    /// labelled issue or an `@airlock` mention starts a run, a review asking for changes queues
    /// a follow-up. Exit codes: 2 error (it serves until stopped).
    Webhook(triggers::WebhookArgs),
    /// The agents `airlock run --agent` can run: list the built-in definitions, or validate a
    /// definition file. Exit codes: 0 listed or valid, 2 invalid or unreadable.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Review a pull request: its diff, the touched code and its callers in context, read-only
    /// tools, and one review (summary, verdict, inline comments on lines of the diff) queued
    /// with the broker, which posts it on GitHub once approved. Exit codes: 0 review queued,
    /// 3 no review queued, 2 error.
    Review(review::ReviewArgs),
    /// Continue a parked run (one a budget stopped) with more budget, from its kept worktree
    /// and conversation. Exit codes as for `airlock run`; 2 also when the run expired.
    Resume(run::ResumeArgs),
    /// A sandboxed reader worker (started by `airlock run`; not for direct use).
    #[command(hide = true)]
    ReaderWorker(run::ReaderWorkerArgs),
    /// Score queued pull requests with the judge, or re-run its calibration set.
    /// Exit codes: 0 done, 1 a judgement failed or the accept rate is above the ceiling, 2 error.
    Judge(judge::JudgeArgs),
    /// Run the whole product on bundled example repositories with scripted models and a real
    /// broker, then check every scenario. Exit codes: 0 all as expected, 1 not, 2 error.
    Demo(demo::DemoArgs),
    /// Print a shell completion script for airlock (e.g. `airlock completions bash >
    /// ~/.local/share/bash-completion/completions/airlock`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write airlock's man pages (airlock.1 and one per subcommand) into a directory.
    Man {
        /// Where to write them (created if missing).
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
}

/// `airlock completions SHELL`: the script clap generates for the whole command tree.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "airlock", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Ok(ExitCode::SUCCESS)
}

/// `airlock man --dir DIR`: `airlock.1` and `airlock-SUBCOMMAND.1` for every visible subcommand.
fn man_pages(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let command = Cli::command();
    let mut written = Vec::new();
    let mut pages = vec![("airlock".to_string(), command.clone())];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("airlock-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut text = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut text)
            .with_context(|| format!("rendering {name}.1"))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    for path in written {
        outln!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Parse the process arguments and run the chosen subcommand; returns the process exit code.
pub fn run() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    airlock_policies::terminal::init_logging(
        airlock_policies::terminal::Verbosity {
            verbose: cli.verbose,
            quiet: cli.quiet,
        },
        cli.log_format,
    );
    let command = matches.subcommand_name().unwrap_or_default();
    tracing::debug!(version = VERSION, command, "airlock starting");
    // Closes (and logs its time with -v) when the command is done.
    let span = tracing::info_span!("command", command).entered();
    let result = match cli.command {
        Command::Doctor(args) => sandbox::doctor(args),
        Command::Init(args) => init::run(args),
        Command::Sandbox(cmd) => sandbox::run(cmd),
        Command::Index(args) => retrieval::index(args),
        Command::Search(args) => retrieval::search(args),
        Command::Map(args) => retrieval::map(args),
        Command::History(cmd) => history::run(cmd),
        Command::Eval(cmd) => retrieval::eval(cmd),
        Command::ReferenceRepos(args) => reference_repos::run(args),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Run(args) => run::run(args, cli.quiet),
        Command::Resume(args) => run::resume(args, cli.quiet),
        Command::Agents(cmd) => agents::run(cmd),
        Command::Review(args) => review::review(args, cli.quiet),
        Command::ReaderWorker(args) => run::reader_worker(args),
        Command::Batch(args) => triggers::batch(args),
        Command::Watch(args) => triggers::watch_command(args),
        Command::Worker(args) => triggers::queue_worker(args),
        Command::Webhook(args) => triggers::webhook(args),
        Command::Judge(args) => judge::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man_pages(&dir),
    };
    drop(span);
    match result {
        Ok(code) => code,
        Err(err) => {
            if err
                .chain()
                .filter_map(|e| e.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                // The reader went away (`airlock search ... | head`): end quietly, as `outln!`.
                return ExitCode::from(141);
            }
            // An error can quote a repository's or an issue's text (a file name, a front-matter
            // key): shown escaped, like every such text.
            eprintln!(
                "airlock: error: {}",
                airlock_policies::terminal::escaped(&error_text(&err))
            );
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// An error and its causes on one line, `a: b: c`, leaving out a cause whose text the message
/// before it already ends with (many error types print their source in their own message).
pub(crate) fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "Broken pipe");
        #[derive(Debug)]
        struct Repeats(std::io::Error);
        impl std::fmt::Display for Repeats {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "writing output: {}", self.0)
            }
        }
        impl std::error::Error for Repeats {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = anyhow::Error::new(Repeats(io));
        assert_eq!(error_text(&err), "writing output: Broken pipe");
        let err = anyhow::anyhow!("no such file").context("opening x");
        assert_eq!(error_text(&err), "opening x: no such file");
    }
}
