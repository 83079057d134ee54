//! The `airlock-broker` command line: `serve` for supervisors, and the approver's `queue`,
//! `show`, `approve`, `deny`, `publish`, `abandon` and `expire`, and `ui`, the same
//! operations as a web page.
//!
//! Exit codes: 0 done; 1 the action was refused (unknown item, wrong state, bad reason);
//! 2 configuration or operational failure.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::BrokerConfig;
use crate::error::Error;
use crate::rules::PolicyRules;
use crate::sandboxed::SandboxExecutor;
use crate::service::{AuditJournal, Broker, unix_now};
use crate::store::QueueItem;

/// Exit code when the requested action was refused.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code for configuration and operational failures.
pub const EXIT_ERROR: u8 = 2;

/// `--version`: the crate version and the commit it was built from (`build.rs`).
const VERSION: &str = env!("AIRLOCK_VERSION");

/// Every exit status `airlock-broker` uses, shown at the end of `--help` (and in docs/cli.md).
const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    done (also when the output's reader went away, as with `show 3 | head`)
  1    refused: an unknown item, a wrong state, a missing reason or confirmation, an unknown
       approver, an attestation that does not verify; gate test: an example failed
  2    error: a usage mistake, a configuration or operational failure";

#[derive(Debug, Parser)]
#[command(
    name = "airlock-broker",
    version = VERSION,
    about = "Checks every open_pr claim, runs the witness tests and queues pull requests for a human.",
    after_help = EXIT_CODES_HELP
)]
struct Cli {
    /// The broker configuration (default: $AIRLOCK_BROKER_CONFIG, else /etc/airlock/broker.toml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Log more on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, display_order = 900)]
    verbose: u8,
    /// Log only errors.
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

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Listen on the configured Unix socket for supervisors (and on `listen` with mutual TLS
    /// when broker.toml has it).
    Serve,
    /// List the queue as a table; every agent text is shown with control and invisible
    /// characters escaped (`\u{1b}`).
    Queue {
        /// Print the rows as JSON for scripts: the raw text, not escaped (non-ASCII written as
        /// `\u` escapes, so the document parses back to exactly what the agent sent).
        #[arg(long)]
        json: bool,
    },
    /// Show one queued pull request: issue, title and body, diffstat, claimed and computed
    /// digest, flags, witness steps, judge score and the branch approval pushes; then the
    /// arguments verbatim, the test evidence and the diff. Every text from the agent or the
    /// repository is shown with control and invisible characters escaped (`\u{1b}`, `\u{d}`,
    /// `\u{202e}`), so none can hide a line.
    Show {
        /// Queue item id.
        id: i64,
        /// Colour the diff: `auto` only on a terminal and never with NO_COLOR set.
        #[arg(long, value_enum, default_value = "auto")]
        color: Color,
        /// Print the item as JSON for scripts: the raw text, not escaped (non-ASCII written as
        /// `\u` escapes, so the document parses back to exactly what the agent sent).
        #[arg(long)]
        json: bool,
    },
    /// Approve a queued pull request: commit, push, and open the draft pull request. A risky
    /// item (a finding, a flag, a gate note, a test_change_reason) needs --confirm-risk and
    /// --reason; a senior-route item (a test_change_reason other than none) needs two approvals
    /// by two registered approvers, one of them senior, and stays queued after the first.
    Approve {
        /// Queue item id.
        id: i64,
        /// One line saying why (required on a risky item).
        #[arg(long)]
        reason: Option<String>,
        /// Confirm that you saw the item's risk signals (required on a risky item).
        #[arg(long)]
        confirm_risk: bool,
        /// Who approves (default: $USER); a registered approver when any is registered.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Deny a queued pull request; the reason goes back to the run.
    Deny {
        /// Queue item id.
        id: i64,
        /// One line saying why (required).
        #[arg(long)]
        reason: String,
        /// Who denies (default: $USER); a registered approver when any is registered.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Request changes on a queue item: a queued one is denied with the feedback as the
    /// reason; a published one keeps its branch and pull request, and `airlock run --follow-up
    /// N` answers the feedback there with a new commit on the same branch.
    RequestChanges {
        /// Queue item id.
        id: i64,
        /// What the reviewer wants changed (shown to the follow-up's agent as data).
        #[arg(long)]
        feedback: String,
        /// Who requests them (default: $USER); a registered approver when any is registered.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Retry the publication (commit, push, draft pull request) of an approved item whose
    /// publication failed (`publish_failed`).
    Publish {
        /// Queue item id.
        id: i64,
    },
    /// End an item whose publication failed: final, recorded with who and why; the run is
    /// told APPROVAL_DENIED with the reason.
    Abandon {
        /// Queue item id.
        id: i64,
        /// One line saying why (required).
        #[arg(long)]
        reason: String,
        /// Who abandons it (default: $USER); a registered approver when any is registered.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// The named approvers: `approver add NAME [--senior]` prints their token once (the
    /// broker keeps only its hash), `approver list`, `approver remove NAME`. Once any is
    /// registered, every decision must name one (--by or $USER) and the web page logs in only
    /// with their tokens.
    Approver {
        #[command(subcommand)]
        command: ApproverCommand,
    },
    /// The witness attestation of a queue item: an in-toto statement of the patched tree, the
    /// pin, the digest, the policy, the gates, each witness step and the decision. Printed, or
    /// written with its SSH signature (`--out DIR`), or checked (`--verify FILE`: exit 0 only
    /// for an unchanged statement of the item whose FILE.sig verifies).
    Attest {
        /// Queue item id.
        id: i64,
        /// Write DIR/N.intoto.json and, with [signing], DIR/N.intoto.json.sig.
        #[arg(long, value_name = "DIR", conflicts_with = "verify")]
        out: Option<PathBuf>,
        /// Check FILE (and FILE.sig beside it) against the item; needs [signing].
        #[arg(long, value_name = "FILE")]
        verify: Option<PathBuf>,
    },
    /// Expire queued pull requests older than the configured queue age.
    Expire,
    /// List the claims workers hold or held on issues (`airlock watch`, `webhook`, `batch`):
    /// repository, issue, state (held, done, released), holder and lease end.
    Claims {
        /// Print the claims as JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The shared work queue that `airlock worker` takes issues from: `work add REPO N...`
    /// queues issues, `work list` shows each with its claim.
    Work {
        #[command(subcommand)]
        command: WorkCommand,
    },
    /// Tools for writing a gate (the organisation's own rules, `[[repositories.NAME.gates]]`).
    Gate {
        #[command(subcommand)]
        command: GateCommand,
    },
    /// Serve the approver's and the security team's web page: the queue, each item (diff,
    /// witness, digest, findings, judge) with approve, deny and request changes, and the
    /// injection findings with their triage. Each approver logs in with their own token
    /// (`approver add`). While none is registered, one operator token logs in instead: printed
    /// at start unless `--token-file` names one, its sessions deciding as `--by` or `$USER`.
    Ui {
        /// Address to listen on (loopback by default; the page is plain HTTP).
        #[arg(long, default_value = "127.0.0.1:8642")]
        listen: std::net::SocketAddr,
        /// Read the login token from this file (its first line, 16 characters or more)
        /// instead of generating one.
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// The name the operator token's sessions decide as, while no approver is registered
        /// (default: $USER).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Print a shell completion script for airlock-broker (e.g. `airlock-broker completions
    /// bash > ~/.local/share/bash-completion/completions/airlock-broker`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write airlock-broker's man pages (airlock-broker.1 and one per subcommand) into a
    /// directory.
    Man {
        /// Where to write them (created if missing).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ApproverCommand {
    /// Add a named approver and print their login token, once.
    Add {
        /// The name decisions are recorded as (no whitespace or control characters).
        name: String,
        /// A senior approver: one of the two approvals a senior-route item needs.
        #[arg(long)]
        senior: bool,
    },
    /// List the approvers: name, senior or not, when added (never a token).
    List {
        /// Print the approvers as JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Remove an approver: their token and web sessions stop working; their approvals stay.
    Remove {
        /// The approver's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum WorkCommand {
    /// Queue issues of a repository for the workers (an issue already queued stays as it is;
    /// a done one is not worked again).
    Add {
        /// The repository as broker.toml names it (`[repositories."NAME"]`).
        repository: String,
        /// Issue numbers on the forge.
        #[arg(required = true, value_parser = clap::value_parser!(u64).range(1..))]
        issues: Vec<u64>,
    },
    /// List the work queue, oldest first: each issue, when it was queued, how often a worker
    /// took it, and its claim (ready, held, lapsed, done, released).
    List {
        /// Print the entries as JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum GateCommand {
    /// Run a gate's examples and print each verdict; exit 1 when one does not get the verdict
    /// it expects. Needs no broker configuration.
    Test {
        /// The gate: a component (`.wasm`) or WebAssembly text (`.wat`, a core module
        /// implementing the gate world by hand, or a component), compiled here.
        gate: PathBuf,
        /// The examples file (`[[match]]` and `[[not_match]]`, as the broker checks at load).
        #[arg(long, value_name = "FILE")]
        examples: PathBuf,
        /// Fuel of one call.
        #[arg(long, default_value_t = airlock_gates::DEFAULT_GATE_FUEL)]
        fuel: u64,
        /// Memory cap of one call (`64MiB`, `512KiB`, `1GiB`).
        #[arg(long, default_value = crate::config::DEFAULT_GATE_MEMORY)]
        memory: String,
        /// Wall-clock limit of one call.
        #[arg(long, default_value = crate::config::DEFAULT_GATE_TIMEOUT)]
        timeout: String,
    },
}

/// `gate test`: load the gate, run its examples, print them; 0 when all pass, 1 when one
/// fails, 2 when the gate or its examples cannot be loaded.
fn gate_command(command: GateCommand) -> ExitCode {
    let GateCommand::Test {
        gate,
        examples,
        fuel,
        memory,
        timeout,
    } = command;
    let report = crate::config::gate_limits(fuel, &memory, &timeout)
        .map_err(|e| Error::BadArgument(format!("--{e}")))
        .and_then(|limits| crate::gates::test_gate(&gate, &examples, limits));
    match report {
        Ok(report) => {
            print!("{}", crate::view::render_gate_test(&report));
            ExitCode::from(if report.passed() { 0 } else { EXIT_REFUSED })
        }
        Err(err) => {
            eprintln!(
                "airlock-broker: error: {}",
                airlock_policies::terminal::escaped(&err.to_string())
            );
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// `airlock-broker completions SHELL`: the script clap generates for the whole command tree.
fn completions(shell: clap_complete::Shell) -> crate::Result<()> {
    use clap::CommandFactory;
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut Cli::command(), "airlock-broker", &mut out);
    out.flush().map_err(Error::io("writing to stdout"))
}

/// `airlock-broker man --dir DIR`: `airlock-broker.1` and `airlock-broker-SUBCOMMAND.1` for
/// every visible subcommand, each path printed once written.
fn man_pages(dir: &std::path::Path) -> crate::Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let command = Cli::command();
    let mut pages = vec![("airlock-broker".to_owned(), command.clone())];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("airlock-broker-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    let mut out = std::io::stdout().lock();
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut text = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut text)
            .map_err(Error::io(format!("rendering {name}.1")))?;
        std::fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))?;
        writeln!(out, "{}", path.display()).map_err(Error::io("writing to stdout"))?;
    }
    Ok(())
}

fn config_path(cli: &Cli) -> PathBuf {
    cli.config
        .clone()
        .or_else(|| std::env::var_os("AIRLOCK_BROKER_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/airlock/broker.toml"))
}

/// Build the production broker for `config`.
pub fn production_broker(config: BrokerConfig) -> crate::Result<Broker> {
    let _span = tracing::debug_span!("open_broker").entered();
    let store = crate::store::open(&config)?;
    tracing::debug!("queue store open");
    let rules = PolicyRules::load(config.policy.as_deref())?;
    let journal = AuditJournal::open(&config.audit_log)?;
    tracing::debug!(audit_log = %config.audit_log.display(), "audit log open");
    let executor = SandboxExecutor::new(
        config.witness_ro.clone(),
        config
            .witness_env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    Ok(Broker::new(
        config,
        store,
        Box::new(rules),
        Box::new(executor),
        Box::new(journal),
        Box::new(crate::forges::Forges::default()),
    ))
}

use crate::approver::decider;

/// Parse the process arguments and run; returns the exit code.
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
    let name = matches.subcommand_name().unwrap_or_default();
    tracing::debug!(version = VERSION, command = name, "airlock-broker starting");
    // Closes (and logs its time with -v) when the command is done.
    let _span = tracing::info_span!("command", command = name).entered();
    let path = config_path(&cli);
    // What needs no configuration runs before it is read.
    let result = match cli.command {
        Command::Gate { command } => return gate_command(command),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man_pages(&dir),
        command => {
            tracing::debug!(config = %path.display(), "reading the broker configuration");
            BrokerConfig::load(&path)
                .and_then(production_broker)
                .and_then(|broker| dispatch(broker, command))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`airlock-broker show 3 | head`): it has what it wanted.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(err) => {
            // An error can quote a text the agent sent (a path, a branch): shown escaped.
            eprintln!(
                "airlock-broker: error: {}",
                airlock_policies::terminal::escaped(&err.to_string())
            );
            let refused = matches!(
                err,
                Error::UnknownQueueItem(_)
                    | Error::WrongState { .. }
                    | Error::BadReason
                    | Error::BadFeedback { .. }
                    | Error::FollowUpStale { .. }
                    | Error::MissingForgeToken { .. }
                    | Error::BadApprovalReason
                    | Error::UnknownApprover(_)
                    | Error::ApproverExists(_)
                    | Error::BadApproverName(_)
                    | Error::RiskNotConfirmed { .. }
                    | Error::SeniorRouteWithoutApprovers { .. }
                    | Error::AlreadyApproved { .. }
                    | Error::AlreadyPublished { .. }
                    | Error::AttestationRefused { .. }
                    | Error::SigningNotConfigured { .. }
            );
            ExitCode::from(if refused { EXIT_REFUSED } else { EXIT_ERROR })
        }
    }
}

fn dispatch(broker: Broker, command: Command) -> crate::Result<()> {
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::Io {
        context: "writing to stdout".to_owned(),
        source: e,
    };
    match command {
        // Handled before the configuration is read (`run`).
        Command::Gate { .. } | Command::Completions { .. } | Command::Man { .. } => Ok(()),
        Command::Serve => {
            // Every gate loads, its examples passing, before anything is taken in: a gate
            // that does not is a configuration error, never a gate skipped.
            broker.gates()?;
            // A key that cannot sign keeps `serve` down before anything is committed.
            crate::signing::check_at_start(
                broker.config().signing.as_ref(),
                broker
                    .config()
                    .repositories
                    .values()
                    .map(|r| r.author_email.as_str()),
            )?;
            // Neither a broken repository nor a failing publication keeps `serve` down: each is
            // reported here and fails only what depends on it.
            for (repository, problem) in broker.check_repositories() {
                eprintln!("airlock-broker: repository {repository:?}: {problem}");
            }
            let resumed = broker.resume_publications();
            if !resumed.is_empty() {
                eprintln!("airlock-broker: resumed publication of queue items {resumed:?}");
            }
            // The TLS files are read and the port bound before the socket appears: a broken
            // `[tls]` keeps the broker down, and a supervisor that finds the socket finds the
            // network listener too.
            let network = match &broker.config().network {
                Some(network) => Some((
                    crate::server::bind_tls(&network.listen)?,
                    crate::tls::server_config(&network.tls)?,
                )),
                None => None,
            };
            let work_dir = broker.config().witness_work_dir();
            let listener = crate::server::bind(&broker.config().socket, || {
                crate::witness::remove_stale_scratch(&work_dir).map(|_| ())
            })?;
            eprintln!(
                "airlock-broker: listening on {}",
                broker.config().socket.display()
            );
            let broker = Arc::new(broker);
            if let Some((tcp, tls)) = network {
                let address = tcp
                    .local_addr()
                    .map_err(Error::io("reading the network listener's address"))?;
                eprintln!("airlock-broker: listening on tls://{address} (mutual TLS)");
                let serving = broker.clone();
                std::thread::spawn(move || {
                    if let Err(e) = crate::server::serve_tls(serving, tcp, tls) {
                        eprintln!("airlock-broker: the network listener stopped: {e}");
                    }
                });
            }
            let resuming = broker.clone();
            std::thread::spawn(move || {
                if let Err(e) = resuming.resume_intakes() {
                    eprintln!("airlock-broker: resuming interrupted intakes: {e}");
                }
            });
            crate::server::serve(broker, listener)
        }
        Command::Work {
            command: WorkCommand::Add { repository, issues },
        } => {
            let keys: Vec<airlock_protocol::IssueKey> = issues
                .iter()
                .map(|&issue_number| airlock_protocol::IssueKey {
                    repository: repository.clone(),
                    issue_number,
                })
                .collect();
            let added = broker.enqueue_work(&keys, &decider(None)?)?;
            writeln!(
                out,
                "queued {added} new of {} issues of {}",
                keys.len(),
                airlock_policies::terminal::escaped(&repository)
            )
            .map_err(w)
        }
        Command::Work {
            command: WorkCommand::List { json },
        } => {
            let entries = broker.work()?;
            let text = if json {
                format!("{}\n", to_json(&entries)?)
            } else {
                crate::view::render_work(&entries, unix_now())
            };
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(w)
        }
        Command::Claims { json } => {
            let claims = broker.claims()?;
            let text = if json {
                format!("{}\n", to_json(&claims)?)
            } else {
                let now = unix_now();
                claims
                    .iter()
                    .map(|c| {
                        let state = match c.state {
                            airlock_protocol::ClaimState::Held if c.lease_expires_at <= now => {
                                "lapsed"
                            }
                            airlock_protocol::ClaimState::Held => "held",
                            airlock_protocol::ClaimState::Done => "done",
                            airlock_protocol::ClaimState::Released => "released",
                        };
                        format!(
                            "{}#{} {state} by {} (lease to {})\n",
                            airlock_policies::terminal::escaped(&c.issue.repository),
                            c.issue.issue_number,
                            airlock_policies::terminal::escaped(&c.holder),
                            c.lease_expires_at
                        )
                    })
                    .collect()
            };
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(w)
        }
        Command::Queue { json } => {
            let rows = crate::approver::queue_rows(&broker)?;
            let text = if json {
                format!("{}\n", to_json(&rows)?)
            } else {
                crate::view::render_queue(&rows, unix_now())
            };
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(w)
        }
        Command::Show { id, color, json } => {
            let (view, score) = crate::approver::item_view(&broker, id)?;
            let text = if json {
                format!("{}\n", to_json(&view)?)
            } else {
                crate::view::render_item(&view, score.as_ref(), use_colour(color))
            };
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(w)
        }
        Command::Approve {
            id,
            reason,
            confirm_risk,
            by,
        } => {
            let request = crate::decisions::ApprovalRequest {
                by: decider(by.as_deref())?,
                reason,
                confirm_risk,
            };
            match broker.approve(id, &request)? {
                crate::decisions::Approval::Published(item) => {
                    write_published(&mut out, &broker, "approved", &item).map_err(w)
                }
                crate::decisions::Approval::Pending { item, approvals } => writeln!(
                    out,
                    "approval recorded on {}, which stays queued: {}",
                    item.id,
                    airlock_policies::terminal::escaped_line(&crate::risk::pending_words(
                        &approvals
                    ))
                )
                .map_err(w),
            }
        }
        Command::Approver { command } => approver_command(&broker, command, &mut out),
        Command::Publish { id } => {
            let item = broker.publish_requested(id)?;
            write_published(&mut out, &broker, "published", &item).map_err(w)
        }
        Command::Abandon { id, reason, by } => {
            let item = broker.abandon(id, &decider(by.as_deref())?, &reason)?;
            writeln!(
                out,
                "abandoned {}: {}",
                item.id,
                item.abandon_reason.unwrap_or_default()
            )
            .map_err(w)
        }
        Command::Deny { id, reason, by } => {
            let item = broker.deny(id, &decider(by.as_deref())?, &reason)?;
            writeln!(
                out,
                "denied {}: {}",
                item.id,
                item.reason.unwrap_or_default()
            )
            .map_err(w)
        }
        Command::RequestChanges { id, feedback, by } => {
            let item = broker.request_changes(id, &decider(by.as_deref())?, &feedback)?;
            writeln!(
                out,
                "changes requested on {} ({}); follow it up with: airlock run --follow-up {}",
                item.id,
                item.status.as_str(),
                item.id
            )
            .map_err(w)
        }
        Command::Ui {
            listen,
            token_file,
            by,
        } => {
            // Named approvers log in with their own tokens; the operator token only while
            // there are none.
            let operator = if broker.approvers()?.is_empty() {
                let name = decider(by.as_deref())?;
                let (token, generated) = match &token_file {
                    Some(path) => (crate::ui::read_token_file(path)?, false),
                    None => (crate::ui::random_token()?, true),
                };
                Some((crate::ui::OperatorLogin { token, name }, generated))
            } else {
                if token_file.is_some() {
                    eprintln!(
                        "airlock-broker: warning: --token-file is ignored: approvers are registered, and each logs in with their own token"
                    );
                }
                None
            };
            let listener = std::net::TcpListener::bind(listen)
                .map_err(Error::io(format!("listening on {listen}")))?;
            let address = listener
                .local_addr()
                .map_err(Error::io("reading the UI's address"))?;
            if !address.ip().is_loopback() {
                eprintln!(
                    "airlock-broker: warning: the ui listens on {address}, not a loopback address; the page is plain HTTP"
                );
            }
            eprintln!("airlock-broker: ui at http://{address}/");
            match &operator {
                Some((login, generated)) => {
                    if *generated {
                        eprintln!("airlock-broker: ui login token: {}", login.token);
                    }
                    eprintln!(
                        "airlock-broker: no approver is registered: the login token's sessions decide as {} (add approvers with `airlock-broker approver add NAME`)",
                        airlock_policies::terminal::escaped_line(&login.name)
                    );
                }
                None => eprintln!(
                    "airlock-broker: log in with a named approver's token (`airlock-broker approver list`)"
                ),
            }
            let ui =
                crate::ui::Ui::new(Arc::new(broker), operator.map(|(login, _)| login), address);
            crate::ui::serve(Arc::new(ui), listener)
        }
        Command::Attest {
            id,
            out: dir,
            verify,
        } => attest_command(&broker, id, dir, verify, &mut out),
        Command::Expire => {
            let expired = broker.expire()?;
            for item in expired {
                writeln!(out, "expired {} (run {})", item.id, item.run_id).map_err(w)?;
            }
            Ok(())
        }
    }
}

/// `attest N [--out DIR | --verify FILE]`.
fn attest_command(
    broker: &Broker,
    id: i64,
    dir: Option<PathBuf>,
    verify: Option<PathBuf>,
    out: &mut impl Write,
) -> crate::Result<()> {
    let w = |e: std::io::Error| Error::Io {
        context: "writing to stdout".to_owned(),
        source: e,
    };
    let shown = |p: &std::path::Path| {
        airlock_policies::terminal::escaped(&p.display().to_string()).into_owned()
    };
    if let Some(file) = verify {
        crate::attestation::verify(broker, id, &file)?;
        return writeln!(
            out,
            "{} is the broker's signed statement of queue item {id}",
            shown(&file)
        )
        .map_err(w);
    }
    let Some(dir) = dir else {
        let statement = crate::attestation::statement(broker, id)?;
        return out.write_all(&statement.to_bytes()?).map_err(w);
    };
    let written = crate::attestation::write(broker, id, &dir)?;
    match &written.signature {
        Some(sig) => writeln!(
            out,
            "wrote {} and its signature {}",
            shown(&written.statement),
            shown(sig)
        ),
        None => writeln!(
            out,
            "wrote {} unsigned: broker.toml has no [signing] key",
            shown(&written.statement)
        ),
    }
    .map_err(w)
}

/// `approver add|list|remove`.
fn approver_command(
    broker: &Broker,
    command: ApproverCommand,
    out: &mut impl Write,
) -> crate::Result<()> {
    let w = |e: std::io::Error| Error::Io {
        context: "writing to stdout".to_owned(),
        source: e,
    };
    let escaped = airlock_policies::terminal::escaped_line;
    match command {
        ApproverCommand::Add { name, senior } => {
            let added = broker.add_approver(&name, senior)?;
            writeln!(
                out,
                "added approver {}{}; their login token (shown only now; the broker keeps only its hash):\n{}",
                escaped(&added.approver.name),
                if senior { " (senior)" } else { "" },
                added.token
            )
            .map_err(w)
        }
        ApproverCommand::List { json } => {
            let approvers = broker.approvers()?;
            if json {
                return writeln!(out, "{}", to_json(&approvers)?).map_err(w);
            }
            if approvers.is_empty() {
                return writeln!(
                    out,
                    "no approvers registered (add one with `airlock-broker approver add NAME [--senior]`)"
                )
                .map_err(w);
            }
            for a in approvers {
                writeln!(
                    out,
                    "{}\t{}\tadded {}",
                    escaped(&a.name),
                    if a.senior { "senior" } else { "-" },
                    a.added_at
                )
                .map_err(w)?;
            }
            Ok(())
        }
        ApproverCommand::Remove { name } => {
            let removed = broker.remove_approver(&name)?;
            writeln!(
                out,
                "removed approver {}: their token and sessions no longer work",
                escaped(&removed.name)
            )
            .map_err(w)
        }
    }
}

fn write_published(
    out: &mut impl Write,
    broker: &Broker,
    verb: &str,
    item: &QueueItem,
) -> std::io::Result<()> {
    if let Some(review) = &item.review {
        return writeln!(
            out,
            "{verb} {}: review of {} posted{}",
            item.id,
            review.pull,
            item.pr_url
                .as_deref()
                .map(|u| format!(": {}", airlock_policies::terminal::escaped_line(u)))
                .unwrap_or_default()
        );
    }
    writeln!(
        out,
        "{verb} {}: {}",
        item.id,
        airlock_policies::terminal::escaped_line(&broker.published_words(item))
    )
}

pub use crate::view::render_judge_score;

/// Whether `show` colours its diff: `--color always` does (an explicit flag overrides
/// `NO_COLOR`, as no-color.org asks); `auto` only on a terminal and only without `NO_COLOR`.
fn use_colour(color: Color) -> bool {
    match color {
        Color::Always => true,
        Color::Never => false,
        // A terminal, and none of NO_COLOR, CLICOLOR=0 or TERM=dumb (CLICOLOR_FORCE forces it).
        Color::Auto => {
            anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
        }
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> crate::Result<String> {
    crate::view::to_ascii_json(value).map_err(|e| Error::Io {
        context: "serializing the JSON output".to_owned(),
        source: e.into(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
