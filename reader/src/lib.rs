//! airlock-reader: the isolated reader worker that answers one question about the checkout.
//!
//! It owns the reader brief (`reader/prompts/brief.md`), the worker's two-tool list
//! (`search_repo`, `read_file`), the JSON-lines protocol between the worker process and the
//! supervisor, and the worker loop itself. The worker runs inside the sandbox, read-only over the
//! checkout and the index, with no network and no credentials; it never talks to a model
//! directly: every model call is relayed by the supervisor over stdin/stdout.
//!
//! It must never gain a write path, a test runner, a subagent or a network client: the tool list
//! here is the control, not the prompt. A call to any other tool name gets an error result.

pub mod brief;
pub mod protocol;
pub mod repo_tools;
pub mod tools;
pub mod worker;

pub use brief::{BRIEF_TEMPLATE, Brief, MAX_QUOTED_LINES, brief_version, render_brief};
pub use protocol::{FromSupervisor, FromWorker, ReadReport, RefusedReadReport};
pub use tools::{
    READER_TOOL_NAMES, ReadRefused, ReadTool, ReaderTools, RefusalClass, read_file_spec,
    search_repo_spec, tool_specs,
};
pub use worker::{WorkerError, run_worker};
