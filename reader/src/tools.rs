//! The two read tools, shared by the reader and the supervisor: their specs, the trait the
//! worker executes them through, and the classes of a refused read (`RefusalClass`).

use airlock_model::ToolSpec;
use serde_json::json;

/// The two read tools, the one place their names are spelled: the reader offers exactly these,
/// and the supervisor's own tool list takes them from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadTool {
    /// `search_repo`: zero-LLM retrieval over the checkout.
    SearchRepo,
    /// `read_file`: a bounded read of a line range.
    ReadFile,
}

impl ReadTool {
    /// Both read tools, in the order they are offered.
    pub const ALL: [ReadTool; 2] = [ReadTool::SearchRepo, ReadTool::ReadFile];

    /// The tool's name as the model calls it.
    pub const fn name(self) -> &'static str {
        match self {
            ReadTool::SearchRepo => "search_repo",
            ReadTool::ReadFile => "read_file",
        }
    }

    /// The read tool called `name`, if it is one.
    pub fn from_name(name: &str) -> Option<ReadTool> {
        ReadTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The tool's spec as sent to the model.
    pub fn spec(self) -> ToolSpec {
        match self {
            ReadTool::SearchRepo => search_repo_spec(),
            ReadTool::ReadFile => read_file_spec(),
        }
    }
}

/// The only tool names a reader has.
pub const READER_TOOL_NAMES: [&str; 2] = [ReadTool::SearchRepo.name(), ReadTool::ReadFile.name()];

/// `search_repo`: zero-LLM retrieval over the checkout.
pub fn search_repo_spec() -> ToolSpec {
    ToolSpec {
        name: ReadTool::SearchRepo.name().into(),
        description: "Search the checkout (lexical and structural retrieval, no model). Returns \
                      ranked hits as path, line range, symbol and score. Locate before you read."
            .into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "Words, identifiers or an error message."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most hits (default 8)."}
            }
        }),
    }
}

/// `read_file`: a bounded read of a line range.
pub fn read_file_spec() -> ToolSpec {
    ToolSpec {
        name: ReadTool::ReadFile.name().into(),
        description: "Read lines start_line..=end_line (1-based) of one file of the checkout. \
                      A line range is required; reads are capped at 10 KB and refuse absolute \
                      paths, `..`, symlink escapes, directories and binary files."
            .into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["path", "start_line", "end_line"],
            "properties": {
                "path": {"type": "string", "description": "Path relative to the checkout root."},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1}
            }
        }),
    }
}

/// The reader's whole tool list.
pub fn tool_specs() -> Vec<ToolSpec> {
    ReadTool::ALL.into_iter().map(ReadTool::spec).collect()
}

/// Why a `read_file` call was refused: the bounded reader's own code, or a check the worker
/// makes before reading. Serialised externally tagged (`{"bounded": "parent_segment"}`,
/// `"read_budget_spent"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalClass {
    /// The bounded reader refused the path or the window (absolute path, `..`, a symlink
    /// escape, not found, a directory, a binary file, an empty window, ...).
    Bounded(airlock_checkout::RefusalCode),
    /// The brief's read budget was spent before this call.
    ReadBudgetSpent,
    /// The call's arguments did not decode (a missing path, a wrong type, an unknown field).
    InvalidArguments,
    /// `@reference/<slug>/...` named a slug the run has no reference repository for.
    UnknownReference,
}

impl RefusalClass {
    /// The class as the audit log names it: a bounded reader's code as it serialises
    /// (`parent_segment`), or `read_budget_spent`, `invalid_arguments`, `unknown_reference`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalClass::Bounded(code) => code.as_str(),
            RefusalClass::ReadBudgetSpent => "read_budget_spent",
            RefusalClass::InvalidArguments => "invalid_arguments",
            RefusalClass::UnknownReference => "unknown_reference",
        }
    }
}

impl std::fmt::Display for RefusalClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused read: its class, and the text the model is shown (`<class>: <why>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRefused {
    /// Why.
    pub class: RefusalClass,
    /// The message handed to the model as the call's error result.
    pub message: String,
}

impl ReadRefused {
    /// A refusal of `class` saying `message`.
    pub fn new(class: RefusalClass, message: impl Into<String>) -> Self {
        ReadRefused {
            class,
            message: message.into(),
        }
    }
}

impl From<airlock_checkout::ReadRefusal> for ReadRefused {
    fn from(refusal: airlock_checkout::ReadRefusal) -> Self {
        let class = RefusalClass::Bounded(refusal.code());
        ReadRefused::new(class, format!("{class}: {refusal}"))
    }
}

/// How the worker executes its two tools. Search results arrive rendered (the worker's edge to
/// its model), a failed search as the text the model sees; a read arrives typed, served or
/// refused, so that the worker can report it (`FromWorker::Read`, `FromWorker::ReadRefused`)
/// and render it once.
pub trait ReaderTools {
    /// Ranked hits for a query, rendered.
    fn search(&self, query: &str, limit: usize) -> Result<String, String>;
    /// Lines `start..=end` of `path`, through the bounded reader.
    fn read_lines(
        &self,
        path: &str,
        start: usize,
        end: usize,
    ) -> Result<airlock_checkout::ReadOutcome, ReadRefused>;
}

/// Arguments of `search_repo`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The query.
    pub query: String,
    /// Most hits.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Hits a search returns when the call names no limit.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;
/// The most hits one search may return.
pub const MAX_SEARCH_LIMIT: usize = 20;

impl SearchArgs {
    /// The limit asked for, within `1..=MAX_SEARCH_LIMIT` ([`DEFAULT_SEARCH_LIMIT`] when none).
    pub fn limit_or_default(&self) -> usize {
        self.limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT)
    }
}

/// Arguments of `read_file`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Path relative to the checkout root.
    pub path: String,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, inclusive.
    pub end_line: usize,
}

/// Decode a tool call's arguments into `T`; the error is the text handed back to the model
/// (malformed JSON, a missing field, a wrong type, an unknown field).
pub fn decode_args<T: serde::de::DeserializeOwned>(
    call: &airlock_model::ToolCall,
) -> Result<T, String> {
    let value = call
        .checked_arguments()
        .map_err(|e| format!("invalid arguments for {}: {e}", call.name))?;
    serde_json::from_value::<T>(value.clone())
        .map_err(|e| format!("invalid arguments for {}: {e}", call.name))
}

/// The path a `read_file` call asked for, when its arguments name one as a string, whether or
/// not the rest of them decode (for the record of a refused call).
pub fn asked_path(call: &airlock_model::ToolCall) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct PathOnly {
        path: String,
    }
    let value = call.checked_arguments().ok()?;
    serde_json::from_value::<PathOnly>(value.clone())
        .ok()
        .map(|p| p.path)
}

/// Check a read range: 1-based, ordered; the error is the text handed back to the model.
pub fn check_range(args: &ReadArgs) -> Result<(), String> {
    if args.start_line == 0 || args.end_line < args.start_line {
        return Err(format!(
            "invalid line range {}..{}: lines are 1-based and end_line >= start_line",
            args.start_line, args.end_line
        ));
    }
    Ok(())
}
