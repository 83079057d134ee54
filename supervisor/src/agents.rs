//! Agents as data: a definition file (TOML) names an agent's system prompt, the tools of the
//! loop it may call, its autonomy tier, its turn cap, what starts it, the writes it may make and
//! what it ends with. The loop (`session`) takes all of these from the [`Agent`]; nothing about
//! an agent is hard-coded there. The built-in definitions (`supervisor/agents/`) are embedded in
//! the binary; an operator's own file is loaded the same way and validated the same way.
//!
//! A definition is operator input, never read from the checkout under work. Unknown keys are
//! refused, and every error names the file, the key and how to fix it.

use crate::config::DocsConfig;
use crate::tool_name::Tool;
use airlock_protocol::ChangeKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The highest `max_iterations` a definition may set.
pub const MAX_ITERATIONS: u32 = 200;

/// The built-in agent `airlock run` uses when neither `--agent` nor `[agent] definition` names
/// one.
pub const DEFAULT_AGENT: &str = "issue-fixer";

/// The placeholders a prompt may use; the supervisor fills each one (see
/// `prompts::render_agent_prompt`).
pub const PROMPT_PLACEHOLDERS: [&str; 10] = [
    "REPO",
    "PULL",
    "BASE_COMMIT",
    "ISSUE_ID",
    "WRITE_ALLOWLIST",
    "TEST_COMMAND",
    "MAX_TURNS",
    "MAX_FULL_RUNS",
    "MAX_READS",
    "LEARNINGS_FILE",
];

/// Errors loading or validating an agent definition.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The definition file could not be read.
    #[error("cannot read agent definition {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not TOML, or not the shape of a definition; the parser's message names the line, the
    /// column and the key.
    #[error("invalid agent definition {origin}: {message}")]
    Parse {
        /// The file (or `built-in NAME`).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A key's value is refused; `problem` says how to fix it.
    #[error("invalid agent definition {origin}: `{key}` {problem}")]
    Invalid {
        /// The file (or `built-in NAME`).
        origin: String,
        /// The key.
        key: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// The agents the triggers start do not fit together (`[agent] triggered`).
    #[error("{origin}: {problem}")]
    Route {
        /// Which setting: `[agent] definition` or `[agent] triggered: SPEC`.
        origin: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// No built-in agent has this name.
    #[error(
        "no built-in agent `{name}`; the built-in agents are {known}, or give the path of a \
         definition file (ending in .toml)"
    )]
    UnknownBuiltin {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: String,
    },
}

/// Result alias for agent definitions.
pub type Result<T> = std::result::Result<T, AgentError>;

/// What an agent may do on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Autonomy {
    /// Reads, searches and test runs only: no write tool, no `open_pr`.
    ReadOnly,
    /// May write inside its allowlist and submit a draft pull request through the broker,
    /// where a human approves it.
    DraftPr,
}

impl Autonomy {
    /// The definition's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::ReadOnly => "read-only",
            Autonomy::DraftPr => "draft-pr",
        }
    }
}

/// What starts an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerKind {
    /// An operator's command (`airlock run --agent ...`).
    Manual,
    /// An issue given a label (`label`).
    IssueLabeled,
    /// A pull request opened or updated.
    PrOpened,
    /// A pull request merged.
    OnMerge,
}

/// `[trigger]`: what starts the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// The event.
    pub on: TriggerKind,
    /// The label, for `issue-labeled` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl Trigger {
    /// One line for a person: `issue-labeled (airlock)`.
    pub fn describe(&self) -> String {
        let on = match self.on {
            TriggerKind::Manual => "manual",
            TriggerKind::IssueLabeled => "issue-labeled",
            TriggerKind::PrOpened => "pr-opened",
            TriggerKind::OnMerge => "on-merge",
        };
        match &self.label {
            Some(label) => format!("{on} ({label})"),
            None => on.to_string(),
        }
    }
}

/// `[output]`: the terminal tool the agent ends with and, for `open_pr`, what kind of change
/// it submits (which decides the broker's witness).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// The terminal tool.
    pub tool: Tool,
    /// For `open_pr`: `fix` or `docs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<ChangeKind>,
}

/// A definition file as written: one of `prompt`/`prompt_file`, every other key checked by
/// [`validate`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefinitionFile {
    name: String,
    description: String,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    prompt_file: Option<String>,
    tools: Vec<Tool>,
    autonomy: Autonomy,
    max_iterations: u32,
    trigger: Trigger,
    #[serde(default)]
    write_allowlist: Option<Vec<String>>,
    #[serde(default)]
    docs_dirs: bool,
    output: Output,
}

/// A loaded, validated agent: everything the loop takes from its definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    /// Its name (`issue-fixer`).
    pub name: String,
    /// What it is for, one paragraph.
    pub description: String,
    /// Where it came from: `built-in` or the definition's path.
    pub origin: String,
    /// The system prompt template (`{{NAME}}` placeholders of [`PROMPT_PLACEHOLDERS`]).
    pub prompt: String,
    /// The tools the model is offered, in the loop's order; any other call is refused.
    pub tools: Vec<Tool>,
    /// Its autonomy tier.
    pub autonomy: Autonomy,
    /// Its turn cap: a run gets the lower of this and `[budgets] max_turns`.
    pub max_iterations: u32,
    /// What starts it.
    pub trigger: Trigger,
    /// Globs that replace the configuration's `[write] allowlist` for its runs (the policy's
    /// refused classes still win); `None` keeps the configuration's.
    pub write_allowlist: Option<Vec<String>>,
    /// Whether the operator's `[docs] dirs` and `[docs] learnings` join its allowlist.
    pub docs_dirs: bool,
    /// What it ends with.
    pub output: Output,
}

impl Agent {
    /// The built-in issue fixer.
    pub fn issue_fixer() -> Result<Agent> {
        builtin(DEFAULT_AGENT)
    }

    /// What a run of this agent submits: `fix` unless the definition says otherwise.
    pub fn change(&self) -> ChangeKind {
        self.output.change.unwrap_or_default()
    }

    /// The write allowlist of a run of this agent under `docs`: the definition's globs, each
    /// docs directory's files and the learnings file; `None` when the definition sets none
    /// (the configuration's `[write] allowlist` applies, else the policy's).
    pub fn write_allowlist(&self, docs: &DocsConfig) -> Option<Vec<String>> {
        if self.write_allowlist.is_none() && !self.docs_dirs {
            return None;
        }
        let mut globs = self.write_allowlist.clone().unwrap_or_default();
        if self.docs_dirs {
            globs.extend(
                docs.dirs
                    .iter()
                    .map(|d| format!("{}/**", d.trim_end_matches('/'))),
            );
            globs.extend(docs.learnings.iter().cloned());
        }
        let mut seen = std::collections::BTreeSet::new();
        globs.retain(|g| seen.insert(g.clone()));
        Some(globs)
    }

    /// The offered tools' names, comma-separated, for a person.
    pub fn tool_names(&self) -> String {
        self.tools
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A built-in definition: its file name, its text and the prompt files it names.
struct Builtin {
    name: &'static str,
    definition: &'static str,
    prompts: &'static [(&'static str, &'static str)],
}

const BUILTINS: [Builtin; 3] = [
    Builtin {
        name: "issue-fixer",
        definition: include_str!("../agents/issue-fixer.toml"),
        prompts: &[("../prompts/system.md", crate::prompts::SYSTEM_TEMPLATE)],
    },
    Builtin {
        name: "docs-writer",
        definition: include_str!("../agents/docs-writer.toml"),
        prompts: &[("docs-writer.md", include_str!("../agents/docs-writer.md"))],
    },
    Builtin {
        name: "pr-reviewer",
        definition: include_str!("../agents/pr-reviewer.toml"),
        prompts: &[("../prompts/reviewer.md", crate::prompts::REVIEWER_TEMPLATE)],
    },
];

/// The built-in agents' names, in order (the issue fixer first).
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.name).collect()
}

/// The built-in agent called `name`.
pub fn builtin(name: &str) -> Result<Agent> {
    let Some(b) = BUILTINS.iter().find(|b| b.name == name) else {
        return Err(AgentError::UnknownBuiltin {
            name: name.to_string(),
            known: builtin_names().join(", "),
        });
    };
    let origin = format!("built-in {}", b.name);
    let agent = parse(b.definition, &origin, &|rel| {
        b.prompts
            .iter()
            .find(|(p, _)| *p == rel)
            .map(|(_, text)| (*text).to_string())
            .ok_or_else(|| format!("{rel} is not embedded"))
    })?;
    Ok(Agent {
        origin: "built-in".to_string(),
        ..agent
    })
}

/// Every built-in agent, the issue fixer first.
pub fn builtins() -> Result<Vec<Agent>> {
    BUILTINS.iter().map(|b| builtin(b.name)).collect()
}

/// Whether `spec` names a definition file rather than a built-in agent (the configuration
/// resolves such paths against its file, so the rule lives there).
pub use crate::config::is_definition_path as is_path;

/// The agent `spec` names: a built-in name, or the path of a definition file.
pub fn resolve(spec: &str) -> Result<Agent> {
    if is_path(spec) {
        load_file(Path::new(spec))
    } else {
        builtin(spec)
    }
}

/// Load and validate the definition at `path`; its `prompt_file` is read relative to the
/// file's directory.
pub fn load_file(path: &Path) -> Result<Agent> {
    let text = std::fs::read_to_string(path).map_err(|source| AgentError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    parse(&text, &path.display().to_string(), &|rel| {
        let at = dir.join(rel);
        std::fs::read_to_string(&at).map_err(|e| format!("cannot read {}: {e}", at.display()))
    })
}

/// Parse and validate definition text; `origin` names it in errors, `read_prompt` reads a
/// `prompt_file` (relative to the definition) or says why it cannot.
fn parse(
    text: &str,
    origin: &str,
    read_prompt: &dyn Fn(&str) -> std::result::Result<String, String>,
) -> Result<Agent> {
    let file: DefinitionFile = toml::from_str(text).map_err(|e| AgentError::Parse {
        origin: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    let invalid = |key: &str, problem: String| AgentError::Invalid {
        origin: origin.to_string(),
        key: key.to_string(),
        problem,
    };
    let prompt = match (&file.prompt, &file.prompt_file) {
        (Some(text), None) => text.clone(),
        (None, Some(rel)) => read_prompt(rel).map_err(|why| {
            invalid(
                "prompt_file",
                format!("{why}; give a path relative to the definition's directory"),
            )
        })?,
        (Some(_), Some(_)) => {
            return Err(invalid(
                "prompt",
                "and `prompt_file` are both set; keep one: the prompt's text, or the path of a \
                 file holding it"
                    .into(),
            ));
        }
        (None, None) => {
            return Err(invalid(
                "prompt",
                "is missing; set `prompt` (the system prompt's text) or `prompt_file` (its path, \
                 relative to the definition)"
                    .into(),
            ));
        }
    };
    let agent = Agent {
        name: file.name,
        description: file.description,
        origin: origin.to_string(),
        prompt,
        tools: file.tools,
        autonomy: file.autonomy,
        max_iterations: file.max_iterations,
        trigger: file.trigger,
        write_allowlist: file.write_allowlist,
        docs_dirs: file.docs_dirs,
        output: file.output,
    };
    validate(&agent, &invalid)?;
    Ok(agent)
}

/// The rules a definition must keep beyond its shape.
fn validate(agent: &Agent, invalid: &dyn Fn(&str, String) -> AgentError) -> Result<()> {
    let name_ok = agent.name.len() <= 40
        && agent.name.starts_with(|c: char| c.is_ascii_lowercase())
        && agent
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !name_ok {
        return Err(invalid(
            "name",
            format!(
                "{:?} is not a name: use lower-case letters, digits and `-`, starting with a \
                 letter, at most 40 characters (e.g. \"docs-writer\")",
                agent.name
            ),
        ));
    }
    if agent.description.trim().is_empty() {
        return Err(invalid(
            "description",
            "is empty; say in a sentence what the agent is for".into(),
        ));
    }
    if agent.prompt.trim().is_empty() {
        return Err(invalid(
            "prompt",
            "is empty; the agent needs a system prompt".into(),
        ));
    }
    for placeholder in placeholders(&agent.prompt) {
        if !PROMPT_PLACEHOLDERS.contains(&placeholder.as_str()) {
            return Err(invalid(
                "prompt",
                format!(
                    "uses the placeholder {{{{{placeholder}}}}}, which the supervisor does not \
                     fill; the placeholders are {}",
                    PROMPT_PLACEHOLDERS
                        .iter()
                        .map(|p| format!("{{{{{p}}}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if agent.tools.is_empty() {
        return Err(invalid(
            "tools",
            "is empty; list the tools the agent may call, e.g. [\"search_repo\", \"read_file\"]"
                .into(),
        ));
    }
    for (i, tool) in agent.tools.iter().enumerate() {
        if agent.tools[..i].contains(tool) {
            return Err(invalid(
                "tools",
                format!("lists `{}` twice; list each tool once", tool.name()),
            ));
        }
    }
    if !(1..=MAX_ITERATIONS).contains(&agent.max_iterations) {
        return Err(invalid(
            "max_iterations",
            format!(
                "is {}; it must be between 1 and {MAX_ITERATIONS} (the loop's turn cap)",
                agent.max_iterations
            ),
        ));
    }
    match (&agent.trigger.on, &agent.trigger.label) {
        (TriggerKind::IssueLabeled, None) => {
            return Err(invalid(
                "trigger.label",
                "is missing; `on = \"issue-labeled\"` needs the label that starts the agent".into(),
            ));
        }
        (TriggerKind::IssueLabeled, Some(label)) if label.trim().is_empty() => {
            return Err(invalid("trigger.label", "is empty; name the label".into()));
        }
        (TriggerKind::IssueLabeled, Some(_)) => {}
        (_, Some(_)) => {
            return Err(invalid(
                "trigger.label",
                "is set, but only `on = \"issue-labeled\"` takes a label; remove it".into(),
            ));
        }
        (_, None) => {}
    }
    if !agent.output.tool.is_terminal() {
        return Err(invalid(
            "output.tool",
            format!(
                "is `{}`, which does not end a run; the terminal tools are {}",
                agent.output.tool.name(),
                terminal_tools()
            ),
        ));
    }
    if !agent.tools.contains(&agent.output.tool) {
        return Err(invalid(
            "output.tool",
            format!(
                "is `{}`, which `tools` does not list; add it to `tools`",
                agent.output.tool.name()
            ),
        ));
    }
    match (agent.output.tool, agent.output.change) {
        (Tool::OpenPr, None) => {
            return Err(invalid(
                "output.change",
                "is missing; `open_pr` needs the kind of change: \"fix\" (a test that fails \
                 before and passes after) or \"docs\" (documentation only)"
                    .into(),
            ));
        }
        (Tool::OpenPr, Some(_)) => {}
        (other, Some(_)) => {
            return Err(invalid(
                "output.change",
                format!(
                    "is set, but only `open_pr` submits a change, not `{}`; remove it",
                    other.name()
                ),
            ));
        }
        (_, None) => {}
    }
    match agent.autonomy {
        Autonomy::ReadOnly => {
            if let Some(tool) = agent.tools.iter().find(|t| t.needs_draft_pr()) {
                return Err(invalid(
                    "tools",
                    format!(
                        "lists `{}`, which a `read-only` agent may not call; remove it, or set \
                         `autonomy = \"draft-pr\"`",
                        tool.name()
                    ),
                ));
            }
            if agent.write_allowlist.is_some() || agent.docs_dirs {
                return Err(invalid(
                    "write_allowlist",
                    "is set for a `read-only` agent, which writes nothing; remove it (and \
                     `docs_dirs`), or set `autonomy = \"draft-pr\"`"
                        .into(),
                ));
            }
        }
        Autonomy::DraftPr => {
            if agent.output.tool != Tool::OpenPr {
                return Err(invalid(
                    "autonomy",
                    format!(
                        "is `draft-pr`, but the agent ends with `{}`, not `open_pr`; a \
                         `draft-pr` agent submits through the broker: set `output.tool = \
                         \"open_pr\"`, or `autonomy = \"read-only\"`",
                        agent.output.tool.name()
                    ),
                ));
            }
        }
    }
    if let Some(globs) = &agent.write_allowlist {
        if globs.is_empty() && !agent.docs_dirs {
            return Err(invalid(
                "write_allowlist",
                "is empty, which refuses every write; list globs (e.g. [\"**/*.md\"]) or remove \
                 the key to keep the configuration's allowlist"
                    .into(),
            ));
        }
        let policy = airlock_policies::Policy::default()
            .map_err(|e| invalid("write_allowlist", format!("the built-in policy: {e}")))?;
        policy.with_allowlist(globs).map_err(|e| {
            invalid(
                "write_allowlist",
                format!("{e}; write globs relative to the repository root, e.g. \"docs/**\""),
            )
        })?;
    }
    Ok(())
}

/// The names of a prompt's `{{NAME}}` placeholders, in order.
fn placeholders(prompt: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = prompt;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].to_string());
        rest = &after[end + 2..];
    }
    out
}

fn terminal_tools() -> String {
    Tool::ALL
        .iter()
        .filter(|t| t.is_terminal())
        .map(|t| format!("`{}`", t.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which agent each trigger starts (`airlock watch`, `airlock webhook`, `airlock batch
/// --label`), by the agents' own `[trigger]`: the default agent (`[agent] definition`, else the
/// issue fixer) answers the trigger label and `@airlock` mentions, and every agent of `[agent]
/// triggered` its own trigger. Built once when a trigger starts, so a mistake is reported
/// before any work is taken; an agent is kept by its spec (a built-in name or a definition's
/// path), which the run resolves again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    /// The default agent's spec: a mention, an issue list, or a label no agent claims starts it.
    pub default_agent: String,
    /// `(label, agent spec)`; labels are compared without case.
    labels: Vec<(String, String)>,
    /// The agent a pull request opened or updated starts, if any.
    pub pull_request: Option<String>,
    /// The agent a merged pull request starts, if any.
    pub merged: Option<String>,
}

/// What a trigger contributes to [`Routes::build`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteOptions<'a> {
    /// `[agent] definition`: the default agent's spec, the issue fixer when absent.
    pub default_agent: Option<&'a str>,
    /// The trigger's `--label`: the label that starts the default agent (its definition's own
    /// `issue-labeled` label when absent).
    pub label: Option<&'a str>,
    /// `[agent] triggered`: the other agents the triggers start.
    pub triggered: &'a [String],
    /// `--review-pull-requests`: the built-in reviewer answers pull requests unless a
    /// `pr-opened` agent of `triggered` does.
    pub review_pull_requests: bool,
}

impl Routes {
    /// The routes of `options`, every agent loaded and validated. Refused: an agent that
    /// nothing would start (`manual`), two agents on one trigger, an issue or merge agent that
    /// does not end with `open_pr`, and a pull request agent that does not end with
    /// `submit_review`.
    pub fn build(options: RouteOptions<'_>) -> Result<Routes> {
        let default_agent = options.default_agent.unwrap_or(DEFAULT_AGENT).to_owned();
        let agent = resolve(&default_agent)?;
        let origin = "[agent] definition".to_owned();
        if agent.output.tool != Tool::OpenPr {
            return Err(AgentError::Route {
                origin,
                problem: format!(
                    "`{}` ends with `{}`, so it cannot work on issues; the default agent must \
                     end with `open_pr` (list a reviewer in `[agent] triggered` instead)",
                    agent.name,
                    agent.output.tool.name()
                ),
            });
        }
        let mut routes = Routes {
            default_agent: default_agent.clone(),
            labels: Vec::new(),
            pull_request: None,
            merged: None,
        };
        let own_label = match (&agent.trigger.on, &agent.trigger.label) {
            (TriggerKind::IssueLabeled, Some(label)) => Some(label.as_str()),
            _ => None,
        };
        if let Some(label) = options.label.or(own_label) {
            routes.labels.push((label.to_owned(), default_agent));
        }
        for spec in options.triggered {
            let agent = resolve(spec)?;
            let route = |problem: String| AgentError::Route {
                origin: format!("[agent] triggered: {spec}"),
                problem,
            };
            let ends_with = |tool: Tool| -> Result<()> {
                if agent.output.tool == tool {
                    return Ok(());
                }
                Err(route(format!(
                    "`{}` is started by `{}` but ends with `{}`; that trigger needs an agent \
                     that ends with `{}`",
                    agent.name,
                    agent.trigger.describe(),
                    agent.output.tool.name(),
                    tool.name()
                )))
            };
            match (&agent.trigger.on, &agent.trigger.label) {
                (TriggerKind::Manual, _) => {
                    return Err(route(format!(
                        "`{}` has `on = \"manual\"`, so no trigger starts it; remove it from \
                         the list (run it with `airlock run --agent`), or give its definition \
                         another [trigger]",
                        agent.name
                    )));
                }
                (TriggerKind::IssueLabeled, Some(label)) => {
                    ends_with(Tool::OpenPr)?;
                    if let Some(other) = routes.for_label(label) {
                        return Err(route(format!(
                            "`{}` and `{other}` are both started by the label {label:?}; give \
                             each agent its own label",
                            agent.name
                        )));
                    }
                    routes.labels.push((label.clone(), spec.clone()));
                }
                (TriggerKind::IssueLabeled, None) => {}
                (TriggerKind::PrOpened | TriggerKind::OnMerge, _) => {
                    let (slot, tool, event) = if agent.trigger.on == TriggerKind::PrOpened {
                        (
                            &mut routes.pull_request,
                            Tool::SubmitReview,
                            "a pull request",
                        )
                    } else {
                        (&mut routes.merged, Tool::OpenPr, "a merge")
                    };
                    ends_with(tool)?;
                    if let Some(other) = slot {
                        return Err(route(format!(
                            "`{}` and `{other}` are both started by {event}; keep one",
                            agent.name
                        )));
                    }
                    *slot = Some(spec.clone());
                }
            }
        }
        if options.review_pull_requests && routes.pull_request.is_none() {
            routes.pull_request = Some("pr-reviewer".to_owned());
        }
        Ok(routes)
    }

    /// The agent an issue given `label` starts, if any (labels compared without case).
    pub fn for_label(&self, label: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(l, _)| l.eq_ignore_ascii_case(label))
            .map(|(_, spec)| spec.as_str())
    }

    /// Every label that starts an agent, in the order the routes were built.
    pub fn labels(&self) -> Vec<String> {
        self.labels.iter().map(|(l, _)| l.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "notes"
description = "Writes notes."
prompt = "You write notes for {{ISSUE_ID}} in {{REPO}}."
tools = ["search_repo", "read_file", "write_file", "run_tests", "open_pr"]
autonomy = "draft-pr"
max_iterations = 12
write_allowlist = ["notes/**"]

[trigger]
on = "manual"

[output]
tool = "open_pr"
change = "docs"
"#;

    fn no_files(rel: &str) -> std::result::Result<String, String> {
        Err(format!(
            "cannot read /defs/{rel}: No such file or directory"
        ))
    }

    fn load(text: &str) -> Result<Agent> {
        parse(text, "/defs/notes.toml", &no_files)
    }

    fn error(text: &str) -> String {
        match load(text) {
            Ok(a) => panic!("accepted: {a:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_good_definition_loads_with_every_key() {
        let a = load(GOOD).unwrap();
        assert_eq!(a.name, "notes");
        assert_eq!(
            a.tools,
            [
                Tool::SearchRepo,
                Tool::ReadFile,
                Tool::WriteFile,
                Tool::RunTests,
                Tool::OpenPr
            ]
        );
        assert_eq!(a.autonomy, Autonomy::DraftPr);
        assert_eq!(a.max_iterations, 12);
        assert_eq!(a.change(), ChangeKind::Docs);
        assert_eq!(a.trigger.describe(), "manual");
        assert_eq!(
            a.write_allowlist(&DocsConfig::default()),
            Some(vec!["notes/**".to_string()])
        );
    }

    #[test]
    fn an_unknown_key_is_refused_naming_file_and_key() {
        let e = error(&format!("{GOOD}\n[extra]\nx = 1\n"));
        assert!(e.contains("/defs/notes.toml"), "{e}");
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = error(&GOOD.replace("max_iterations", "max_turns"));
        assert!(e.contains("unknown field `max_turns`"), "{e}");
        let e = error(&GOOD.replace("on = \"manual\"", "on = \"manual\"\nwhen = \"now\""));
        assert!(e.contains("unknown field `when`"), "{e}");
    }

    #[test]
    fn an_unknown_tool_is_refused_with_the_list_of_tools() {
        let e = error(&GOOD.replace("\"run_tests\"", "\"shell\""));
        assert!(e.contains("/defs/notes.toml"), "{e}");
        assert!(e.contains("no such tool `shell`"), "{e}");
        assert!(e.contains("search_repo, read_file, write_file"), "{e}");
        assert!(e.contains("tools"), "{e}");
    }

    #[test]
    fn a_tool_list_inconsistent_with_the_tier_is_refused() {
        let read_only = GOOD.replace("autonomy = \"draft-pr\"", "autonomy = \"read-only\"");
        let e = error(&read_only);
        assert!(
            e.contains("`tools` lists `write_file`, which a `read-only` agent may not call"),
            "{e}"
        );
        assert!(e.contains("or set `autonomy = \"draft-pr\"`"), "{e}");
        // Without write tools, open_pr is still refused to a read-only agent.
        let e = error(&read_only.replace("\"write_file\", ", ""));
        assert!(e.contains("lists `open_pr`"), "{e}");
        // A draft-pr agent must end with open_pr.
        let e = error(&GOOD.replace(
            "tool = \"open_pr\"\nchange = \"docs\"",
            "tool = \"read_file\"",
        ));
        assert!(
            e.contains("`output.tool` is `read_file`, which does not end a run"),
            "{e}"
        );
        // The terminal tool must be offered.
        let e = error(&GOOD.replace(", \"open_pr\"]", "]"));
        assert!(
            e.contains("`output.tool` is `open_pr`, which `tools` does not list"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_prompt_file_is_refused_with_its_path() {
        let text = GOOD.replace(
            "prompt = \"You write notes for {{ISSUE_ID}} in {{REPO}}.\"",
            "prompt_file = \"prompts/notes.md\"",
        );
        let e = error(&text);
        assert!(
            e.contains("invalid agent definition /defs/notes.toml: `prompt_file` cannot read /defs/prompts/notes.md"),
            "{e}"
        );
        assert!(e.contains("relative to the definition"), "{e}");
        // From disk: the path is read relative to the definition, and found.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("prompts")).unwrap();
        let def = dir.path().join("notes.toml");
        std::fs::write(&def, &text).unwrap();
        let e = load_file(&def).unwrap_err().to_string();
        assert!(e.contains("prompts/notes.md"), "{e}");
        std::fs::write(dir.path().join("prompts/notes.md"), "Notes for {{REPO}}.").unwrap();
        assert_eq!(load_file(&def).unwrap().prompt, "Notes for {{REPO}}.");
    }

    #[test]
    fn other_bad_values_say_how_to_fix_them() {
        for (from, to, expected) in [
            (
                "max_iterations = 12",
                "max_iterations = 0",
                "between 1 and 200",
            ),
            (
                "max_iterations = 12",
                "max_iterations = 900",
                "between 1 and 200",
            ),
            (
                "name = \"notes\"",
                "name = \"Notes Bot\"",
                "lower-case letters",
            ),
            (
                "on = \"manual\"",
                "on = \"issue-labeled\"",
                "`trigger.label` is missing",
            ),
            (
                "on = \"manual\"",
                "on = \"manual\"\nlabel = \"x\"",
                "only `on = \"issue-labeled\"`",
            ),
            ("change = \"docs\"", "", "`output.change` is missing"),
            (
                "write_allowlist = [\"notes/**\"]",
                "write_allowlist = []",
                "refuses every write",
            ),
            (
                "write_allowlist = [\"notes/**\"]",
                "write_allowlist = [\"a/[b\"]",
                "write_allowlist",
            ),
            (
                "{{REPO}}",
                "{{REPOSITORY}}",
                "{{REPOSITORY}}, which the supervisor does not fill",
            ),
            (
                "\"run_tests\"",
                "\"run_tests\", \"run_tests\"",
                "lists `run_tests` twice",
            ),
        ] {
            assert!(GOOD.contains(from), "{from}");
            let e = error(&GOOD.replace(from, to));
            assert!(e.contains(expected), "{from} -> {to}: {e}");
            assert!(e.contains("/defs/notes.toml"), "{e}");
        }
        let both = GOOD.replace("prompt = ", "prompt_file = \"x.md\"\nprompt = ");
        assert!(error(&both).contains("both set"));
        let neither = GOOD.replace(
            "prompt = \"You write notes for {{ISSUE_ID}} in {{REPO}}.\"",
            "",
        );
        assert!(error(&neither).contains("`prompt` is missing"));
    }

    #[test]
    fn the_built_ins_load_and_the_issue_fixer_is_first_with_the_supervisor_prompt() {
        let all = builtins().unwrap();
        let names: Vec<&str> = all.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["issue-fixer", "docs-writer", "pr-reviewer"]);
        let fixer = &all[0];
        assert_eq!(fixer.prompt, crate::prompts::SYSTEM_TEMPLATE);
        assert_eq!(fixer.tools, Tool::ALL);
        assert_eq!(fixer.change(), ChangeKind::Fix);
        assert_eq!(fixer.write_allowlist(&DocsConfig::default()), None);
        let docs = &all[1];
        assert_eq!(docs.change(), ChangeKind::Docs);
        let config = DocsConfig {
            dirs: vec!["docs".into(), "guide/".into()],
            learnings: Some("notes/LEARNINGS.txt".into()),
        };
        assert_eq!(
            docs.write_allowlist(&config).unwrap(),
            ["**/*.md", "docs/**", "guide/**", "notes/LEARNINGS.txt"]
        );
        assert!(matches!(
            builtin("pr-helper"),
            Err(AgentError::UnknownBuiltin { .. })
        ));
        assert!(resolve("docs-writer").is_ok());
        assert!(matches!(
            resolve("./missing.toml"),
            Err(AgentError::Read { .. })
        ));
    }

    #[test]
    fn the_docs_writers_policy_refuses_source_and_agent_configuration_and_a_refused_learnings_file()
    {
        let docs = builtin("docs-writer").unwrap();
        let mut config = crate::config::Config::parse(
            "[docs]\ndirs = [\"guide\"]\nlearnings = \"guide/LEARNINGS.md\"\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        let policy = crate::runner::agent_policy(&docs, &config, "airlock.toml", "calc").unwrap();
        assert!(policy.check_write("README.md").is_allowed());
        assert!(policy.check_write("guide/usage.txt").is_allowed());
        assert!(!policy.check_write("calc/ops.py").is_allowed());
        assert!(!policy.check_write("AGENTS.md").is_allowed());
        assert!(!policy.check_write(".github/workflows/docs.md").is_allowed());
        // The fixer keeps the configuration's allowlist.
        let fixer = Agent::issue_fixer().unwrap();
        let policy = crate::runner::agent_policy(&fixer, &config, "airlock.toml", "calc").unwrap();
        assert!(policy.check_write("calc/ops.py").is_allowed());
        config.docs.learnings = Some("AGENTS.md".into());
        let e = crate::runner::agent_policy(&docs, &config, "airlock.toml", "calc")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[docs] learnings = \"AGENTS.md\" in airlock.toml"),
            "{e}"
        );
        assert!(
            e.contains("editor-agent-config") && e.contains("docs/LEARNINGS.md"),
            "{e}"
        );
        let bad = crate::config::Config::parse("[docs]\ndirs = [\"../up\"]\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("`docs.dirs`") && bad.contains("without `..`"),
            "{bad}"
        );
    }

    #[test]
    fn the_shipped_files_validate_from_disk_too() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
        for name in builtin_names() {
            let from_disk = load_file(&dir.join(format!("{name}.toml"))).unwrap();
            let embedded = builtin(name).unwrap();
            assert_eq!(from_disk.prompt, embedded.prompt, "{name}");
            assert_eq!(from_disk.tools, embedded.tools, "{name}");
        }
    }

    /// A definition file in `dir` started by `trigger` (TOML lines) and ending with `output`.
    fn definition(dir: &Path, name: &str, trigger: &str, output: &str) -> String {
        let (tools, autonomy) = if output.contains("submit_review") {
            ("[\"read_file\", \"submit_review\"]", "read-only")
        } else {
            ("[\"read_file\", \"write_file\", \"open_pr\"]", "draft-pr")
        };
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "name = \"{name}\"\ndescription = \"d\"\nprompt = \"p\"\ntools = {tools}\n\
                 autonomy = \"{autonomy}\"\nmax_iterations = 5\n[trigger]\n{trigger}\n\
                 [output]\n{output}\n"
            ),
        )
        .unwrap();
        path.display().to_string()
    }

    #[test]
    fn each_trigger_starts_the_agent_whose_definition_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let docs = definition(
            dir.path(),
            "docs",
            "on = \"issue-labeled\"\nlabel = \"Docs\"",
            "tool = \"open_pr\"\nchange = \"docs\"",
        );
        let reviewer = definition(
            dir.path(),
            "strict-reviewer",
            "on = \"pr-opened\"",
            "tool = \"submit_review\"",
        );
        let triggered = vec![docs.clone(), reviewer.clone()];
        let routes = Routes::build(RouteOptions {
            triggered: &triggered,
            ..RouteOptions::default()
        })
        .unwrap();
        // The issue fixer keeps its own label; the docs agent answers its own, without case.
        assert_eq!(routes.for_label("AIRLOCK"), Some("issue-fixer"));
        assert_eq!(routes.for_label("docs"), Some(docs.as_str()));
        assert_eq!(routes.for_label("bug"), None);
        assert_eq!(routes.labels(), ["airlock", "Docs"]);
        assert_eq!(routes.pull_request.as_deref(), Some(reviewer.as_str()));
        // --review-pull-requests does not displace an operator's reviewer...
        let with_flag = Routes::build(RouteOptions {
            triggered: &triggered,
            review_pull_requests: true,
            ..RouteOptions::default()
        })
        .unwrap();
        assert_eq!(with_flag.pull_request.as_deref(), Some(reviewer.as_str()));
        // ...and without one it starts the built-in reviewer; without either, nothing does.
        let flag_only = Routes::build(RouteOptions {
            label: Some("fix-me"),
            review_pull_requests: true,
            ..RouteOptions::default()
        })
        .unwrap();
        assert_eq!(flag_only.pull_request.as_deref(), Some("pr-reviewer"));
        assert_eq!(flag_only.for_label("fix-me"), Some("issue-fixer"));
        assert_eq!(flag_only.for_label("airlock"), None);
        assert_eq!(
            Routes::build(RouteOptions::default()).unwrap().pull_request,
            None
        );
    }

    #[test]
    fn routes_that_cannot_work_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let refusal = |triggered: Vec<String>, label: Option<&str>| {
            Routes::build(RouteOptions {
                label,
                triggered: &triggered,
                ..RouteOptions::default()
            })
            .unwrap_err()
            .to_string()
        };
        let manual = refusal(vec!["docs-writer".to_owned()], None);
        assert!(
            manual.contains("[agent] triggered: docs-writer") && manual.contains("manual"),
            "{manual}"
        );
        let same_label = definition(
            dir.path(),
            "twin",
            "on = \"issue-labeled\"\nlabel = \"airlock\"",
            "tool = \"open_pr\"\nchange = \"fix\"",
        );
        let twin = refusal(vec![same_label], None);
        assert!(
            twin.contains("`twin` and `issue-fixer` are both started by the label \"airlock\""),
            "{twin}"
        );
        let second = definition(
            dir.path(),
            "second",
            "on = \"pr-opened\"",
            "tool = \"submit_review\"",
        );
        let first = definition(
            dir.path(),
            "first",
            "on = \"pr-opened\"",
            "tool = \"submit_review\"",
        );
        let two = refusal(vec![first.clone(), second], None);
        assert!(two.contains("both started by a pull request"), "{two}");
        let writer_on_pulls = definition(
            dir.path(),
            "w",
            "on = \"pr-opened\"",
            "tool = \"open_pr\"\nchange = \"docs\"",
        );
        let wrong = refusal(vec![writer_on_pulls], None);
        assert!(
            wrong.contains("ends with `open_pr`") && wrong.contains("ends with `submit_review`"),
            "{wrong}"
        );
        let merge = definition(
            dir.path(),
            "m",
            "on = \"on-merge\"",
            "tool = \"open_pr\"\nchange = \"docs\"",
        );
        let also = definition(
            dir.path(),
            "m2",
            "on = \"on-merge\"",
            "tool = \"open_pr\"\nchange = \"docs\"",
        );
        let merges = refusal(vec![merge.clone(), also], None);
        assert!(
            merges.contains("`m2` and `") && merges.contains("both started by a merge"),
            "{merges}"
        );
        let routes = Routes::build(RouteOptions {
            triggered: std::slice::from_ref(&merge),
            ..RouteOptions::default()
        })
        .unwrap();
        assert_eq!(routes.merged.as_deref(), Some(merge.as_str()));
        let missing = refusal(vec!["/nowhere/agent.toml".to_owned()], None);
        assert!(missing.contains("/nowhere/agent.toml"), "{missing}");
        let default_reviewer = Routes::build(RouteOptions {
            default_agent: Some(&first),
            ..RouteOptions::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            default_reviewer.contains("[agent] definition")
                && default_reviewer.contains("must end with `open_pr`"),
            "{default_reviewer}"
        );
    }
}
