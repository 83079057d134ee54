//! The broker's own screening for the approver: the prompt-injection detector
//! ([`airlock_audit::detect`]) over what the broker can see without trusting the run (the
//! registered issue, the pull request's title and body, the diff's added lines, and every file
//! the diff touches as it stands at the pinned commit), merged with what the run reported
//! with `open_pr` into one [`ItemFinding`] per place. The intake stores the result on the
//! queue item; `show` and the web page read it from there.

use std::path::Path;

use airlock_audit::SourceKind;
use airlock_policies::{FileDiff, LineKind};
use airlock_protocol::{FindingSource, IssueText, ItemFinding, merge_by_place};

/// Files larger than this are not screened at the pin (a generated blob is not prose an
/// agent reads); the diff's added lines of such a file still are.
const MAX_SCREENED_FILE_BYTES: usize = 2 * 1024 * 1024;

/// What the broker screens, all of it from its own records and clone.
pub struct Screened<'a> {
    /// The issue the run registered, when it sent one.
    pub issue: Option<&'a IssueText>,
    /// The pull request's (or review's) title.
    pub title: &'a str,
    /// The pull request's body (or a review's words).
    pub body: Option<&'a str>,
    /// The broker's own diff, parsed.
    pub files: &'a [FileDiff],
}

/// The broker's findings in the issue, the title, the body and the diff's added lines; a
/// finding of the issue names the body's line (the title is line 0), a diff finding the added
/// line's number in the new file.
pub fn text_findings(seen: &Screened<'_>) -> Vec<ItemFinding> {
    let found =
        |place: &str, text: &str, source, path: Option<&str>, line_of: &dyn Fn(u64) -> u64| {
            airlock_audit::detect(text, source, path)
                .into_iter()
                .map(|f| {
                    ItemFinding::at(
                        FindingSource::Broker,
                        place,
                        Some(line_of(f.line)),
                        f.rule.as_str(),
                        &f.excerpt,
                    )
                })
                .collect::<Vec<_>>()
        };
    let same = |n: u64| n;
    let mut out = Vec::new();
    if let Some(issue) = seen.issue {
        let text = format!("{}\n{}", issue.title, issue.body);
        // Line 1 is the title; the body's lines follow, numbered from 1.
        out.extend(found("issue", &text, SourceKind::IssueBody, None, &|n| {
            n.saturating_sub(1)
        }));
    }
    out.extend(found(
        "title",
        seen.title,
        SourceKind::ToolOutput,
        None,
        &same,
    ));
    if let Some(body) = seen.body {
        out.extend(found("body", body, SourceKind::IssueBody, None, &same));
    }
    for file in seen.files {
        let added: Vec<&airlock_policies::DiffLine> = file
            .hunks
            .iter()
            .flat_map(|h| &h.lines)
            .filter(|l| l.kind == LineKind::Added)
            .collect();
        if added.is_empty() {
            continue;
        }
        let text: Vec<&str> = added.iter().map(|l| l.text.as_str()).collect();
        let new_line = |n: u64| {
            usize::try_from(n)
                .ok()
                .and_then(|n| added.get(n.checked_sub(1)?))
                .and_then(|l| l.new_line)
                .map_or(n, |l| l as u64)
        };
        out.extend(found(
            file.path(),
            &text.join("\n"),
            SourceKind::File,
            Some(file.path()),
            &new_line,
        ));
    }
    out
}

/// The broker's findings in every file the diff touches, as each stands at the pinned
/// commit `pin` of `repo` (a file the change adds has no pinned version; a binary or a very
/// large blob is skipped). Line numbers are the pinned file's.
pub fn pinned_file_findings(
    repo: &git2::Repository,
    pin: git2::Oid,
    files: &[FileDiff],
) -> Vec<ItemFinding> {
    let Ok(tree) = repo.find_commit(pin).and_then(|c| c.tree()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for file in files {
        let path = file.old_path.as_deref().unwrap_or(file.path());
        let Ok(entry) = tree.get_path(Path::new(path)) else {
            continue;
        };
        let Ok(blob) = repo.find_blob(entry.id()) else {
            continue;
        };
        if blob.is_binary() || blob.size() > MAX_SCREENED_FILE_BYTES {
            continue;
        }
        let text = String::from_utf8_lossy(blob.content());
        out.extend(
            airlock_audit::detect(&text, SourceKind::File, Some(path))
                .into_iter()
                .map(|f| ItemFinding {
                    at_pin: true,
                    ..ItemFinding::at(
                        FindingSource::Broker,
                        path,
                        Some(f.line),
                        f.rule.as_str(),
                        &f.excerpt,
                    )
                }),
        );
    }
    out
}

/// One finding per place and source, from the broker's own and the run's reported ones. What
/// the run reported is kept only in its own attribution: a `source` of `broker` in a run's
/// report is relabelled `run` (the run cannot speak for the broker).
pub fn merged(own: Vec<ItemFinding>, reported: &[ItemFinding]) -> Vec<ItemFinding> {
    let reported = reported.iter().cloned().map(|mut f| {
        if f.source == FindingSource::Broker {
            f.source = FindingSource::Run;
        }
        f
    });
    merge_by_place(own.into_iter().chain(reported))
}

/// A review's words as one text: the summary, then each comment as `path:line (SIDE): body`.
pub fn review_text(review: &airlock_schemas::Review) -> String {
    let mut text = review.summary.clone();
    for c in &review.comments {
        text.push_str(&format!(
            "\n\n{}:{} ({}): {}",
            c.path,
            c.line,
            airlock_policies::diffmap::side_name(c.side),
            c.body
        ));
    }
    text
}
