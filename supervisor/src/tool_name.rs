//! The tools the supervisor's model may call, by name: the one [`Tool`] enum that agent
//! definitions, parked runs and the tool loop share. What each tool does, its spec and how its
//! result is screened belong to `crate::tools`, which implements them; this module sits below
//! both `agents` and `tools` so neither has to import the other for the names.
//!
//! A tool's name is spelled once: the read tools' in `airlock-reader` (the reader offers exactly
//! those), `open_pr`'s in `airlock-schemas`, the rest here.

use airlock_reader::ReadTool;
use serde::Deserialize;

/// A tool the supervisor's model may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// Zero-LLM retrieval over the checkout.
    SearchRepo,
    /// A bounded read of a line range.
    ReadFile,
    /// Create or replace one file.
    WriteFile,
    /// Replace exactly one occurrence of a text in one file.
    EditFile,
    /// The test command in the sandbox, narrow or full.
    RunTests,
    /// A read-only reader answering one question.
    DelegateRead,
    /// The merged pull requests before the pin that match a query.
    SearchHistory,
    /// The gated pull request, forwarded to the broker.
    OpenPr,
    /// The reviewer's review of a pull request, forwarded to the broker (its terminal tool).
    SubmitReview,
}

impl Tool {
    /// Every tool, in the order the model is offered them.
    pub const ALL: [Tool; 8] = [
        Tool::SearchRepo,
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::EditFile,
        Tool::RunTests,
        Tool::DelegateRead,
        Tool::SearchHistory,
        Tool::OpenPr,
    ];

    /// The reviewer's tools: read-only ones and its terminal `submit_review`.
    pub const REVIEWER: [Tool; 4] = [
        Tool::SearchRepo,
        Tool::ReadFile,
        Tool::DelegateRead,
        Tool::SubmitReview,
    ];

    /// The name the model calls the tool by.
    pub const fn name(self) -> &'static str {
        match self {
            Tool::SearchRepo => ReadTool::SearchRepo.name(),
            Tool::ReadFile => ReadTool::ReadFile.name(),
            Tool::WriteFile => "write_file",
            Tool::EditFile => "edit_file",
            Tool::RunTests => "run_tests",
            Tool::DelegateRead => "delegate_read",
            Tool::SearchHistory => "search_history",
            Tool::OpenPr => airlock_schemas::OPEN_PR_TOOL_NAME,
            Tool::SubmitReview => "submit_review",
        }
    }

    /// The tool called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL
            .into_iter()
            .chain(Tool::REVIEWER)
            .find(|t| t.name() == name)
    }

    /// Whether calling the tool ends the run's work (an agent definition's `output.tool`).
    pub const fn is_terminal(self) -> bool {
        matches!(self, Tool::OpenPr | Tool::SubmitReview)
    }

    /// Whether the tool changes the worktree or submits it: an agent of the `read-only` tier
    /// may not be offered it.
    pub const fn needs_draft_pr(self) -> bool {
        matches!(self, Tool::WriteFile | Tool::EditFile | Tool::OpenPr)
    }
}

/// A tool is written as its name (in agent definitions and parked runs).
impl serde::Serialize for Tool {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Tool::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "no such tool `{name}`; the tools are {}",
                tool_list(&Tool::ALL)
            ))
        })
    }
}

/// `a, b, ... and z`: the tools' names for a message.
pub(crate) fn tool_list(tools: &[Tool]) -> String {
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}
