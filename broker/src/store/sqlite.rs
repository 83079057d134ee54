//! The SQLite [`Store`]: one file, WAL journal, every state change in one IMMEDIATE transaction
//! (SQLite's single writer lock serialises them), the schema in versioned migrations.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::path::Path;

use super::codec::{QUEUE_COLUMNS, RawQueueRow, from_json, parse_run_state, to_json};
use super::{
    ChangeRequest, ClaimAttempt, Decision, IntakeOutcome, IntakeStart, JudgeScore, NewQueueItem,
    QueueItem, QueueStatus, ReviewItem, ReviewQueueing, RunRecord, RunState, Store, WorkEntry,
};
use crate::error::{Error, Result};
use crate::protocol::{
    BrokerReply, ClaimRelease, ClaimRequest, ClaimStatus, IssueKey, RunRegistration,
};
use airlock_schemas::BrokerError;

/// The tables of the first release (part of migration 1).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    registration TEXT NOT NULL,
    state TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    issue_number INTEGER
);
CREATE TABLE IF NOT EXISTS submissions (
    run_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    args TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    reply TEXT,
    finished_at INTEGER,
    PRIMARY KEY (run_id, request_id)
);
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    request_id TEXT NOT NULL,
    repository TEXT NOT NULL,
    base_commit TEXT NOT NULL,
    issue_id TEXT NOT NULL,
    title TEXT NOT NULL,
    args TEXT NOT NULL,
    diff TEXT NOT NULL,
    digest TEXT NOT NULL,
    evidence TEXT NOT NULL,
    flags TEXT NOT NULL,
    status TEXT NOT NULL,
    queued_at INTEGER NOT NULL,
    decided_at INTEGER,
    decided_by TEXT,
    reason TEXT,
    branch TEXT,
    commit_oid TEXT,
    pr_url TEXT,
    publish_error TEXT,
    abandoned_by TEXT,
    abandon_reason TEXT,
    abandoned_at INTEGER
);
CREATE TABLE IF NOT EXISTS change_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id INTEGER NOT NULL REFERENCES queue(id),
    feedback TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requested_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS judge_scores (
    queue_id INTEGER PRIMARY KEY REFERENCES queue(id),
    judgement TEXT NOT NULL,
    judged_at INTEGER NOT NULL
);
";

/// The claims table, added after the first release (part of migration 1).
const ADDED_TABLES: &str = "
CREATE TABLE IF NOT EXISTS claims (
    repository TEXT NOT NULL,
    issue_number INTEGER NOT NULL,
    holder TEXT NOT NULL,
    state TEXT NOT NULL,
    claimed_at INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    PRIMARY KEY (repository, issue_number)
);
";

/// Columns added after the first release, as (table, column, type): migration 1 gives a
/// database created before them each one it lacks (`ALTER TABLE ... ADD COLUMN`, NULL in
/// existing rows).
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("queue", "publish_error", "TEXT"),
    ("queue", "abandoned_by", "TEXT"),
    ("queue", "abandon_reason", "TEXT"),
    ("queue", "abandoned_at", "INTEGER"),
    ("runs", "issue_number", "INTEGER"),
    ("queue", "review", "TEXT"),
    ("queue", "gates", "TEXT"),
];

/// Migration 1, the schema as it stood when versions began: the first release's tables, the
/// claims table and [`ADDED_COLUMNS`]. Every step is idempotent, so it also brings a database
/// that an unversioned broker created (any of its tables present, no `schema_migrations`) up
/// to date without touching its rows.
fn baseline(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch(ADDED_TABLES)?;
    for (table, name, kind) in ADDED_COLUMNS {
        let existing: Vec<String> = {
            let mut stmt =
                conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
            stmt.query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?
        };
        if !existing.iter().any(|c| c == name) {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {name} {kind}"))?;
        }
    }
    Ok(())
}

/// Migration 2: the shared work queue (its claims are rows of `claims`).
fn work_queue(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS work_queue (
            repository TEXT NOT NULL,
            issue_number INTEGER NOT NULL,
            enqueued_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (repository, issue_number)
        );",
    )
}

/// Migration 3: what a run reports its egress proxy refused, per queue item (JSON; NULL for
/// items queued before).
fn queue_network_blocked(conn: &Connection) -> rusqlite::Result<()> {
    let existing: Vec<String> = {
        let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('queue')")?;
        stmt.query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?
    };
    if !existing.iter().any(|c| c == "network_blocked") {
        conn.execute_batch("ALTER TABLE queue ADD COLUMN network_blocked TEXT")?;
    }
    Ok(())
}

/// One step of the schema; `version` orders them and is the row it leaves in
/// `schema_migrations`. The PostgreSQL store's list has the same versions for the same tables.
struct Migration {
    version: i64,
    name: &'static str,
    apply: fn(&Connection) -> rusqlite::Result<()>,
}

/// Every migration, in order. Append only: a released step is never edited.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "baseline",
        apply: baseline,
    },
    Migration {
        version: 2,
        name: "work_queue",
        apply: work_queue,
    },
    Migration {
        version: 3,
        name: "queue_network_blocked",
        apply: queue_network_blocked,
    },
];

/// Apply the migrations `conn` lacks, in order, in one IMMEDIATE transaction (so two brokers
/// opening one file at once apply each step once). A database some newer broker migrated past
/// the steps this one knows is refused rather than written with an older idea of its tables.
fn migrate(conn: &mut Connection, ctx: &str) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(Error::store(ctx))?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        );",
    )
    .map_err(Error::store(ctx))?;
    let applied: Vec<i64> = {
        let mut stmt = tx
            .prepare("SELECT version FROM schema_migrations ORDER BY version")
            .map_err(Error::store(ctx))?;
        stmt.query_map([], |r| r.get(0))
            .map_err(Error::store(ctx))?
            .collect::<rusqlite::Result<_>>()
            .map_err(Error::store(ctx))?
    };
    super::check_schema_version(&applied, MIGRATIONS.iter().map(|m| m.version))?;
    for migration in MIGRATIONS {
        if applied.contains(&migration.version) {
            continue;
        }
        (migration.apply)(&tx).map_err(Error::store(format!(
            "{ctx}: migration {} ({})",
            migration.version, migration.name
        )))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at)
             VALUES (?1, ?2, CAST(strftime('%s', 'now') AS INTEGER))",
            params![migration.version, migration.name],
        )
        .map_err(Error::store(ctx))?;
    }
    tx.commit().map_err(Error::store(ctx))
}

/// The SQLite-backed store.
pub struct SqliteStore {
    pub(super) conn: Connection,
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`, in WAL mode, and bring its schema up
    /// to date.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(Error::io(format!("creating {}", parent.display())))?;
        }
        let ctx = format!("opening {}", path.display());
        let mut conn = Connection::open(path).map_err(Error::store(ctx.clone()))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(Error::store(ctx.clone()))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(Error::store(ctx.clone()))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::StoreCorrupt {
                what: "journal mode".to_owned(),
                message: format!("{} refused WAL (got {mode})", path.display()),
            });
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
            .map_err(Error::store(ctx.clone()))?;
        migrate(&mut conn, &ctx)?;
        Ok(SqliteStore { conn })
    }
}

fn raw_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawQueueRow> {
    Ok(RawQueueRow {
        id: r.get(0)?,
        run_id: r.get(1)?,
        request_id: r.get(2)?,
        repository: r.get(3)?,
        base_commit: r.get(4)?,
        issue_id: r.get(5)?,
        title: r.get(6)?,
        args: r.get(7)?,
        diff: r.get(8)?,
        digest: r.get(9)?,
        evidence: r.get(10)?,
        flags: r.get(11)?,
        status: r.get(12)?,
        queued_at: r.get(13)?,
        decided_at: r.get(14)?,
        decided_by: r.get(15)?,
        reason: r.get(16)?,
        branch: r.get(17)?,
        commit: r.get(18)?,
        pr_url: r.get(19)?,
        publish_error: r.get(20)?,
        abandoned_by: r.get(21)?,
        abandon_reason: r.get(22)?,
        abandoned_at: r.get(23)?,
        issue_number: r.get(24)?,
        review: r.get(25)?,
        gates: r.get(26)?,
        network_blocked: r.get(27)?,
    })
}

fn query_items(
    conn: &Connection,
    where_clause: &str,
    param: &dyn rusqlite::ToSql,
) -> Result<Vec<QueueItem>> {
    let sql = format!("SELECT {QUEUE_COLUMNS} FROM queue {where_clause} ORDER BY id");
    let mut stmt = conn
        .prepare(&sql)
        .map_err(Error::store("reading the queue"))?;
    let rows: Vec<RawQueueRow> = if where_clause.contains('?') {
        stmt.query_map([param], raw_row)
    } else {
        stmt.query_map([], raw_row)
    }
    .map_err(Error::store("reading the queue"))?
    .collect::<rusqlite::Result<_>>()
    .map_err(Error::store("reading the queue"))?;
    rows.into_iter().map(RawQueueRow::into_item).collect()
}

/// Insert a queued item (a pull request, or a review with `review`) in `tx`; its id.
fn insert_queue_item(
    tx: &Connection,
    run_id: &str,
    request_id: &str,
    item: &NewQueueItem,
    review: Option<&ReviewItem>,
    now: i64,
    ctx: &str,
) -> Result<i64> {
    let review = review.map(|r| to_json("review", r)).transpose()?;
    tx.execute(
        "INSERT INTO queue (run_id, request_id, repository, base_commit, issue_id, title, args, diff, digest, evidence, flags, status, queued_at, review, gates, network_blocked) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            run_id,
            request_id,
            item.repository,
            item.base_commit,
            item.issue_id,
            item.title,
            item.args,
            item.diff,
            to_json("digest", &item.digest)?,
            to_json("evidence", &item.evidence)?,
            to_json("flags", &item.flags)?,
            QueueStatus::Queued.as_str(),
            now,
            review,
            to_json("gates", &item.gates)?,
            to_json("network_blocked", &item.network_blocked)?,
        ],
    )
    .map_err(Error::store(ctx.to_owned()))?;
    Ok(tx.last_insert_rowid())
}

impl Store for SqliteStore {
    fn register_run(&mut self, run: &RunRegistration, now: i64) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store("registering a run"))?;
        let existing: Option<String> = tx
            .query_row(
                "SELECT registration FROM runs WHERE run_id = ?1",
                [&run.run_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(Error::store("registering a run"))?;
        match existing {
            Some(text) => {
                let stored: RunRegistration = from_json("run registration", &text)?;
                if &stored != run {
                    return Err(Error::Registration(format!(
                        "run {:?} is already registered with different details",
                        run.run_id
                    )));
                }
            }
            None => {
                tx.execute(
                    "INSERT INTO runs (run_id, registration, state, registered_at, issue_number) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        run.run_id,
                        to_json("run registration", run)?,
                        RunState::Active.as_str(),
                        now,
                        run.issue_number.and_then(|n| i64::try_from(n).ok())
                    ],
                )
                .map_err(Error::store("registering a run"))?;
            }
        }
        tx.commit().map_err(Error::store("registering a run"))
    }

    fn run(&mut self, run_id: &str) -> Result<Option<RunRecord>> {
        let row: Option<(String, String, i64)> = self
            .conn
            .query_row(
                "SELECT registration, state, registered_at FROM runs WHERE run_id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(Error::store("reading a run"))?;
        row.map(|(reg, state, at)| {
            Ok(RunRecord {
                registration: from_json("run registration", &reg)?,
                state: parse_run_state(&state)?,
                registered_at: at,
            })
        })
        .transpose()
    }

    fn begin_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        args: &str,
        now: i64,
    ) -> Result<IntakeStart> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store("recording a submission"))?;
        let existing: Option<(Option<String>, i64)> = tx
            .query_row(
                "SELECT reply, received_at FROM submissions WHERE run_id = ?1 AND request_id = ?2",
                [run_id, request_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(Error::store("recording a submission"))?;
        let start = match existing {
            Some((Some(reply), _)) => {
                IntakeStart::Completed(from_json("submission reply", &reply)?)
            }
            Some((None, received_at)) => {
                tx.execute(
                    "UPDATE submissions SET attempts = attempts + 1 WHERE run_id = ?1 AND request_id = ?2",
                    [run_id, request_id],
                )
                .map_err(Error::store("recording a submission"))?;
                IntakeStart::Run {
                    received_at,
                    resumed: true,
                }
            }
            None => {
                tx.execute(
                    "INSERT INTO submissions (run_id, request_id, args, received_at, attempts) VALUES (?1, ?2, ?3, ?4, 1)",
                    params![run_id, request_id, args, now],
                )
                .map_err(Error::store("recording a submission"))?;
                IntakeStart::Run {
                    received_at: now,
                    resumed: false,
                }
            }
        };
        tx.commit()
            .map_err(Error::store("recording a submission"))?;
        Ok(start)
    }

    fn finish_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        outcome: IntakeOutcome,
        now: i64,
    ) -> Result<BrokerReply> {
        let ctx = "recording an intake outcome";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        let already: Option<Option<String>> = tx
            .query_row(
                "SELECT reply FROM submissions WHERE run_id = ?1 AND request_id = ?2",
                [run_id, request_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(Error::store(ctx))?;
        if let Some(Some(reply)) = already {
            // A concurrent attempt at the same request finished first: its reply stands.
            return from_json("submission reply", &reply);
        }
        let reply = match outcome {
            IntakeOutcome::Queue(item) => {
                let taken: Option<i64> = tx
                    .query_row("SELECT id FROM queue WHERE run_id = ?1", [run_id], |r| {
                        r.get(0)
                    })
                    .optional()
                    .map_err(Error::store(ctx))?;
                if taken.is_some() {
                    BrokerReply::Refused {
                        error: BrokerError::policy_violation(
                            "second_open_pr",
                            "one_open_pr_per_run",
                            "this run already has an accepted open_pr",
                        ),
                    }
                } else {
                    let id = insert_queue_item(&tx, run_id, request_id, &item, None, now, ctx)?;
                    tx.execute(
                        "UPDATE runs SET state = ?2 WHERE run_id = ?1",
                        [run_id, RunState::Queued.as_str()],
                    )
                    .map_err(Error::store(ctx))?;
                    BrokerReply::Queued { queue_id: id }
                }
            }
            IntakeOutcome::Refuse(refusal) => {
                if !refusal.retryable {
                    // A final refusal ends the run, unless it already has an accepted open_pr
                    // (a refused second call must not take the queued one down with it).
                    tx.execute(
                        "UPDATE runs SET state = ?2 WHERE run_id = ?1 AND state = ?3",
                        [run_id, RunState::Ended.as_str(), RunState::Active.as_str()],
                    )
                    .map_err(Error::store(ctx))?;
                }
                BrokerReply::Refused { error: refusal }
            }
        };
        tx.execute(
            "UPDATE submissions SET reply = ?3, finished_at = ?4 WHERE run_id = ?1 AND request_id = ?2",
            params![run_id, request_id, to_json("reply", &reply)?, now],
        )
        .map_err(Error::store(ctx))?;
        tx.commit().map_err(Error::store(ctx))?;
        Ok(reply)
    }

    fn queue_review(
        &mut self,
        run_id: &str,
        request_id: &str,
        item: &NewQueueItem,
        review: &ReviewItem,
        now: i64,
    ) -> Result<ReviewQueueing> {
        let ctx = "queueing a review";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        // A resent submission of the same run: the review queued first stands.
        if let Some(own) = query_items(&tx, "WHERE run_id = ?1", &run_id)?
            .into_iter()
            .next()
        {
            return Ok(ReviewQueueing::Queued(own));
        }
        if let Some(earlier) = query_items(&tx, "WHERE review IS NOT NULL", &0)?
            .into_iter()
            .find(|q| q.reviews_head(&review.pull))
        {
            return Ok(ReviewQueueing::HeadReviewed(earlier));
        }
        let id = insert_queue_item(&tx, run_id, request_id, item, Some(review), now, ctx)?;
        tx.commit().map_err(Error::store(ctx))?;
        self.queue_item(id)?
            .map(ReviewQueueing::Queued)
            .ok_or(Error::UnknownQueueItem(id))
    }

    fn unfinished_intakes(&mut self) -> Result<Vec<(String, String, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT run_id, request_id, args FROM submissions WHERE reply IS NULL ORDER BY received_at, run_id, request_id")
            .map_err(Error::store("listing unfinished intakes"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(Error::store("listing unfinished intakes"))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(Error::store("listing unfinished intakes"))?;
        Ok(rows)
    }

    fn queue(&mut self) -> Result<Vec<QueueItem>> {
        query_items(&self.conn, "", &0)
    }

    fn queue_item(&mut self, id: i64) -> Result<Option<QueueItem>> {
        Ok(query_items(&self.conn, "WHERE id = ?1", &id)?
            .into_iter()
            .next())
    }

    fn queue_item_for_run(&mut self, run_id: &str) -> Result<Option<QueueItem>> {
        Ok(query_items(&self.conn, "WHERE run_id = ?1", &run_id)?
            .into_iter()
            .next())
    }

    fn expire_queued_before(&mut self, cutoff: i64, now: i64) -> Result<Vec<QueueItem>> {
        let ctx = "expiring queue items";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        let ids: Vec<i64> = {
            let mut stmt = tx
                .prepare(
                    "SELECT id FROM queue WHERE status = 'queued' AND queued_at <= ?1 ORDER BY id",
                )
                .map_err(Error::store(ctx))?;
            stmt.query_map([cutoff], |r| r.get(0))
                .map_err(Error::store(ctx))?
                .collect::<rusqlite::Result<_>>()
                .map_err(Error::store(ctx))?
        };
        for id in &ids {
            tx.execute(
                "UPDATE queue SET status = 'expired', decided_at = ?2 WHERE id = ?1",
                params![id, now],
            )
            .map_err(Error::store(ctx))?;
        }
        tx.commit().map_err(Error::store(ctx))?;
        let mut out = Vec::new();
        for id in ids {
            if let Some(item) = self.queue_item(id)? {
                out.push(item);
            }
        }
        Ok(out)
    }

    fn decide(&mut self, id: i64, decision: &Decision, now: i64) -> Result<QueueItem> {
        let ctx = "recording a decision";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        let status = status_of(&tx, id, ctx)?;
        let (action, new_status, by, reason) = match decision {
            Decision::Approve { by } => ("approve", QueueStatus::Approved, by, None),
            Decision::Deny { by, reason } => ("deny", QueueStatus::Denied, by, Some(reason)),
        };
        if status != QueueStatus::Queued.as_str() {
            return Err(Error::WrongState {
                id,
                status,
                action: action.to_owned(),
            });
        }
        tx.execute(
            "UPDATE queue SET status = ?2, decided_at = ?3, decided_by = ?4, reason = ?5 WHERE id = ?1",
            params![id, new_status.as_str(), now, by, reason],
        )
        .map_err(Error::store(ctx))?;
        tx.commit().map_err(Error::store(ctx))?;
        self.queue_item(id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn record_change_request(
        &mut self,
        queue_id: i64,
        by: &str,
        feedback: &str,
        now: i64,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO change_requests (queue_id, feedback, requested_by, requested_at) VALUES (?1, ?2, ?3, ?4)",
                params![queue_id, feedback, by, now],
            )
            .map_err(Error::store("recording a change request"))?;
        Ok(())
    }

    fn change_request(&mut self, queue_id: i64) -> Result<Option<ChangeRequest>> {
        self.conn
            .query_row(
                "SELECT queue_id, feedback, requested_by, requested_at FROM change_requests WHERE queue_id = ?1 ORDER BY id DESC LIMIT 1",
                params![queue_id],
                |r| {
                    Ok(ChangeRequest {
                        queue_id: r.get(0)?,
                        feedback: r.get(1)?,
                        requested_by: r.get(2)?,
                        requested_at: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(Error::store("reading a change request"))
    }

    fn record_push(&mut self, id: i64, branch: &str, commit: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE queue SET branch = ?2, commit_oid = ?3 WHERE id = ?1",
                params![id, branch, commit],
            )
            .map_err(Error::store("recording a push"))?;
        Ok(())
    }

    fn record_published(&mut self, id: i64, pr_url: Option<&str>) -> Result<()> {
        self.conn
            .execute(
                "UPDATE queue SET status = 'published', pr_url = ?2, publish_error = NULL WHERE id = ?1 AND status = 'approved'",
                params![id, pr_url],
            )
            .map_err(Error::store("recording a publication"))?;
        Ok(())
    }

    fn record_publish_failed(&mut self, id: i64, error: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE queue SET status = 'publish_failed', publish_error = ?2 WHERE id = ?1 AND status IN ('approved', 'publish_failed')",
                params![id, error],
            )
            .map_err(Error::store("recording a failed publication"))?;
        Ok(())
    }

    fn retry_publication(&mut self, id: i64) -> Result<QueueItem> {
        let ctx = "retrying a publication";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        let status = status_of(&tx, id, ctx)?;
        match status.as_str() {
            "publish_failed" => {
                tx.execute(
                    "UPDATE queue SET status = 'approved' WHERE id = ?1",
                    params![id],
                )
                .map_err(Error::store(ctx))?;
            }
            "approved" | "published" => {}
            _ => {
                return Err(Error::WrongState {
                    id,
                    status,
                    action: "publish".to_owned(),
                });
            }
        }
        tx.commit().map_err(Error::store(ctx))?;
        self.queue_item(id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn attach_judge_score(
        &mut self,
        id: i64,
        judgement: &serde_json::Value,
        now: i64,
    ) -> Result<()> {
        let ctx = "attaching a judge score";
        let text = to_json("judge score", judgement)?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        status_of(&tx, id, ctx)?;
        tx.execute(
            "INSERT INTO judge_scores (queue_id, judgement, judged_at) VALUES (?1, ?2, ?3)
             ON CONFLICT(queue_id) DO UPDATE SET judgement = ?2, judged_at = ?3",
            params![id, text, now],
        )
        .map_err(Error::store(ctx))?;
        tx.commit().map_err(Error::store(ctx))
    }

    fn judge_score(&mut self, id: i64) -> Result<Option<JudgeScore>> {
        let row: Option<(String, i64)> = self
            .conn
            .query_row(
                "SELECT judgement, judged_at FROM judge_scores WHERE queue_id = ?1",
                params![id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(Error::store("reading a judge score"))?;
        row.map(|(text, at)| from_json("judge score", &text).map(|v| (v, at)))
            .transpose()
    }

    fn claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt> {
        super::claims::claim(&mut self.conn, request, now)
    }

    fn renew_claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt> {
        super::claims::renew(&mut self.conn, request, now)
    }

    fn release_claim(&mut self, release: &ClaimRelease, now: i64) -> Result<ClaimStatus> {
        super::claims::release(&mut self.conn, release, now)
    }

    fn claims(&mut self) -> Result<Vec<ClaimStatus>> {
        super::claims::all(&self.conn)
    }

    fn enqueue_work(&mut self, issues: &[IssueKey], now: i64) -> Result<usize> {
        super::claims::enqueue_work(&mut self.conn, issues, now)
    }

    fn take_work(
        &mut self,
        holder: &str,
        lease_secs: u64,
        repository: Option<&str>,
        now: i64,
    ) -> Result<Option<ClaimStatus>> {
        super::claims::take_work(&mut self.conn, holder, lease_secs, repository, now)
    }

    fn work(&mut self) -> Result<Vec<WorkEntry>> {
        super::claims::work(&self.conn)
    }

    fn abandon(&mut self, id: i64, by: &str, reason: &str, now: i64) -> Result<QueueItem> {
        let ctx = "abandoning a queue item";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::store(ctx))?;
        let status = status_of(&tx, id, ctx)?;
        if status != QueueStatus::PublishFailed.as_str() {
            return Err(Error::WrongState {
                id,
                status,
                action: "abandon".to_owned(),
            });
        }
        tx.execute(
            "UPDATE queue SET status = 'abandoned', abandoned_by = ?2, abandon_reason = ?3, abandoned_at = ?4 WHERE id = ?1",
            params![id, by, reason, now],
        )
        .map_err(Error::store(ctx))?;
        tx.commit().map_err(Error::store(ctx))?;
        self.queue_item(id)?.ok_or(Error::UnknownQueueItem(id))
    }
}

/// The status of queue item `id` inside a transaction; an unknown id is
/// [`Error::UnknownQueueItem`].
fn status_of(tx: &rusqlite::Transaction<'_>, id: i64, ctx: &str) -> Result<String> {
    let status: Option<String> = tx
        .query_row("SELECT status FROM queue WHERE id = ?1", [id], |r| r.get(0))
        .optional()
        .map_err(Error::store(ctx))?;
    status.ok_or(Error::UnknownQueueItem(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TestRunner;

    fn reg(run_id: &str) -> RunRegistration {
        RunRegistration {
            run_id: run_id.to_owned(),
            repository: "acme/calc".to_owned(),
            base_commit: "a".repeat(40),
            issue_id: "ISSUE-1".to_owned(),
            issue_number: None,
            worktree: "/runs/x".to_owned(),
            test_command: vec!["python3".to_owned()],
            test_runner: TestRunner::Unittest,
            write_allowlist: vec![],
            test_env: Default::default(),
            reconnect_secs: None,
            issue: None,
            follow_up_of: None,
            change: Default::default(),
            tree: Default::default(),
        }
    }

    fn item() -> NewQueueItem {
        NewQueueItem {
            repository: "acme/calc".to_owned(),
            base_commit: "a".repeat(40),
            issue_id: "CALC-1".to_owned(),
            title: "fix: something long enough".to_owned(),
            args: "{\"b\": 1, \"a\": 2}".to_owned(),
            diff: "diff".to_owned(),
            digest: serde_json::json!({}),
            evidence: vec![],
            flags: vec!["x".to_owned()],
            gates: vec![crate::gates::GateNote {
                gate: "migrations-route".to_owned(),
                digest: "sha256:0f".to_owned(),
                verdict: airlock_gates::Verdict::Route("database".to_owned()),
            }],
            network_blocked: Vec::new(),
        }
    }

    #[test]
    fn intake_is_idempotent_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/broker.db");
        {
            let mut s = SqliteStore::open(&path).unwrap();
            s.register_run(&reg("r1"), 1).unwrap();
            s.register_run(&reg("r1"), 2).unwrap();
            let mut other = reg("r1");
            other.worktree = "/elsewhere".to_owned();
            assert!(matches!(
                s.register_run(&other, 3),
                Err(Error::Registration(_))
            ));
            assert_eq!(
                s.begin_intake("r1", "q1", "{}", 5).unwrap(),
                IntakeStart::Run {
                    received_at: 5,
                    resumed: false
                }
            );
        }
        // Reopened as after a crash: the unanswered request is still there, and runs again.
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.unfinished_intakes().unwrap().len(), 1);
        // It keeps the time it first arrived: a resumed intake is judged from then.
        assert_eq!(
            s.begin_intake("r1", "q1", "{}", 6).unwrap(),
            IntakeStart::Run {
                received_at: 5,
                resumed: true
            }
        );
        let reply = s
            .finish_intake("r1", "q1", IntakeOutcome::Queue(Box::new(item())), 7)
            .unwrap();
        assert_eq!(reply, BrokerReply::Queued { queue_id: 1 });
        assert_eq!(
            s.begin_intake("r1", "q1", "{}", 8).unwrap(),
            IntakeStart::Completed(reply)
        );
        assert!(s.unfinished_intakes().unwrap().is_empty());
        let stored = s.queue_item(1).unwrap().unwrap();
        assert_eq!(stored.item, item());
        assert_eq!(s.run("r1").unwrap().unwrap().state, RunState::Queued);
    }

    #[test]
    fn a_second_accepted_intake_of_a_run_becomes_a_policy_violation() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("b.db")).unwrap();
        s.register_run(&reg("r1"), 1).unwrap();
        s.begin_intake("r1", "q1", "{}", 1).unwrap();
        s.begin_intake("r1", "q2", "{}", 1).unwrap();
        s.finish_intake("r1", "q1", IntakeOutcome::Queue(Box::new(item())), 2)
            .unwrap();
        let reply = s
            .finish_intake("r1", "q2", IntakeOutcome::Queue(Box::new(item())), 3)
            .unwrap();
        let BrokerReply::Refused { error } = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(error.details["offending"], "second_open_pr");
        assert_eq!(s.queue().unwrap().len(), 1);
        // A final refusal of a later call does not end the queued run.
        assert_eq!(s.run("r1").unwrap().unwrap().state, RunState::Queued);
    }

    #[test]
    fn decisions_move_only_queued_items() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("c.db")).unwrap();
        s.register_run(&reg("r1"), 1).unwrap();
        s.begin_intake("r1", "q1", "{}", 1).unwrap();
        s.finish_intake("r1", "q1", IntakeOutcome::Queue(Box::new(item())), 100)
            .unwrap();
        assert!(s.expire_queued_before(99, 200).unwrap().is_empty());
        let deny = Decision::Deny {
            by: "rev".to_owned(),
            reason: "no".to_owned(),
        };
        let denied = s.decide(1, &deny, 150).unwrap();
        assert_eq!(denied.status, QueueStatus::Denied);
        assert_eq!(denied.reason.as_deref(), Some("no"));
        let approve = Decision::Approve {
            by: "rev".to_owned(),
        };
        assert!(matches!(
            s.decide(1, &approve, 160),
            Err(Error::WrongState { .. })
        ));
        assert!(matches!(
            s.decide(9, &approve, 160),
            Err(Error::UnknownQueueItem(9))
        ));
        assert!(
            s.expire_queued_before(1000, 1000).unwrap().is_empty(),
            "denied items never expire"
        );
    }

    #[test]
    fn a_failed_publication_is_retried_or_abandoned_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        {
            let mut s = SqliteStore::open(&path).unwrap();
            s.register_run(&reg("r1"), 1).unwrap();
            s.begin_intake("r1", "q1", "{}", 1).unwrap();
            s.finish_intake("r1", "q1", IntakeOutcome::Queue(Box::new(item())), 2)
                .unwrap();
            // Only a publish_failed item can be abandoned.
            assert!(matches!(
                s.abandon(1, "rev", "why", 3),
                Err(Error::WrongState { .. })
            ));
            let approve = Decision::Approve {
                by: "rev".to_owned(),
            };
            s.decide(1, &approve, 3).unwrap();
            s.record_publish_failed(1, "the remote rejected it")
                .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let failed = s.queue_item(1).unwrap().unwrap();
        assert_eq!(failed.status, QueueStatus::PublishFailed);
        assert_eq!(
            failed.publish_error.as_deref(),
            Some("the remote rejected it")
        );
        assert_eq!(
            s.retry_publication(1).unwrap().status,
            QueueStatus::Approved
        );
        s.record_publish_failed(1, "again").unwrap();
        let abandoned = s.abandon(1, "rev", "the remote is gone", 9).unwrap();
        assert_eq!(abandoned.status, QueueStatus::Abandoned);
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        let abandoned = s.queue_item(1).unwrap().unwrap();
        assert_eq!(abandoned.status, QueueStatus::Abandoned);
        assert_eq!(abandoned.abandoned_by.as_deref(), Some("rev"));
        assert_eq!(
            abandoned.abandon_reason.as_deref(),
            Some("the remote is gone")
        );
        assert_eq!(abandoned.abandoned_at, Some(9));
        assert!(matches!(
            s.retry_publication(1),
            Err(Error::WrongState { .. })
        ));
    }

    fn versions(path: &Path) -> Vec<i64> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT version FROM schema_migrations ORDER BY version")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// A database as the broker before versioned migrations left it: `SCHEMA` and the claims
    /// table, with `with_columns` of [`ADDED_COLUMNS`] added, no `schema_migrations`, and a
    /// row in every table.
    fn unversioned_database(path: &Path, with_columns: &[&str]) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute_batch(ADDED_TABLES).unwrap();
        for (table, name, kind) in ADDED_COLUMNS {
            let present: bool = conn
                .query_row(
                    &format!(
                        "SELECT count(*) > 0 FROM pragma_table_info('{table}') WHERE name = ?1"
                    ),
                    [name],
                    |r| r.get(0),
                )
                .unwrap();
            if with_columns.contains(name) && !present {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {name} {kind}"))
                    .unwrap();
            }
        }
        let mut numbered = reg("r1");
        numbered.issue_number = Some(77);
        conn.execute(
            "INSERT INTO runs (run_id, registration, state, registered_at, issue_number) VALUES ('r1', ?1, 'queued', 1, 77)",
            [serde_json::to_string(&numbered).unwrap()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO submissions (run_id, request_id, args, received_at, attempts) VALUES ('r1', 'q2', '{}', 3, 1)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO queue (run_id, request_id, repository, base_commit, issue_id, title, args, diff, digest, evidence, flags, status, queued_at, decided_at, decided_by, publish_error)
             VALUES ('r1', 'q1', 'acme/calc', 'a', 'CALC-1', 't', '{}', 'd', '{}', '[]', '[\"x\"]', 'publish_failed', 5, 6, 'rev', 'the remote rejected it')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO change_requests (queue_id, feedback, requested_by, requested_at) VALUES (1, 'rename it', 'ann', 7)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO judge_scores (queue_id, judgement, judged_at) VALUES (1, '{\"verdict\":\"merge\"}', 8)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO claims (repository, issue_number, holder, state, claimed_at, lease_expires_at) VALUES ('acme/calc', 77, 'w1', 'held', 9, 99)",
            [],
        )
        .unwrap();
    }

    #[test]
    fn a_database_an_unversioned_broker_created_is_migrated_without_losing_rows() {
        let every: Vec<&str> = ADDED_COLUMNS.iter().map(|(_, name, _)| *name).collect();
        // As the last unversioned broker left it (every column), and as the schema text alone
        // creates it (without the review and gates columns).
        for columns in [every, vec![]] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("today.db");
            unversioned_database(&path, &columns);
            let mut s = SqliteStore::open(&path).unwrap();
            assert_eq!(versions(&path), vec![1, 2, 3], "{columns:?}");
            let run = s.run("r1").unwrap().unwrap();
            assert_eq!(
                (run.state, run.registration.issue_number),
                (RunState::Queued, Some(77))
            );
            assert_eq!(
                s.unfinished_intakes().unwrap(),
                vec![("r1".to_owned(), "q2".to_owned(), "{}".to_owned())]
            );
            let item = s.queue_item(1).unwrap().unwrap();
            assert_eq!(
                (
                    item.status,
                    item.decided_by.as_deref(),
                    item.publish_error.as_deref(),
                    item.issue_number,
                    item.item.flags.clone(),
                    item.review.is_none() && item.item.gates.is_empty()
                ),
                (
                    QueueStatus::PublishFailed,
                    Some("rev"),
                    Some("the remote rejected it"),
                    Some(77),
                    vec!["x".to_owned()],
                    true
                )
            );
            assert_eq!(
                s.change_request(1).unwrap().map(|c| c.feedback),
                Some("rename it".to_owned())
            );
            assert_eq!(
                s.judge_score(1).unwrap(),
                Some((serde_json::json!({"verdict": "merge"}), 8))
            );
            assert_eq!(
                s.claims()
                    .unwrap()
                    .iter()
                    .map(|c| (c.holder.as_str(), c.lease_expires_at))
                    .collect::<Vec<_>>(),
                vec![("w1", 99)]
            );
            // The new tables are there and take rows.
            let issue = crate::protocol::IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: 78,
            };
            assert_eq!(s.enqueue_work(&[issue], 10).unwrap(), 1);
            s.record_push(1, "airlock/r1", "c").unwrap();
            drop(s);
            // Opening again applies nothing and keeps everything.
            let mut s = SqliteStore::open(&path).unwrap();
            assert_eq!(versions(&path), vec![1, 2, 3]);
            assert_eq!(s.work().unwrap().len(), 1);
            assert_eq!(
                s.queue_item(1).unwrap().unwrap().branch.as_deref(),
                Some("airlock/r1")
            );
        }
    }

    #[test]
    fn a_database_a_newer_broker_migrated_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("newer.db");
        SqliteStore::open(&path).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)",
                [],
            )
            .unwrap();
        let err = SqliteStore::open(&path).err().unwrap();
        assert!(
            matches!(&err, Error::StoreCorrupt { what, .. } if what == "schema version"),
            "{err}"
        );
        assert!(err.to_string().contains("newer broker"), "{err}");
    }

    #[test]
    fn a_database_from_before_the_publication_columns_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            // The queue table as the first release created it, with one published row.
            let conn = Connection::open(&path).unwrap();
            let old = SCHEMA
                .replace(
                    "pr_url TEXT,\n    publish_error TEXT,\n    abandoned_by TEXT,\n    abandon_reason TEXT,\n    abandoned_at INTEGER\n",
                    "pr_url TEXT\n",
                )
                .replace(
                    "registered_at INTEGER NOT NULL,\n    issue_number INTEGER\n",
                    "registered_at INTEGER NOT NULL\n",
                );
            assert!(!old.contains("issue_number"));
            assert_ne!(old, SCHEMA);
            conn.execute_batch(&old).unwrap();
            conn.execute(
                "INSERT INTO queue (run_id, request_id, repository, base_commit, issue_id, title, args, diff, digest, evidence, flags, status, queued_at)
                 VALUES ('r1', 'q1', 'acme/calc', 'a', 'CALC-1', 't', '{}', 'd', '{}', '[]', '[]', 'published', 5)",
                [],
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let old_item = s.queue_item(1).unwrap().unwrap();
        assert_eq!(old_item.status, QueueStatus::Published);
        // The claims table did not exist then: it does now.
        assert_eq!(s.claims().unwrap(), vec![]);
        assert_eq!(old_item.publish_error, None);
        assert_eq!(old_item.issue_number, None);
        // Nor did the gates: an old item has no gate notes.
        assert!(old_item.item.gates.is_empty());
        // A run registered after the migration keeps its GitHub issue number.
        let mut numbered = reg("r2");
        numbered.issue_number = Some(77);
        s.register_run(&numbered, 6).unwrap();
        s.begin_intake("r2", "q2", "{}", 6).unwrap();
        s.finish_intake("r2", "q2", IntakeOutcome::Queue(Box::new(item())), 7)
            .unwrap();
        let queued = s.queue_item_for_run("r2").unwrap().unwrap();
        assert_eq!(queued.issue_number, Some(77));
        drop(s);
        // Opening again is a no-op.
        SqliteStore::open(&path).unwrap();
    }
}
