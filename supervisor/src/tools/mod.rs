//! The supervisor's tools: each [`Tool`]'s spec and how its result is screened, and one
//! handler module per family (`files`, `tests`, `delegate`, `history`, `open_pr`), each
//! returning a [`ToolReply`]. Handlers reach the run through a [`Toolbox`]: its settings, its
//! capabilities and its [`Ledger`]; they never see the loop.
//!
//! A tool's name is spelled once, in `crate::tool_name` (the read tools' in `airlock-reader`,
//! `open_pr`'s in `airlock-schemas`), below both this module and `agents`.

mod delegate;
mod files;
pub mod history;
mod open_pr;
mod submit_review;
mod tests;

pub use crate::tool_name::Tool;
pub use submit_review::ReviewTarget;

use crate::config::Config;
use crate::delegate::ReaderLauncher;
use crate::ledger::{Ledger, Result};
use crate::ports::{Baseline, History, PrSink, Retrieval, TestRunner, Worktree};
use crate::reference_repos::ReferenceRepos;
use crate::tool_name::tool_list;
use airlock_audit::{Event, SourceKind, sha256_hex};
use airlock_model::{ChatModel, ToolCall, ToolSpec};
use airlock_policies::Policy;
use airlock_reader::tools::{ReadArgs, decode_args};
use serde::Deserialize;

/// Where a tool result came from, for the injection detector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screening {
    /// What kind of text it is.
    pub kind: SourceKind,
    /// Its source as the `injection_suspected` event names it.
    pub source: String,
}

/// Just the `path` of a call's arguments (the audit event names the file a tool touched).
#[derive(Deserialize)]
struct PathArg {
    path: String,
}

impl Tool {
    /// The tool's spec as sent to the model; `Err` when an embedded contract is broken.
    pub fn spec(self) -> std::result::Result<ToolSpec, String> {
        Ok(match self {
            Tool::SearchRepo => files::search_spec(),
            Tool::ReadFile => files::read_spec(),
            Tool::WriteFile => files::write_spec(),
            Tool::EditFile => files::edit_spec(),
            Tool::RunTests => tests::spec(),
            Tool::DelegateRead => delegate::spec(),
            Tool::SearchHistory => history::spec(),
            Tool::OpenPr => open_pr::spec()?,
            Tool::SubmitReview => submit_review::spec()?,
        })
    }

    /// How the result of `call` is screened: a file read is file text under its path, a search
    /// is snippets under its query, anything else tool output under the tool's name.
    pub fn screening(self, call: &ToolCall) -> Screening {
        match self {
            Tool::ReadFile => Screening {
                kind: SourceKind::File,
                source: decode_args::<ReadArgs>(call)
                    .map(|a| a.path)
                    .unwrap_or_default(),
            },
            Tool::SearchRepo => Screening {
                kind: SourceKind::SearchSnippet,
                source: format!(
                    "search:{}",
                    decode_args::<files::SearchCall>(call)
                        .map(|a| a.query)
                        .unwrap_or_default()
                ),
            },
            // Pull request titles are repository text, screened like search snippets.
            Tool::SearchHistory => Screening {
                kind: SourceKind::SearchSnippet,
                source: format!(
                    "history:{}",
                    decode_args::<history::HistoryArgs>(call)
                        .map(|a| a.query)
                        .unwrap_or_default()
                ),
            },
            other => Screening {
                kind: SourceKind::ToolOutput,
                source: format!("tool:{}", other.name()),
            },
        }
    }

    /// The file `call` touches, for the audit event: reads, writes and edits name one.
    fn touched_path(self, call: &ToolCall) -> Option<String> {
        match self {
            Tool::ReadFile | Tool::WriteFile | Tool::EditFile => {
                serde_json::from_value::<PathArg>(call.arguments.clone())
                    .ok()
                    .map(|a| a.path)
            }
            _ => None,
        }
    }
}

/// Screening of a call to a tool that does not exist.
fn unknown_screening(call: &ToolCall) -> Screening {
    Screening {
        kind: SourceKind::ToolOutput,
        source: format!("tool:{}", call.name),
    }
}

/// The supervisor's whole tool list, as sent to the model.
pub fn specs() -> std::result::Result<Vec<ToolSpec>, String> {
    specs_of(&Tool::ALL)
}

/// The specs of `tools` (an agent's), in that order.
pub fn specs_of(tools: &[Tool]) -> std::result::Result<Vec<ToolSpec>, String> {
    tools.iter().copied().map(Tool::spec).collect()
}

/// A tool's effect on the loop besides its result text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// The loop goes on.
    Continue,
    /// A budget or a terminal broker code ends the run as an escalation, for this reason.
    End(String),
    /// A budget that parks the run (to be resumed with more of it), for this reason.
    Park(crate::park::ParkedOn, String),
}

/// What a successful read returned, for the `tool_call` event (the `file_read` event has the
/// rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFigures {
    /// Bytes of file content returned (not of the rendered result).
    pub content_bytes: u64,
    /// Whether the read cap cut the window short.
    pub truncated: bool,
    /// The file's line shown on the reply's second line (the first is the read's header): the
    /// approver is told a finding's line in the file, not in the reply.
    pub first_line: u64,
}

/// What a tool hands back: the result text the model sees, whether it is an error result, its
/// effect on the loop, and for a read what it returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReply {
    /// The result text.
    pub text: String,
    /// An error result.
    pub is_error: bool,
    /// Whether the run goes on.
    pub flow: Flow,
    /// For a successful read: its figures.
    pub read: Option<ReadFigures>,
}

impl ToolReply {
    /// A result.
    pub fn ok(text: impl Into<String>) -> Self {
        ToolReply {
            text: text.into(),
            is_error: false,
            flow: Flow::Continue,
            read: None,
        }
    }

    /// An error result; the run goes on.
    pub fn error(text: impl Into<String>) -> Self {
        ToolReply {
            text: text.into(),
            is_error: true,
            flow: Flow::Continue,
            read: None,
        }
    }

    /// An error result that ends the run for `reason`.
    pub fn ending(text: impl Into<String>, reason: impl Into<String>) -> Self {
        ToolReply {
            text: text.into(),
            is_error: true,
            flow: Flow::End(reason.into()),
            read: None,
        }
    }
}

/// The fixed facts of the run a handler needs.
#[derive(Debug, Clone, Copy)]
pub struct RunSettings<'t> {
    /// The repository as the operator gave it.
    pub repo: &'t str,
    /// The pinned commit.
    pub base_commit: &'t str,
    /// The configuration (budgets, tests).
    pub config: &'t Config,
}

/// Everything a tool handler reaches.
pub struct Toolbox<'t> {
    /// The run's settings.
    pub run: RunSettings<'t>,
    /// The tools the run's agent is offered; a call to any other is refused.
    pub offered: &'t [Tool],
    /// The model (a reader's calls are relayed to it).
    pub model: &'t dyn ChatModel,
    /// Retrieval over the checkout.
    pub retrieval: &'t dyn Retrieval,
    /// The merged pull requests up to the pin.
    pub history: &'t dyn History,
    /// The worktree.
    pub worktree: &'t dyn Worktree,
    /// The write policy.
    pub policy: &'t Policy,
    /// The sandboxed test runner.
    pub tests: &'t dyn TestRunner,
    /// Reader workers.
    pub readers: &'t dyn ReaderLauncher,
    /// The broker.
    pub broker: &'t mut dyn PrSink,
    /// The run's reference repositories (read-only exemplars).
    pub references: &'t ReferenceRepos,
    /// What the test runner established before the first turn.
    pub baseline: Baseline,
    /// For a reviewer: the pull request under review.
    pub review: Option<ReviewTarget>,
    /// The run's ledger.
    pub ledger: Ledger<'t>,
}

impl Toolbox<'_> {
    /// Execute one call and keep its records: the trajectory's call and result, the screening
    /// of its result, the audit event, the progress line. The reply goes back to the model.
    pub fn call(&mut self, call: &ToolCall) -> Result<ToolReply> {
        self.ledger
            .record(&crate::trajectory::TrajectoryEvent::ToolCall { call })?;
        let tool = Tool::from_name(&call.name).filter(|t| self.offered.contains(t));
        // Named by the tool enum, never by the model's text, which could hold escapes.
        let _span =
            tracing::debug_span!("tool_call", tool = tool.map_or("unknown", Tool::name)).entered();
        let reply = match tool {
            Some(tool) => self.dispatch(tool, call)?,
            None => ToolReply::error(format!(
                "no such tool `{}`; the tools are {}",
                call.name,
                tool_list(self.offered)
            )),
        };
        let screening = tool.map_or_else(|| unknown_screening(call), |t| t.screening(call));
        // The detector scans the text as it is; the model is shown it with hidden characters
        // made visible.
        self.ledger.screen_shown(
            screening.kind,
            &screening.source,
            &reply.text,
            reply.read.map(|r| r.first_line),
        )?;
        let reply = ToolReply {
            text: self.ledger.shown(&screening.source, &reply.text)?,
            ..reply
        };
        self.ledger.append(Event::ToolCall {
            tool: call.name.clone(),
            args_digest: sha256_hex(call.arguments_text().as_bytes()),
            result_bytes: reply.text.len() as u64,
            truncated: reply.read.is_some_and(|r| r.truncated),
            bytes_returned: reply.read.map(|r| r.content_bytes),
            path: tool.and_then(|t| t.touched_path(call)),
        })?;
        self.ledger
            .tool_finished(&call.name, reply.is_error, &reply.text);
        Ok(reply)
    }

    fn dispatch(&mut self, tool: Tool, call: &ToolCall) -> Result<ToolReply> {
        match tool {
            Tool::SearchRepo => files::search_repo(self, call),
            Tool::ReadFile => files::read_file(self, call),
            Tool::WriteFile => files::write_file(self, call),
            Tool::EditFile => files::edit_file(self, call),
            Tool::RunTests => tests::run_tests(self, call),
            Tool::DelegateRead => delegate::delegate_read(self, call),
            Tool::SearchHistory => history::search_history(self, call),
            Tool::OpenPr => open_pr::open_pr(self, call),
            Tool::SubmitReview => submit_review::submit_review(self, call),
        }
    }
}

/// Decode `call`'s arguments, or the error reply the model gets for them.
fn args<T: serde::de::DeserializeOwned>(call: &ToolCall) -> std::result::Result<T, ToolReply> {
    decode_args(call).map_err(ToolReply::error)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn every_tool_is_found_by_its_name_and_the_list_reads_as_before() {
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
        assert_eq!(Tool::from_name("rm_rf"), None);
        assert_eq!(
            tool_list(&Tool::ALL),
            "search_repo, read_file, write_file, edit_file, run_tests, delegate_read, search_history \
             and open_pr"
        );
        assert_eq!(
            tool_list(&Tool::REVIEWER),
            "search_repo, read_file, delegate_read and submit_review"
        );
        assert_eq!(Tool::from_name("submit_review"), Some(Tool::SubmitReview));
        let specs = specs().unwrap_or_default();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let expected: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, expected);
    }
}
