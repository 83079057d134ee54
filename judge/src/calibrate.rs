//! Calibration against hand scores: loading the cases, agreement per dimension, Cohen's kappa
//! on the verdict, and the accept rate.

use std::path::{Path, PathBuf};

use airlock_schemas::{JudgeScores, JudgeVerdict, Verdict};
use serde::{Deserialize, Serialize};

use crate::{CandidateFile, CodebaseContext, Error, JudgeInput, Judgement, Result};

/// The five dimensions, in rubric order.
pub const DIMENSIONS: [&str; 5] = [
    "root_cause",
    "minimality",
    "test_honesty",
    "conventions",
    "faithfulness",
];

fn dimension(scores: &JudgeScores, name: &str) -> u8 {
    match name {
        "root_cause" => scores.root_cause,
        "minimality" => scores.minimality,
        "test_honesty" => scores.test_honesty,
        "conventions" => scores.conventions,
        _ => scores.faithfulness,
    }
}

/// One hand-scored case: the artefact and the human score.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationCase {
    /// Directory name, e.g. `07-claims-test-without-one`.
    pub name: String,
    /// What the judge is shown.
    pub input: JudgeInput,
    /// The hand score.
    pub expected: JudgeVerdict,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseMeta {
    issue_id: String,
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    file_tree: String,
    #[serde(default)]
    candidate_files: Vec<CandidateFile>,
}

fn read(case: &Path, file: &str) -> Result<String> {
    let path = case.join(file);
    std::fs::read_to_string(&path).map_err(|source| Error::Io { path, source })
}

/// Load every case directory under `dir` (sorted by name). Each holds `issue.md`, `diff.patch`,
/// `before.txt`, `after.txt`, `witness.txt`, `body.md`, `case.json` (issue id, detector flags,
/// file tree, candidate files) and `expected.json` (the hand score, a valid `judge_verdict`).
pub fn load_cases(dir: &Path) -> Result<Vec<CalibrationCase>> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        if entry.path().join("case.json").is_file() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    let mut cases = Vec::new();
    for case in dirs {
        let name = case
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bad = |message: String| Error::BadCase {
            case: name.clone(),
            message,
        };
        let meta: CaseMeta = serde_json::from_str(&read(&case, "case.json")?)
            .map_err(|e| bad(format!("case.json: {e}")))?;
        let expected: JudgeVerdict =
            airlock_schemas::parse(read(&case, "expected.json")?.trim())
                .map_err(|e| bad(format!("expected.json is not a valid judge_verdict: {e}")))?;
        let mut candidate_files = meta.candidate_files;
        candidate_files.sort_by(|a, b| a.path.cmp(&b.path));
        let input = JudgeInput {
            issue_id: meta.issue_id,
            issue_text: read(&case, "issue.md")?,
            diff: read(&case, "diff.patch")?,
            before_output: read(&case, "before.txt")?,
            after_output: read(&case, "after.txt")?,
            witness_result: read(&case, "witness.txt")?,
            pr_body: read(&case, "body.md")?,
            flags: meta.flags,
            context: CodebaseContext {
                file_tree: meta.file_tree,
                candidate_files,
            },
        };
        cases.push(CalibrationCase {
            name,
            input,
            expected,
        });
    }
    Ok(cases)
}

/// Agreement of the judge with the hand scores on one dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionAgreement {
    /// Dimension name.
    pub dimension: String,
    /// Cases scored by both.
    pub cases: usize,
    /// Fraction with the same score.
    pub exact: f64,
    /// Fraction within one point.
    pub within_one: f64,
}

/// One case's outcome in a calibration run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Case name.
    pub case: String,
    /// The hand verdict.
    pub expected: Verdict,
    /// The judge's final verdict; `None` when scoring failed.
    pub judged: Option<Verdict>,
}

/// The calibration report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationReport {
    /// Cases run.
    pub cases: usize,
    /// Cases whose answer broke the contract twice.
    pub failures: usize,
    /// Agreement per dimension, in rubric order.
    pub dimensions: Vec<DimensionAgreement>,
    /// Cohen's kappa between hand and judge verdicts; `None` when undefined (no scored case, or
    /// both raters used one identical category throughout).
    pub verdict_kappa: Option<f64>,
    /// Fraction of scored cases on which the verdicts agree.
    pub verdict_agreement: f64,
    /// Judge's accept rate over the scored cases.
    pub accept_rate: f64,
    /// The configured ceiling.
    pub accept_rate_ceiling: f64,
    /// Set when the accept rate exceeds the ceiling.
    pub warning: Option<String>,
    /// Per case, sorted by name.
    pub results: Vec<CaseResult>,
}

/// Exact and within-one agreement on `dimension` over `(hand, judge)` pairs.
pub fn agreement(dimension: &str, pairs: &[(JudgeScores, JudgeScores)]) -> DimensionAgreement {
    let n = pairs.len();
    let mut exact = 0usize;
    let mut within = 0usize;
    for (hand, judged) in pairs {
        let (a, b) = (
            dimension_of(hand, dimension),
            dimension_of(judged, dimension),
        );
        if a == b {
            exact += 1;
        }
        if a.abs_diff(b) <= 1 {
            within += 1;
        }
    }
    DimensionAgreement {
        dimension: dimension.to_owned(),
        cases: n,
        exact: ratio(exact, n),
        within_one: ratio(within, n),
    }
}

fn dimension_of(scores: &JudgeScores, name: &str) -> u8 {
    dimension(scores, name)
}

fn ratio(k: usize, n: usize) -> f64 {
    if n == 0 { 0.0 } else { k as f64 / n as f64 }
}

fn index(v: Verdict) -> usize {
    match v {
        Verdict::Accept => 0,
        Verdict::Revise => 1,
        Verdict::Reject => 2,
    }
}

/// Cohen's kappa over `(rater_a, rater_b)` verdict pairs: (p_o - p_e) / (1 - p_e). `None` when
/// there are no pairs or p_e is 1 (both raters always gave the same single verdict).
pub fn cohen_kappa(pairs: &[(Verdict, Verdict)]) -> Option<f64> {
    let n = pairs.len();
    if n == 0 {
        return None;
    }
    let mut a = [0usize; 3];
    let mut b = [0usize; 3];
    let mut agree = 0usize;
    for (x, y) in pairs {
        a[index(*x)] += 1;
        b[index(*y)] += 1;
        if x == y {
            agree += 1;
        }
    }
    let nf = n as f64;
    let p_o = agree as f64 / nf;
    let p_e: f64 = (0..3)
        .map(|i| (a[i] as f64 / nf) * (b[i] as f64 / nf))
        .sum();
    if (1.0 - p_e).abs() < f64::EPSILON {
        return None;
    }
    Some((p_o - p_e) / (1.0 - p_e))
}

/// Fraction of `verdicts` that are `accept`.
pub fn accept_rate(verdicts: &[Verdict]) -> f64 {
    ratio(
        verdicts.iter().filter(|v| **v == Verdict::Accept).count(),
        verdicts.len(),
    )
}

/// Build the report from each case's judgement.
pub fn report(
    cases: &[CalibrationCase],
    judgements: &[Judgement],
    accept_rate_ceiling: f64,
) -> CalibrationReport {
    let mut score_pairs = Vec::new();
    let mut verdict_pairs = Vec::new();
    let mut results = Vec::new();
    let mut failures = 0usize;
    for (case, judgement) in cases.iter().zip(judgements) {
        let judged = judgement.verdict();
        match judged {
            Some(v) => {
                score_pairs.push((case.expected.scores, v.scores));
                verdict_pairs.push((case.expected.verdict, v.verdict));
            }
            None => failures += 1,
        }
        results.push(CaseResult {
            case: case.name.clone(),
            expected: case.expected.verdict,
            judged: judged.map(|v| v.verdict),
        });
    }
    results.sort_by(|a, b| a.case.cmp(&b.case));
    let judged: Vec<Verdict> = verdict_pairs.iter().map(|(_, j)| *j).collect();
    let rate = accept_rate(&judged);
    let agree = verdict_pairs.iter().filter(|(a, b)| a == b).count();
    CalibrationReport {
        cases: cases.len(),
        failures,
        dimensions: DIMENSIONS
            .iter()
            .map(|d| agreement(d, &score_pairs))
            .collect(),
        verdict_kappa: cohen_kappa(&verdict_pairs),
        verdict_agreement: ratio(agree, verdict_pairs.len()),
        accept_rate: rate,
        accept_rate_ceiling,
        warning: accept_rate_warning(rate, accept_rate_ceiling),
        results,
    }
}

/// The warning printed when a batch's accept rate is above the ceiling.
pub fn accept_rate_warning(rate: f64, ceiling: f64) -> Option<String> {
    (rate > ceiling).then(|| {
        format!(
            "accept rate {:.0}% is above the ceiling of {:.0}%: the judge is being generous and its scores lose their value",
            rate * 100.0,
            ceiling * 100.0
        )
    })
}
