//! The detectors for the six forbidden moves, run over the test parts of a parsed diff.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::languages::Language;
use crate::locate::rule_error;
use crate::operands::{OperandReader, Operands};
use crate::{Error, Result};

/// The six forbidden moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveKind {
    /// An assertion deleted.
    AssertionRemoved,
    /// A comparison loosened: tolerance raised, equality turned into inequality/approximation.
    ComparisonLoosened,
    /// An except or catch widened.
    CatchWidened,
    /// A skip, xfail or ignore marker added (or a test disabled).
    SkipMarkerAdded,
    /// A test input shrunk.
    TestInputShrunk,
    /// A timeout raised (or removed).
    TimeoutRaised,
}

impl MoveKind {
    /// The kebab-case name used in policy files and findings.
    pub fn as_str(self) -> &'static str {
        match self {
            MoveKind::AssertionRemoved => "assertion-removed",
            MoveKind::ComparisonLoosened => "comparison-loosened",
            MoveKind::CatchWidened => "catch-widened",
            MoveKind::SkipMarkerAdded => "skip-marker-added",
            MoveKind::TestInputShrunk => "test-input-shrunk",
            MoveKind::TimeoutRaised => "timeout-raised",
        }
    }
}

/// How a detector rule looks at a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Removed lines matching `pattern`, net of moves and same-file replacements.
    Removed,
    /// Added lines matching `pattern`, net of moves and same-file removals.
    Added,
    /// A removed line matching `before` replaced by an added line matching `after`.
    Pair,
    /// An added line matching `pattern` (a `return`) followed, in the new file, by a code
    /// line of the same block: the rest of the test can never run. Net of identical moves.
    Unreachable,
    /// An added line where `pattern` finds an assertion whose two operands (read after the
    /// match as `operands` says) are the same text: it can never fail. Netted like `added`.
    SameOperands,
}

/// Which way the numbers of a `numeric` pair rule must move to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Some number grew and none shrank.
    Increase,
    /// Some number shrank and none grew.
    Decrease,
}

/// An example of a detector rule: one line, or a `[before, after]` pair.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Example {
    Line(String),
    Pair(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DetectorSection {
    pub(crate) id: String,
    pub(crate) kind: MoveKind,
    pub(crate) languages: Vec<Language>,
    pub(crate) mode: Mode,
    #[serde(default)]
    pub(crate) pattern: Option<String>,
    #[serde(default)]
    pub(crate) before: Option<String>,
    #[serde(default)]
    pub(crate) after: Option<String>,
    #[serde(default)]
    pub(crate) numeric: Option<Direction>,
    #[serde(default)]
    pub(crate) operands: Option<Operands>,
    #[serde(default)]
    pub(crate) skip_arguments: usize,
    #[serde(default)]
    pub(crate) operators: Vec<String>,
    #[serde(rename = "match")]
    pub(crate) must_match: Vec<Example>,
    pub(crate) not_match: Vec<Example>,
}

/// Which side of the diff a finding's line number refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The base commit's version of the file.
    Old,
    /// The working tree's version of the file.
    New,
}

/// One forbidden move found in a diff.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Finding {
    /// Repository-relative path.
    pub file: String,
    /// 1-based line on `side`.
    pub line: usize,
    /// Which version `line` refers to.
    pub side: Side,
    /// Which of the six moves.
    pub kind: MoveKind,
    /// The id of the rule that fired.
    pub rule: String,
    /// The offending line (or `before -> after` for a replacement), trimmed, at most 200 chars.
    pub excerpt: String,
}

#[derive(Debug, Clone)]
struct Rule {
    id: String,
    kind: MoveKind,
    languages: Vec<Language>,
    mode: Mode,
    pattern: Option<Regex>,
    before: Option<Regex>,
    after: Option<Regex>,
    numeric: Option<Direction>,
    operands: Option<OperandReader>,
}

/// Number and time-unit helpers for `numeric` pair rules.
#[derive(Debug, Clone)]
struct Numbers {
    number: Regex,
    units: Vec<(Regex, UnitStyle)>,
}

#[derive(Debug, Clone, Copy)]
enum UnitStyle {
    /// Unit name in capture 1, number in capture 2.
    UnitThenNumber,
    /// Number in capture 1, unit name in capture 2.
    NumberThenUnit,
    /// Unit name in capture 1, the number is 1.
    UnitAlone,
}

const NUM: &str = r"(\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?)";

fn unit_nanos(unit: &str) -> Option<f64> {
    Some(match unit {
        "nanos" | "Nanos" | "Nanosecond" => 1.0,
        "micros" | "Micros" | "Microsecond" => 1e3,
        "millis" | "Millis" | "Millisecond" => 1e6,
        "secs" | "secs_f64" | "secs_f32" | "Seconds" | "Second" => 1e9,
        "Minutes" | "Minute" | "mins" => 60e9,
        "Hours" | "Hour" => 3600e9,
        "Days" => 86400e9,
        _ => return None,
    })
}

fn parse_number(text: &str) -> Option<f64> {
    text.replace('_', "").parse::<f64>().ok()
}

impl Numbers {
    fn new() -> std::result::Result<Numbers, regex::Error> {
        let go_units = "(Nanosecond|Microsecond|Millisecond|Second|Minute|Hour)";
        Ok(Numbers {
            number: Regex::new(&format!(r"\b{NUM}"))?,
            units: vec![
                (
                    Regex::new(&format!(
                        r"Duration::from_(secs_f64|secs_f32|secs|millis|micros|nanos|mins)\s*\(\s*{NUM}\s*\)"
                    ))?,
                    UnitStyle::UnitThenNumber,
                ),
                (
                    Regex::new(&format!(
                        r"Duration\.of(Nanos|Millis|Seconds|Minutes|Hours|Days)\s*\(\s*{NUM}\s*\)"
                    ))?,
                    UnitStyle::UnitThenNumber,
                ),
                (
                    Regex::new(&format!(r"\b{NUM}\s*\*\s*time\.{go_units}\b"))?,
                    UnitStyle::NumberThenUnit,
                ),
                (
                    Regex::new(&format!(r"\btime\.{go_units}\s*\*\s*{NUM}"))?,
                    UnitStyle::UnitThenNumber,
                ),
                (
                    Regex::new(&format!(r"\btime\.{go_units}\b"))?,
                    UnitStyle::UnitAlone,
                ),
            ],
        })
    }

    /// The line with durations folded to `<nanoseconds>__T`.
    fn fold_units(&self, line: &str) -> String {
        let mut text = line.to_string();
        for (re, style) in &self.units {
            text = re
                .replace_all(&text, |caps: &regex::Captures<'_>| {
                    let (unit, number) = match style {
                        UnitStyle::UnitThenNumber => (caps.get(1), caps.get(2)),
                        UnitStyle::NumberThenUnit => (caps.get(2), caps.get(1)),
                        UnitStyle::UnitAlone => (caps.get(1), None),
                    };
                    let factor = unit.and_then(|u| unit_nanos(u.as_str()));
                    let value = match number {
                        Some(n) => parse_number(n.as_str()),
                        None => Some(1.0),
                    };
                    match (factor, value) {
                        (Some(f), Some(v)) => format!("{}__T", (f * v).round()),
                        _ => caps
                            .get(0)
                            .map_or(String::new(), |m| m.as_str().to_string()),
                    }
                })
                .into_owned();
        }
        text
    }

    /// The shape (numbers replaced by `#`, whitespace dropped) and the numbers of a line.
    fn shape(&self, line: &str) -> (String, Vec<f64>) {
        let folded = self.fold_units(line);
        let mut values = Vec::new();
        let shape = self
            .number
            .replace_all(&folded, |caps: &regex::Captures<'_>| {
                values.push(
                    caps.get(1)
                        .and_then(|m| parse_number(m.as_str()))
                        .unwrap_or(0.0),
                );
                "#"
            })
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        (shape, values)
    }

    /// True when `before` and `after` are the same but for numbers that moved in `direction`.
    fn moved(&self, before: &str, after: &str, direction: Direction) -> bool {
        let (shape_b, values_b) = self.shape(before);
        let (shape_a, values_a) = self.shape(after);
        if shape_b != shape_a || values_b.len() != values_a.len() {
            return false;
        }
        let up = values_b.iter().zip(&values_a).any(|(b, a)| a > b);
        let down = values_b.iter().zip(&values_a).any(|(b, a)| a < b);
        match direction {
            Direction::Increase => up && !down,
            Direction::Decrease => down && !up,
        }
    }
}

/// One line of a diff as the detectors see it.
#[derive(Debug, Clone)]
pub(crate) struct LineRef {
    pub(crate) line: usize,
    pub(crate) text: String,
}

/// One line of a change block as one side of the diff reads it, in order.
#[derive(Debug, Clone)]
pub(crate) struct SeqLine {
    pub(crate) line: usize,
    pub(crate) text: String,
    /// Added (new side) or removed (old side), not context.
    pub(crate) changed: bool,
    /// The line is test code.
    pub(crate) test: bool,
}

/// The test-context lines of one changed file.
#[derive(Debug, Clone)]
pub(crate) struct FileLines {
    pub(crate) path: String,
    pub(crate) language: Language,
    /// The file did not exist at base.
    pub(crate) new_file: bool,
    pub(crate) removed: Vec<LineRef>,
    pub(crate) added: Vec<LineRef>,
    /// Removed line replaced by added line at the same position of a change block.
    pub(crate) pairs: Vec<(LineRef, LineRef)>,
    /// Per hunk, the new side's lines (context and added), in order.
    pub(crate) new_runs: Vec<Vec<SeqLine>>,
    /// Per hunk, the old side's lines (context and removed), in order.
    pub(crate) old_runs: Vec<Vec<SeqLine>>,
}

/// The compiled detector rules.
#[derive(Debug, Clone)]
pub(crate) struct Detectors {
    rules: Vec<Rule>,
    numbers: Numbers,
}

fn compile(
    text: &str,
    file: &str,
    id: &str,
    field: &str,
    pattern: Option<&String>,
) -> Result<Option<Regex>> {
    pattern
        .map(|p| {
            Regex::new(p).map_err(|e| {
                rule_error(
                    text,
                    file,
                    id,
                    format!("{field} regex does not compile: {e}"),
                )
            })
        })
        .transpose()
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() <= 200 {
        t.to_string()
    } else {
        t.chars().take(200).collect()
    }
}

impl Detectors {
    pub(crate) fn build(sections: &[DetectorSection], text: &str, file: &str) -> Result<Detectors> {
        let numbers = Numbers::new().map_err(|e| Error::Rule {
            file: file.to_string(),
            line: 0,
            rule: "<numbers>".to_string(),
            message: e.to_string(),
        })?;
        let mut rules = Vec::new();
        let mut seen = BTreeSet::new();
        for s in sections {
            let err = |m: String| rule_error(text, file, &s.id, m);
            if !seen.insert(s.id.clone()) {
                return Err(err("duplicate rule id".to_string()));
            }
            if s.languages.is_empty() {
                return Err(err("`languages` is empty".to_string()));
            }
            let mut rule = Rule {
                id: s.id.clone(),
                kind: s.kind,
                languages: s.languages.clone(),
                mode: s.mode,
                pattern: compile(text, file, &s.id, "pattern", s.pattern.as_ref())?,
                before: compile(text, file, &s.id, "before", s.before.as_ref())?,
                after: compile(text, file, &s.id, "after", s.after.as_ref())?,
                numeric: s.numeric,
                operands: None,
            };
            if s.mode != Mode::SameOperands
                && (s.operands.is_some() || s.skip_arguments != 0 || !s.operators.is_empty())
            {
                return Err(err(
                    "`operands`, `skip_arguments` and `operators` apply to same-operands rules only"
                        .to_string(),
                ));
            }
            match s.mode {
                Mode::Removed | Mode::Added | Mode::Unreachable => {
                    if rule.pattern.is_none() || rule.before.is_some() || rule.after.is_some() {
                        return Err(err(
                            "a removed/added/unreachable rule needs `pattern` and no `before`/`after`"
                                .to_string(),
                        ));
                    }
                    if rule.numeric.is_some() {
                        return Err(err("`numeric` applies to pair rules only".to_string()));
                    }
                }
                Mode::Pair => {
                    if rule.pattern.is_some() || rule.before.is_none() || rule.after.is_none() {
                        return Err(err(
                            "a pair rule needs `before` and `after` and no `pattern`".to_string(),
                        ));
                    }
                }
                Mode::SameOperands => {
                    let Some(shape) = s.operands else {
                        return Err(err("a same-operands rule needs `operands`".to_string()));
                    };
                    let wants_after = shape == Operands::Chain;
                    if rule.pattern.is_none()
                        || rule.before.is_some()
                        || rule.numeric.is_some()
                        || rule.after.is_some() != wants_after
                    {
                        return Err(err(
                            "a same-operands rule needs `pattern`, `after` exactly when `operands = \"chain\"`, and no `before`/`numeric`"
                                .to_string(),
                        ));
                    }
                    if (shape == Operands::Comparison) == s.operators.is_empty() {
                        return Err(err(
                            "`operators` is required for, and only for, `operands = \"comparison\"`"
                                .to_string(),
                        ));
                    }
                    rule.operands = Some(OperandReader {
                        shape,
                        skip_arguments: s.skip_arguments,
                        operators: s.operators.clone(),
                        after: rule.after.take(),
                    });
                }
            }
            if s.must_match.is_empty() || s.not_match.is_empty() {
                return Err(err(
                    "needs at least one `match` and one `not_match` example".to_string(),
                ));
            }
            let language = rule.languages[0];
            for (expected, examples) in [(true, &s.must_match), (false, &s.not_match)] {
                for example in examples {
                    let fired = match (s.mode, example) {
                        (Mode::Removed | Mode::Added | Mode::SameOperands, Example::Line(line)) => {
                            rule.line_fires(language, line)
                        }
                        (Mode::Unreachable, Example::Line(snippet)) => {
                            let mut lines = snippet.lines();
                            let first = lines.next().unwrap_or("");
                            rule.unreachable_fires(language, first, lines)
                        }
                        (Mode::Pair, Example::Pair(pair)) if pair.len() == 2 => {
                            rule.pair_fires(&numbers, language, &pair[0], &pair[1])
                        }
                        _ => {
                            return Err(err(format!(
                                "example {example:?} has the wrong shape: pair rules take [before, after], the others strings (an unreachable rule's: the line, then the lines after it)"
                            )));
                        }
                    };
                    if fired != expected {
                        let which = if expected { "match" } else { "not_match" };
                        return Err(err(format!(
                            "{which} example {example:?} {} the rule",
                            if fired { "fires" } else { "does not fire" }
                        )));
                    }
                }
            }
            rules.push(rule);
        }
        Ok(Detectors { rules, numbers })
    }

    /// Every finding in `files`, sorted.
    pub(crate) fn run(&self, files: &[FileLines]) -> Vec<Finding> {
        let mut findings: BTreeSet<Finding> = BTreeSet::new();
        // Pair rules.
        for rule in self.rules.iter().filter(|r| r.mode == Mode::Pair) {
            for f in files
                .iter()
                .filter(|f| rule.languages.contains(&f.language))
            {
                for (before, after) in &f.pairs {
                    if rule.pair_fires(&self.numbers, f.language, &before.text, &after.text) {
                        findings.insert(Finding {
                            file: f.path.clone(),
                            line: after.line,
                            side: Side::New,
                            kind: rule.kind,
                            rule: rule.id.clone(),
                            excerpt: excerpt(&format!(
                                "{} -> {}",
                                before.text.trim(),
                                after.text.trim()
                            )),
                        });
                    }
                }
            }
        }
        // Removed/added (and same-operands, an added mode) rules, netted per (kind, mode).
        let lined = |r: &Rule| !matches!(r.mode, Mode::Pair | Mode::Unreachable);
        let groups: BTreeSet<(MoveKind, bool)> = self
            .rules
            .iter()
            .filter(|r| lined(r))
            .map(|r| (r.kind, r.mode == Mode::Removed))
            .collect();
        for (kind, removed_mode) in groups {
            let rules: Vec<&Rule> = self
                .rules
                .iter()
                .filter(|r| r.kind == kind && lined(r) && (r.mode == Mode::Removed) == removed_mode)
                .collect();
            self.run_group(kind, removed_mode, &rules, files, &mut findings);
        }
        for rule in self.rules.iter().filter(|r| r.mode == Mode::Unreachable) {
            run_unreachable(rule, files, &mut findings);
        }
        // One finding per (file, line, side, kind): several rules of a kind may fire on a line.
        let mut seen = BTreeSet::new();
        findings
            .into_iter()
            .filter(|f| seen.insert((f.file.clone(), f.line, f.side, f.kind)))
            .collect()
    }

    fn run_group(
        &self,
        kind: MoveKind,
        removed_mode: bool,
        rules: &[&Rule],
        files: &[FileLines],
        findings: &mut BTreeSet<Finding>,
    ) {
        struct Hit {
            file: usize,
            line: usize,
            text: String,
            rule: String,
            cancelled: bool,
        }
        let first_rule = |language: Language, text: &str| -> Option<String> {
            rules
                .iter()
                .find(|r| r.languages.contains(&language) && r.line_fires(language, text))
                .map(|r| r.id.clone())
        };
        let mut primary: Vec<Hit> = Vec::new();
        let mut counter: Vec<Hit> = Vec::new();
        for (index, f) in files.iter().enumerate() {
            // Only skip markers count in files that are new: a new test may legitimately
            // catch broadly or use a small input, but a new skipped test is no test. A new
            // file's lines still cancel moves (a renamed test file).
            let primary_counts =
                !f.new_file || (kind == MoveKind::SkipMarkerAdded && !removed_mode);
            let (main, other) = if removed_mode {
                (&f.removed, &f.added)
            } else {
                (&f.added, &f.removed)
            };
            let empty = Vec::new();
            let main = if primary_counts { main } else { &empty };
            for (lines, out) in [(main, &mut primary), (other, &mut counter)] {
                for l in lines {
                    if let Some(rule) = first_rule(f.language, &l.text) {
                        out.push(Hit {
                            file: index,
                            line: l.line,
                            text: l.text.trim().to_string(),
                            rule,
                            cancelled: false,
                        });
                    }
                }
            }
        }
        // Moves: an identical line on the other side anywhere in the diff cancels one hit.
        let mut by_text: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, c) in counter.iter().enumerate() {
            by_text.entry(c.text.as_str()).or_default().push(i);
        }
        let mut cancelled_counter = vec![false; counter.len()];
        for p in primary.iter_mut() {
            if let Some(list) = by_text.get_mut(p.text.as_str())
                && let Some(i) = list.pop()
            {
                p.cancelled = true;
                if let Some(flag) = cancelled_counter.get_mut(i) {
                    *flag = true;
                }
            }
        }
        // Same-file replacements: each remaining counter hit cancels one remaining primary.
        let mut counter_left: BTreeMap<usize, usize> = BTreeMap::new();
        for (i, c) in counter.iter().enumerate() {
            if !cancelled_counter.get(i).copied().unwrap_or(true) {
                *counter_left.entry(c.file).or_default() += 1;
            }
        }
        for p in primary.iter().filter(|p| !p.cancelled) {
            let left = counter_left.entry(p.file).or_default();
            if *left > 0 {
                *left -= 1;
                continue;
            }
            let Some(f) = files.get(p.file) else { continue };
            findings.insert(Finding {
                file: f.path.clone(),
                line: p.line,
                side: if removed_mode { Side::Old } else { Side::New },
                kind,
                rule: p.rule.clone(),
                excerpt: excerpt(&p.text),
            });
        }
    }
}

/// Unreachable-rule hits of one side: (file index, line, trimmed text).
fn unreachable_hits(
    rule: &Rule,
    files: &[FileLines],
    new_side: bool,
) -> Vec<(usize, usize, String)> {
    let mut hits = Vec::new();
    for (index, f) in files.iter().enumerate() {
        if !rule.languages.contains(&f.language) {
            continue;
        }
        // New files count too for the kind that counts there (a new test that returns
        // before its assertions is no test).
        if new_side && f.new_file && rule.kind != MoveKind::SkipMarkerAdded {
            continue;
        }
        let runs = if new_side { &f.new_runs } else { &f.old_runs };
        for run in runs {
            for (k, l) in run.iter().enumerate() {
                if !(l.changed && l.test) {
                    continue;
                }
                let rest = run.iter().skip(k + 1).map(|n| n.text.as_str());
                if rule.unreachable_fires(f.language, &l.text, rest) {
                    hits.push((index, l.line, l.text.trim().to_string()));
                }
            }
        }
    }
    hits
}

/// An unreachable rule over the diff: each new-side hit counts unless an identical line was
/// already unreachable on the old side (the dead code moved, it was not made).
fn run_unreachable(rule: &Rule, files: &[FileLines], findings: &mut BTreeSet<Finding>) {
    let mut old: HashMap<String, usize> = HashMap::new();
    for (_, _, text) in unreachable_hits(rule, files, false) {
        *old.entry(text).or_default() += 1;
    }
    for (index, line, text) in unreachable_hits(rule, files, true) {
        if let Some(n) = old.get_mut(&text).filter(|n| **n > 0) {
            *n -= 1;
            continue;
        }
        let Some(f) = files.get(index) else { continue };
        findings.insert(Finding {
            file: f.path.clone(),
            line,
            side: Side::New,
            kind: rule.kind,
            rule: rule.id.clone(),
            excerpt: excerpt(&text),
        });
    }
}

/// Whether `line` is a complete statement: brackets balanced and nothing left hanging
/// (`return (`, `return a +`, `return \`), so the next line starts a new statement.
fn complete_statement(line: &str) -> bool {
    let code = line.trim_end();
    let balanced = crate::operands::bracket_contents(&format!("{code})"))
        .is_some_and(|(_, rest)| rest.is_empty());
    balanced
        && !code.ends_with([
            '(', '[', '{', ',', '\\', '+', '-', '*', '/', '|', '&', '=', '.', ':',
        ])
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

impl Rule {
    fn line_fires(&self, language: Language, line: &str) -> bool {
        if language.is_comment_line(line) {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return false;
        };
        match &self.operands {
            Some(reader) => pattern
                .find_iter(line)
                .any(|m| reader.identical(language, line, m.end())),
            None => pattern.is_match(line),
        }
    }

    /// `line` matches and the next code line of `rest` is in the same block: it never runs.
    fn unreachable_fires<'a>(
        &self,
        language: Language,
        line: &str,
        rest: impl Iterator<Item = &'a str>,
    ) -> bool {
        if !self.line_fires(language, line) || !complete_statement(line) {
            return false;
        }
        let mut rest = rest;
        let Some(next) = rest.find(|l| !l.trim().is_empty() && !language.is_comment_line(l)) else {
            return false;
        };
        if language == Language::Python {
            // Same indentation: the same block. Less: the block ended. More: a continuation.
            return indentation(next) == indentation(line);
        }
        let t = next.trim_start();
        // A line that starts with `.` or an operator continues the returned expression.
        let continues = t.starts_with(['.', '?', ':', '+', '-', '*', '/', '&', '|', ',', '=']);
        let closes = continues
            || t.starts_with(['}', ')', ']'])
            || t.starts_with("case ")
            || t.starts_with("default:")
            || t.starts_with("default ");
        !closes
    }

    fn pair_fires(&self, numbers: &Numbers, language: Language, before: &str, after: &str) -> bool {
        if language.is_comment_line(before) || language.is_comment_line(after) {
            return false;
        }
        let shape_ok = self.before.as_ref().is_some_and(|r| r.is_match(before))
            && self.after.as_ref().is_some_and(|r| r.is_match(after));
        if !shape_ok {
            return false;
        }
        match self.numeric {
            Some(direction) => numbers.moved(before, after, direction),
            None => true,
        }
    }
}
