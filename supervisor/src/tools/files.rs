//! The file tools: `search_repo` and `read_file` over the checkout (under the read budget),
//! `write_file` and `edit_file` under the write policy (a refused path is recorded, counted and
//! may end the run).

use super::{Flow, ReadFigures, Tool, ToolReply, Toolbox, args};
use crate::ledger::{Result, file_read_event};
use crate::reference_repos::{
    EDIT_TARGET_CODE, READ_PREFIX, edit_target_refusal, is_reference_path,
};
use crate::trajectory::TrajectoryEvent;
use airlock_audit::{Event, ReadBy};
use airlock_model::{ToolCall, ToolSpec};
use airlock_policies::WriteDecision;
use airlock_reader::repo_tools::{render_hits, render_read};
use airlock_reader::tools::{ReadArgs, SearchArgs, check_range};
use serde::Deserialize;
use serde_json::json;

/// Lines shown before and after an edit in `edit_file`'s result.
const EDIT_CONTEXT_LINES: usize = 3;

/// `search_repo`'s arguments in the supervisor: the reader's, plus the reference repository to
/// search instead of the checkout.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchCall {
    pub(super) query: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    reference: Option<String>,
}

/// `search_repo`'s spec: the reader's, with the optional `reference` argument.
pub(super) fn search_spec() -> ToolSpec {
    let mut spec = airlock_reader::ReadTool::SearchRepo.spec();
    spec.description.push_str(&format!(
        " With `reference` (a slug the warm start lists), it searches that reference \
         repository instead; its hits are named `{READ_PREFIX}<slug>/<path>`."
    ));
    if let Some(props) = spec
        .input_schema
        .get_mut("properties")
        .and_then(|p| p.as_object_mut())
    {
        props.insert(
            "reference".into(),
            json!({"type": "string", "minLength": 1,
                   "description": "Optional: the slug of a reference repository to search."}),
        );
    }
    spec
}

/// `read_file`'s spec: the reader's, saying how reference repositories are read.
pub(super) fn read_spec() -> ToolSpec {
    let mut spec = airlock_reader::ReadTool::ReadFile.spec();
    spec.description.push_str(&format!(
        " A path `{READ_PREFIX}<slug>/<path>` reads a reference repository the warm start \
         lists (read-only: never write there)."
    ));
    spec
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

/// `write_file`'s spec.
pub(super) fn write_spec() -> ToolSpec {
    ToolSpec {
        name: Tool::WriteFile.name().into(),
        description: "Create or replace one file with the given content. The write policy \
                      is checked first; a refused path is not written and must not be \
                      retried with a variant."
            .into(),
        input_schema: json!({
            "type": "object", "additionalProperties": false,
            "required": ["path", "content"],
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}}
        }),
    }
}

/// `edit_file`'s spec.
pub(super) fn edit_spec() -> ToolSpec {
    ToolSpec {
        name: Tool::EditFile.name().into(),
        description: "Replace exactly one occurrence of old_text with new_text in one file. \
                      Fails when old_text occurs zero or several times. The write policy is \
                      checked first."
            .into(),
        input_schema: json!({
            "type": "object", "additionalProperties": false,
            "required": ["path", "old_text", "new_text"],
            "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string", "minLength": 1},
                "new_text": {"type": "string"}
            }
        }),
    }
}

pub(super) fn search_repo(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let call: SearchCall = match args(call) {
        Ok(a) => a,
        Err(reply) => return Ok(reply),
    };
    let limit = SearchArgs {
        query: String::new(),
        limit: call.limit,
    }
    .limit_or_default();
    tb.ledger.facts.searches.push(call.query.clone());
    let hits = match &call.reference {
        Some(slug) => tb.references.search(slug, &call.query, limit),
        None => tb.retrieval.search(&call.query, limit),
    };
    Ok(match hits {
        Ok(hits) => ToolReply::ok(render_hits(&hits)),
        Err(e) => ToolReply::error(e.to_string()),
    })
}

pub(super) fn read_file(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let args: ReadArgs = match args(call) {
        Ok(a) => a,
        Err(reply) => return Ok(reply),
    };
    if let Err(e) = check_range(&args) {
        return Ok(ToolReply::error(e));
    }
    let max_reads = tb.run.config.budgets.max_reads;
    if tb.ledger.counts.reads >= max_reads {
        return Ok(ToolReply::ending(
            format!("read budget spent ({max_reads} reads)"),
            format!("read budget ({max_reads}) spent"),
        ));
    }
    tb.ledger.counts.reads += 1;
    let read = if is_reference_path(&args.path) {
        tb.references
            .read_lines(&args.path, args.start_line, args.end_line)
    } else {
        tb.worktree
            .read_lines(&args.path, args.start_line, args.end_line)
    };
    match read {
        Ok(read) => {
            tb.ledger.facts.reads.push(format!(
                "{}:{}-{}",
                args.path, args.start_line, args.end_line
            ));
            tb.ledger.read_paths.insert(args.path.clone());
            tb.ledger
                .append(file_read_event(&read, ReadBy::Supervisor))?;
            Ok(ToolReply {
                read: Some(ReadFigures {
                    content_bytes: read.bytes_returned,
                    truncated: read.truncated,
                    first_line: u64::from(read.line_start),
                }),
                ..ToolReply::ok(render_read(&read))
            })
        }
        Err(refusal) => {
            tb.ledger.append(Event::PolicyRefusal {
                path: args.path.clone(),
                rule: format!("read:{}", refusal.code),
                reader: Some(ReadBy::Supervisor),
            })?;
            Ok(ToolReply::error(refusal.to_string()))
        }
    }
}

pub(super) fn write_file(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    match args::<WriteArgs>(call) {
        Ok(a) => write(tb, &a.path, &a.content),
        Err(reply) => Ok(reply),
    }
}

pub(super) fn edit_file(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let args: EditArgs = match args(call) {
        Ok(a) => a,
        Err(reply) => return Ok(reply),
    };
    if args.old_text.is_empty() {
        return Ok(ToolReply::error(format!(
            "invalid arguments for {}: old_text is empty",
            Tool::EditFile.name()
        )));
    }
    // Policy before anything else, so a refused path is not even read.
    if let Some(refused) = refuse_reference_edit(tb, &args.path)? {
        return Ok(refused);
    }
    if let Some(refused) = refuse_if_denied(tb, &args.path)? {
        return Ok(refused);
    }
    let current = match tb.worktree.read_for_edit(&args.path) {
        Ok(t) => t,
        Err(e) => return Ok(ToolReply::error(e.to_string())),
    };
    let count = current.matches(&args.old_text).count();
    if count != 1 {
        return Ok(ToolReply::error(format!(
            "{}: old_text occurs {count} times in {}; it must occur exactly once \
             (include more surrounding lines to make it unique)",
            Tool::EditFile.name(),
            args.path
        )));
    }
    let at = current.find(&args.old_text).unwrap_or(0);
    let updated = current.replacen(&args.old_text, &args.new_text, 1);
    let written = write(tb, &args.path, &updated)?;
    if written.is_error {
        return Ok(written);
    }
    Ok(ToolReply {
        text: edited_lines(
            tb,
            &args.path,
            &updated,
            at,
            args.new_text.len(),
            written.text,
        ),
        ..written
    })
}

/// The result of an edit: what was written, then the edited lines with a few lines of context
/// and their numbers, read back through the bounded reader (so within its cap, however large
/// the file).
fn edited_lines(
    tb: &Toolbox<'_>,
    path: &str,
    updated: &str,
    at: usize,
    new_len: usize,
    written: String,
) -> String {
    let line_of = |offset: usize| updated[..offset.min(updated.len())].matches('\n').count() + 1;
    let first = line_of(at);
    let last = line_of(at + new_len.saturating_sub(1)).max(first);
    let start = first.saturating_sub(EDIT_CONTEXT_LINES).max(1);
    let end = last + EDIT_CONTEXT_LINES;
    match tb.worktree.read_lines(path, start, end) {
        Ok(read) => format!(
            "{written}; edited lines {first}-{last}, shown with {EDIT_CONTEXT_LINES} lines of \
             context:\n{}",
            render_read(&read).trim_end()
        ),
        Err(_) => written,
    }
}

/// Check the write policy; `Some(reply)` when refused (recorded, counted, maybe ending).
fn refuse_if_denied(tb: &mut Toolbox<'_>, path: &str) -> Result<Option<ToolReply>> {
    let decision = tb.policy.check_write_in_root(tb.worktree.root(), path);
    refuse_on(tb, path, decision)
}

/// Record and count a refused write (by path or by content); `None` when allowed.
fn refuse_on(
    tb: &mut Toolbox<'_>,
    path: &str,
    decision: WriteDecision,
) -> Result<Option<ToolReply>> {
    let WriteDecision::Refused { rule, reason } = decision else {
        return Ok(None);
    };
    // A variant of a refused path (another spelling, another file of the same class) is
    // refused by the same rule: the class is the rule, so a second hit is a retry.
    let class = rule.clone();
    let ledger = &mut tb.ledger;
    let retry = !ledger.work.refused_classes.insert(class.clone());
    ledger.counts.refusals += 1;
    let refusals = ledger.counts.refusals;
    ledger.facts.refusals.push(format!("{path}: {rule}"));
    ledger.append(Event::PolicyRefusal {
        path: path.to_string(),
        rule: rule.clone(),
        reader: None,
    })?;
    ledger.record(&TrajectoryEvent::PolicyRefusal {
        path,
        rule: &rule,
        class: Some(&class),
        retry_of_refused_class: Some(retry),
        refusals,
    })?;
    let mut message = format!(
        "write refused by policy: `{path}` (rule `{rule}`: {reason}). Nothing was written."
    );
    if retry {
        message.push_str(
            " This is a retry of a path class already refused in this run; it is counted.",
        );
    } else {
        message.push_str(" Do not retry with a variant path: variants are refused too.");
    }
    let max_refusals = tb.run.config.budgets.max_refusals;
    let flow = if refusals > max_refusals {
        Flow::End(format!(
            "too many refused writes ({refusals} > {max_refusals})"
        ))
    } else {
        Flow::Continue
    };
    Ok(Some(ToolReply {
        text: message,
        is_error: true,
        flow,
        read: None,
    }))
}

/// Refuse a write or an edit inside a reference repository, with exactly
/// `cited-reference-repo-as-edit-target:<path>`: recorded and counted like a policy refusal.
pub(super) fn refuse_reference_edit(tb: &mut Toolbox<'_>, path: &str) -> Result<Option<ToolReply>> {
    let Some(text) = edit_target_refusal(path) else {
        return Ok(None);
    };
    let ledger = &mut tb.ledger;
    ledger.counts.refusals += 1;
    let refusals = ledger.counts.refusals;
    ledger
        .facts
        .refusals
        .push(format!("{path}: {EDIT_TARGET_CODE}"));
    ledger.append(Event::PolicyRefusal {
        path: path.to_string(),
        rule: EDIT_TARGET_CODE.to_string(),
        reader: None,
    })?;
    ledger.record(&TrajectoryEvent::PolicyRefusal {
        path,
        rule: EDIT_TARGET_CODE,
        class: None,
        retry_of_refused_class: None,
        refusals,
    })?;
    let max_refusals = tb.run.config.budgets.max_refusals;
    let flow = if refusals > max_refusals {
        Flow::End(format!(
            "too many refused writes ({refusals} > {max_refusals})"
        ))
    } else {
        Flow::Continue
    };
    Ok(Some(ToolReply {
        text,
        is_error: true,
        flow,
        read: None,
    }))
}

fn write(tb: &mut Toolbox<'_>, path: &str, content: &str) -> Result<ToolReply> {
    if let Some(refused) = refuse_reference_edit(tb, path)? {
        return Ok(refused);
    }
    if let Some(refused) = refuse_if_denied(tb, path)? {
        return Ok(refused);
    }
    // The broker refuses a binary file at intake; refuse it here first, by the same rule.
    let content_decision = airlock_policies::check_content(path, content.as_bytes());
    if let Some(refused) = refuse_on(tb, path, content_decision)? {
        return Ok(refused);
    }
    let created = tb.worktree.line_count(path).is_none();
    match tb.worktree.write(path, content) {
        Ok(()) => {
            let work = &mut tb.ledger.work;
            if created && tb.policy.is_test_path(path) {
                work.new_test_files.insert(path.to_string());
            }
            work.wrote = true;
            work.green_full_since_write = false;
            tb.ledger.facts.files_written.push(path.to_string());
            Ok(ToolReply::ok(format!(
                "wrote {path} ({} bytes)",
                content.len()
            )))
        }
        Err(e) => Ok(ToolReply::error(e.to_string())),
    }
}
