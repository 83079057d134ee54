//! The questions asked on issues, written once over [`Backend`]: asked (a round asked again
//! replaces its row and opens it), read while open, the last reply read moved on, and closed
//! at most once (`UPDATE ... WHERE state = 'open'`: of two workers taking one answer, one
//! closes the question and starts the next run).

use super::sql::{Backend, Row};
use super::{QuestionClose, StoredQuestion};
use crate::error::{Error, Result};
use airlock_protocol::{IssueKey, IssueQuestion, OpenQuestion};

fn to_i64(n: u64, what: &str) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::StoreCorrupt {
        what: what.to_owned(),
        message: format!("{n} does not fit a 64-bit integer"),
    })
}

fn to_u64(n: i64, what: &str) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::StoreCorrupt {
        what: what.to_owned(),
        message: format!("{n} is negative"),
    })
}

pub(super) fn record<B: Backend>(b: &mut B, q: &IssueQuestion, now: i64) -> Result<()> {
    let json = serde_json::to_string(q).map_err(|e| Error::StoreCorrupt {
        what: "questions.question".to_owned(),
        message: e.to_string(),
    })?;
    b.execute(
        "recording a question",
        "INSERT INTO questions (repository, issue_number, round, run_id, question, state,
         last_reply_id, asked_at) VALUES (?1, ?2, ?3, ?4, ?5, 'open', 0, ?6)
         ON CONFLICT (repository, issue_number, round) DO UPDATE SET run_id = excluded.run_id,
         question = excluded.question, state = 'open', last_reply_id = 0,
         asked_at = excluded.asked_at, closed_at = NULL, closed_by = NULL",
        &[
            q.issue.repository.as_str().into(),
            to_i64(q.issue.issue_number, "issue number")?.into(),
            i64::from(q.round).into(),
            q.run_id.as_str().into(),
            json.as_str().into(),
            now.into(),
        ],
    )?;
    Ok(())
}

fn stored(r: &mut Row) -> Result<StoredQuestion> {
    let text = r.text(0)?;
    let question: IssueQuestion = serde_json::from_str(&text).map_err(|e| Error::StoreCorrupt {
        what: "questions.question".to_owned(),
        message: e.to_string(),
    })?;
    Ok(StoredQuestion {
        open: OpenQuestion {
            question,
            asked_at: r.int(2)?,
        },
        last_reply_id: to_u64(r.int(1)?, "questions.last_reply_id")?,
    })
}

pub(super) fn open<B: Backend>(
    b: &mut B,
    repository: &str,
    issue_number: Option<u64>,
) -> Result<Vec<StoredQuestion>> {
    let rows = match issue_number {
        Some(n) => b.query(
            "reading an issue's open questions",
            "SELECT question, last_reply_id, asked_at FROM questions
             WHERE repository = ?1 AND issue_number = ?2 AND state = 'open'
             ORDER BY asked_at, round",
            &[repository.into(), to_i64(n, "issue number")?.into()],
        )?,
        None => b.query(
            "reading a repository's open questions",
            "SELECT question, last_reply_id, asked_at FROM questions
             WHERE repository = ?1 AND state = 'open' ORDER BY asked_at, issue_number, round",
            &[repository.into()],
        )?,
    };
    rows.into_iter().map(|mut r| stored(&mut r)).collect()
}

pub(super) fn replies_read<B: Backend>(
    b: &mut B,
    issue: &IssueKey,
    round: u32,
    last_reply_id: u64,
) -> Result<()> {
    b.execute(
        "recording the replies read",
        "UPDATE questions SET last_reply_id = ?4 WHERE repository = ?1 AND issue_number = ?2
         AND round = ?3 AND state = 'open' AND last_reply_id < ?4",
        &[
            issue.repository.as_str().into(),
            to_i64(issue.issue_number, "issue number")?.into(),
            i64::from(round).into(),
            to_i64(last_reply_id, "comment id")?.into(),
        ],
    )?;
    Ok(())
}

pub(super) fn close<B: Backend>(
    b: &mut B,
    issue: &IssueKey,
    round: u32,
    close: &QuestionClose,
    now: i64,
) -> Result<bool> {
    let changed = b.execute(
        "closing a question",
        "UPDATE questions SET state = ?4, closed_by = ?5, closed_at = ?6 WHERE repository = ?1
         AND issue_number = ?2 AND round = ?3 AND state = 'open'",
        &[
            issue.repository.as_str().into(),
            to_i64(issue.issue_number, "issue number")?.into(),
            i64::from(round).into(),
            close.state().into(),
            close.by.as_str().into(),
            now.into(),
        ],
    )?;
    Ok(changed == 1)
}
