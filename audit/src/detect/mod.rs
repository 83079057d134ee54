//! The deterministic prompt-injection detector.
//!
//! It runs over every text a tool hands a model (file reads, search snippets, issue bodies,
//! tool output) and returns findings: line, rule and excerpt. It flags and records; it never
//! blocks, rewrites or strips the text it scans, which stays data. What a model or an approver
//! is then shown goes through [`make_visible`], a separate rendering step over a copy.
//!
//! How it keeps false positives low (measured with `airlock audit fp-scan`): ordinary source
//! and documentation constantly say "add this dependency", "install the package" or "send the
//! token to the server" to human readers, so a request to add a URL, dependency, credential,
//! workflow or file is only flagged when the text is also aimed at the agent's own work ("when
//! you fix this…", "…in your pull request"), sits next to text that addresses an AI or
//! overrides instructions, or is hidden (an HTML comment in Markdown, a line carrying invisible
//! characters). Text that addresses an AI, claims to change the agent's instructions, tries to
//! hide something from the reviewer, or carries chat-template tokens is flagged on its own.
//!
//! Matching runs on a normalised copy of the text: lowercased, comment leaders stripped,
//! invisible characters removed, Unicode tag characters decoded to the ASCII they smuggle and
//! common Cyrillic/Greek/fullwidth look-alikes folded to Latin, so that "іgnore" spelt with a
//! Cyrillic і or a phrase split by zero-width spaces still matches. Excerpts come from the
//! original text with invisible characters shown as `<U+XXXX>`.

mod code;
mod decode;
mod framing;
mod hidden;
mod lexicon;
mod normalize;
mod prefilter;
mod rules;
mod signals;
mod visible;

pub use visible::{HiddenKind, Visible, make_visible};

use serde::{Deserialize, Serialize};

/// What kind of text is being scanned; decides which rules apply (HTML comments are only
/// hidden text in Markdown and issue bodies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A file of the checkout (read_file).
    File,
    /// A snippet returned by search.
    SearchSnippet,
    /// The body of the issue being worked on (Markdown).
    IssueBody,
    /// Output of a tool run (test output, reader digest).
    ToolOutput,
}

/// A detector rule. The string ids are stable: they are stored in audit records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// Zero-width or otherwise invisible characters (ZWSP, word joiner, mid-text BOM, invisible
    /// operators, Hangul fillers; ZWJ/ZWNJ only where they do not join non-ASCII script).
    InvisibleCharacter,
    /// Bidirectional embedding, override or isolate controls (and LRM/RLM/ALM on lines
    /// without right-to-left script).
    BidiControl,
    /// Unicode tag characters (U+E0000..U+E007F), which can smuggle invisible ASCII.
    TagCharacters,
    /// An HTML comment in Markdown (hidden when rendered) that carries instructions.
    HiddenHtmlComment,
    /// Text that addresses an AI, assistant, agent or language model.
    AddressesAi,
    /// Text that claims to change, replace or override the agent's instructions.
    OverridesInstructions,
    /// Text that asks to hide something from the user or reviewer.
    ConcealsFromReviewer,
    /// Chat-template control tokens (`<|im_start|>`, `[INST]`, `<<SYS>>`).
    ChatTemplateToken,
    /// A request to add or include a URL.
    RequestsUrl,
    /// A request to add a dependency.
    RequestsDependency,
    /// A request to add, reveal or send a credential.
    RequestsCredential,
    /// A request to add a CI workflow or hook.
    RequestsWorkflow,
    /// A request to create a file.
    RequestsFile,
    /// Instructions to send a secret to an outside address.
    ExfiltratesSecret,
    /// Text aimed at an automated reader without naming AI ("automated contributors must…",
    /// "whoever automates fixes here…") that asks for something.
    AddressesAutomation,
    /// A request to weaken, skip, delete or rewrite tests or their thresholds.
    WeakensTests,
    /// A request to remove a security control (authentication, a checksum, TLS verification).
    WeakensSecurity,
    /// A request to approve, merge, publish or bypass review.
    RequestsApproval,
    /// A claim of authority ("authorized by the repository owner") behind a request.
    FalseAuthority,
    /// A tool call spelled out as JSON or XML for the agent to run.
    ToolCallPayload,
    /// An encoded payload (base64, hex, escapes, rot13) that decodes to instructions, or a
    /// request to decode something and act on it.
    EncodedInstructions,
}

impl Rule {
    /// The stable id stored in audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::InvisibleCharacter => "invisible-character",
            Rule::BidiControl => "bidi-control",
            Rule::TagCharacters => "tag-characters",
            Rule::HiddenHtmlComment => "hidden-html-comment",
            Rule::AddressesAi => "addresses-ai",
            Rule::OverridesInstructions => "overrides-instructions",
            Rule::ConcealsFromReviewer => "conceals-from-reviewer",
            Rule::ChatTemplateToken => "chat-template-token",
            Rule::RequestsUrl => "requests-url",
            Rule::RequestsDependency => "requests-dependency",
            Rule::RequestsCredential => "requests-credential",
            Rule::RequestsWorkflow => "requests-workflow",
            Rule::RequestsFile => "requests-file",
            Rule::ExfiltratesSecret => "exfiltrates-secret",
            Rule::AddressesAutomation => "addresses-automation",
            Rule::WeakensTests => "weakens-tests",
            Rule::WeakensSecurity => "weakens-security",
            Rule::RequestsApproval => "requests-approval",
            Rule::FalseAuthority => "false-authority",
            Rule::ToolCallPayload => "tool-call-payload",
            Rule::EncodedInstructions => "encoded-instructions",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One flagged place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// 1-based line number.
    pub line: u64,
    /// The rule that fired.
    pub rule: Rule,
    /// The original line, trimmed, at most 200 characters, invisible characters as `<U+XXXX>`.
    pub excerpt: String,
}

/// How a borderline span fell short of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NearMiss {
    /// A phrase rule matched, but the line quotes it as an example of an attack (a security
    /// guide, a detector's test vectors), so it was not flagged. An attacker can dress an
    /// instruction up the same way.
    QuotedExample,
    /// A sentence held the signal a combination rule is named after (an AI addressed, a claim
    /// of authority, a request to hide something, the agent's own work with a harmful object,
    /// a tool name in a call's shape, a role token) without the one companion signal the rule
    /// needs beside it.
    OneSignalShort,
}

impl NearMiss {
    /// The stable id stored in audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            NearMiss::QuotedExample => "quoted_example",
            NearMiss::OneSignalShort => "one_signal_short",
        }
    }
}

/// A place that nearly fired a rule: not a finding, a candidate for a second opinion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Borderline {
    /// 1-based line number.
    pub line: u64,
    /// The rule it came closest to.
    pub rule: Rule,
    /// How it fell short.
    pub near: NearMiss,
    /// The original line, as in [`Finding::excerpt`].
    pub excerpt: String,
}

/// What one scan found: the findings (exactly those of [`detect`]) and the borderline spans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Screening {
    /// Findings, sorted by line then rule, at most one per (line, rule).
    pub findings: Vec<Finding>,
    /// Borderline spans, sorted by line, at most one per line and none on a line that has a
    /// finding (a quoted example before a sentence one signal short, then by rule).
    pub borderline: Vec<Borderline>,
}

/// Scan `text` and return findings sorted by line then rule, at most one per (line, rule).
/// `path` is where the text came from (used to recognise Markdown); the text is not changed.
pub fn detect(text: &str, source: SourceKind, path: Option<&str>) -> Vec<Finding> {
    screen(text, source, path).findings
}

/// [`detect`], plus the spans that nearly fired. Computing them costs no second pass: they
/// are what the same scan set aside. Encoded runs contribute findings only.
pub fn screen(text: &str, source: SourceKind, path: Option<&str>) -> Screening {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut near = Vec::new();
    let mut hits = scan_lines(text, &lines, source, path, &mut near);
    // What an encoded run says is scanned too; a finding there is reported on the run's line.
    for run in decode::runs(&lines) {
        let inner: Vec<&str> = run.text.split('\n').collect();
        // What a run decodes to is words, whatever file it sits in: read it whole, not as code.
        let decoded = match source {
            SourceKind::File => SourceKind::SearchSnippet,
            other => other,
        };
        if !scan_lines(&run.text, &inner, decoded, path, &mut Vec::new()).is_empty()
            || rules::decoded_asks_for_harm(&inner)
        {
            hits.push((run.line, Rule::EncodedInstructions));
        }
    }
    hits.sort_unstable();
    hits.dedup();
    let excerpt_of = |i: usize| excerpt(lines.get(i).copied().unwrap_or_default());
    near.sort_unstable();
    near.dedup_by_key(|(line, _, _)| *line);
    let borderline = near
        .into_iter()
        .filter(|(line, _, _)| hits.binary_search_by_key(line, |(l, _)| *l).is_err())
        .map(|(i, near, rule)| Borderline {
            line: i as u64 + 1,
            rule,
            near,
            excerpt: excerpt_of(i),
        })
        .collect();
    let findings = hits
        .into_iter()
        .map(|(i, rule)| Finding {
            line: i as u64 + 1,
            rule,
            excerpt: excerpt_of(i),
        })
        .collect();
    Screening {
        findings,
        borderline,
    }
}

fn scan_lines(
    text: &str,
    lines: &[&str],
    source: SourceKind,
    path: Option<&str>,
    near: &mut Vec<(usize, NearMiss, Rule)>,
) -> Vec<(usize, Rule)> {
    let mut hits: Vec<(usize, Rule)> = hidden::scan(lines);
    let markdown = source == SourceKind::IssueBody || path.is_some_and(is_markdown);
    let mut phrases = Vec::new();
    let mut short = Vec::new();
    // In a source file the words are its comments and strings; the code between them is not
    // read as prose (identifiers such as `ai`, `crate`, `decode(` are not words to anyone).
    let view = match source {
        SourceKind::File => code::prose_view(text, path),
        _ => None,
    };
    let view_lines: Vec<&str>;
    let original = lines;
    let (text, lines) = match &view {
        Some(v) => {
            view_lines = v.split('\n').collect();
            (v.as_str(), view_lines.as_slice())
        }
        None => (text, lines),
    };
    rules::scan(text, lines, markdown, &mut phrases, &mut short);
    // A phrase quoted as an example of an attack (a security guide, a detector's own test
    // vectors) is not an instruction; hidden characters are reported wherever they are.
    let (quoted, phrases): (Vec<_>, Vec<_>) = phrases
        .into_iter()
        .partition(|&(line, _)| framing::quoted_example(original, line));
    near.extend(
        quoted
            .into_iter()
            .map(|(line, rule)| (line, NearMiss::QuotedExample, rule)),
    );
    near.extend(
        short
            .into_iter()
            .map(|(line, rule)| (line, NearMiss::OneSignalShort, rule)),
    );
    hits.extend(phrases);
    hits
}

/// Whether every detector pattern compiled. Always true in a tested build; callers that
/// measure or rely on the detector check it so a broken pattern can never pass silently.
pub fn rules_ready() -> bool {
    rules::all_compiled() && signals::ready() && decode::ready() && framing::ready()
}

/// Whether a path names a Markdown document.
pub fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".md", ".markdown", ".mdx", ".mkd", ".mdown"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// The line as a person should see it in a report.
pub fn excerpt(line: &str) -> String {
    const MAX_CHARS: usize = 200;
    let mut out = String::new();
    for (count, c) in line.trim().chars().enumerate() {
        if count >= MAX_CHARS {
            out.push('…');
            break;
        }
        if hidden::is_invisible_or_control(c) {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
