//! Phrase rules over the normalised text.

use super::Rule;
use super::prefilter::PatternSet;
use super::{lexicon, normalize, signals};
use regex::Regex;
use std::sync::OnceLock;

/// Gap between two words of a phrase (punctuation, spaces, a comment line break).
const G: &str = r"\W{1,6}";

/// Nouns that can only mean an AI system.
const AI: &str = r"(?:ai|a\.i\.|llms?|large\W{1,3}language\W{1,3}models?|language\W{1,3}models?|ai\W{1,3}(?:models?|assistants?|agents?|tools?|systems?|reviewers?|bots?|coders?|helpers?)|(?:coding|code|software|autonomous|automated|ai-powered)\W{1,3}(?:assistants?|agents?|bots?|reviewers?)|chatbots?|chat\W?gpt|gpt-?\d(?:\.\d)?o?|claude|copilot|gemini|codex|devin|cline|aider)";

/// AI nouns plus the generic ones that need a strong context around them.
fn ai_any() -> String {
    format!(r"(?:{AI}|assistants?|agents?|bots?)")
}

/// Phrases that put a request into the agent's own work.
fn agent_context_when() -> String {
    format!(
        r"(?:\b(?:when(?:ever)?|after|before|while|once|as\W+soon\W+as)\W{{1,3}}you{G}(?:fix|patch|submit|resolve|address|finish|complete|work{G}on|open{G}(?:the|a|your){G}(?:pr|pull\W?request))\b|\b(?:as\W+part\W+of|while|when){G}(?:fixing|resolving|addressing|patching|working\W+on){G}(?:this|the\W+issue|the\W+bug)\b)"
    )
}

/// Phrases that put a request into the agent's output ("…in your pull request").
fn agent_context_in() -> String {
    format!(
        r"(?:\b(?:in|to|into|with){G}your{G}(?:pull\W?request|pr|pr\W(?:description|body|title)|patch|diff|fix|commit(?:\W+message)?|response|reply|answer|output|summary|solution|submission)\b|\b(?:in|to|into){G}the{G}(?:pull\W?request|pr)(?:\W(?:description|body|title))?\b)"
    )
}

/// Gap between two words of one sentence (no sentence end in between).
const WG: &str = r"(?:[^\w.!?;]|\.\S){1,6}";

/// Any character of a sentence: a dot only when it is not followed by a space (URLs, paths).
const SENT: &str = r"(?:[^.!?;]|\.\S)";

const REQUEST_VERB: &str = r"\b(?:add|adds|adding|include|insert|append|embed|install|import|require|download|fetch|curl|wget|send|upload|post|create|put|paste|reference|print|echo|reveal|output|commit|register)\b";

fn objects() -> [(Rule, &'static str); 5] {
    [
        (
            Rule::RequestsCredential,
            r"\b(?:credentials?|secrets?|tokens?|api\W?keys?|passwords?|ssh\W?keys?|private\W?keys?|access\W?keys?|id_rsa|aws_(?:secret|access)\w*|github_token|npm_token|environment\W+variables|env\W+vars)\b|\.env\b|~/\.ssh",
        ),
        (
            Rule::RequestsWorkflow,
            r"\b(?:workflows?|github\W+actions?|ci\W+(?:job|step|config|configuration|pipeline)s?|pipelines?|pre-commit\W+hooks?|git\W+hooks?|cron\W?jobs?|gitlab-ci|jenkinsfile)\b|\.github/",
        ),
        (
            Rule::RequestsDependency,
            r"\b(?:dependenc(?:y|ies)|package|library|crate|gem|plugin|requirements\.txt|package\.json|cargo\.toml|pom\.xml|go\.mod|gemfile|pyproject\.toml|npm\W+install|pip\W+install|cargo\W+add)\b",
        ),
        (
            Rule::RequestsUrl,
            r"https?://|\bwww\.\w|\b(?:urls?|endpoints?|webhooks?|tracking\W+pixels?|(?:this|the\W+following)\W+(?:link|domain|address))\b",
        ),
        (
            Rule::RequestsFile,
            r"\b(?:new\W+file|(?:a|the)\W+file\W+(?:named|called)|create\W+(?:a\W+|the\W+)?file|(?:add|create)\W+(?:a\W+)?(?:script|binary|executable))\b",
        ),
    ]
}

struct Compiled {
    /// Rules that flag on their own.
    strong: PatternSet<Rule>,
    /// Request verb followed by an object of one category, in the agent's context.
    in_context: PatternSet<Rule>,
    /// Request verb followed by an object, without context (flagged only near strong findings
    /// or in hidden text).
    weak: PatternSet<Rule>,
    /// Rules matched against the original text, case-sensitive.
    raw: Vec<(Rule, Regex)>,
    /// Instruction-like text inside a Markdown HTML comment.
    comment_imperative: Option<Regex>,
    expected: usize,
    compiled: usize,
}

fn strong_patterns() -> Vec<(Rule, String)> {
    let ai_any = ai_any();
    vec![
        // "Note to the AI:", "Instructions for LLM agents", "Hey Claude"
        (Rule::AddressesAi, format!(r"(?m)\b(?:note|notice|message|instructions?|reminder|attention|attn|warning|important|psa|directive|hint|memo)\W{{0,4}}(?:to|for){G}(?:(?:the|all|any|every)\W{{1,3}})?(?:{AI}\b|(?:assistants?|agents?|bots?)\s*(?:[:\-–—,]|$))")),
        (Rule::AddressesAi, format!(r"\b(?:attention|attn|hey|hi|hello|dear|greetings|yo|calling){G}(?:(?:the|all|any|fellow|every)\W{{1,3}})?{AI}\b")),
        // A greeting and its addressee on one line: string literals on two lines of code
        // ("hello", then role="assistant") are not a greeting.
        (Rule::AddressesAi, r"\b(?:dear|hey|hello)[^\w\n]{1,6}(?:assistant|agent)s?\b".to_string()),
        // Vocative at the start of a sentence: "AI: please…", "Assistant, ignore…"
        (Rule::AddressesAi, format!(r"(?m)(?:^|[.!?]\s+)\W*{AI}\s*[,:]\s*(?:please|you|ignore|disregard|forget|do\s+not|don't|never|always|add|include|insert|make\s+sure|ensure|remember|stop|before|when|from\s+now|your)\b")),
        (Rule::AddressesAi, r"(?m)(?:^|[.!?]\s+)\W*(?:assistant|agent)\s*[,:]\s*(?:please\W+)?(?:ignore|disregard|forget|do\s+not|don't|never|you\s+must|from\s+now)\b".to_string()),
        (Rule::AddressesAi, format!(r"\bif\W+you\W{{1,3}}(?:are|re)\W+(?:an?\W+|the\W+)?(?:{AI}|assistant|agent|bot)\b")),
        (Rule::AddressesAi, format!(r"\b(?:{AI}|assistants|agents)\W{{1,3}}(?:that\W+(?:is|are)\W+|who\W+(?:is|are)\W+|(?:is|are)\W+)?(?:reading|processing|parsing|analy[sz]ing|reviewing|scanning|ingesting|summari[sz]ing|crawling|indexing|seeing|working\W+(?:on|with)|fixing|tasked\W+with)\W{{1,3}}(?:this|these)\b")),
        (Rule::AddressesAi, format!(r"\bas\W+an?\W+(?:{AI}|assistant|agent)\b[^\n.]{{0,40}}\byou\b")),
        // "To whichever language model is reading this:", "Copilot should add…"
        (Rule::AddressesAi, format!(r"\bto{G}(?:whichever|whatever|any|every|each){G}(?:{AI}|assistant|agent|bot)s?\b")),
        (Rule::AddressesAi, format!(r"\b{AI}{G}(?:should|must|needs?{G}to|has{G}to|is{G}(?:required|instructed|expected|asked){G}to|will{G}now){G}(?:also{G}|now{G}|then{G})?(?:add|include|insert|ignore|disregard|approve|merge|remove|delete|open|create|install|send|set|change|modify|commit|push|skip|disable|mark)\b")),
        (Rule::AddressesAi, format!(r"\b(?:assistants?|agents?|bots?){G}(?:should|must|are{G}required{G}to|is{G}required{G}to){G}(?:also{G})?(?:approve|merge|ignore|disregard|skip|mark)\b")),
        (Rule::OverridesInstructions, format!(r"\bthe{G}(?:real|actual|true|updated|correct|new){G}(?:instructions|task|orders){G}(?:are|is|follow){G}(?:below|here|as\W+follows|the\W+following)\b|\bthe{G}issue{G}(?:text|description|body)?{G}(?:is|was){G}(?:outdated|obsolete|superseded|fake|a\W+decoy)\b")),
        (Rule::OverridesInstructions, r"\byou\W+are\W+now\W+(?:in\W+)?(?:developer|dev|maintenance|god|debug|unrestricted|jailbreak|jailbroken|admin|root|sudo|dan)\W+mode\b".to_string()),
        // "ignore all previous instructions", "disregard the above system prompt"
        (Rule::OverridesInstructions, r"\b(?:ignore|disregard|forget|bypass|abandon|discard|set\W+aside|stop\W+following|do\W+not\W+follow|don't\W+follow|no\W+longer\W+follow)\W{1,6}(?:(?:all|any|every|each|of|the|your|my|these|those|its|their|other)\W{1,6}){0,3}(?:previous|prior|preceding|above|earlier|original|initial|system|safety)\W{1,6}(?:(?:and|or|all|any|the|of|your)\W{1,6})?(?:\w+\W{1,6})?(?:instructions|prompts?|directives?|guidelines|guidance|directions|guardrails|rules|constraints|orders|context|messages)\b".to_string()),
        (Rule::OverridesInstructions, format!(r"\b(?:ignore|disregard|forget|override|bypass)\W{{1,6}}(?:all\W+|any\W+)?(?:your|the\W+(?:assistant|agent|model|ai)'?s?){G}(?:\w+{G})?(?:instructions|prompt|programming|guidelines|guardrails|rules|directives|system\W+prompt|system\W+message)\b")),
        (Rule::OverridesInstructions, format!(r"\b(?:ignore|disregard|forget){G}(?:everything|all|anything){G}(?:above|before|prior|previously|you\W+(?:were|have\W+been|ve\W+been)\W+(?:told|given|instructed))\b")),
        (Rule::OverridesInstructions, format!(r"\b(?:ignore|disregard|forget){G}the{G}above{G}(?:and|instructions|directions|text|prompt|context)\b")),
        (Rule::OverridesInstructions, format!(r"\b(?:ignore|disregard|forget|abandon){G}(?:the|your){G}(?:(?:original|current|assigned|actual|given|real){G})?(?:issue|task|assignment|goal|objective|ticket){G}(?:you{G}(?:were|have\W+been|ve\W+been){G}(?:given|assigned|asked)|and{G}instead)\b")),
        (Rule::OverridesInstructions, format!(r"\b(?:your|the\W+(?:assistant|agent|model|ai)'?s?){G}(?:new|real|actual|true|updated|revised|only|primary|sole|secret){G}(?:instructions?|directives?|system\W+prompt|task|goal|objective|mission|orders|job|priority|purpose){G}(?:is|are|was|were|has|have)\b|\b(?:your|the\W+(?:assistant|agent|model|ai)'?s?){G}(?:new|real|actual|true|updated|revised|secret){G}(?:instructions?|directives?|system\W+prompt|task|goal|objective|mission|orders)\s*:")),
        (Rule::OverridesInstructions, format!(r"\b(?:new|updated|revised|additional|special|secret|hidden|priority|urgent|override){G}(?:instructions?|directives?|system\W+prompt|orders){G}(?:for|to){G}(?:(?:the|all|any){G})?(?:{ai_any}|models?|you)\b")),
        (Rule::OverridesInstructions, r"\b(?:system|admin|administrator|prompt|instruction)\W{1,3}(?:prompt\W{1,3})?override\b\s*(?::|mode|activated|enabled|engaged|in\W+effect|protocol)".to_string()),
        (Rule::OverridesInstructions, format!(r"\boverride{G}(?:all{G}|any{G})?(?:your|the{G}(?:previous|prior|above|original|system))(?:{G}\w+)?{G}(?:instructions|prompt|system\W+prompt|directives|guardrails)\b")),
        (Rule::OverridesInstructions, format!(r"\byour{G}(?:\w+{G})?(?:instructions|system\W+prompt|prompt|directives|guidelines|guardrails|rules|task|orders){G}(?:have|has){G}(?:been{G})?(?:changed|updated|overridden|replaced|revised|superseded|modified|lifted|removed|disabled)\b")),
        (Rule::OverridesInstructions, format!(r"\b(?:system\W+prompt|(?:the\W+)?instructions\W+you\W+(?:were|have\W+been)\W+given){G}(?:has|have|is|are){G}(?:been{G})?(?:changed|updated|overridden|replaced|revised|superseded|outdated|obsolete|void)\b")),
        (Rule::OverridesInstructions, r"\b(?:do\W+anything\W+now|dan\W+mode)\b".to_string()),
        (Rule::ConcealsFromReviewer, format!(r"\b(?:do\W+not|don't|dont|never|must\W+not){G}(?:tell|mention|reveal|disclose){G}(?:(?:this|that|it|anything|about\W+(?:this|it)){G})?(?:to{G})?(?:the{G}|your{G})?(?:user|human|reviewer|operator|approver|maintainer|supervisor|owner)s?\b")),
        (Rule::ConcealsFromReviewer, format!(r"\bwithout{G}(?:telling|informing|alerting){G}(?:the{G}|your{G})?(?:user|human|reviewer|operator|approver|maintainer)s?\b")),
        (Rule::ConcealsFromReviewer, format!(r"\b(?:hide|conceal){G}(?:this|these|it|the{G}change|the{G}changes){G}(?:\w+{G})?from{G}(?:the{G}|any{G})?(?:user|human|reviewer|operator|approver|maintainer)s?\b")),
        (Rule::ConcealsFromReviewer, format!(r"\b(?:do\W+not|don't|never){G}(?:mention|include|list|report|disclose|explain){G}(?:this|these|it|that){G}(?:\w+{G}){{0,2}}(?:in|to){G}(?:the{G}|your{G})?(?:pr|pull\W?request|summary|commit\W+message|description|changelog|output|response|reviewer)\b")),
        (Rule::ExfiltratesSecret, r"\b(?:send|post|upload|exfiltrate|leak|forward|transmit|email|beacon|pipe)\W{1,6}(?:\w+\W{1,6}){0,4}?(?:credentials?|secrets?|tokens?|api\W?keys?|passwords?|ssh\W?keys?|private\W?keys?|id_rsa|environment\W+variables|env\W+vars|aws_\w+|github_token|npm_token)\b[^\n!?;]{0,80}?\b(?:to|at|into)\W{1,3}(?:https?://|(?:\d{1,3}\.){3}\d{1,3})".to_string()),
        (Rule::ExfiltratesSecret, r"(?:~/\.ssh/\S*|\bid_rsa\b|/etc/shadow|\.aws/credentials)[^\n]{0,80}?(?:https?://|\|\s*(?:curl|nc|wget)\b)|\b(?:curl|wget)\b[^\n]{0,80}(?:~/\.ssh/|\bid_rsa\b|/etc/shadow|\.aws/credentials)".to_string()),
    ]
}

fn compile() -> Compiled {
    let mut expected = 0;
    let mut compiled = 0;
    let mut set = |wanted: Vec<(Rule, String)>| {
        expected += wanted.len();
        let (set, _refused) = PatternSet::build(wanted);
        compiled += set.len();
        set
    };
    let strong = set(strong_patterns());
    let ctx_when = agent_context_when();
    let ctx_in = agent_context_in();
    let mut in_context = Vec::new();
    let mut weak = Vec::new();
    for (rule, obj) in objects() {
        let before = format!(
            r"(?:{ctx_when}|{ctx_in}){SENT}{{0,120}}?{REQUEST_VERB}{SENT}{{0,80}}?(?:{obj})"
        );
        let after = format!(r"{REQUEST_VERB}{SENT}{{0,100}}?(?:{obj}){SENT}{{0,100}}?{ctx_in}");
        in_context.push((rule, format!("{before}|{after}")));
        weak.push((rule, format!(r"{REQUEST_VERB}[^!?;\n]{{0,80}}?(?:{obj})")));
    }
    let in_context = set(in_context);
    let weak = set(weak);
    let mut build = |p: &str| {
        expected += 1;
        let r = Regex::new(p).ok();
        compiled += usize::from(r.is_some());
        r
    };
    let role_tokens = format!("(?m){}", lexicon::ROLE_TOKENS);
    let raw = [(Rule::ChatTemplateToken, role_tokens.as_str())]
        .into_iter()
        .filter_map(|(rule, p)| build(p).map(|r| (rule, r)))
        .collect();
    let comment_imperative = build(&format!(
        r"\b(?:you|please|must|make\W+sure|be\W+sure|remember\W+to|always|never|should){WG}(?:\w+{WG}){{0,8}}?{REQUEST_VERB}{SENT}{{0,80}}?(?:https?://|\b(?:url|endpoint|webhook|dependency|dependencies|package|credentials?|secrets?|tokens?|api\W?keys?|passwords?|workflows?|new\W+file)\b|\.github/)"
    ));
    Compiled {
        strong,
        in_context,
        weak,
        raw,
        comment_imperative,
        expected,
        compiled,
    }
}

fn compiled() -> &'static Compiled {
    static RULES: OnceLock<Compiled> = OnceLock::new();
    RULES.get_or_init(compile)
}

/// True when every pattern compiles (a unit test holds this); this compiles the branches not
/// used yet.
pub(crate) fn all_compiled() -> bool {
    let c = compiled();
    c.expected == c.compiled
        && c.comment_imperative.is_some()
        && [&c.strong, &c.in_context, &c.weak]
            .iter()
            .all(|set| set.refused().is_empty())
}

/// The normalised text with a map back to line numbers.
struct Normalized {
    text: String,
    line_starts: Vec<usize>,
    /// Lines that begin a list item, a table row, a `**Label**:` or a heading: a sentence
    /// never runs on into them and an addressee never carries into them.
    item_lines: Vec<bool>,
}

impl Normalized {
    fn new(lines: &[&str]) -> Self {
        let mut text = String::new();
        let mut line_starts = Vec::with_capacity(lines.len());
        let item_lines = lines.iter().map(|l| starts_item(l)).collect();
        let mut buf = String::new();
        for line in lines {
            buf.clear();
            buf.push_str(&normalize::line(line));
            let mut s = buf.trim_start();
            if let Some(rest) = s.strip_prefix("<!--") {
                s = rest;
            }
            let s = s.trim_start_matches(|c: char| {
                matches!(
                    c,
                    ' ' | '\t' | '/' | '#' | '*' | ';' | '%' | '>' | '!' | '-' | '"' | '\'' | '`'
                )
            });
            line_starts.push(text.len());
            text.push_str(s);
            text.push('\n');
        }
        Normalized {
            text,
            line_starts,
            item_lines,
        }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.line_starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }
}

/// Whether a decoded payload's lines ask for something hostile (see [`signals::asks_for_harm`]).
pub(crate) fn decoded_asks_for_harm(lines: &[&str]) -> bool {
    signals::asks_for_harm(&Normalized::new(lines).text)
}

/// Whether a line starts a list item (`- `, `+ `, `1.`), a table row, a `**Label**` or a
/// Markdown heading of level two or more. `* ` is left out: it continues block comments.
fn starts_item(line: &str) -> bool {
    let t = line.trim_start_matches([' ', '\t', '>']);
    let numbered = t
        .find(['.', ')'])
        .is_some_and(|i| (1..4).contains(&i) && t[..i].bytes().all(|b| b.is_ascii_digit()));
    ["- ", "+ ", "|", "**", "## ", "### ", "#### "]
        .iter()
        .any(|m| t.starts_with(m))
        || numbered
}

/// How many lines after a strong finding a bare request still counts as part of it.
const NEAR_LINES: usize = 3;

/// Findings as (0-based line, rule) into `hits`; the signal windows that came one companion
/// short of a rule into `near`.
pub(crate) fn scan(
    text: &str,
    lines: &[&str],
    markdown: bool,
    hits: &mut Vec<(usize, Rule)>,
    near: &mut Vec<(usize, Rule)>,
) {
    let rules = compiled();
    let norm = Normalized::new(lines);
    let hidden_lines: Vec<usize> = hits.iter().map(|(l, _)| *l).collect();
    let mut strong_lines = Vec::new();
    rules
        .strong
        .find(&norm.text, &|_| true, &mut |rule, start, end| {
            // An AI noun that is a name in code is not an addressee (see signals).
            if rule == Rule::AddressesAi && signals::names_only_code(&norm.text, start, end) {
                return;
            }
            let line = norm.line_of(meaningful_start(&norm.text, start, end));
            strong_lines.push(line);
            hits.push((line, rule));
        });
    // Role tokens are legitimate in chat templates and tokenizer code; they count only with
    // an instruction beside them (decided with the other signals).
    let mut role_offsets = Vec::new();
    for (_, re) in &rules.raw {
        for m in re.find_iter(text) {
            // "the <|endoftext|> token" names a token, as tokenizer docs do; it plays no role.
            let after = text[m.end()..].trim_start_matches([' ', '`', '\'', '"']);
            if after
                .get(..5)
                .is_some_and(|w| w.eq_ignore_ascii_case("token"))
            {
                continue;
            }
            let line = text[..m.start()].bytes().filter(|&b| b == b'\n').count();
            if let Some(&start) = norm.line_starts.get(line) {
                role_offsets.push(start);
            }
        }
    }
    rules
        .in_context
        .find(&norm.text, &|_| true, &mut |rule, start, end| {
            // The URL asked for is a link's target: the sentence points its reader to a page.
            let linked = rule == Rule::RequestsUrl
                && norm.text[start..end]
                    .rfind("http")
                    .is_some_and(|p| signals::in_link_target(&norm.text, start + p));
            if !linked {
                hits.push((norm.line_of(meaningful_start(&norm.text, start, end)), rule));
            }
        });
    let before = hits.len();
    signals::scan(
        &norm.text,
        &|o| norm.line_of(o),
        &norm.item_lines,
        &role_offsets,
        hits,
        near,
    );
    strong_lines.extend(
        hits[before..]
            .iter()
            .filter(|(_, r)| *r == Rule::ChatTemplateToken)
            .map(|(l, _)| *l),
    );
    let hidden_comments = if markdown {
        html_comments(text)
    } else {
        Vec::new()
    };
    // A bare request counts only beside something else; with nothing else, there is nothing
    // to look for.
    if !(strong_lines.is_empty() && hidden_lines.is_empty() && hidden_comments.is_empty()) {
        rules
            .weak
            .find(&norm.text, &|_| true, &mut |rule, start, _| {
                let line = norm.line_of(start);
                let near_strong = strong_lines
                    .iter()
                    .any(|&s| line >= s && line <= s + NEAR_LINES);
                let in_hidden = hidden_lines.contains(&line)
                    || hidden_comments.iter().any(|&(a, b)| line >= a && line <= b);
                if near_strong || in_hidden {
                    hits.push((line, rule));
                }
            });
    }
    for (first, last) in hidden_comments {
        let inner = Normalized::new(&lines[first..=last.min(lines.len().saturating_sub(1))]);
        let flagged = rules.strong.matches_any(&inner.text)
            || rules.in_context.matches_any(&inner.text)
            || rules
                .comment_imperative
                .as_ref()
                .is_some_and(|re| re.is_match(&inner.text));
        if flagged {
            hits.push((first, Rule::HiddenHtmlComment));
        }
    }
}

/// Where a match really starts: patterns may begin with punctuation or line breaks.
fn meaningful_start(text: &str, start: usize, end: usize) -> usize {
    start
        + text[start..end]
            .find(|c: char| c.is_alphanumeric() || c == '<' || c == '[')
            .unwrap_or(0)
}

/// Line ranges (0-based, inclusive) of `<!-- … -->` comments, skipping fenced code blocks.
fn html_comments(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut open: Option<usize> = None;
    for (i, line) in text.split('\n').enumerate() {
        let t = line.trim_start();
        if open.is_none() && (t.starts_with("```") || t.starts_with("~~~")) {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut rest = line;
        loop {
            match open {
                None => match rest.find("<!--") {
                    Some(p) => {
                        open = Some(i);
                        rest = &rest[p + 4..];
                    }
                    None => break,
                },
                Some(start) => match rest.find("-->") {
                    Some(p) => {
                        out.push((start, i));
                        open = None;
                        rest = &rest[p + 3..];
                    }
                    None => break,
                },
            }
        }
    }
    if let Some(start) = open {
        // An unclosed comment hides the rest of the document.
        out.push((start, text.split('\n').count().saturating_sub(1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert!(all_compiled(), "a detector pattern failed to compile");
    }

    #[test]
    fn comment_ranges() {
        let t = "a\n<!-- x\ny -->\n```\n<!-- in code -->\n```\n<!-- z -->";
        assert_eq!(html_comments(t), vec![(1, 2), (6, 6)]);
    }
}
