//! The SQLite backend of the [`super::Store`]: one file, WAL journal, every state change in
//! one IMMEDIATE transaction (SQLite's single writer lock serialises them), the schema in
//! versioned migrations. The statements and transactions are the shared query layer's
//! (`query`, `claims`); this file holds the connection, the schema and SQLite's [`Dialect`].

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, Type, ValueRef};
use std::path::Path;

use super::schema::{
    approver_tables, ci_checks_table, claims_table, first_release_tables, questions_table,
    work_queue_table,
};
use super::sql::{self, Backend, Cell, Dialect, Migration, Param, Row};
use crate::error::{Error, Result};

/// The tables of the first release (part of migration 1).
const SCHEMA: &str = first_release_tables!(
    "CREATE TABLE IF NOT EXISTS",
    "INTEGER",
    "INTEGER PRIMARY KEY AUTOINCREMENT",
    ""
);

/// The claims table, added after the first release (part of migration 1).
const ADDED_TABLES: &str = claims_table!("CREATE TABLE IF NOT EXISTS", "INTEGER");

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

/// Names of `table`'s columns.
fn columns(store: &mut SqliteStore, table: &str, ctx: &str) -> Result<Vec<String>> {
    store
        .query(
            ctx,
            &format!("SELECT name FROM pragma_table_info('{table}')"),
            &[],
        )?
        .into_iter()
        .map(|mut r| r.text(0))
        .collect()
}

/// Migration 1, the schema as it stood when versions began: the first release's tables, the
/// claims table and [`ADDED_COLUMNS`]. Every step is idempotent, so it also brings a database
/// that an unversioned broker created (any of its tables present, no `schema_migrations`) up
/// to date without touching its rows.
fn baseline(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    store.batch(ctx, SCHEMA)?;
    store.batch(ctx, ADDED_TABLES)?;
    for (table, name, kind) in ADDED_COLUMNS {
        if !columns(store, table, ctx)?.iter().any(|c| c == name) {
            store.batch(
                ctx,
                &format!("ALTER TABLE {table} ADD COLUMN {name} {kind}"),
            )?;
        }
    }
    Ok(())
}

/// Migration 2: the shared work queue (its claims are rows of `claims`).
fn work_queue(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    store.batch(
        ctx,
        work_queue_table!("CREATE TABLE IF NOT EXISTS", "INTEGER"),
    )
}

/// Migration 3: what a run reports its egress proxy refused, per queue item (JSON; NULL for
/// items queued before).
fn queue_network_blocked(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    if !columns(store, "queue", ctx)?
        .iter()
        .any(|c| c == "network_blocked")
    {
        store.batch(ctx, "ALTER TABLE queue ADD COLUMN network_blocked TEXT")?;
    }
    Ok(())
}

/// Migration 4: every finding screened for the approver, per queue item (JSON; NULL for
/// items queued before).
fn queue_findings(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    if !columns(store, "queue", ctx)?
        .iter()
        .any(|c| c == "findings")
    {
        store.batch(ctx, "ALTER TABLE queue ADD COLUMN findings TEXT")?;
    }
    Ok(())
}

/// Migration 5: the named approvers (their tokens hashed) and the approvals given on queue
/// items.
fn approvers(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    store.batch(
        ctx,
        approver_tables!("CREATE TABLE IF NOT EXISTS", "INTEGER"),
    )
}

/// Migration 6: what the broker did with each failed CI check of its pull requests.
fn ci_checks(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    store.batch(
        ctx,
        ci_checks_table!("CREATE TABLE IF NOT EXISTS", "INTEGER"),
    )
}

/// Migration 7: the questions asked on issues, kept until answered.
fn questions(store: &mut SqliteStore, ctx: &str) -> Result<()> {
    store.batch(
        ctx,
        questions_table!("CREATE TABLE IF NOT EXISTS", "INTEGER"),
    )
}

/// Every migration, in order. Append only: a released step is never edited.
const MIGRATIONS: &[Migration<SqliteStore>] = &[
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
    Migration {
        version: 4,
        name: "queue_findings",
        apply: queue_findings,
    },
    Migration {
        version: 5,
        name: "approvers",
        apply: approvers,
    },
    Migration {
        version: 6,
        name: "ci_checks",
        apply: ci_checks,
    },
    Migration {
        version: 7,
        name: "questions",
        apply: questions,
    },
];

/// The SQLite-backed store.
pub struct SqliteStore {
    conn: Connection,
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
        let conn = Connection::open(path).map_err(Error::store(ctx.clone()))?;
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
        let mut store = SqliteStore { conn };
        sql::migrate(&mut store, &ctx, MIGRATIONS)?;
        Ok(store)
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Param::Int(v) => v.to_sql(),
            Param::MaybeInt(v) => v.to_sql(),
            Param::Text(v) => v.to_sql(),
            Param::MaybeText(v) => v.to_sql(),
        }
    }
}

/// Column `i` as the shared layer reads it.
fn cell(value: ValueRef<'_>, i: usize) -> rusqlite::Result<Cell> {
    Ok(match value {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(v) => Cell::Int(v),
        ValueRef::Text(_) => Cell::Text(
            value
                .as_str()
                .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Text, Box::new(e)))?
                .to_owned(),
        ),
        other => {
            return Err(rusqlite::Error::InvalidColumnType(
                i,
                format!("column {i}"),
                other.data_type(),
            ));
        }
    })
}

impl Backend for SqliteStore {
    const DIALECT: Dialect = Dialect {
        placeholder: '?',
        begin: "BEGIN IMMEDIATE",
        lock_rows: "",
        skip_locked_work: "",
        advisory_lock: None,
        integer: "INTEGER",
        unix_now: "CAST(strftime('%s', 'now') AS INTEGER)",
    };

    fn begin(&mut self, ctx: &str) -> Result<()> {
        if !self.conn.is_autocommit() {
            // A transaction left open (a panic between begin and commit) is abandoned.
            let _ = self.rollback(ctx);
        }
        self.batch(ctx, Self::DIALECT.begin)
    }

    fn commit(&mut self, ctx: &str) -> Result<()> {
        self.batch(ctx, "COMMIT")
    }

    fn rollback(&mut self, ctx: &str) -> Result<()> {
        self.batch(ctx, "ROLLBACK")
    }

    fn batch(&mut self, ctx: &str, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).map_err(Error::store(ctx))
    }

    fn execute(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<u64> {
        let changed = self
            .conn
            .execute(sql, rusqlite::params_from_iter(params))
            .map_err(Error::store(ctx))?;
        Ok(u64::try_from(changed).unwrap_or(u64::MAX))
    }

    fn query(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        let mut stmt = self.conn.prepare(sql).map_err(Error::store(ctx))?;
        let width = stmt.column_count();
        stmt.query_map(rusqlite::params_from_iter(params), |r| {
            (0..width)
                .map(|i| cell(r.get_ref(i)?, i))
                .collect::<rusqlite::Result<_>>()
                .map(Row)
        })
        .map_err(Error::store(ctx))?
        .collect::<rusqlite::Result<_>>()
        .map_err(Error::store(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        Decision, IntakeOutcome, IntakeReply as BrokerReply, IntakeStart, NewQueueItem,
        QueueStatus, RunState, Store,
    };
    use super::*;
    use crate::intake::FinishIntake;
    use airlock_protocol::{RunRegistration, TestRunner};

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
            findings: Some(Vec::new()),
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
            assert_eq!(versions(&path), vec![1, 2, 3, 4, 5, 6, 7], "{columns:?}");
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
            let issue = airlock_protocol::IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: 78,
            };
            assert_eq!(s.enqueue_work(&[issue], 10).unwrap(), 1);
            s.record_push(1, "airlock/r1", "c").unwrap();
            drop(s);
            // Opening again applies nothing and keeps everything.
            let mut s = SqliteStore::open(&path).unwrap();
            assert_eq!(versions(&path), vec![1, 2, 3, 4, 5, 6, 7]);
            assert_eq!(s.work().unwrap().len(), 1);
            assert_eq!(
                s.queue_item(1).unwrap().unwrap().branch.as_deref(),
                Some("airlock/r1")
            );
        }
    }

    #[test]
    fn a_reply_an_earlier_broker_recorded_is_still_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replies.db");
        SqliteStore::open(&path).unwrap();
        // As the broker that stored the protocol's reply wrote the rows.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "INSERT INTO submissions (run_id, request_id, args, received_at, attempts, reply, finished_at)
                 VALUES ('r1', 'q1', '{}', 1, 1, '{\"status\":\"queued\",\"queue_id\":4}', 2),
                        ('r1', 'q2', '{}', 1, 1, '{\"status\":\"refused\",\"error\":{\"code\":\"POLICY_VIOLATION\",\"retryable\":false,\"message\":\"m\",\"details\":{\"offending\":\"second_open_pr\"}}}', 2);",
            )
            .unwrap();
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(
            s.begin_intake("r1", "q1", "{}", 3).unwrap(),
            IntakeStart::Completed(BrokerReply::Queued { queue_id: 4 })
        );
        let IntakeStart::Completed(BrokerReply::Refused { error }) =
            s.begin_intake("r1", "q2", "{}", 3).unwrap()
        else {
            panic!("not the stored refusal")
        };
        assert_eq!(error.details["offending"], "second_open_pr");
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
