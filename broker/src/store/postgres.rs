//! The PostgreSQL [`Store`]: the same tables and the same rules as the SQLite store, for a
//! broker whose state lives on a database server (workers on many hosts, one queue).
//!
//! Concurrency: every method is one READ COMMITTED transaction that takes row locks
//! (`SELECT ... FOR UPDATE`) on what it changes, and `INSERT ... ON CONFLICT DO NOTHING` where
//! the row may not exist yet (the unique key makes the second inserter wait for the first and
//! then see its row). Row locks rather than SERIALIZABLE with retries: `take_work` needs
//! `FOR UPDATE SKIP LOCKED` anyway so that concurrent takers get different issues, and with
//! locks the outcome of a race is decided where it happens (one claimer acquires, the others
//! see its claim) instead of by aborting and replaying whole transactions. The one rule with no
//! row to lock, one review per head commit, takes a transaction-scoped advisory lock keyed by
//! the head.
//!
//! The connection is plain TCP or a Unix socket, without TLS (`NoTls`): the server is meant to
//! sit on the broker's host or a private network. The password, when the server wants one,
//! comes from the environment variable `state_db_password_env` names, never from broker.toml.
//!
//! The client is the synchronous `postgres` crate: it runs a small runtime of its own, so it is
//! called from plain threads and `spawn_blocking`, never from async code.

use postgres::{Client, NoTls, Row, Transaction};
use sha2::Digest;

use super::codec::{
    QUEUE_COLUMNS, RawQueueRow, attempts, claim_state_str, from_json, issue_number, lease_end,
    parse_claim_state, parse_run_state, stored_issue_number, to_json,
};
use super::{
    ChangeRequest, ClaimAttempt, Decision, IntakeOutcome, IntakeStart, JudgeScore, NewQueueItem,
    QueueItem, QueueStatus, ReviewItem, ReviewQueueing, RunRecord, RunState, Store, WorkEntry,
};
use crate::error::{Error, Result};
use crate::protocol::{
    BrokerReply, ClaimEnd, ClaimRelease, ClaimRequest, ClaimState, ClaimStatus, IssueKey,
    PullRequestKey, RunRegistration,
};
use airlock_schemas::BrokerError;

/// Migration 1: the tables as the SQLite store's migration 1 leaves them.
const BASELINE: &str = "
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    registration TEXT NOT NULL,
    state TEXT NOT NULL,
    registered_at BIGINT NOT NULL,
    issue_number BIGINT
);
CREATE TABLE submissions (
    run_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    args TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    reply TEXT,
    finished_at BIGINT,
    PRIMARY KEY (run_id, request_id)
);
CREATE TABLE queue (
    id BIGSERIAL PRIMARY KEY,
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
    queued_at BIGINT NOT NULL,
    decided_at BIGINT,
    decided_by TEXT,
    reason TEXT,
    branch TEXT,
    commit_oid TEXT,
    pr_url TEXT,
    publish_error TEXT,
    abandoned_by TEXT,
    abandon_reason TEXT,
    abandoned_at BIGINT,
    review TEXT,
    gates TEXT
);
CREATE TABLE change_requests (
    id BIGSERIAL PRIMARY KEY,
    queue_id BIGINT NOT NULL REFERENCES queue(id),
    feedback TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requested_at BIGINT NOT NULL
);
CREATE TABLE judge_scores (
    queue_id BIGINT PRIMARY KEY REFERENCES queue(id),
    judgement TEXT NOT NULL,
    judged_at BIGINT NOT NULL
);
CREATE TABLE claims (
    repository TEXT NOT NULL,
    issue_number BIGINT NOT NULL,
    holder TEXT NOT NULL,
    state TEXT NOT NULL,
    claimed_at BIGINT NOT NULL,
    lease_expires_at BIGINT NOT NULL,
    PRIMARY KEY (repository, issue_number)
);
";

/// Migration 2: the shared work queue (its claims are rows of `claims`).
const WORK_QUEUE: &str = "
CREATE TABLE work_queue (
    repository TEXT NOT NULL,
    issue_number BIGINT NOT NULL,
    enqueued_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (repository, issue_number)
);
CREATE INDEX work_queue_order ON work_queue (enqueued_at, repository, issue_number);
";

/// Every migration as (version, name, SQL), in order, with the SQLite store's version numbers
/// for the same tables. Append only: a released step is never edited.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "baseline", BASELINE),
    (2, "work_queue", WORK_QUEUE),
    (3, "queue_network_blocked", QUEUE_NETWORK_BLOCKED),
];

/// Migration 3: what a run reports its egress proxy refused, per queue item (JSON; NULL for
/// items queued before).
const QUEUE_NETWORK_BLOCKED: &str =
    "ALTER TABLE queue ADD COLUMN IF NOT EXISTS network_blocked TEXT;";

/// Any fixed key: brokers opening one database at once take turns applying migrations.
const MIGRATION_LOCK: i64 = 0x6169_726c_6f63_6b01;

/// How often a transaction that lost a race to a concurrent one (a row inserted or claimed
/// between its look and its write) starts again before giving up; each lost race means another
/// transaction committed, so this bounds nothing but a pathological storm.
const RACE_RETRIES: usize = 64;

/// How a transaction that may race a concurrent one ended.
enum Race<T> {
    /// It did its work: commit it.
    Won(T),
    /// A concurrent transaction changed a row between this one's look and its write: roll back
    /// and start again.
    Lost,
}

/// The PostgreSQL-backed store: one connection; a call that finds it cut by the server (a
/// restart, an idle timeout) fails, and the next one connects again.
pub struct PostgresStore {
    config: postgres::Config,
    /// `None` only while being dropped, or after a failed reconnection.
    client: Option<Client>,
}

impl PostgresStore {
    /// Connect to the database at `url` (`postgres://user@host:port/db`) with `password` when
    /// given, and bring its schema up to date.
    pub fn connect(url: &str, password: Option<&str>) -> Result<Self> {
        let mut config: postgres::Config = url.parse().map_err(Error::postgres(format!(
            "reading the state_db URL {}",
            redacted(url)
        )))?;
        if let Some(password) = password {
            config.password(password);
        }
        config.application_name("airlock-broker");
        let ctx = format!("connecting to {}", redacted(url));
        let mut client = config
            .connect(NoTls)
            .map_err(Error::postgres(ctx.clone()))?;
        migrate(&mut client, &ctx)?;
        Ok(PostgresStore {
            config,
            client: Some(client),
        })
    }

    /// The connection, opened again first if it was found closed: a broker outlives its
    /// database's restarts.
    fn client(&mut self) -> Result<&mut Client> {
        let client = match self.client.take() {
            Some(client) if !client.is_closed() => client,
            _ => self
                .config
                .connect(NoTls)
                .map_err(Error::postgres("reconnecting to the state database"))?,
        };
        Ok(self.client.insert(client))
    }

    /// A new transaction on the connection.
    fn transaction(&mut self, ctx: &str) -> Result<Transaction<'_>> {
        self.client()?.transaction().map_err(Error::postgres(ctx))
    }

    /// Run `f` in a transaction and commit it; when `f` lost a race the transaction is rolled
    /// back and `f` runs again in a new one.
    fn retrying<T>(
        &mut self,
        ctx: &str,
        mut f: impl FnMut(&mut Transaction<'_>) -> Result<Race<T>>,
    ) -> Result<T> {
        for _ in 0..RACE_RETRIES {
            let mut tx = self.transaction(ctx)?;
            match f(&mut tx)? {
                Race::Won(value) => {
                    tx.commit().map_err(Error::postgres(ctx))?;
                    return Ok(value);
                }
                Race::Lost => tx.rollback().map_err(Error::postgres(ctx))?,
            }
        }
        Err(Error::StoreCorrupt {
            what: "contended row".to_owned(),
            message: format!(
                "{ctx}: lost the race to concurrent writers {RACE_RETRIES} times in a row"
            ),
        })
    }

    fn query_items(&mut self, where_clause: &str, param: &Param<'_>) -> Result<Vec<QueueItem>> {
        let client = self.client()?;
        query_items(client, where_clause, param)
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The client closes its connection by blocking on a runtime of its own, which panics on
        // a thread that runs async code (the web page's, should the last holder of the broker
        // go away there): there it is closed on a thread of its own.
        if let Some(client) = self.client.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let _ = std::thread::spawn(move || drop(client)).join();
        }
    }
}

/// The URL with any password replaced, for messages (the configuration refuses a password in
/// the URL, but a message must never be where one leaks).
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Apply the migrations the database lacks, in order, in one transaction that holds an advisory
/// lock, so brokers starting together apply each step once.
fn migrate(client: &mut Client, ctx: &str) -> Result<()> {
    let mut tx = client.transaction().map_err(Error::postgres(ctx))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(Error::postgres(ctx))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version BIGINT PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        );",
    )
    .map_err(Error::postgres(ctx))?;
    let applied: Vec<i64> = tx
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .map_err(Error::postgres(ctx))?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<std::result::Result<_, _>>()
        .map_err(Error::postgres(ctx))?;
    super::check_schema_version(&applied, MIGRATIONS.iter().map(|(v, _, _)| *v))?;
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(sql).map_err(Error::postgres(format!(
            "{ctx}: migration {version} ({name})"
        )))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at)
             VALUES ($1, $2, EXTRACT(EPOCH FROM now())::BIGINT)",
            &[version, name],
        )
        .map_err(Error::postgres(ctx))?;
    }
    tx.commit().map_err(Error::postgres(ctx))
}

/// The one parameter a queue read filters by.
enum Param<'a> {
    None,
    Id(i64),
    Text(&'a str),
}

fn raw_row(r: &Row) -> std::result::Result<RawQueueRow, postgres::Error> {
    Ok(RawQueueRow {
        id: r.try_get(0)?,
        run_id: r.try_get(1)?,
        request_id: r.try_get(2)?,
        repository: r.try_get(3)?,
        base_commit: r.try_get(4)?,
        issue_id: r.try_get(5)?,
        title: r.try_get(6)?,
        args: r.try_get(7)?,
        diff: r.try_get(8)?,
        digest: r.try_get(9)?,
        evidence: r.try_get(10)?,
        flags: r.try_get(11)?,
        status: r.try_get(12)?,
        queued_at: r.try_get(13)?,
        decided_at: r.try_get(14)?,
        decided_by: r.try_get(15)?,
        reason: r.try_get(16)?,
        branch: r.try_get(17)?,
        commit: r.try_get(18)?,
        pr_url: r.try_get(19)?,
        publish_error: r.try_get(20)?,
        abandoned_by: r.try_get(21)?,
        abandon_reason: r.try_get(22)?,
        abandoned_at: r.try_get(23)?,
        issue_number: r.try_get(24)?,
        review: r.try_get(25)?,
        gates: r.try_get(26)?,
        network_blocked: r.try_get(27)?,
    })
}

/// Queue items matching `where_clause` (with `$1` bound to `param`), by id.
fn query_items(
    client: &mut impl postgres::GenericClient,
    where_clause: &str,
    param: &Param<'_>,
) -> Result<Vec<QueueItem>> {
    let ctx = "reading the queue";
    let sql = format!("SELECT {QUEUE_COLUMNS} FROM queue {where_clause} ORDER BY id");
    let rows = match param {
        Param::None => client.query(&sql, &[]),
        Param::Id(id) => client.query(&sql, &[id]),
        Param::Text(text) => client.query(&sql, &[text]),
    }
    .map_err(Error::postgres(ctx))?;
    rows.iter()
        .map(|r| raw_row(r).map_err(Error::postgres(ctx))?.into_item())
        .collect()
}

/// The status of queue item `id`, locked until the transaction ends; an unknown id is
/// [`Error::UnknownQueueItem`].
fn lock_status(tx: &mut Transaction<'_>, id: i64, ctx: &str) -> Result<String> {
    let row = tx
        .query_opt("SELECT status FROM queue WHERE id = $1 FOR UPDATE", &[&id])
        .map_err(Error::postgres(ctx))?
        .ok_or(Error::UnknownQueueItem(id))?;
    row.try_get(0).map_err(Error::postgres(ctx))
}

/// An advisory-lock key for "a review of this head commit": the same for every spelling of the
/// owner and repository that [`QueueItem::reviews_head`] takes as the same.
fn head_lock_key(pull: &PullRequestKey) -> i64 {
    let text = format!(
        "review {}/{}#{}@{}",
        pull.owner.to_ascii_lowercase(),
        pull.repo.to_ascii_lowercase(),
        pull.number,
        pull.head_sha
    );
    let digest = sha2::Sha256::digest(text.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

fn insert_item(
    tx: &mut Transaction<'_>,
    run_id: &str,
    request_id: &str,
    item: &NewQueueItem,
    review: Option<&ReviewItem>,
    now: i64,
    ctx: &str,
) -> Result<Option<i64>> {
    let review = review.map(|r| to_json("review", r)).transpose()?;
    let row = tx
        .query_opt(
            "INSERT INTO queue (run_id, request_id, repository, base_commit, issue_id, title, args, diff, digest, evidence, flags, status, queued_at, review, gates, network_blocked)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
             ON CONFLICT (run_id) DO NOTHING RETURNING id",
            &[
                &run_id,
                &request_id,
                &item.repository,
                &item.base_commit,
                &item.issue_id,
                &item.title,
                &item.args,
                &item.diff,
                &to_json("digest", &item.digest)?,
                &to_json("evidence", &item.evidence)?,
                &to_json("flags", &item.flags)?,
                &QueueStatus::Queued.as_str(),
                &now,
                &review,
                &to_json("gates", &item.gates)?,
                &to_json("network_blocked", &item.network_blocked)?,
            ],
        )
        .map_err(Error::postgres(ctx))?;
    row.map(|r| r.try_get(0).map_err(Error::postgres(ctx)))
        .transpose()
}

fn read_claim(
    tx: &mut Transaction<'_>,
    issue: &IssueKey,
    ctx: &str,
) -> Result<Option<ClaimStatus>> {
    let row = tx
        .query_opt(
            "SELECT holder, state, claimed_at, lease_expires_at FROM claims
             WHERE repository = $1 AND issue_number = $2 FOR UPDATE",
            &[&issue.repository, &stored_issue_number(issue)?],
        )
        .map_err(Error::postgres(ctx))?;
    row.map(|r| {
        let state: String = r.try_get(1).map_err(Error::postgres(ctx))?;
        Ok(ClaimStatus {
            issue: issue.clone(),
            holder: r.try_get(0).map_err(Error::postgres(ctx))?,
            state: parse_claim_state(&state)?,
            claimed_at: r.try_get(2).map_err(Error::postgres(ctx))?,
            lease_expires_at: r.try_get(3).map_err(Error::postgres(ctx))?,
        })
    })
    .transpose()
}

/// Insert `claim` as a new row; `false` when a concurrent transaction inserted the issue's row
/// first (the caller starts again and finds it).
fn insert_claim(tx: &mut Transaction<'_>, claim: &ClaimStatus, ctx: &str) -> Result<bool> {
    let inserted = tx
        .execute(
            "INSERT INTO claims (repository, issue_number, holder, state, claimed_at, lease_expires_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (repository, issue_number) DO NOTHING",
            &[
                &claim.issue.repository,
                &stored_issue_number(&claim.issue)?,
                &claim.holder,
                &claim_state_str(claim.state),
                &claim.claimed_at,
                &claim.lease_expires_at,
            ],
        )
        .map_err(Error::postgres(ctx))?;
    Ok(inserted == 1)
}

/// Overwrite the issue's claim row (locked by [`read_claim`]).
fn update_claim(tx: &mut Transaction<'_>, claim: &ClaimStatus, ctx: &str) -> Result<()> {
    tx.execute(
        "UPDATE claims SET holder = $3, state = $4, claimed_at = $5, lease_expires_at = $6
         WHERE repository = $1 AND issue_number = $2",
        &[
            &claim.issue.repository,
            &stored_issue_number(&claim.issue)?,
            &claim.holder,
            &claim_state_str(claim.state),
            &claim.claimed_at,
            &claim.lease_expires_at,
        ],
    )
    .map_err(Error::postgres(ctx))?;
    Ok(())
}

/// Whether a claim may be taken by someone new: released, or held past its lease.
fn claim_is_free(claim: &ClaimStatus, now: i64) -> bool {
    match claim.state {
        ClaimState::Done => false,
        ClaimState::Released => true,
        ClaimState::Held => claim.lease_expires_at <= now,
    }
}

impl Store for PostgresStore {
    fn register_run(&mut self, run: &RunRegistration, now: i64) -> Result<()> {
        let ctx = "registering a run";
        let text = to_json("run registration", run)?;
        let number = run.issue_number.and_then(|n| i64::try_from(n).ok());
        let mut tx = self.transaction(ctx)?;
        let inserted = tx
            .execute(
                "INSERT INTO runs (run_id, registration, state, registered_at, issue_number)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id) DO NOTHING",
                &[
                    &run.run_id,
                    &text,
                    &RunState::Active.as_str(),
                    &now,
                    &number,
                ],
            )
            .map_err(Error::postgres(ctx))?;
        if inserted == 0 {
            let row = tx
                .query_one(
                    "SELECT registration FROM runs WHERE run_id = $1",
                    &[&run.run_id],
                )
                .map_err(Error::postgres(ctx))?;
            let stored: String = row.try_get(0).map_err(Error::postgres(ctx))?;
            let stored: RunRegistration = from_json("run registration", &stored)?;
            if &stored != run {
                return Err(Error::Registration(format!(
                    "run {:?} is already registered with different details",
                    run.run_id
                )));
            }
        }
        tx.commit().map_err(Error::postgres(ctx))
    }

    fn run(&mut self, run_id: &str) -> Result<Option<RunRecord>> {
        let ctx = "reading a run";
        let row = self
            .client()?
            .query_opt(
                "SELECT registration, state, registered_at FROM runs WHERE run_id = $1",
                &[&run_id],
            )
            .map_err(Error::postgres(ctx))?;
        row.map(|r| {
            let registration: String = r.try_get(0).map_err(Error::postgres(ctx))?;
            let state: String = r.try_get(1).map_err(Error::postgres(ctx))?;
            Ok(RunRecord {
                registration: from_json("run registration", &registration)?,
                state: parse_run_state(&state)?,
                registered_at: r.try_get(2).map_err(Error::postgres(ctx))?,
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
        let ctx = "recording a submission";
        let mut tx = self.transaction(ctx)?;
        let inserted = tx
            .execute(
                "INSERT INTO submissions (run_id, request_id, args, received_at, attempts)
                 VALUES ($1, $2, $3, $4, 1) ON CONFLICT (run_id, request_id) DO NOTHING",
                &[&run_id, &request_id, &args, &now],
            )
            .map_err(Error::postgres(ctx))?;
        let start = if inserted == 1 {
            IntakeStart::Run {
                received_at: now,
                resumed: false,
            }
        } else {
            let row = tx
                .query_one(
                    "SELECT reply, received_at FROM submissions
                     WHERE run_id = $1 AND request_id = $2 FOR UPDATE",
                    &[&run_id, &request_id],
                )
                .map_err(Error::postgres(ctx))?;
            let reply: Option<String> = row.try_get(0).map_err(Error::postgres(ctx))?;
            match reply {
                Some(reply) => IntakeStart::Completed(from_json("submission reply", &reply)?),
                None => {
                    tx.execute(
                        "UPDATE submissions SET attempts = attempts + 1
                         WHERE run_id = $1 AND request_id = $2",
                        &[&run_id, &request_id],
                    )
                    .map_err(Error::postgres(ctx))?;
                    IntakeStart::Run {
                        received_at: row.try_get(1).map_err(Error::postgres(ctx))?,
                        resumed: true,
                    }
                }
            }
        };
        tx.commit().map_err(Error::postgres(ctx))?;
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
        let mut tx = self.transaction(ctx)?;
        // Locks the submission: a concurrent attempt at the same request waits here and then
        // finds this one's reply.
        let already = tx
            .query_opt(
                "SELECT reply FROM submissions WHERE run_id = $1 AND request_id = $2 FOR UPDATE",
                &[&run_id, &request_id],
            )
            .map_err(Error::postgres(ctx))?;
        if let Some(row) = already {
            let reply: Option<String> = row.try_get(0).map_err(Error::postgres(ctx))?;
            if let Some(reply) = reply {
                // A concurrent attempt at the same request finished first: its reply stands.
                return from_json("submission reply", &reply);
            }
        }
        let reply = match outcome {
            IntakeOutcome::Queue(item) => {
                // The unique run id decides between two accepted open_pr calls of one run: the
                // second insert waits for the first transaction and then inserts nothing.
                match insert_item(&mut tx, run_id, request_id, &item, None, now, ctx)? {
                    None => BrokerReply::Refused {
                        error: BrokerError::policy_violation(
                            "second_open_pr",
                            "one_open_pr_per_run",
                            "this run already has an accepted open_pr",
                        ),
                    },
                    Some(id) => {
                        tx.execute(
                            "UPDATE runs SET state = $2 WHERE run_id = $1",
                            &[&run_id, &RunState::Queued.as_str()],
                        )
                        .map_err(Error::postgres(ctx))?;
                        BrokerReply::Queued { queue_id: id }
                    }
                }
            }
            IntakeOutcome::Refuse(refusal) => {
                if !refusal.retryable {
                    // A final refusal ends the run, unless it already has an accepted open_pr
                    // (a refused second call must not take the queued one down with it).
                    tx.execute(
                        "UPDATE runs SET state = $2 WHERE run_id = $1 AND state = $3",
                        &[
                            &run_id,
                            &RunState::Ended.as_str(),
                            &RunState::Active.as_str(),
                        ],
                    )
                    .map_err(Error::postgres(ctx))?;
                }
                BrokerReply::Refused { error: refusal }
            }
        };
        tx.execute(
            "UPDATE submissions SET reply = $3, finished_at = $4
             WHERE run_id = $1 AND request_id = $2",
            &[&run_id, &request_id, &to_json("reply", &reply)?, &now],
        )
        .map_err(Error::postgres(ctx))?;
        tx.commit().map_err(Error::postgres(ctx))?;
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
        let mut tx = self.transaction(ctx)?;
        // No row stands for "a review of this head" until one is queued: reviews of one head
        // take turns on an advisory lock instead, held until this transaction ends.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&head_lock_key(&review.pull)],
        )
        .map_err(Error::postgres(ctx))?;
        let own = |tx: &mut Transaction<'_>| {
            query_items(tx, "WHERE run_id = $1", &Param::Text(run_id))
                .map(|items| items.into_iter().next())
        };
        // A resent submission of the same run: the review queued first stands.
        if let Some(own) = own(&mut tx)? {
            return Ok(ReviewQueueing::Queued(own));
        }
        if let Some(earlier) = query_items(&mut tx, "WHERE review IS NOT NULL", &Param::None)?
            .into_iter()
            .find(|q| q.reviews_head(&review.pull))
        {
            return Ok(ReviewQueueing::HeadReviewed(earlier));
        }
        let queued = match insert_item(&mut tx, run_id, request_id, item, Some(review), now, ctx)? {
            Some(id) => query_items(&mut tx, "WHERE id = $1", &Param::Id(id))?
                .into_iter()
                .next()
                .ok_or(Error::UnknownQueueItem(id))?,
            // The same run queued something between the look and the insert.
            None => own(&mut tx)?.ok_or_else(|| Error::UnknownRun(run_id.to_owned()))?,
        };
        tx.commit().map_err(Error::postgres(ctx))?;
        Ok(ReviewQueueing::Queued(queued))
    }

    fn unfinished_intakes(&mut self) -> Result<Vec<(String, String, String)>> {
        let ctx = "listing unfinished intakes";
        self.client()?
            .query(
                "SELECT run_id, request_id, args FROM submissions WHERE reply IS NULL
                 ORDER BY received_at, run_id, request_id",
                &[],
            )
            .map_err(Error::postgres(ctx))?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<std::result::Result<_, postgres::Error>>()
            .map_err(Error::postgres(ctx))
    }

    fn queue(&mut self) -> Result<Vec<QueueItem>> {
        self.query_items("", &Param::None)
    }

    fn queue_item(&mut self, id: i64) -> Result<Option<QueueItem>> {
        Ok(self
            .query_items("WHERE id = $1", &Param::Id(id))?
            .into_iter()
            .next())
    }

    fn queue_item_for_run(&mut self, run_id: &str) -> Result<Option<QueueItem>> {
        Ok(self
            .query_items("WHERE run_id = $1", &Param::Text(run_id))?
            .into_iter()
            .next())
    }

    fn expire_queued_before(&mut self, cutoff: i64, now: i64) -> Result<Vec<QueueItem>> {
        let ctx = "expiring queue items";
        let mut ids: Vec<i64> = self
            .client()?
            .query(
                "UPDATE queue SET status = 'expired', decided_at = $2
                 WHERE status = 'queued' AND queued_at <= $1 RETURNING id",
                &[&cutoff, &now],
            )
            .map_err(Error::postgres(ctx))?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<_, _>>()
            .map_err(Error::postgres(ctx))?;
        ids.sort_unstable();
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
        let mut tx = self.transaction(ctx)?;
        let status = lock_status(&mut tx, id, ctx)?;
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
            "UPDATE queue SET status = $2, decided_at = $3, decided_by = $4, reason = $5
             WHERE id = $1",
            &[&id, &new_status.as_str(), &now, by, &reason],
        )
        .map_err(Error::postgres(ctx))?;
        tx.commit().map_err(Error::postgres(ctx))?;
        self.queue_item(id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn record_change_request(
        &mut self,
        queue_id: i64,
        by: &str,
        feedback: &str,
        now: i64,
    ) -> Result<()> {
        self.client()?
            .execute(
                "INSERT INTO change_requests (queue_id, feedback, requested_by, requested_at)
                 VALUES ($1, $2, $3, $4)",
                &[&queue_id, &feedback, &by, &now],
            )
            .map_err(Error::postgres("recording a change request"))?;
        Ok(())
    }

    fn change_request(&mut self, queue_id: i64) -> Result<Option<ChangeRequest>> {
        let ctx = "reading a change request";
        let row = self
            .client()?
            .query_opt(
                "SELECT queue_id, feedback, requested_by, requested_at FROM change_requests
                 WHERE queue_id = $1 ORDER BY id DESC LIMIT 1",
                &[&queue_id],
            )
            .map_err(Error::postgres(ctx))?;
        row.map(|r| {
            Ok(ChangeRequest {
                queue_id: r.try_get(0)?,
                feedback: r.try_get(1)?,
                requested_by: r.try_get(2)?,
                requested_at: r.try_get(3)?,
            })
        })
        .transpose()
        .map_err(Error::postgres(ctx))
    }

    fn record_push(&mut self, id: i64, branch: &str, commit: &str) -> Result<()> {
        self.client()?
            .execute(
                "UPDATE queue SET branch = $2, commit_oid = $3 WHERE id = $1",
                &[&id, &branch, &commit],
            )
            .map_err(Error::postgres("recording a push"))?;
        Ok(())
    }

    fn record_published(&mut self, id: i64, pr_url: Option<&str>) -> Result<()> {
        self.client()?
            .execute(
                "UPDATE queue SET status = 'published', pr_url = $2, publish_error = NULL
                 WHERE id = $1 AND status = 'approved'",
                &[&id, &pr_url],
            )
            .map_err(Error::postgres("recording a publication"))?;
        Ok(())
    }

    fn record_publish_failed(&mut self, id: i64, error: &str) -> Result<()> {
        self.client()?
            .execute(
                "UPDATE queue SET status = 'publish_failed', publish_error = $2
                 WHERE id = $1 AND status IN ('approved', 'publish_failed')",
                &[&id, &error],
            )
            .map_err(Error::postgres("recording a failed publication"))?;
        Ok(())
    }

    fn retry_publication(&mut self, id: i64) -> Result<QueueItem> {
        let ctx = "retrying a publication";
        let mut tx = self.transaction(ctx)?;
        let status = lock_status(&mut tx, id, ctx)?;
        match status.as_str() {
            "publish_failed" => {
                tx.execute("UPDATE queue SET status = 'approved' WHERE id = $1", &[&id])
                    .map_err(Error::postgres(ctx))?;
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
        tx.commit().map_err(Error::postgres(ctx))?;
        self.queue_item(id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn abandon(&mut self, id: i64, by: &str, reason: &str, now: i64) -> Result<QueueItem> {
        let ctx = "abandoning a queue item";
        let mut tx = self.transaction(ctx)?;
        let status = lock_status(&mut tx, id, ctx)?;
        if status != QueueStatus::PublishFailed.as_str() {
            return Err(Error::WrongState {
                id,
                status,
                action: "abandon".to_owned(),
            });
        }
        tx.execute(
            "UPDATE queue SET status = 'abandoned', abandoned_by = $2, abandon_reason = $3,
             abandoned_at = $4 WHERE id = $1",
            &[&id, &by, &reason, &now],
        )
        .map_err(Error::postgres(ctx))?;
        tx.commit().map_err(Error::postgres(ctx))?;
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
        let mut tx = self.transaction(ctx)?;
        // Locked so that the item cannot go away between the look and the insert.
        lock_status(&mut tx, id, ctx)?;
        tx.execute(
            "INSERT INTO judge_scores (queue_id, judgement, judged_at) VALUES ($1, $2, $3)
             ON CONFLICT (queue_id) DO UPDATE
               SET judgement = EXCLUDED.judgement, judged_at = EXCLUDED.judged_at",
            &[&id, &text, &now],
        )
        .map_err(Error::postgres(ctx))?;
        tx.commit().map_err(Error::postgres(ctx))
    }

    fn judge_score(&mut self, id: i64) -> Result<Option<JudgeScore>> {
        let ctx = "reading a judge score";
        let row = self
            .client()?
            .query_opt(
                "SELECT judgement, judged_at FROM judge_scores WHERE queue_id = $1",
                &[&id],
            )
            .map_err(Error::postgres(ctx))?;
        row.map(|r| {
            let text: String = r.try_get(0).map_err(Error::postgres(ctx))?;
            let at: i64 = r.try_get(1).map_err(Error::postgres(ctx))?;
            from_json("judge score", &text).map(|v| (v, at))
        })
        .transpose()
    }

    fn claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt> {
        let ctx = "claiming an issue";
        let fresh = ClaimStatus {
            issue: request.issue.clone(),
            holder: request.holder.clone(),
            state: ClaimState::Held,
            claimed_at: now,
            lease_expires_at: lease_end(now, request.lease_secs),
        };
        self.retrying(ctx, |tx| {
            let attempt = match read_claim(tx, &request.issue, ctx)? {
                None => {
                    // Of concurrent first claimers one inserts; the others start again and
                    // find its claim.
                    if !insert_claim(tx, &fresh, ctx)? {
                        return Ok(Race::Lost);
                    }
                    return Ok(Race::Won(ClaimAttempt::Acquired(fresh.clone())));
                }
                Some(c) if c.state == ClaimState::Done => ClaimAttempt::Taken(c),
                Some(c) if claim_is_free(&c, now) => ClaimAttempt::Acquired(fresh.clone()),
                Some(c) if c.holder == request.holder => ClaimAttempt::Renewed(ClaimStatus {
                    lease_expires_at: fresh.lease_expires_at,
                    ..c
                }),
                Some(c) => ClaimAttempt::Taken(c),
            };
            match &attempt {
                ClaimAttempt::Acquired(c) | ClaimAttempt::Renewed(c) => update_claim(tx, c, ctx)?,
                ClaimAttempt::Taken(_) => {}
            }
            Ok(Race::Won(attempt))
        })
    }

    fn renew_claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt> {
        let ctx = "renewing a claim";
        let mut tx = self.transaction(ctx)?;
        let attempt = match read_claim(&mut tx, &request.issue, ctx)? {
            Some(c) if c.state == ClaimState::Held && c.holder == request.holder => {
                // A lapsed lease nobody took over is still this holder's to extend: the worker
                // was slow, not dead, and nobody else has started on the issue.
                let renewed = ClaimStatus {
                    lease_expires_at: lease_end(now, request.lease_secs),
                    ..c
                };
                update_claim(&mut tx, &renewed, ctx)?;
                ClaimAttempt::Renewed(renewed)
            }
            Some(c) if c.holder != request.holder => ClaimAttempt::Taken(c),
            Some(c) => {
                return Err(Error::ClaimNotHeld {
                    issue: request.issue.clone(),
                    holder: request.holder.clone(),
                    state: claim_state_str(c.state).to_owned(),
                });
            }
            None => {
                return Err(Error::ClaimNotHeld {
                    issue: request.issue.clone(),
                    holder: request.holder.clone(),
                    state: "unclaimed".to_owned(),
                });
            }
        };
        tx.commit().map_err(Error::postgres(ctx))?;
        Ok(attempt)
    }

    fn release_claim(&mut self, release: &ClaimRelease, now: i64) -> Result<ClaimStatus> {
        let ctx = "releasing a claim";
        let mut tx = self.transaction(ctx)?;
        let ended = match read_claim(&mut tx, &release.issue, ctx)? {
            Some(c) if c.state == ClaimState::Held && c.holder == release.holder => {
                let ended = ClaimStatus {
                    state: match release.end {
                        ClaimEnd::Done => ClaimState::Done,
                        ClaimEnd::Abandoned => ClaimState::Released,
                    },
                    lease_expires_at: now,
                    ..c
                };
                update_claim(&mut tx, &ended, ctx)?;
                ended
            }
            other => {
                return Err(Error::ClaimNotHeld {
                    issue: release.issue.clone(),
                    holder: release.holder.clone(),
                    state: match other {
                        Some(c) => format!("{} by {:?}", claim_state_str(c.state), c.holder),
                        None => "unclaimed".to_owned(),
                    },
                });
            }
        };
        tx.commit().map_err(Error::postgres(ctx))?;
        Ok(ended)
    }

    fn claims(&mut self) -> Result<Vec<ClaimStatus>> {
        let ctx = "listing claims";
        let rows = self
            .client()?
            .query(
                "SELECT repository, issue_number, holder, state, claimed_at, lease_expires_at
                 FROM claims ORDER BY repository, issue_number",
                &[],
            )
            .map_err(Error::postgres(ctx))?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get(3).map_err(Error::postgres(ctx))?;
                Ok(ClaimStatus {
                    issue: IssueKey {
                        repository: r.try_get(0).map_err(Error::postgres(ctx))?,
                        issue_number: issue_number(r.try_get(1).map_err(Error::postgres(ctx))?)?,
                    },
                    holder: r.try_get(2).map_err(Error::postgres(ctx))?,
                    state: parse_claim_state(&state)?,
                    claimed_at: r.try_get(4).map_err(Error::postgres(ctx))?,
                    lease_expires_at: r.try_get(5).map_err(Error::postgres(ctx))?,
                })
            })
            .collect()
    }

    fn enqueue_work(&mut self, issues: &[IssueKey], now: i64) -> Result<usize> {
        let ctx = "queueing work";
        // Inserted in key order: two enqueuers of overlapping lists then wait for each other's
        // rows in the same order and never deadlock.
        let mut sorted: Vec<&IssueKey> = issues.iter().collect();
        sorted
            .sort_by(|a, b| (&a.repository, a.issue_number).cmp(&(&b.repository, b.issue_number)));
        let mut tx = self.transaction(ctx)?;
        let mut new = 0;
        for issue in sorted {
            new += tx
                .execute(
                    "INSERT INTO work_queue (repository, issue_number, enqueued_at, attempts)
                     VALUES ($1, $2, $3, 0) ON CONFLICT (repository, issue_number) DO NOTHING",
                    &[&issue.repository, &stored_issue_number(issue)?, &now],
                )
                .map_err(Error::postgres(ctx))?;
        }
        tx.commit().map_err(Error::postgres(ctx))?;
        usize::try_from(new).map_err(|_| Error::StoreCorrupt {
            what: "work queue count".to_owned(),
            message: new.to_string(),
        })
    }

    fn take_work(
        &mut self,
        holder: &str,
        lease_secs: u64,
        repository: Option<&str>,
        now: i64,
    ) -> Result<Option<ClaimStatus>> {
        let ctx = "taking work";
        self.retrying(ctx, |tx| {
            // SKIP LOCKED: an issue another taker is claiming right now is passed over, so
            // concurrent takers get different issues instead of queueing behind one row.
            let candidate = tx
                .query_opt(
                    "SELECT w.repository, w.issue_number FROM work_queue w
                     LEFT JOIN claims c
                       ON c.repository = w.repository AND c.issue_number = w.issue_number
                     WHERE ($1::TEXT IS NULL OR w.repository = $1)
                       AND (c.state IS NULL OR c.state = 'released'
                            OR (c.state = 'held' AND c.lease_expires_at <= $2))
                     ORDER BY w.enqueued_at, w.repository, w.issue_number
                     LIMIT 1
                     FOR UPDATE OF w SKIP LOCKED",
                    &[&repository, &now],
                )
                .map_err(Error::postgres(ctx))?;
            let Some(row) = candidate else {
                return Ok(Race::Won(None));
            };
            let n: i64 = row.try_get(1).map_err(Error::postgres(ctx))?;
            let issue = IssueKey {
                repository: row.try_get(0).map_err(Error::postgres(ctx))?,
                issue_number: issue_number(n)?,
            };
            let claim = ClaimStatus {
                issue,
                holder: holder.to_owned(),
                state: ClaimState::Held,
                claimed_at: now,
                lease_expires_at: lease_end(now, lease_secs),
            };
            // The join read the claim as of this statement's snapshot; a `claim` committed
            // since (not through the work queue, so not kept off by the row lock) wins: look
            // again under the claim's own lock, and start over when the issue is no longer free.
            match read_claim(tx, &claim.issue, ctx)? {
                None => {
                    if !insert_claim(tx, &claim, ctx)? {
                        return Ok(Race::Lost);
                    }
                }
                Some(current) if claim_is_free(&current, now) => update_claim(tx, &claim, ctx)?,
                Some(_) => return Ok(Race::Lost),
            }
            tx.execute(
                "UPDATE work_queue SET attempts = attempts + 1
                 WHERE repository = $1 AND issue_number = $2",
                &[&claim.issue.repository, &n],
            )
            .map_err(Error::postgres(ctx))?;
            Ok(Race::Won(Some(claim)))
        })
    }

    fn work(&mut self) -> Result<Vec<WorkEntry>> {
        let ctx = "listing the work queue";
        let rows = self
            .client()?
            .query(
                "SELECT w.repository, w.issue_number, w.enqueued_at, w.attempts,
                        c.holder, c.state, c.claimed_at, c.lease_expires_at
                 FROM work_queue w
                 LEFT JOIN claims c
                   ON c.repository = w.repository AND c.issue_number = w.issue_number
                 ORDER BY w.enqueued_at, w.repository, w.issue_number",
                &[],
            )
            .map_err(Error::postgres(ctx))?;
        rows.iter()
            .map(|r| {
                let issue = IssueKey {
                    repository: r.try_get(0).map_err(Error::postgres(ctx))?,
                    issue_number: issue_number(r.try_get(1).map_err(Error::postgres(ctx))?)?,
                };
                let holder: Option<String> = r.try_get(4).map_err(Error::postgres(ctx))?;
                let state: Option<String> = r.try_get(5).map_err(Error::postgres(ctx))?;
                let claimed_at: Option<i64> = r.try_get(6).map_err(Error::postgres(ctx))?;
                let lease: Option<i64> = r.try_get(7).map_err(Error::postgres(ctx))?;
                let claim = match (holder, state, claimed_at, lease) {
                    (Some(holder), Some(state), Some(claimed_at), Some(lease_expires_at)) => {
                        Some(ClaimStatus {
                            issue: issue.clone(),
                            holder,
                            state: parse_claim_state(&state)?,
                            claimed_at,
                            lease_expires_at,
                        })
                    }
                    _ => None,
                };
                Ok(WorkEntry {
                    enqueued_at: r.try_get(2).map_err(Error::postgres(ctx))?,
                    attempts: attempts(r.try_get(3).map_err(Error::postgres(ctx))?)?,
                    issue,
                    claim,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(url: &str) -> Vec<i64> {
        let mut client = Client::connect(url, NoTls).unwrap();
        client
            .query(
                "SELECT version FROM schema_migrations ORDER BY version",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    #[test]
    fn brokers_opening_one_new_database_at_once_migrate_it_once() {
        let server = airlock_testkit::PgServer::shared();
        let url = server.database("migrate_at_once");
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    barrier.wait();
                    PostgresStore::connect(&url, None).unwrap();
                });
            }
        });
        assert_eq!(versions(&url), vec![1, 2, 3]);
        // Opening again applies nothing.
        PostgresStore::connect(&url, None).unwrap();
        assert_eq!(versions(&url), vec![1, 2, 3]);
    }

    #[test]
    fn a_connection_the_server_cut_is_opened_again() {
        let server = airlock_testkit::PgServer::shared();
        let url = server.database("cut_connection");
        let mut store = PostgresStore::connect(&url, None).unwrap();
        assert_eq!(store.claims().unwrap(), vec![]);
        let cut = Client::connect(&url, NoTls)
            .unwrap()
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap();
        assert_eq!(cut, 1);
        // The call that finds the connection cut fails; the next one reconnects.
        let _ = store.claims();
        assert_eq!(store.claims().unwrap(), vec![]);
    }

    #[test]
    fn a_store_dropped_on_an_async_thread_closes_quietly() {
        let server = airlock_testkit::PgServer::shared();
        let url = server.database("async_drop");
        let store = PostgresStore::connect(&url, None).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move { drop(store) });
    }

    #[test]
    fn a_database_a_newer_broker_migrated_is_refused() {
        let server = airlock_testkit::PgServer::shared();
        let url = server.database("newer_schema");
        PostgresStore::connect(&url, None).unwrap();
        Client::connect(&url, NoTls)
            .unwrap()
            .execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)",
                &[],
            )
            .unwrap();
        let err = PostgresStore::connect(&url, None).err().unwrap();
        assert!(err.to_string().contains("newer broker"), "{err}");
    }

    #[test]
    fn an_unreachable_server_is_an_error_naming_it() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://airlock:s3cret@127.0.0.1:{port}/airlock");
        let err = PostgresStore::connect(&url, None).err().unwrap();
        let text = err.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn a_password_never_shows_in_a_message() {
        assert_eq!(
            redacted("postgres://airlock:s3cret@db:5432/airlock"),
            "postgres://airlock:***@db:5432/airlock"
        );
        assert_eq!(
            redacted("postgresql://airlock@db/airlock"),
            "postgresql://airlock@db/airlock"
        );
        assert_eq!(redacted("postgres://db/airlock"), "postgres://db/airlock");
    }

    #[test]
    fn every_spelling_of_one_head_locks_the_same_key() {
        let pull = |owner: &str, sha: &str| PullRequestKey {
            owner: owner.to_owned(),
            repo: "Calc".to_owned(),
            number: 4,
            head_sha: sha.to_owned(),
        };
        assert_eq!(
            head_lock_key(&pull("Acme", "ab")),
            head_lock_key(&pull("acme", "ab"))
        );
        assert_ne!(
            head_lock_key(&pull("acme", "ab")),
            head_lock_key(&pull("acme", "cd"))
        );
    }
}
