//! Condensation of the conversation the model is sent: beyond `[context]
//! condense_above_tokens`, old tool results become a one-line stub that says what was elided and
//! the call that brings it back. The trajectory keeps every result whole; only the request
//! shrinks.
//!
//! What always stays whole: the system prompt and the warm start (they are not tool results),
//! the last `keep_recent_results` results, every error, every reader digest (its anchors were
//! checked and the agent builds on them), every read of a file the agent has since written or
//! edited (the lines its change relied on), full test runs (budgeted, and a green one carries
//! the diff digest), writes, edits and `open_pr`'s answers, and any result a stub would not
//! shorten.
//!
//! Why in blocks: a provider's prompt cache serves a request's prefix only when it is byte for
//! byte the prefix of an earlier request. Eliding one old result per turn would change the
//! prefix right after the warm start on every turn and turn each cache read into a cache write
//! of the whole conversation. Instead the conversation grows untouched until it passes the
//! threshold, and then every result old enough is elided at once; the next condensation waits
//! until the conversation has grown by half the threshold again. The prefix therefore changes
//! once per half-threshold of growth, and the system prompt and warm start, never condensed,
//! stay cached throughout. A stub is never expanded again, for the same reason: the agent reads
//! again when it needs the text.

use std::collections::BTreeSet;

use airlock_codegraph::map::CHARS_PER_TOKEN;
use airlock_model::{Message, ToolCall};
use airlock_reader::tools::{ReadArgs, SearchArgs, decode_args};
use serde::Serialize;

use crate::config::ContextConfig;
use crate::tool_name::Tool;

/// How the agent gets an elided result back.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Recall {
    /// `read_file` of the same range.
    Read {
        path: String,
        start_line: usize,
        end_line: usize,
    },
    /// `search_repo` with the same query.
    Search { query: String },
    /// A narrow `run_tests` again.
    Tests { selector: String },
}

/// One tool result the condenser may elide later.
#[derive(Debug, Clone)]
struct Candidate {
    /// Its index in the conversation.
    index: usize,
    recall: Recall,
}

/// What one condensation did, for the trajectory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condensed {
    /// Results elided.
    pub results: usize,
    /// The first elided message's index: the request's prefix up to it is unchanged.
    pub first_index: usize,
    /// The conversation's size before, in tokens.
    pub tokens_before: usize,
    /// And after.
    pub tokens_after: usize,
}

/// The condensation state of one run's conversation.
#[derive(Debug, Clone)]
pub struct Condenser {
    config: ContextConfig,
    /// Tool results in order: `Some` for one that may be elided, `None` for one that stays.
    results: Vec<Option<Candidate>>,
    /// The size the conversation must pass before the next condensation.
    next_at_tokens: usize,
}

impl Condenser {
    /// A condenser under `config`.
    pub fn new(config: &ContextConfig) -> Self {
        Condenser {
            config: config.clone(),
            results: Vec::new(),
            next_at_tokens: config.condense_above_tokens,
        }
    }

    /// Note the result of `call` at `index` of the conversation; errors, reader digests and
    /// `open_pr` answers stay whole.
    pub fn note_result(&mut self, index: usize, call: &ToolCall, is_error: bool) {
        let recall = if is_error { None } else { recall_of(call) };
        self.results
            .push(recall.map(|recall| Candidate { index, recall }));
    }

    /// Condense `messages` when they have grown past the threshold: every result older than the
    /// last `keep_recent_results` that may be elided, and whose read is not of a path in
    /// `written`, becomes its stub. `None` when nothing changed.
    pub fn condense(
        &mut self,
        messages: &mut [Message],
        written: &BTreeSet<String>,
    ) -> Option<Condensed> {
        if self.config.condense_above_tokens == 0 {
            return None;
        }
        let tokens_before = conversation_tokens(messages);
        if tokens_before <= self.next_at_tokens {
            return None;
        }
        let old = self
            .results
            .len()
            .saturating_sub(self.config.keep_recent_results);
        let mut results = 0;
        let mut first_index = None;
        for slot in &mut self.results[..old] {
            let Some(candidate) = slot else { continue };
            if let Recall::Read { path, .. } = &candidate.recall
                && written.contains(path)
            {
                continue;
            }
            let Some(Message::Tool(result)) = messages.get_mut(candidate.index) else {
                continue;
            };
            let stub = stub(&candidate.recall, &result.content);
            if stub.len() >= result.content.len() {
                continue;
            }
            result.content = stub;
            first_index =
                Some(first_index.map_or(candidate.index, |i: usize| i.min(candidate.index)));
            results += 1;
            *slot = None;
        }
        let tokens_after = conversation_tokens(messages);
        // Whatever happened, wait for half a threshold of growth: a conversation whose whole
        // results keep it above the threshold is not rewritten on every turn.
        self.next_at_tokens = tokens_after.max(self.config.condense_above_tokens)
            + self.config.condense_above_tokens / 2;
        first_index.map(|first_index| Condensed {
            results,
            first_index,
            tokens_before,
            tokens_after,
        })
    }
}

/// How a successful result of `call` is got back, or `None` when it must stay whole.
fn recall_of(call: &ToolCall) -> Option<Recall> {
    match Tool::from_name(&call.name)? {
        Tool::ReadFile => decode_args::<ReadArgs>(call).ok().map(|a| Recall::Read {
            path: a.path,
            start_line: a.start_line,
            end_line: a.end_line,
        }),
        Tool::SearchRepo => decode_args::<SearchArgs>(call)
            .ok()
            .map(|a| Recall::Search { query: a.query }),
        // A full run stays whole: running it again costs the full-run budget, and a green
        // one carries the diff digest `open_pr` needs.
        Tool::RunTests => call
            .arguments
            .get("selector")
            .and_then(|s| s.as_str())
            .map(|s| Recall::Tests {
                selector: s.to_string(),
            }),
        // A reader's digest holds checked anchors; writes and edits are short and are the
        // agent's own change; open_pr's (and submit_review's) answer decides the run; a history
        // search is at most ten lines.
        Tool::DelegateRead
        | Tool::WriteFile
        | Tool::EditFile
        | Tool::OpenPr
        | Tool::SearchHistory
        | Tool::SubmitReview => None,
    }
}

/// The one line that replaces an elided result.
fn stub(recall: &Recall, content: &str) -> String {
    let lines = content.lines().count();
    match recall {
        Recall::Read {
            path,
            start_line,
            end_line,
        } => format!(
            "[elided to keep the conversation short: read_file {path} lines {start_line}-{end_line} \
             ({lines} lines). To see it again call read_file with path {path:?}, start_line \
             {start_line}, end_line {end_line}.]"
        ),
        Recall::Search { query } => format!(
            "[elided to keep the conversation short: the {lines} lines of search_repo hits for \
             {query:?}. To see them again call search_repo with query {query:?}.]"
        ),
        Recall::Tests { selector } => {
            // The verdict line stays: what the run established is not elided.
            let headline = content.lines().next().unwrap_or("");
            format!(
                "[elided to keep the conversation short: the output of this test run ({lines} \
                 lines); it began: {headline} To see it again call run_tests with selector \
                 {selector:?}.]"
            )
        }
    }
}

/// The conversation's size in tokens, at [`CHARS_PER_TOKEN`].
fn conversation_tokens(messages: &[Message]) -> usize {
    let chars: usize = messages
        .iter()
        .map(|m| match m {
            Message::Assistant(a) => {
                a.text.len()
                    + a.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments_text().len())
                        .sum::<usize>()
            }
            other => other.text().len(),
        })
        .sum();
    chars.div_ceil(CHARS_PER_TOKEN)
}

/// Paths a result of `call` wrote, for [`Condenser::condense`]'s `written`.
pub fn written_path(call: &ToolCall) -> Option<String> {
    match Tool::from_name(&call.name)? {
        Tool::WriteFile | Tool::EditFile => call
            .arguments
            .get("path")
            .and_then(|p| p.as_str())
            .map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_call(id: &str, path: &str) -> ToolCall {
        ToolCall::new(
            id,
            "read_file",
            json!({"path": path, "start_line": 1, "end_line": 200}),
        )
    }

    fn big(n: usize) -> String {
        (0..n).map(|i| format!("{i}| line of code\n")).collect()
    }

    /// A conversation of `calls`, each answered by a result of `size` lines (errors where
    /// `errors` says so), noted in a condenser.
    fn conversation(
        config: &ContextConfig,
        calls: &[ToolCall],
        size: usize,
        errors: &[bool],
    ) -> (Vec<Message>, Condenser) {
        let mut messages = vec![Message::system("rules"), Message::user(big(50))];
        let mut condenser = Condenser::new(config);
        for (i, call) in calls.iter().enumerate() {
            messages.push(Message::Assistant(airlock_model::AssistantMessage {
                text: String::new(),
                tool_calls: vec![call.clone()],
            }));
            let is_error = errors.get(i).copied().unwrap_or(false);
            messages.push(Message::tool_result(&call.id, big(size), is_error));
            condenser.note_result(messages.len() - 1, call, is_error);
        }
        (messages, condenser)
    }

    fn config(above: usize, keep: usize) -> ContextConfig {
        ContextConfig {
            condense_above_tokens: above,
            keep_recent_results: keep,
        }
    }

    #[test]
    fn below_the_threshold_nothing_changes() {
        let calls: Vec<ToolCall> = (0..3)
            .map(|i| read_call(&format!("c{i}"), "a.py"))
            .collect();
        let (mut messages, mut c) = conversation(&config(100_000, 1), &calls, 100, &[]);
        let before = messages.clone();
        assert_eq!(c.condense(&mut messages, &BTreeSet::new()), None);
        assert_eq!(messages, before);
    }

    #[test]
    fn old_results_become_stubs_and_the_recent_the_errors_the_digests_and_the_edited_stay() {
        let calls = vec![
            read_call("c0", "a.py"),
            read_call("c1", "edited.py"),
            ToolCall::new("c2", "search_repo", json!({"query": "parse date"})),
            read_call("c3", "b.py"),
            ToolCall::new(
                "c4",
                "delegate_read",
                json!({"question": "q", "why": "w", "max_reads": 1, "max_turns": 1}),
            ),
            ToolCall::new("c5", "run_tests", json!({"selector": "tests.test_a"})),
            read_call("c6", "c.py"),
            read_call("c7", "d.py"),
        ];
        let errors = [false, false, false, true];
        let (mut messages, mut c) = conversation(&config(1_000, 2), &calls, 100, &errors);
        let original = messages.clone();
        let written: BTreeSet<String> = ["edited.py".to_string()].into();
        let done = c.condense(&mut messages, &written).unwrap();
        let content = |i: usize| messages[3 + 2 * i].text().to_string();
        assert!(content(0).starts_with("[elided"), "{}", content(0));
        assert!(
            content(0).contains(r#"call read_file with path "a.py", start_line 1, end_line 200"#),
            "{}",
            content(0)
        );
        assert_eq!(content(0).lines().count(), 1);
        assert_eq!(
            content(1),
            original[5].text(),
            "a read of an edited file stays"
        );
        assert!(content(2).contains(r#"call search_repo with query "parse date""#));
        assert_eq!(content(3), original[9].text(), "an error stays");
        assert_eq!(content(4), original[11].text(), "a reader's digest stays");
        assert!(content(5).contains(r#"call run_tests with selector "tests.test_a""#));
        assert!(content(5).contains("it began: 0| line of code"));
        assert_eq!(content(6), original[15].text(), "the last results stay");
        assert_eq!(content(7), original[17].text());
        // The system prompt and the warm start are never touched.
        assert_eq!(messages[..2], original[..2]);
        assert_eq!(done.results, 3);
        assert_eq!(done.first_index, 3);
        assert!(done.tokens_after < done.tokens_before);
    }

    #[test]
    fn condensation_comes_in_blocks_so_the_prefix_changes_rarely() {
        let config = config(2_000, 2);
        let mut messages = vec![Message::system("rules"), Message::user(big(50))];
        let mut c = Condenser::new(&config);
        let mut changes = 0;
        let mut prefix_changed_at = Vec::new();
        for turn in 0..60 {
            let call = read_call(&format!("c{turn}"), &format!("f{turn}.py"));
            messages.push(Message::Assistant(airlock_model::AssistantMessage {
                text: String::new(),
                tool_calls: vec![call.clone()],
            }));
            messages.push(Message::tool_result(&call.id, big(40), false));
            c.note_result(messages.len() - 1, &call, false);
            if c.condense(&mut messages, &BTreeSet::new()).is_some() {
                changes += 1;
                prefix_changed_at.push(turn);
            }
        }
        // Each condensation elides a block; the conversation then grows for several turns
        // with its prefix unchanged.
        assert!(changes >= 2, "{prefix_changed_at:?}");
        assert!(changes <= 60 / 4, "{prefix_changed_at:?}");
        for pair in prefix_changed_at.windows(2) {
            assert!(pair[1] - pair[0] >= 3, "{prefix_changed_at:?}");
        }
        // The stubs still grow with the run, far slower than the results they stand for.
        let mut whole = messages.clone();
        for m in whole.iter_mut().skip(2) {
            if let Message::Tool(r) = m {
                r.content = big(40);
            }
        }
        assert!(
            conversation_tokens(&messages) * 2 < conversation_tokens(&whole),
            "{} against {}",
            conversation_tokens(&messages),
            conversation_tokens(&whole)
        );
    }

    #[test]
    fn zero_never_condenses() {
        let calls: Vec<ToolCall> = (0..30)
            .map(|i| read_call(&format!("c{i}"), "a.py"))
            .collect();
        let (mut messages, mut c) = conversation(&config(0, 1), &calls, 400, &[]);
        assert_eq!(c.condense(&mut messages, &BTreeSet::new()), None);
    }
}
