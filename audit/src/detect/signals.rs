//! Combination rules: concepts from [`super::lexicon`] found in one sentence (at most three
//! lines of it) that together are text aimed at the agent.
//!
//! - an addressee (an AI named or addressed, or an automated reader paraphrased) with a
//!   request or anything hostile asked for;
//! - the agent's own work ("when you fix this", "in the same commit") with something hostile
//!   and a request in other words;
//! - a claim of authority with something hostile or a request;
//! - a request to hide something, with the agent's work, an addressee, a hostile act, or
//!   naming the reviewer or the record they read ("in commits or summaries");
//! - a replacement of the task beside a request, an addressee, the agent's work or a harm;
//! - a request to decode a payload and act on it, on its own;
//! - tool-call-shaped JSON or XML naming a tool that acts, or carrying a dangerous argument.
//!
//! What is not read as a request: the author's own obligation ("we need to ...") unless
//! something hostile is asked beside it, and a doc tag (`@return`). A word inside a URL or
//! heading a Rust path is not one of the sentence's words.

use super::Rule;
use super::lexicon::{self, HarmKind};
use super::prefilter::PatternSet;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Signal {
    AddressAi,
    AddressAutomation,
    AgentWork,
    Directive,
    /// A directive in the first person ("we need to", "I'm going to"): the author's own
    /// obligation, which counts as a [`Signal::Directive`] only beside a hostile act.
    OwnObligation,
    Harm(HarmKind),
    Conceal,
    /// A request to hide something that names whom from or where (the reviewer, the commit
    /// message, the summary): beside [`Signal::Conceal`], at the same place.
    ConcealNamed,
    Hijack,
    Authority,
    DecodeAndAct,
    ToolCall,
    ToolPayload,
    RoleToken,
}

struct Compiled {
    patterns: PatternSet<Signal>,
    /// An AI noun on its own, to tell an addressee from a name in code (`llm.get_model()`),
    /// compiled at its first use: most texts have no match it must look at.
    ai_noun: OnceLock<Option<regex::Regex>>,
    expected: usize,
    errors: Vec<String>,
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let fill = |p: &str| {
            p.replace("{AI}", lexicon::AI_NOUN)
                .replace("{AGENT}", lexicon::AGENT_NOUN)
                .replace("{ACT}", lexicon::ACTION_VERB)
        };
        let mut wanted: Vec<(Signal, String)> = Vec::new();
        wanted.extend(
            lexicon::ADDRESS_AI
                .iter()
                .map(|p| (Signal::AddressAi, fill(p))),
        );
        wanted.extend(
            lexicon::ADDRESS_AUTOMATION
                .iter()
                .map(|p| (Signal::AddressAutomation, fill(p))),
        );
        wanted.extend(
            lexicon::AGENT_WORK
                .iter()
                .map(|p| (Signal::AgentWork, fill(p))),
        );
        wanted.push((Signal::Directive, lexicon::DIRECTIVE.to_string()));
        wanted.push((Signal::Directive, lexicon::IMPERATIVE_START.to_string()));
        wanted.push((Signal::Directive, lexicon::IMPERATIVE_OTHER.to_string()));
        wanted.extend(
            lexicon::HARM
                .iter()
                .map(|(k, p)| (Signal::Harm(*k), (*p).to_string())),
        );
        wanted.extend(lexicon::CONCEAL.iter().map(|p| (Signal::Conceal, fill(p))));
        wanted.extend(lexicon::HIJACK.iter().map(|p| (Signal::Hijack, fill(p))));
        wanted.extend(
            lexicon::AUTHORITY
                .iter()
                .map(|p| (Signal::Authority, fill(p))),
        );
        wanted.push((Signal::DecodeAndAct, lexicon::DECODE_AND_ACT.to_string()));
        wanted.extend(
            lexicon::TOOL_CALL
                .iter()
                .map(|p| (Signal::ToolCall, (*p).to_string())),
        );
        wanted.push((Signal::ToolPayload, lexicon::TOOL_CALL_PAYLOAD.to_string()));
        let expected = wanted.len();
        let (patterns, refused) = PatternSet::build(wanted);
        let errors = refused
            .into_iter()
            .map(|r| format!("{:?}: {}", r.label, r.why))
            .collect();
        Compiled {
            patterns,
            ai_noun: OnceLock::new(),
            expected,
            errors,
        }
    })
}

/// The AI-noun regex, compiled at its first use.
fn ai_noun() -> Option<&'static regex::Regex> {
    compiled()
        .ai_noun
        .get_or_init(|| {
            regex::RegexBuilder::new(lexicon::AI_NOUN)
                .size_limit(64 << 20)
                .build()
                .ok()
        })
        .as_ref()
}

/// Whether every pattern compiles (this compiles the ones not used yet).
pub(crate) fn ready() -> bool {
    let c = compiled();
    c.errors.is_empty()
        && c.patterns.len() == c.expected
        && c.patterns.refused().is_empty()
        && ai_noun().is_some()
}

/// Sentence spans of the normalised text: ends at `.`, `!`, `?` (and their CJK forms)
/// followed by a space or line end, at blank lines, and at lines that look like code.
fn sentences(text: &str, item_at: &dyn Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let end = match c {
            '.' | '!' | '?' => next.is_none_or(char::is_whitespace),
            '。' | '！' | '？' => true,
            '\n' => next == Some('\n') || next.is_none() || item_at(i + 1),
            _ => false,
        };
        if end {
            let stop = i + c.len_utf8();
            if stop > start {
                out.push((start, stop));
            }
            start = stop;
        }
    }
    if start < bytes.len() {
        out.push((start, bytes.len()));
    }
    out
}

/// Findings, as (0-based line, rule), from the normalised text (`line_of` maps an offset back);
/// windows that fire no rule but hold a rule's leading signal without its companion go to
/// `near` (see [`near_miss`]). `near` never changes what lands in `hits`.
pub(crate) fn scan(
    norm: &str,
    line_of: &dyn Fn(usize) -> usize,
    item_lines: &[bool],
    role_tokens: &[usize],
    hits: &mut Vec<(usize, Rule)>,
    near: &mut Vec<(usize, Rule)>,
) {
    let c = compiled();
    let mut found: Vec<(usize, Signal)> = role_tokens
        .iter()
        .map(|&o| (o, Signal::RoleToken))
        .collect();
    c.patterns.find(norm, &|_| true, &mut |signal, start, end| {
        if signal == Signal::AddressAi && names_only_code(norm, start, end) {
            return;
        }
        // A doc tag (`@return`, `:return:`) names what a function gives back.
        if signal == Signal::Directive && doc_tag(norm, start, end) {
            return;
        }
        // "We need to drop the task", "so I'm going to ignore that bug": the author telling
        // what their own code must do is a request only beside a hostile act ("we need to
        // skip these tests in this PR").
        let signal = if signal == Signal::Directive && first_person(norm, start, end) {
            Signal::OwnObligation
        } else {
            signal
        };
        // A bare object that heads a Rust path (`crate::mounted_mock::MountedMock`) is a name
        // in code, as an AI noun is; a file name or an expression (`requirements.txt`,
        // `os.environ`) is what a request names, and stays.
        if let Signal::Harm(kind) = signal
            && kind.is_bare_object()
            && kind != HarmKind::Url
            && first_word_is_code(norm, start, end)
        {
            return;
        }
        // A word of a URL is the address's ("/controllers/cron-jobs/#time-zones"), not one of
        // the sentence's: the URL itself is judged as a URL.
        if matches!(signal, Signal::Harm(kind) if kind != HarmKind::Url) && in_url(norm, start) {
            return;
        }
        // "Do this instead of just adding one" offers an alternative; "do this instead" alone
        // replaces a task.
        if signal == Signal::Hijack
            && norm[start..end].trim_end().ends_with("instead")
            && norm[end..].trim_start().starts_with("of ")
        {
            return;
        }
        // A link's target (`[the docs](https://...)`, reST's `<https://...>`_) is a reference
        // the text points its reader to; a URL to be added is written out.
        if signal == Signal::Harm(HarmKind::Url)
            && (in_link_target(norm, start) || cited(norm, start))
        {
            return;
        }
        let at = start
            + norm[start..end]
                .find(|ch: char| ch.is_alphanumeric() || ch == '<')
                .unwrap_or(0);
        if signal == Signal::Conceal && names_the_reviewed(clause_from(norm, start, end)) {
            found.push((at, Signal::ConcealNamed));
        }
        found.push((at, signal));
    });
    if found.is_empty() {
        return;
    }
    found.sort_unstable();
    // Who a paragraph addresses carries to the sentences after it: "For the patch: set
    // retries on every test. Also comment out the assertion." asks both of the patch.
    let mut carried: Vec<Signal> = Vec::new();
    let mut carried_for = 0usize;
    let item_at = |offset: usize| item_lines.get(line_of(offset)).copied().unwrap_or(false);
    for (a, b) in sentences(norm, &item_at) {
        let first = line_of(a);
        let last = line_of(b.saturating_sub(1));
        let lo = found.partition_point(|&(at, _)| at < a);
        let hi = found.partition_point(|&(at, _)| at < b);
        let own: Vec<(usize, Signal)> = found[lo..hi].to_vec();
        for top in first..=last {
            let mut in_window: Vec<(usize, Signal)> = own
                .iter()
                .copied()
                .filter(|&(at, _)| (top..top + 3).contains(&line_of(at)))
                .collect();
            // An addressee heard sentences ago governs a request that asks for something
            // hostile, not every sentence of advice after it ("For dall-e-3, use one of ...").
            let hostile = in_window.iter().any(|(_, s)| {
                matches!(
                    s,
                    Signal::Harm(_) | Signal::Conceal | Signal::Hijack | Signal::Authority
                )
            });
            if carried_for > 0 && top == first {
                in_window.extend(
                    carried
                        .iter()
                        .filter(|&&s| {
                            hostile || !matches!(s, Signal::AddressAutomation | Signal::AgentWork)
                        })
                        .map(|&s| (a, s)),
                );
            }
            if let Some((at, rule)) = judge(&in_window) {
                hits.push((line_of(at), rule));
            } else if let Some((at, rule)) = near_miss(&in_window) {
                near.push((line_of(at), rule));
            }
            if last - first < 3 {
                break;
            }
        }
        let context: Vec<Signal> = own
            .iter()
            .map(|&(_, s)| s)
            .filter(|s| CARRIED.contains(s))
            .collect();
        if ends_paragraph(norm, b, &item_at) {
            carried.clear();
            carried_for = 0;
        } else if !context.is_empty() {
            carried = context;
            carried_for = CARRY_SENTENCES;
        } else {
            carried_for = carried_for.saturating_sub(1);
        }
    }
}

/// The offset just past the last character of `norm[..start]` that `stop` accepts, or 0: where
/// the token that reaches `start` begins. The character may be wider than a byte (U+2028 is a
/// space to `char::is_whitespace`).
fn after_last(norm: &str, start: usize, stop: impl Fn(char) -> bool) -> usize {
    norm[..start]
        .char_indices()
        .rev()
        .find(|&(_, c)| stop(c))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// Whether the word at `start` is part of a link's target: the address it belongs to follows
/// `](` or `<`.
pub(crate) fn in_link_target(norm: &str, start: usize) -> bool {
    let address = after_last(norm, start, |c| c.is_whitespace() || c == '(' || c == '<');
    let before = &norm[..address];
    before.ends_with("](") || before.ends_with('<')
}

/// Whether the directive at `norm[start..end]` is an obligation the author or their code is
/// under: "we need to", "so we just need to", "I'm going to", "we'll have to", "we must". A
/// directive with "you" in it ("we need you to") is not.
fn first_person(norm: &str, start: usize, end: usize) -> bool {
    let matched = &norm[start..end];
    if matched
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == "you")
    {
        return false;
    }
    let words = norm[..start]
        .rsplit(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .take(4);
    for w in words {
        match w {
            "we" | "i" | "i'm" | "we'll" | "i'll" | "we're" | "we'd" | "i'd" | "we've" | "i've" => {
                return true;
            }
            "just" | "only" | "still" | "also" | "then" | "now" | "really" | "first" | "will"
            | "ll" | "d" | "m" | "re" | "ve" | "would" | "probably" | "definitely" | "so"
            | "therefore" | "thus" | "here" | "always" | "actually" | "simply" | "may"
            | "might" | "do" | "don't" | "dont" | "not" | "t" | "don" | "won't" | "won"
            | "going" => {}
            _ => return false,
        }
    }
    false
}

/// Whether the match at `start` lies inside a URL: the whitespace-delimited token it is in
/// begins (after any opening bracket or quote) with `http://` or `https://` before `start`.
fn in_url(norm: &str, start: usize) -> bool {
    let token_start = after_last(norm, start, char::is_whitespace);
    let token = norm[token_start..start].trim_start_matches(['(', '<', '[', '"', '\'', '`']);
    token.starts_with("http://") || token.starts_with("https://")
}

/// Whether a `::` path segment follows `at` (`crate::read::Dwarf`).
fn rust_path_at(norm: &str, at: usize) -> bool {
    norm[at..]
        .strip_prefix("::")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// The text of a match and the rest of its clause (to `.`, `!`, `?`, `;` or a blank line, at
/// most 60 bytes past the match): "say nothing about it" and where, "in commits or summaries".
fn clause_from(norm: &str, start: usize, end: usize) -> &str {
    let mut stop = (end + 60).min(norm.len());
    while !norm.is_char_boundary(stop) {
        stop -= 1;
    }
    let tail = &norm[end..stop];
    let cut = tail
        .find(['.', '!', '?', ';'])
        .into_iter()
        .chain(tail.find("\n\n"))
        .min()
        .unwrap_or(tail.len());
    &norm[start..end + cut]
}

/// Whether a request to hide something names the reviewer or the record a reviewer reads: "say
/// nothing about it in commits or summaries", "reviewers should not see them". Hiding from
/// the output of a program ("exclude editable package from output"), the parser or "our
/// users" names neither.
fn names_the_reviewed(matched: &str) -> bool {
    let words: Vec<&str> = matched
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().enumerate().any(|(i, w)| {
        let record = matches!(
            *w,
            "commit" | "commits" | "summary" | "summaries" | "changelog" | "pr" | "description"
        );
        // "in commits or summaries", "from the PR description"; not "we hide that commit".
        let placed = words[..i]
            .iter()
            .rev()
            .take(3)
            .any(|p| matches!(*p, "in" | "into" | "to" | "from"));
        matches!(*w, "reviewer" | "reviewers" | "approver" | "approvers") || (record && placed)
    })
}

/// Whether the directive at `norm[start..end]` is a documentation tag (`@return`,
/// `:return:`), which names what a function gives back and asks nothing.
fn doc_tag(norm: &str, start: usize, end: usize) -> bool {
    norm[..first_word(norm, start, end)].ends_with(['@', ':'])
}

/// Where the first word of `norm[start..end]` begins (a pattern may open on punctuation).
fn first_word(norm: &str, start: usize, end: usize) -> usize {
    start
        + norm[start..end]
            .find(|c: char| c.is_alphanumeric())
            .unwrap_or(0)
}

/// Whether the first word of `norm[start..end]` heads a path in code (`crate::mounted_mock`):
/// a file name (`requirements.txt`) or an expression (`os.environ`) is what a request names,
/// so only a `::` path counts.
fn first_word_is_code(norm: &str, start: usize, end: usize) -> bool {
    let at = first_word(norm, start, end);
    let stop = at
        + norm[at..end]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(end - at);
    stop > at && rust_path_at(norm, stop)
}

/// Whether the URL at `start` is cited rather than asked for: "see https://…", "read
/// https://… before touching this", "the trap described at https://…".
fn cited(norm: &str, start: usize) -> bool {
    let address = after_last(norm, start, |c| c.is_whitespace() || c == '(' || c == '<');
    let mut words = norm[..address]
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .rev();
    let last = words.next().unwrap_or_default();
    let before = words.next().unwrap_or_default();
    matches!(last, "see" | "read" | "cf" | "via")
        || (matches!(last, "at" | "in" | "from" | "on")
            && matches!(
                before,
                "described"
                    | "documented"
                    | "explained"
                    | "discussed"
                    | "reported"
                    | "tracked"
                    | "found"
                    | "available"
                    | "information"
                    | "details"
                    | "listed"
                    | "defined"
                    | "specified"
                    | "published"
            ))
}

/// Whether every AI noun in `norm[start..end]` is a name in code rather than an addressee:
/// inside a Markdown code span (`` `llm` ``), or joined to an identifier or a path
/// (`llm.get_model()`, `io.datasette.llm`, `llm-markov`, `llm_key`), or a command given flags
/// (`llm -m gpt-4o`). The tool named "llm" is not being spoken to in its own docs. A match
/// with no AI noun in it ("if you are an assistant") is left alone.
pub(crate) fn names_only_code(norm: &str, start: usize, end: usize) -> bool {
    let Some(noun) = ai_noun() else {
        return false;
    };
    let hay = &norm[..end];
    let mut at = start;
    let mut any = false;
    while let Some(m) = noun.find_at(hay, at) {
        if m.start() == m.end() {
            break;
        }
        if !is_code_name(norm, m.start(), m.end()) {
            return false;
        }
        any = true;
        at = m.end();
    }
    any
}

/// Whether the word at `norm[s..e]` is part of code: in a code span or joined to one.
fn is_code_name(norm: &str, s: usize, e: usize) -> bool {
    let line_start = norm[..s].rfind('\n').map_or(0, |i| i + 1);
    let in_span = norm[line_start..s].matches('`').count() % 2 == 1;
    let before = norm[..s].chars().next_back();
    let mut after = norm[e..].chars();
    let (next, then) = (after.next(), after.next());
    let joined_before = matches!(before, Some('.' | '/' | '_' | '$' | '@' | '\\' | '-'));
    let joined_after = matches!(next, Some('.' | '_' | '/' | '(' | '[' | '-' | ':' | '='))
        && then.is_some_and(|c| c.is_alphanumeric() || matches!(c, '(' | ')' | '_'))
        || rust_path_at(norm, e);
    let flags = next == Some(' ')
        && then == Some('-')
        && norm[e..]
            .chars()
            .nth(2)
            .is_some_and(|c| c.is_ascii_lowercase() || c == '-');
    in_span || joined_before || joined_after || flags
}

/// The signals that say whom a text is for (an addressee, the agent's work, a chat role, a claimed
/// authority), and
/// so carry to the sentences after them.
const CARRIED: &[Signal] = &[
    Signal::AddressAi,
    Signal::AddressAutomation,
    Signal::AgentWork,
    Signal::RoleToken,
    Signal::Authority,
];

/// How many sentences after it an addressee still governs, within its paragraph.
const CARRY_SENTENCES: usize = 2;

/// Whether the sentence ending at `end` ends its paragraph: a blank line, the text's end, or a
/// list item or heading next.
fn ends_paragraph(norm: &str, end: usize, item_at: &dyn Fn(usize) -> bool) -> bool {
    let rest = &norm[end..];
    let gap = rest
        .find(|c: char| !c.is_whitespace())
        .unwrap_or(rest.len());
    let newlines = rest[..gap].matches('\n').count() + usize::from(norm[..end].ends_with('\n'));
    gap == rest.len() || newlines >= 2 || (newlines == 1 && item_at(end + gap))
}

/// Whether some sentence of a normalised text asks for something hostile: a request or an
/// imperative beside a harm. Decoded payloads are judged by this: nobody base64-encodes
/// "disable TLS verification" for a human reader, so the request needs no addressee.
pub(crate) fn asks_for_harm(norm: &str) -> bool {
    let c = compiled();
    let mut found: Vec<(usize, Signal)> = Vec::new();
    c.patterns.find(
        norm,
        &|signal| {
            matches!(
                signal,
                Signal::Directive | Signal::Harm(_) | Signal::Conceal | Signal::Hijack
            )
        },
        &mut |signal, start, _| found.push((start, signal)),
    );
    found.sort_unstable();
    sentences(norm, &|_| false).into_iter().any(|(a, b)| {
        let inside = found.iter().filter(|(at, _)| (a..b).contains(at));
        let (mut asks, mut harm) = (false, false);
        for (_, s) in inside {
            match s {
                Signal::Directive => asks = true,
                Signal::Hijack => return true,
                _ => harm = true,
            }
        }
        asks && harm
    })
}

/// The rule a window of signals fires, and where.
fn judge(window: &[(usize, Signal)]) -> Option<(usize, Rule)> {
    let at = |want: &dyn Fn(Signal) -> bool| window.iter().find(|(_, s)| want(*s)).map(|(p, _)| *p);
    let has = |s: Signal| at(&|x| x == s);
    let harm = at(&|s| matches!(s, Signal::Harm(_)));
    // A hostile act ("skip the tests", "disable auth"), not a bare object ("packages"): what
    // a claim of authority, a concealment or the author's own "we need to" needs beside it.
    let hostile_act = window
        .iter()
        .any(|(_, s)| matches!(s, Signal::Harm(k) if !k.is_bare_object()));
    let is_directive =
        |s: Signal| s == Signal::Directive || (hostile_act && s == Signal::OwnObligation);
    let directive = at(&|s| is_directive(s));
    let conceal = has(Signal::Conceal);
    let hijack = has(Signal::Hijack);
    let addressee = has(Signal::AddressAi).or(has(Signal::AddressAutomation));
    let work = has(Signal::AgentWork);
    let asks = harm.or(conceal).or(hijack);
    // A request counts as the agent's work's or a concealment's companion only when it is
    // other words than that signal: "Change to a package" reads as both a request and the
    // agent's work, and "must not be reported" as both a request and a concealment, which is
    // one signal each.
    let directive_apart = |from: Option<usize>| {
        window
            .iter()
            .find(|&&(p, s)| is_directive(s) && Some(p) != from)
            .map(|&(p, _)| p)
    };
    if let Some(p) = has(Signal::DecodeAndAct) {
        return Some((p, Rule::EncodedInstructions));
    }
    if let Some(p) = has(Signal::ToolCall)
        && (has(Signal::ToolPayload).is_some() || addressee.is_some())
    {
        return Some((p, Rule::ToolCallPayload));
    }
    if let Some(p) = has(Signal::RoleToken)
        && (directive
            .or(asks)
            .or(addressee)
            .or(work)
            .or(has(Signal::Authority))
            .is_some())
    {
        return Some((p, Rule::ChatTemplateToken));
    }
    // A replacement of the task counts beside a request, an addressee, the agent's work, a
    // harm or a claim of authority: "will wait for the handshake", "regardless of whether" and
    // "the task is cancelled" are ordinary prose of source code.
    // A request for something hostile names it after asking: "add the package ...", not
    // "changes to this package: run the tests".
    if let Some(p) = hijack
        && (directive
            .or(harm)
            .or(conceal)
            .or(addressee)
            .or(work)
            .or(has(Signal::Authority))
            .is_some())
    {
        return Some((p, Rule::OverridesInstructions));
    }
    // A link is not a request: an AI named beside a URL is documentation ("[llm models
    // --help](https://...)") until something is asked of it.
    let asks_beyond_url = conceal.or(hijack).is_some()
        || window
            .iter()
            .any(|(_, s)| matches!(s, Signal::Harm(k) if *k != HarmKind::Url));
    if let Some(p) = has(Signal::AddressAi)
        && (directive.is_some() || asks_beyond_url)
    {
        return Some((p, Rule::AddressesAi));
    }
    if let Some(p) = has(Signal::AddressAutomation)
        && (directive.is_some() || asks.is_some())
    {
        return Some((p, Rule::AddressesAutomation));
    }
    // Hiding something counts beside the agent's work, an addressee, a hostile act, or an
    // object some other words ask for: "exclude editable package from output" is a CLI's help
    // and "lexed as a single token to keep it out of the parser" is code prose.
    if let Some(p) = conceal
        && (work.is_some()
            || addressee.is_some()
            || hostile_act
            || has(Signal::ConcealNamed).is_some()
            || (harm.is_some() && directive_apart(conceal).is_some()))
    {
        return Some((p, Rule::ConcealsFromReviewer));
    }
    // "Don't ask for confirmation" beside the word "packages" is a CLI's help text: a claim of
    // authority needs a hostile act, or an object of one that something asks for ("you must
    // add the token").
    if let Some(p) = has(Signal::Authority)
        && (hostile_act
            || (harm.is_some() && directive.is_some())
            || work.is_some()
            || addressee.is_some())
    {
        return Some((p, Rule::FalseAuthority));
    }
    if let Some(p) = work
        && directive_apart(work).is_some()
    {
        let kind = window.iter().find_map(|&(_, s)| match s {
            Signal::Harm(k) => Some(k),
            _ => None,
        });
        if let Some(kind) = kind {
            return Some((p, harm_rule(kind)));
        }
    }
    None
}

/// The rule a window that fired nothing came one companion short of, and where: the signal a
/// combination rule is named after is there, the one signal it needs beside it is not.
///
/// - an addressee (an AI named, an automated reader paraphrased) with no request or harm;
/// - tool-call-shaped text naming a tool, with no dangerous argument and no addressee;
/// - a chat-template role token with no instruction beside it;
/// - a request to hide something from the reviewer with no agent work, addressee or harm;
/// - a claim of authority with no harm, agent work or addressee;
/// - the agent's own work with something hostile, but no directive.
///
/// A request or harmful object alone ("add this dependency") is not a near miss: ordinary
/// documentation says that to people all the time, so it has no rule's leading signal.
fn near_miss(window: &[(usize, Signal)]) -> Option<(usize, Rule)> {
    let at = |want: &dyn Fn(Signal) -> bool| window.iter().find(|(_, s)| want(*s)).map(|(p, _)| *p);
    let has = |s: Signal| at(&|x| x == s);
    let harm = window.iter().find_map(|(p, s)| match s {
        Signal::Harm(k) => Some((*p, *k)),
        _ => None,
    });
    // `judge` returned nothing, so every leading signal found here lacks its companion.
    if let Some(p) = has(Signal::AddressAi) {
        return Some((p, Rule::AddressesAi));
    }
    if let Some(p) = has(Signal::AddressAutomation) {
        return Some((p, Rule::AddressesAutomation));
    }
    if let Some(p) = has(Signal::ToolCall) {
        return Some((p, Rule::ToolCallPayload));
    }
    if let Some(p) = has(Signal::Conceal) {
        return Some((p, Rule::ConcealsFromReviewer));
    }
    if let Some(p) = has(Signal::Authority) {
        return Some((p, Rule::FalseAuthority));
    }
    if let Some(p) = has(Signal::AgentWork)
        && let Some((_, kind)) = harm
    {
        return Some((p, harm_rule(kind)));
    }
    if let Some(p) = has(Signal::RoleToken) {
        return Some((p, Rule::ChatTemplateToken));
    }
    None
}

fn harm_rule(kind: HarmKind) -> Rule {
    match kind {
        HarmKind::Credential => Rule::RequestsCredential,
        HarmKind::Workflow => Rule::RequestsWorkflow,
        HarmKind::Dependency => Rule::RequestsDependency,
        HarmKind::Url => Rule::RequestsUrl,
        HarmKind::File => Rule::RequestsFile,
        HarmKind::Tests => Rule::WeakensTests,
        HarmKind::Security => Rule::WeakensSecurity,
        HarmKind::Approval => Rule::RequestsApproval,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_pattern_compiles() {
        let c = super::compiled();
        assert!(c.errors.is_empty(), "{}", c.errors.join("\n\n"));
        let refused: Vec<String> = c
            .patterns
            .refused()
            .into_iter()
            .map(|r| format!("{:?}: {}", r.label, r.why))
            .collect();
        assert!(refused.is_empty(), "{}", refused.join("\n\n"));
        assert!(super::ai_noun().is_some());
        // Every ASCII window of the labelled corpora (attacks in many phrasings, benign
        // near-misses) meets the same matches through the ASCII restrictions as in full.
        let corpora = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/injection");
        let mut files = 0;
        for dir in ["corpus", "heldout"] {
            for entry in std::fs::read_dir(corpora.join(dir)).unwrap() {
                let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
                let (mut fast, mut full) = (Vec::new(), Vec::new());
                c.patterns
                    .find(&text, &|_| true, &mut |l, s, e| fast.push((l, s, e)));
                c.patterns
                    .find_in_full(&text, &|_| true, &mut |l, s, e| full.push((l, s, e)));
                fast.sort_unstable();
                full.sort_unstable();
                assert!(!full.is_empty());
                assert_eq!(fast, full);
                files += 1;
            }
        }
        assert!(files >= 30, "{files} corpus files");
        for (signal, re) in c.patterns.iter() {
            for plain in ["", "x", "fn main() {}", "\n\n"] {
                assert!(
                    !re.is_match(plain),
                    "{signal:?} matches {plain:?}: {}",
                    re.as_str()
                );
            }
        }
    }
}
