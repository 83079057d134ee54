//! The pages as HTML strings. Every text that came from the agent, the repository, the forge
//! or the audit log passes through [`esc`] (one line) or [`esc_block`] (kept multi-line): its
//! control, format and invisible characters are written out first, as the terminal views do
//! (`policies::terminal`), and then `& < > " '` are escaped, so no text can open a tag, an
//! attribute or a link. No page holds inline script or style (the CSP allows neither).

use std::fmt::Write as _;

use airlock_audit::{BorderlineOpinion, FindingStatus, Injection, SecondOpinion, TriageStatus};
use airlock_policies::testrun::Grade;
use airlock_schemas::JudgeVerdict;

use crate::approver::{JudgeScore, ScoredRow};
use crate::view::ItemView;

/// HTML-escape text that is already visible (no control characters left).
pub fn esc_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Agent or repository text for one line of a page (a title, a path, a cell).
pub fn esc(text: &str) -> String {
    esc_text(&airlock_policies::terminal::escaped_line(text))
}

/// Agent or repository text kept on its lines (a body, a log), for a `<pre>`.
pub fn esc_block(text: &str) -> String {
    esc_text(&airlock_policies::terminal::escaped(text))
}

/// Which page the navigation marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// The queue and item pages.
    Queue,
    /// The security page.
    Security,
    /// The login page (no navigation).
    None,
}

/// A whole page around `body`; with a session's CSRF token, the navigation and logout form.
pub fn layout(title: &str, nav: Nav, csrf: Option<&str>, scripts: &[&str], body: &str) -> String {
    layout_as(title, nav, csrf, None, scripts, body)
}

/// [`layout`] that names who is logged in (`who`, escaped) beside the logout button.
pub fn layout_as(
    title: &str,
    nav: Nav,
    csrf: Option<&str>,
    who: Option<&str>,
    scripts: &[&str],
    body: &str,
) -> String {
    let mut out = String::from("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        out,
        "<title>{} · airlock</title><link rel=\"stylesheet\" href=\"/static/app.css\">",
        esc(title)
    );
    for script in scripts {
        let _ = write!(out, "<script src=\"{script}\" defer></script>");
    }
    out.push_str("</head><body>");
    if let (Some(csrf), true) = (csrf, nav != Nav::None) {
        let class = |n: Nav| if n == nav { " class=\"active\"" } else { "" };
        let _ = write!(
            out,
            "<header class=\"top\"><span>airlock</span><a href=\"/\"{}>Queue</a><a href=\"/security\"{}>Security</a>\
             <form method=\"post\" action=\"/logout\">{}<input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Log out</button></form></header>",
            class(Nav::Queue),
            class(Nav::Security),
            who.map(|w| format!(
                "<span class=\"who\" id=\"who\">logged in as {}</span> ",
                esc(w)
            ))
            .unwrap_or_default(),
            esc_text(csrf)
        );
    }
    out.push_str("<main>");
    out.push_str(body);
    out.push_str("</main></body></html>\n");
    out
}

/// The login form.
pub fn login(message: Option<&str>) -> String {
    let mut body = String::from("<div class=\"login\"><h1>airlock: log in</h1>");
    if let Some(m) = message {
        let _ = write!(body, "<p class=\"error\">{}</p>", esc(m));
    }
    body.push_str(
        "<p>Paste your approver token (<code>airlock-broker approver add NAME</code> printed it). While no approver is registered, the token <code>airlock-broker ui</code> printed when it started (or the one in the file it was given) logs in instead.</p>\
         <form method=\"post\" action=\"/login\"><input type=\"password\" name=\"token\" autocomplete=\"off\" required autofocus> \
         <button type=\"submit\" id=\"login\">Log in</button></form></div>",
    );
    layout("log in", Nav::None, None, &[], &body)
}

/// An error page.
pub fn error(csrf: Option<&str>, message: &str) -> String {
    let body = format!(
        "<h1>Refused</h1><p class=\"error\" id=\"error\">{}</p><p><a href=\"/\">Back to the queue</a></p>",
        esc(message)
    );
    layout("refused", Nav::Queue, csrf, &[], &body)
}

/// How old something is, in one short unit.
fn age(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The judge's stored verdict, when it parses as the contract's type.
fn verdict_of(score: Option<&JudgeScore>) -> Option<JudgeVerdict> {
    score.and_then(|(j, _)| serde_json::from_value(j.get("verdict")?.clone()).ok())
}

fn verdict_word(v: &JudgeVerdict) -> &'static str {
    match v.verdict {
        airlock_schemas::Verdict::Accept => "accept",
        airlock_schemas::Verdict::Revise => "revise",
        airlock_schemas::Verdict::Reject => "reject",
    }
}

fn judge_cell(score: Option<&JudgeScore>) -> String {
    match (score, verdict_of(score)) {
        (None, _) => "—".to_owned(),
        (Some(_), None) => "unscored".to_owned(),
        (Some(_), Some(v)) => {
            let s = v.scores;
            let total = u32::from(s.root_cause)
                + u32::from(s.minimality)
                + u32::from(s.test_honesty)
                + u32::from(s.conventions)
                + u32::from(s.faithfulness);
            format!("{} {total}/25", verdict_word(&v))
        }
    }
}

/// The queue's filters, as the query string gives them.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct QueueFilter {
    /// Only this status.
    #[serde(default)]
    pub status: String,
    /// Only this repository.
    #[serde(default)]
    pub repository: String,
    /// Only items whose title or issue id holds this text.
    #[serde(default)]
    pub q: String,
}

impl QueueFilter {
    fn keeps(&self, row: &ScoredRow) -> bool {
        let r = &row.row;
        (self.status.is_empty() || r.status == self.status)
            && (self.repository.is_empty() || r.repository == self.repository)
            && (self.q.is_empty()
                || r.title.to_lowercase().contains(&self.q.to_lowercase())
                || r.issue_id.to_lowercase().contains(&self.q.to_lowercase()))
    }
}

/// What the queue page's script compares to notice a change: every item's id and status.
pub fn queue_stamp<'a>(items: impl IntoIterator<Item = (i64, &'a str)>) -> String {
    items
        .into_iter()
        .map(|(id, status)| format!("{id}:{status}"))
        .collect::<Vec<_>>()
        .join(",")
}

const STATUSES: [&str; 7] = [
    "queued",
    "approved",
    "published",
    "publish_failed",
    "abandoned",
    "denied",
    "expired",
];

fn select(name: &str, label: &str, options: &[String], chosen: &str) -> String {
    let mut out =
        format!("<label>{label}<br><select name=\"{name}\"><option value=\"\">any</option>");
    for o in options {
        let _ = write!(
            out,
            "<option value=\"{v}\"{}>{v}</option>",
            if o == chosen { " selected" } else { "" },
            v = esc(o)
        );
    }
    out.push_str("</select></label>");
    out
}

/// The queue page: newest first, filtered, reloaded by `/static/queue.js` when it changes.
pub fn queue(rows: &[ScoredRow], filter: &QueueFilter, now: i64, csrf: &str, who: &str) -> String {
    let mut body = String::from("<h1>Approval queue</h1>");
    let mut repositories: Vec<String> = rows.iter().map(|r| r.row.repository.clone()).collect();
    repositories.sort();
    repositories.dedup();
    let statuses: Vec<String> = STATUSES.iter().map(|s| (*s).to_owned()).collect();
    let _ = write!(
        body,
        "<form class=\"filters\" method=\"get\" action=\"/\">{}{}<label>Title or issue<br><input name=\"q\" value=\"{}\"></label><button type=\"submit\">Filter</button></form>",
        select("status", "Status", &statuses, &filter.status),
        select(
            "repository",
            "Repository",
            &repositories,
            &filter.repository
        ),
        esc(&filter.q)
    );
    let _ = write!(
        body,
        "<table class=\"list\" id=\"queue\" data-stamp=\"{}\"><thead><tr><th>ID</th><th>Status</th><th>Repository</th><th>Issue</th><th>Title</th><th>Age</th><th>Flags</th><th>Judge</th></tr></thead><tbody>",
        esc(&queue_stamp(
            rows.iter().map(|r| (r.row.id, r.row.status.as_str()))
        ))
    );
    let mut shown = 0;
    for scored in rows.iter().rev().filter(|r| filter.keeps(r)) {
        shown += 1;
        let r = &scored.row;
        let injection = match r.confirmed_injections {
            0 => String::new(),
            n => format!(" <span class=\"badge danger\">INJECTION: {n} confirmed</span>"),
        };
        // The findings count with the flags, as `queue`'s FLAGS column does; marked when any.
        let flags = match r.flags + r.findings {
            0 => "0".to_owned(),
            n => format!(
                "<span class=\"warn-icon\" role=\"img\" aria-label=\"risk signals\">\u{26a0}</span> <span class=\"flag-count\" title=\"{} finding(s), {} flag(s)\">{n}</span>",
                r.findings, r.flags
            ),
        };
        let _ = write!(
            body,
            "<tr data-id=\"{id}\"><td><a href=\"/items/{id}\">{id}</a></td><td><span class=\"badge status-{st}\">{st}</span>{injection}</td><td>{}</td><td>{}</td><td><a href=\"/items/{id}\">{}</a></td><td>{}</td><td>{flags}</td><td>{}</td></tr>",
            esc(&r.repository),
            esc(&r.issue_id),
            esc(&r.title),
            age(now - r.queued_at),
            esc(&judge_cell(scored.judge.as_ref())),
            id = r.id,
            st = esc(&r.status),
        );
    }
    body.push_str("</tbody></table>");
    if shown == 0 {
        body.push_str("<p id=\"empty\">No item matches.</p>");
    }
    layout_as(
        "queue",
        Nav::Queue,
        Some(csrf),
        Some(who),
        &["/static/queue.js"],
        &body,
    )
}

/// Which diff layout the item page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffLayout {
    /// One column.
    Unified,
    /// Base and change side by side.
    SideBySide,
}

fn grade_text(grade: &Grade) -> String {
    match grade {
        Grade::Ok => "ok".to_owned(),
        Grade::NotOk(why) => format!("NOT OK: {why}"),
        Grade::Invalid(why) => format!("INVALID: {why}"),
    }
}

fn digest_cell(v: Option<&serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => esc(s),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(esc).unwrap_or_else(|| esc(&x.to_string())))
            .collect::<Vec<_>>()
            .join(", "),
        Some(other) => esc(&other.to_string()),
        None => "?".to_owned(),
    }
}

/// The anchor of a place in the diff (`path`, new-file `line`), when the diff shows that file.
fn line_anchor(files: &[airlock_policies::FileDiff], path: &str, line: u64) -> Option<String> {
    let index = files.iter().position(|f| f.path() == path)?;
    Some(format!("#f{index}-n{line}"))
}

/// The anchor of line `line` of `path` as it stands at the pin, when the diff shows that line
/// (a removed line, or a context line by its new number).
fn pinned_line_anchor(
    files: &[airlock_policies::FileDiff],
    path: &str,
    line: u64,
) -> Option<String> {
    let (index, file) = files
        .iter()
        .enumerate()
        .find(|(_, f)| f.old_path.as_deref() == Some(path))?;
    let shown = file
        .hunks
        .iter()
        .flat_map(|h| &h.lines)
        .find(|l| l.old_line.and_then(|n| u64::try_from(n).ok()) == Some(line))?;
    Some(match (shown.kind, shown.new_line) {
        (airlock_policies::LineKind::Context, Some(new)) => format!("#f{index}-n{new}"),
        _ => format!("#f{index}-o{line}"),
    })
}

/// The anchor of the diff line a flag names (`path:line:` of a file the diff shows).
fn flag_anchor(files: &[airlock_policies::FileDiff], flag: &str) -> Option<String> {
    files.iter().enumerate().find_map(|(index, file)| {
        let needle = format!("{}:", file.path());
        flag.match_indices(&needle).find_map(|(at, _)| {
            let rest = &flag[at + needle.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let line: usize = digits.parse().ok()?;
            rest[digits.len()..]
                .starts_with(':')
                .then(|| format!("#f{index}-n{line}"))
        })
    })
}

/// Which new-file lines of each diff file a finding or a flag names.
fn flagged_lines(
    view: &ItemView,
    files: &[airlock_policies::FileDiff],
) -> Vec<super::diff::FlaggedLines> {
    files
        .iter()
        .map(|file| {
            let path = file.path();
            let mut lines = super::diff::FlaggedLines::new();
            // A finding on the changed file (not on its pinned version) marks its line.
            for f in view.findings.iter().filter(|f| f.path == path && !f.at_pin) {
                if let Some(line) = f.line_start {
                    lines.insert(usize::try_from(line).unwrap_or(0));
                }
            }
            for c in view.confirmed_injections.iter().filter(|c| c.path == path) {
                if let Some(line) = c.line {
                    lines.insert(usize::try_from(line).unwrap_or(0));
                }
            }
            // The intake's flags are sentences that name `path:line:`; a line of this file
            // that one names is marked.
            for line in file.hunks.iter().flat_map(|h| &h.lines) {
                if let Some(n) = line.new_line
                    && view
                        .flags
                        .iter()
                        .any(|flag| flag.contains(&format!("{path}:{n}:")))
                {
                    lines.insert(n);
                }
            }
            lines
        })
        .collect()
}

/// The warning icon beside every risk signal: seen (colour and a symbol) and read out.
const WARN_ICON: &str = "<span class=\"warn-icon\" role=\"img\" aria-label=\"warning\">⚠</span>";

/// The CSS class of a finding's source.
fn source_class(source: airlock_protocol::FindingSource) -> &'static str {
    match source {
        airlock_protocol::FindingSource::Broker => "source-broker",
        airlock_protocol::FindingSource::Run => "source-run",
        airlock_protocol::FindingSource::Model => "source-model",
    }
}

/// The item page's first section: every risk signal the approver decides on, each standing out
/// (a class with colour and an icon) and linked to its line of the diff when the diff shows
/// it: the findings with their source, the intake's flags, the gates' notes, the
/// `test_change_reason` and the senior route with its approvals so far, and what the network
/// refused the run's tests.
fn risk_summary(view: &ItemView, files: &[airlock_policies::FileDiff]) -> String {
    let mut b = String::new();
    let risky = view.risk.is_risky() || !view.confirmed_injections.is_empty();
    let _ = write!(
        b,
        "<section id=\"risk\" class=\"risk {}\"><h2>Risk summary</h2><p id=\"risk-summary\">{}{}</p>",
        if risky { "risky" } else { "plain" },
        if risky {
            format!("{WARN_ICON} ")
        } else {
            String::new()
        },
        esc(&view.risk.summary())
    );
    if risky && view.status == "queued" {
        b.push_str("<p class=\"muted\">Approving this item needs its id typed as a confirmation and a one-line reason (the decision form is at the end of the page).</p>");
    }

    b.push_str("<h3>Injection findings</h3><ul id=\"injections\" class=\"findings\">");
    if view.findings.is_empty() && view.confirmed_injections.is_empty() {
        b.push_str("<li class=\"none\">(none)</li>");
    }
    for c in &view.confirmed_injections {
        let place = match c.line {
            Some(line) => format!("{}:{line}", c.path),
            None => c.path.clone(),
        };
        let place = match c.line.and_then(|l| line_anchor(files, &c.path, l)) {
            Some(anchor) => format!("<a href=\"{anchor}\">{}</a>", esc(&place)),
            None => esc(&place),
        };
        let _ = write!(
            b,
            "<li><span class=\"badge danger\">confirmed</span> #{} {place}: {}: by {}: {}<br><code>{}</code></li>",
            c.finding,
            esc(c.rule.as_deref().unwrap_or("reported by the model")),
            esc(&c.by),
            esc(c.note.as_deref().unwrap_or("")),
            esc(&c.excerpt)
        );
    }
    for f in &view.findings {
        // A finding on the pinned file has the pin's line numbers: linked to that line where
        // the diff shows it (removed, or as context).
        let anchor = f.line_start.and_then(|line| {
            if f.at_pin {
                pinned_line_anchor(files, &f.path, line)
            } else {
                line_anchor(files, &f.path, line)
            }
        });
        let place = match anchor {
            Some(anchor) => format!("<a href=\"{anchor}\">{}</a>", esc(&f.place())),
            None => esc(&f.place()),
        };
        let _ = write!(
            b,
            "<li class=\"finding\">{WARN_ICON} <span class=\"badge {}\">{}</span> {place}{}: {}<br><code>{}</code></li>",
            source_class(f.source),
            esc(f.source.label()),
            if f.at_pin {
                " (the file at the pin)"
            } else {
                ""
            },
            esc(&f.rules.join(", ")),
            esc(&f.excerpt)
        );
    }
    b.push_str("</ul>");

    b.push_str("<h3>Flags</h3><ul id=\"flags\" class=\"signals\">");
    if view.flags.is_empty() {
        b.push_str("<li class=\"none\">(none)</li>");
    }
    for flag in &view.flags {
        match flag_anchor(files, flag) {
            Some(anchor) => {
                let _ = write!(b, "<li><a href=\"{anchor}\">{}</a></li>", esc(flag));
            }
            None => {
                let _ = write!(b, "<li>{}</li>", esc(flag));
            }
        }
    }
    b.push_str("</ul>");

    if !view.gates.is_empty() {
        b.push_str("<h3>Gates</h3><ul id=\"gates\" class=\"signals\">");
        for note in &view.gates {
            let _ = write!(
                b,
                "<li class=\"gate-{}\">{}</li>",
                note.verdict.kind().as_str(),
                esc(&crate::view::gate_note_line(note))
            );
        }
        b.push_str("</ul>");
    }

    if let Some(reason) = &view.risk.test_change_reason {
        let _ = write!(
            b,
            "<h3>Senior route</h3><p id=\"test-change-reason\" class=\"signal\">{WARN_ICON} test_change_reason: <code>{}</code>: two approvals by two named approvers, at least one of them senior.</p>",
            esc(reason)
        );
    }
    if let Some(line) = view.approvals_line() {
        let _ = write!(b, "<p id=\"approvals\">{}</p>", esc(&line));
    }

    if !view.network_blocked.is_empty() {
        b.push_str("<h3>Network refused to the run's tests (reported by the run)</h3><ul id=\"network-blocked\" class=\"signals\">");
        for attempt in &view.network_blocked {
            let _ = write!(b, "<li>{}</li>", esc(&attempt.sentence()));
        }
        b.push_str("</ul>");
    }
    b.push_str("</section>");
    b
}

/// The decision forms, the page's last section: approve (on a risky item with the typed
/// confirmation and the reason it needs), deny and request changes while the item is queued;
/// a request for changes once it is published.
fn decision_forms(view: &ItemView, csrf: &str) -> String {
    let id = view.id;
    let c = esc_text(csrf);
    let mut b = String::new();
    // What the button promises is what approval does: no forge token, no pull request.
    let button = if view.opens_pull_request {
        "Approve: push and open the draft pull request"
    } else {
        "Approve: push the branch (no pull request: no forge token configured)"
    };
    if view.status == "queued" {
        let approve = if view.risk.is_risky() {
            format!(
                "<form method=\"post\" action=\"/items/{id}/approve\" class=\"risky\"><input type=\"hidden\" name=\"csrf\" value=\"{c}\">\
                 <p>{WARN_ICON} This item is risky ({}). Read the risk summary at the top first.</p>\
                 <label>Type the item id <code>{id}</code> to confirm you saw every risk signal<br><input name=\"confirm\" id=\"confirm-risk\" required autocomplete=\"off\" size=\"10\"></label>\
                 <label>Reason (one line, required)<br><input name=\"reason\" id=\"approve-reason\" required size=\"50\"></label>\
                 <button class=\"approve\" id=\"approve\" type=\"submit\">{button}</button></form>",
                esc(&view.risk.summary())
            )
        } else {
            format!(
                "<form method=\"post\" action=\"/items/{id}/approve\"><input type=\"hidden\" name=\"csrf\" value=\"{c}\"><label>Reason (one line, optional)<br><input name=\"reason\" id=\"approve-reason\" size=\"50\"></label><button class=\"approve\" id=\"approve\" type=\"submit\">{button}</button></form>"
            )
        };
        let _ = write!(
            b,
            "<h2 id=\"decision\">Decision</h2><div class=\"actions\">{approve}\
             <form method=\"post\" action=\"/items/{id}/deny\"><input type=\"hidden\" name=\"csrf\" value=\"{c}\"><label>Reason (one line, required)<br><input name=\"reason\" id=\"deny-reason\" required size=\"50\"></label><button class=\"deny\" id=\"deny\" type=\"submit\">Deny</button></form>\
             <form method=\"post\" action=\"/items/{id}/request-changes\"><input type=\"hidden\" name=\"csrf\" value=\"{c}\"><label>Changes to request (returned to the run as the denial reason)<br><textarea name=\"feedback\" id=\"feedback\" required rows=\"3\" cols=\"50\"></textarea></label><button id=\"request-changes\" type=\"submit\">Request changes</button></form>\
             </div>"
        );
    } else if view.status == "published" {
        // A published pull request takes a request for changes: the follow-up run's commit
        // goes to the same branch and pull request.
        let _ = write!(
            b,
            "<h2 id=\"decision\">Decision</h2><div class=\"actions\">\
             <form method=\"post\" action=\"/items/{id}/request-changes\"><input type=\"hidden\" name=\"csrf\" value=\"{c}\"><label>Changes to request (a follow-up run answers them with a new commit on the same branch and pull request: <code>airlock run --follow-up {id}</code>)<br><textarea name=\"feedback\" id=\"feedback\" required rows=\"3\" cols=\"50\"></textarea></label><button id=\"request-changes\" type=\"submit\">Request changes</button></form>\
             </div>"
        );
    }
    b
}

/// The item page: what the approver decides on, in the order they need it: the risk summary
/// first, then the item, the issue, the pull request's words, the diff, the witness and the
/// judge; the decision forms last (approve, deny and request changes while the item is
/// queued), so no decision comes before the evidence.
pub fn item(
    view: &ItemView,
    judge: Option<&JudgeScore>,
    layout_choice: DiffLayout,
    notice: Option<&str>,
    csrf: &str,
    who: &str,
) -> String {
    let mut b = String::new();
    let id = view.id;
    let _ = write!(
        b,
        "<h1>Queue item {id} <span class=\"badge status-{st}\" id=\"status\">{st}</span></h1>",
        st = esc(&view.status)
    );
    if let Some(n) = notice {
        let _ = write!(b, "<p class=\"notice\" id=\"notice\">{}</p>", esc(n));
    }
    if !view.confirmed_injections.is_empty() {
        let _ = write!(
            b,
            "<p class=\"error\">SECURITY: the run met {} confirmed injection finding(s); see below.</p>",
            view.confirmed_injections.len()
        );
    }
    let files = airlock_policies::parse_unified_diff(&view.diff).unwrap_or_default();
    b.push_str(&risk_summary(view, &files));
    b.push_str("<table class=\"list\">");
    let mut row = |k: &str, v: String| {
        let _ = write!(b, "<tr><th>{k}</th><td>{v}</td></tr>");
    };
    row(
        "Title",
        format!("<span id=\"title\">{}</span>", esc(&view.title)),
    );
    row("Run", esc(&view.run_id));
    row(
        "Repository",
        format!(
            "{} at <code>{}</code>",
            esc(&view.repository),
            esc(&view.base_commit)
        ),
    );
    row(
        "Issue",
        match view.issue_number {
            Some(n) => format!("{} (#{n})", esc(&view.issue_id)),
            None => esc(&view.issue_id),
        },
    );
    match &view.review {
        Some(r) => row(
            "Review of",
            format!(
                "{} at <code>{}</code> ({}){}",
                esc(&format!(
                    "{}/{}#{}",
                    r.pull.owner, r.pull.repo, r.pull.number
                )),
                esc(&r.pull.head_sha),
                esc(r.review.verdict.github_event()),
                if view.pr_url.is_some() {
                    ""
                } else {
                    " (approve posts it as a GitHub review)"
                }
            ),
        ),
        None => row(
            "Branch",
            match &view.commit {
                Some(c) => format!("{} at <code>{}</code>", esc(&view.branch), esc(c)),
                None => format!("{} (approve pushes it)", esc(&view.branch)),
            },
        ),
    }
    if let Some(url) = &view.pr_url {
        // A link only to an https address; anything else (a `javascript:` URL) is text.
        let cell = if url.starts_with("https://") && !url.contains(char::is_whitespace) {
            format!(
                "<a href=\"{u}\" rel=\"noreferrer noopener\">{u}</a>",
                u = esc(url)
            )
        } else {
            esc(url)
        };
        row("Pull request", cell);
    } else if view.status == "published" && view.review.is_none() {
        row(
            "Pull request",
            format!(
                "<span id=\"no-pull-request\">{}</span>",
                if view.opens_pull_request {
                    "none: pushed only"
                } else {
                    "none: pushed; no pull request: no forge token configured"
                }
            ),
        );
    }
    if let Some(by) = &view.decided_by {
        row("Decided by", esc(by));
    }
    if let Some(reason) = &view.reason {
        row(
            "Reason",
            format!("<span id=\"reason\">{}</span>", esc(reason)),
        );
    }
    if let Some(e) = &view.publish_error {
        row("Publication", format!("failed: {}", esc(e)));
    }
    if let Some(reason) = &view.abandon_reason {
        row(
            "Abandoned",
            format!(
                "by {}: {}",
                esc(view.abandoned_by.as_deref().unwrap_or("?")),
                esc(reason)
            ),
        );
    }
    b.push_str("</table>");

    b.push_str("<h2>Issue</h2>");
    match &view.issue {
        Some(issue) => {
            let _ = write!(
                b,
                "<p><strong id=\"issue-title\">{}</strong></p><pre id=\"issue-body\">{}</pre>",
                esc(&issue.title),
                esc_block(issue.body.trim_end())
            );
        }
        None => b.push_str("<p>(the run registered no issue text)</p>"),
    }
    // A review's summary and inline comments, each `path:line (SIDE)` then its words.
    b.push_str(if view.review.is_some() {
        "<h2>Review</h2>"
    } else {
        "<h2>Pull request body</h2>"
    });
    match &view.body {
        Some(body) => {
            let _ = write!(b, "<pre id=\"body\">{}</pre>", esc_block(body));
        }
        None => b.push_str("<p>(the stored arguments do not parse as open_pr)</p>"),
    }

    b.push_str("<h2>Diffstat</h2><table class=\"list\" id=\"diffstat\">");
    let (mut plus, mut minus) = (0, 0);
    for (i, f) in view.diffstat.iter().enumerate() {
        plus += f.insertions;
        minus += f.deletions;
        let counts = if f.binary {
            "binary".to_owned()
        } else {
            format!("+{} −{}", f.insertions, f.deletions)
        };
        let _ = write!(
            b,
            "<tr><td><a href=\"#file-{i}\">{}</a></td><td>{counts}</td></tr>",
            esc(&f.path)
        );
    }
    let _ = write!(
        b,
        "<tr><th>{} file(s)</th><th>+{plus} −{minus}</th></tr></table>",
        view.diffstat.len()
    );

    b.push_str("<h2>Digest</h2>");
    match view
        .claimed_digest
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
    {
        Some(serde_json::Value::Object(claimed)) => {
            b.push_str("<table class=\"list\" id=\"digest\"><tr><th>Field</th><th>Claimed by the agent</th><th>Recomputed by the broker</th></tr>");
            for (field, value) in &claimed {
                let mismatch = view.digest_mismatches.iter().any(|m| m == field);
                let _ = write!(
                    b,
                    "<tr{}><td>{}</td><td>{}</td><td>{}{}</td></tr>",
                    if mismatch { " class=\"mismatch\"" } else { "" },
                    esc(field),
                    digest_cell(Some(value)),
                    digest_cell(view.computed_digest.get(field)),
                    if mismatch { " MISMATCH" } else { "" }
                );
            }
            b.push_str("</table>");
        }
        _ => {
            let _ = write!(
                b,
                "<p>(the stored arguments do not parse as open_pr)</p><pre>{}</pre>",
                esc_block(&serde_json::to_string_pretty(&view.computed_digest).unwrap_or_default())
            );
        }
    }

    let _ = write!(
        b,
        "<h2>Diff</h2><p>{} · {}</p>",
        if layout_choice == DiffLayout::Unified {
            "<strong>unified</strong>".to_owned()
        } else {
            format!("<a href=\"/items/{id}\" id=\"unified\">unified</a>")
        },
        if layout_choice == DiffLayout::SideBySide {
            "<strong>side by side</strong>".to_owned()
        } else {
            format!("<a href=\"/items/{id}?diff=split\" id=\"split\">side by side</a>")
        }
    );
    let flagged = flagged_lines(view, &files);
    for (i, (file, flagged)) in files.iter().zip(&flagged).enumerate() {
        let _ = write!(b, "<h3 id=\"file-{i}\">{}</h3>", esc(file.path()));
        if file.binary {
            b.push_str("<p>(binary)</p>");
            continue;
        }
        b.push_str(&match layout_choice {
            DiffLayout::Unified => super::diff::unified(i, file, flagged),
            DiffLayout::SideBySide => super::diff::side_by_side(i, file, flagged),
        });
    }

    b.push_str("<h2>Witness</h2><table class=\"list\" id=\"witness\"><tr><th>Step</th><th>Command</th><th>Exit</th><th>Grade</th><th>Tests</th></tr>");
    for s in &view.witness {
        let step = &s.step;
        let t = s.tests;
        // The command a person reruns, where and with what; the executed argv (with airlock's
        // report option) apart, under the logs.
        let mut command = format!(
            "<code class=\"rerun\">{}</code><br><span class=\"muted\">in {}</span>",
            esc(&crate::witness::rerun::command(step)),
            esc(&crate::witness::rerun::directory(step, &view.base_commit))
        );
        if !step.env.is_empty() {
            let _ = write!(
                command,
                "<br><span class=\"muted\">env</span> <code>{}</code>",
                esc(&crate::witness::rerun::env(step))
            );
        }
        let executed: Vec<String> = step.argv.iter().map(|a| esc(a)).collect();
        let mut tests = format!(
            "{} passed, {} failed, {} errors, {} skipped",
            t.passed, t.failed, t.errors, t.skipped
        );
        if let Some(inv) = &step.inventory {
            let _ = write!(tests, "<br>inventory: {}", esc(&inv.summary()));
        }
        if let Some(verdict) = &step.full_run {
            let _ = write!(
                tests,
                "<br>against the base inventory: {}",
                esc(&verdict.summary())
            );
        }
        let _ = write!(
            b,
            "<tr><td>{} (must {})</td><td>{command}<details><summary>executed command</summary><p>airlock's report option added</p><pre>{}</pre></details><details><summary>logs</summary><p>stdout</p><pre>{}</pre><p>stderr</p><pre>{}</pre></details></td><td>{}</td><td>{}</td><td>{tests}</td></tr>",
            esc(&step.step),
            esc(&step.expect),
            executed.join(" "),
            esc_block(&step.stdout),
            esc_block(&step.stderr),
            step.exit_code
                .map_or_else(|| "none (killed)".to_owned(), |c| c.to_string()),
            esc(&grade_text(&step.grade)),
        );
    }
    b.push_str("</table>");

    b.push_str("<h2>Judge</h2><div id=\"judge\">");
    match (judge, verdict_of(judge)) {
        (None, _) => b.push_str("<p>(not judged)</p>"),
        (Some((j, _)), None) => {
            let _ = write!(
                b,
                "<p>status: {} (the judge's answer broke the contract)</p>",
                esc(j.get("status").and_then(|s| s.as_str()).unwrap_or("?"))
            );
        }
        (Some(_), Some(v)) => {
            let s = v.scores;
            let _ = write!(
                b,
                "<p><strong>{}</strong>: root cause {}, minimality {}, test honesty {}, conventions {}, faithfulness {}</p><p>reason: {}</p>",
                verdict_word(&v),
                s.root_cause,
                s.minimality,
                s.test_honesty,
                s.conventions,
                s.faithfulness,
                esc(&v.one_line_reason)
            );
            for claim in &v.unsupported_claims {
                let _ = write!(b, "<p>unsupported claim: {}</p>", esc(claim));
            }
        }
    }
    b.push_str("</div>");

    b.push_str(&decision_forms(view, csrf));
    layout_as(
        &format!("item {id}"),
        Nav::Queue,
        Some(csrf),
        Some(who),
        &[],
        &b,
    )
}

/// The security page's filter.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct SecurityFilter {
    /// Only this status (`new`, `confirmed`, `dismissed`, `needs-review`).
    #[serde(default)]
    pub status: String,
}

/// One verdict of the operator's security model, as a list item: the model's name and reason
/// are untrusted text (the reason may quote the span it was asked about).
fn second_opinion_item(o: &SecondOpinion) -> String {
    format!(
        "<li class=\"opinion\">second opinion #{}: <span class=\"badge\">{}</span> from {}{}</li>",
        o.seq,
        o.verdict,
        esc(&o.model),
        o.reason
            .as_deref()
            .map(|r| format!(": {}", esc(r)))
            .unwrap_or_default()
    )
}

/// The security page: every injection finding, newest first, with its triage history, the
/// security model's verdicts beside it and the triage controls; then the model's verdicts on
/// borderline spans (text one signal short of a rule), which are leads, not findings.
pub fn security(
    items: &[crate::store::QueueItem],
    list: &[Injection],
    borderline: &[BorderlineOpinion],
    filter: &SecurityFilter,
    notice: Option<&str>,
    csrf: &str,
) -> String {
    let mut b = String::from("<h1>Injection findings</h1>");
    if let Some(n) = notice {
        let _ = write!(b, "<p class=\"notice\" id=\"notice\">{}</p>", esc(n));
    }
    // What every queue item's approver is shown, from the same store as `show`.
    b.push_str("<h2>On queue items</h2><table class=\"list\" id=\"item-findings\"><thead><tr><th>Item</th><th>Status</th><th>Reported by</th><th>Where</th><th>Rules</th><th>Excerpt</th></tr></thead><tbody>");
    let mut any = false;
    for item in items {
        for f in item.item.findings.iter().flatten() {
            any = true;
            let _ = write!(
                b,
                "<tr class=\"finding\"><td><a href=\"/items/{id}\">#{id}</a></td><td><span class=\"badge status-{status}\">{status}</span></td><td>{}</td><td><span class=\"warn-icon\" role=\"img\" aria-label=\"finding\">\u{26a0}</span> {}{}</td><td>{}</td><td><code>{}</code></td></tr>",
                esc(f.source.label()),
                esc(&f.place()),
                if f.at_pin { " (at the pin)" } else { "" },
                esc(&f.rules.join(", ")),
                esc(&f.excerpt),
                id = item.id,
                status = esc(item.status.as_str()),
            );
        }
    }
    if !any {
        b.push_str("<tr><td colspan=\"6\" id=\"no-item-findings\">no findings</td></tr>");
    }
    b.push_str("</tbody></table><h2>In the audit log (triage)</h2>");
    let statuses: Vec<String> = [
        FindingStatus::New,
        FindingStatus::Confirmed,
        FindingStatus::Dismissed,
        FindingStatus::NeedsReview,
    ]
    .iter()
    .map(|s| s.as_str().to_owned())
    .collect();
    let _ = write!(
        b,
        "<form class=\"filters\" method=\"get\" action=\"/security\">{}<button type=\"submit\">Filter</button></form>",
        select("status", "Status", &statuses, &filter.status)
    );
    b.push_str("<table class=\"list\" id=\"findings\"><thead><tr><th>ID</th><th>When</th><th>Status</th><th>Run</th><th>Where</th><th>Rule</th><th>Excerpt</th><th>Triage</th></tr></thead><tbody>");
    if list.is_empty() {
        b.push_str("<tr><td colspan=\"8\" id=\"no-log-findings\">no findings</td></tr>");
    }
    for f in list
        .iter()
        .filter(|f| filter.status.is_empty() || f.status.as_str() == filter.status)
    {
        let place = match f.line {
            Some(line) => format!("{}:{line}", f.path),
            None => f.path.clone(),
        };
        let mut history = String::new();
        for t in &f.triage {
            let _ = write!(
                history,
                "<li>{} by {} ({}){}</li>",
                t.status,
                esc(&t.by),
                esc(&t.ts),
                t.note
                    .as_deref()
                    .map(|n| format!(": {}", esc(n)))
                    .unwrap_or_default()
            );
        }
        let opinions: String = f.second_opinions.iter().map(second_opinion_item).collect();
        let opinions = if opinions.is_empty() {
            opinions
        } else {
            format!("<ul class=\"opinions\">{opinions}</ul>")
        };
        let mut buttons = String::new();
        for status in TriageStatus::ALL {
            let label = match status {
                TriageStatus::Confirmed => "Confirm",
                TriageStatus::Dismissed => "Dismiss",
                TriageStatus::NeedsReview => "Needs review",
            };
            let _ = write!(
                buttons,
                "<button type=\"submit\" name=\"status\" value=\"{}\" id=\"triage-{}-{}\">{label}</button> ",
                status.as_str(),
                f.seq,
                status.as_str()
            );
        }
        let _ = write!(
            b,
            "<tr id=\"finding-{seq}\"><td>#{seq}</td><td>{}</td><td><span class=\"badge\">{}</span></td><td>{}<br>{}</td><td>{}</td><td>{}</td><td><code>{}</code>{opinions}</td><td><ul>{history}</ul>\
             <form method=\"post\" action=\"/security/{seq}/triage\"><input type=\"hidden\" name=\"csrf\" value=\"{c}\"><input name=\"note\" id=\"note-{seq}\" placeholder=\"note (required to confirm or dismiss)\" size=\"30\"><br>{buttons}</form></td></tr>",
            esc(&f.ts),
            f.status,
            esc(&f.run_id),
            esc(f.repository.as_deref().unwrap_or("")),
            esc(&place),
            esc(f.rule.as_deref().unwrap_or("reported by the model")),
            esc(&f.excerpt),
            seq = f.seq,
            c = esc_text(csrf),
        );
    }
    b.push_str("</tbody></table>");
    if !borderline.is_empty() {
        b.push_str("<h2>Borderline spans the security model was asked about</h2><table class=\"list\" id=\"borderline\"><thead><tr><th>When</th><th>Run</th><th>Where</th><th>Near</th><th>Excerpt</th></tr></thead><tbody>");
        for o in borderline {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}:{}</td><td>{} ({})</td><td><code>{}</code><ul class=\"opinions\">{}</ul></td></tr>",
                esc(&o.opinion.ts),
                esc(&o.run_id),
                esc(&o.path),
                o.span.line,
                o.span.rule,
                o.span.near.as_str(),
                esc(&o.span.excerpt),
                second_opinion_item(&o.opinion)
            );
        }
        b.push_str("</tbody></table>");
    }
    layout("security", Nav::Security, Some(csrf), &[], &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewQueueItem, QueueItem, QueueStatus};

    fn flagged_item() -> QueueItem {
        let name = "calc/<b>x</b>.py";
        QueueItem {
            id: 7,
            run_id: "run".to_owned(),
            request_id: "r".to_owned(),
            item: NewQueueItem {
                repository: "acme/calc".to_owned(),
                base_commit: "0".repeat(40),
                issue_id: "CALC-1".to_owned(),
                title: "fix".to_owned(),
                args: "{}".to_owned(),
                diff: format!(
                    "diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,2 @@\n+ok = 1\n+import os; os.system('x')\n"
                ),
                digest: serde_json::json!({}),
                evidence: vec![],
                flags: vec![format!("test-code: {name}:2: a call at import time")],
                gates: vec![crate::gates::GateNote {
                    gate: "changelog-required".to_owned(),
                    digest: "sha256:0f".to_owned(),
                    verdict: airlock_gates::Verdict::Flag("<script>alert(1)</script>".to_owned()),
                }],
                network_blocked: Vec::new(),
                findings: None,
            },
            status: QueueStatus::Queued,
            queued_at: 0,
            decided_at: None,
            decided_by: None,
            reason: None,
            branch: None,
            commit: None,
            pr_url: Some("javascript:alert(1)".to_owned()),
            publish_error: None,
            abandoned_by: None,
            abandon_reason: None,
            abandoned_at: None,
            issue_number: None,
            review: None,
        }
    }

    #[test]
    fn a_flag_links_to_the_line_it_names_and_marks_it() {
        let view = ItemView::of(&flagged_item(), None, None, "airlock/CALC-1-7".to_owned());
        for layout_choice in [DiffLayout::Unified, DiffLayout::SideBySide] {
            let html = item(&view, None, layout_choice, None, "c", "rev");
            assert!(
                html.contains("<li><a href=\"#f0-n2\">test-code: calc/&lt;b&gt;x&lt;/b&gt;.py:2: a call at import time</a></li>"),
                "{html}"
            );
            let row = html
                .lines()
                .find(|l| l.contains("id=\"f0-n2\""))
                .unwrap_or_default();
            assert!(row.contains("flagged"), "{html}");
            let row = html
                .lines()
                .find(|l| l.contains("id=\"f0-n1\""))
                .unwrap_or_default();
            assert!(!row.contains("flagged"), "{row}");
            // A pull-request address that is not https is text, never a link.
            assert!(!html.contains("href=\"javascript:"), "{html}");
            assert!(html.contains("<td>javascript:alert(1)</td>"), "{html}");
            // A gate's flag is data: escaped like every other text.
            assert!(
                html.contains("<li class=\"gate-flag\">flag: &lt;script&gt;alert(1)&lt;/script&gt; (gate changelog-required sha256:0f)</li>"),
                "{html}"
            );
            assert!(!html.contains("<script>"), "{html}");
        }
    }

    #[test]
    fn escaping_leaves_no_markup_and_no_hidden_character() {
        let text =
            "<script>alert(1)</script><img src=x onerror=\"alert(2)\"> 'a' & \u{1b}[2K\u{202e}\r";
        let html = esc(text);
        assert_eq!(
            html,
            "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt; &#39;a&#39; &amp; \\u{1b}[2K\\u{202e}\\u{d}"
        );
        assert_eq!(esc_block("a\nb<"), "a\nb&lt;");
    }
}
