//! The PostgreSQL backend of the [`super::Store`]: the same tables and the same rules as the
//! SQLite store, for a broker whose state lives on a database server (workers on many hosts,
//! one queue). The statements and transactions are the shared query layer's (`query`,
//! `claims`); this file holds the connection, the schema and PostgreSQL's [`Dialect`].
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

use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls};

use super::schema::{
    approver_tables, ci_checks_table, claims_table, first_release_tables, questions_table,
    work_queue_table,
};
use super::sql::{self, Backend, Cell, Dialect, Migration, Param, Row};
use crate::error::{Error, Result};

/// Migration 1, part 1: the first release's tables as the SQLite store's migration 1 leaves
/// them (with the queue columns SQLite added by `ALTER TABLE`).
const FIRST_RELEASE: &str = first_release_tables!(
    "CREATE TABLE",
    "BIGINT",
    "BIGSERIAL PRIMARY KEY",
    ",\n    review TEXT,\n    gates TEXT"
);

/// Migration 1, part 2: the claims table.
const CLAIMS: &str = claims_table!("CREATE TABLE", "BIGINT");

/// Migration 2: the shared work queue, and the order takers read it in.
const WORK_QUEUE: &str = work_queue_table!("CREATE TABLE", "BIGINT");
const WORK_QUEUE_ORDER: &str =
    "CREATE INDEX work_queue_order ON work_queue (enqueued_at, repository, issue_number);";

/// Migration 3: what a run reports its egress proxy refused, per queue item (JSON; NULL for
/// items queued before).
const QUEUE_NETWORK_BLOCKED: &str =
    "ALTER TABLE queue ADD COLUMN IF NOT EXISTS network_blocked TEXT;";

/// Migration 4: every finding screened for the approver, per queue item (JSON; NULL for
/// items queued before).
const QUEUE_FINDINGS: &str = "ALTER TABLE queue ADD COLUMN IF NOT EXISTS findings TEXT;";

/// Migration 5: the named approvers (their tokens hashed) and the approvals given on queue
/// items.
const APPROVERS: &str = approver_tables!("CREATE TABLE", "BIGINT");

/// Migration 6: what the broker did with each failed CI check of its pull requests.
const CI_CHECKS: &str = ci_checks_table!("CREATE TABLE", "BIGINT");

/// Migration 7: the questions asked on issues, kept until answered.
const QUESTIONS: &str = questions_table!("CREATE TABLE", "BIGINT");

/// Every migration, in order, with the SQLite store's version numbers for the same tables.
/// Append only: a released step is never edited.
const MIGRATIONS: &[Migration<PostgresStore>] = &[
    Migration {
        version: 1,
        name: "baseline",
        apply: |pg, ctx| {
            pg.batch(ctx, FIRST_RELEASE)?;
            pg.batch(ctx, CLAIMS)
        },
    },
    Migration {
        version: 2,
        name: "work_queue",
        apply: |pg, ctx| {
            pg.batch(ctx, WORK_QUEUE)?;
            pg.batch(ctx, WORK_QUEUE_ORDER)
        },
    },
    Migration {
        version: 3,
        name: "queue_network_blocked",
        apply: |pg, ctx| pg.batch(ctx, QUEUE_NETWORK_BLOCKED),
    },
    Migration {
        version: 4,
        name: "queue_findings",
        apply: |pg, ctx| pg.batch(ctx, QUEUE_FINDINGS),
    },
    Migration {
        version: 5,
        name: "approvers",
        apply: |pg, ctx| pg.batch(ctx, APPROVERS),
    },
    Migration {
        version: 6,
        name: "ci_checks",
        apply: |pg, ctx| pg.batch(ctx, CI_CHECKS),
    },
    Migration {
        version: 7,
        name: "questions",
        apply: |pg, ctx| pg.batch(ctx, QUESTIONS),
    },
];

/// The PostgreSQL-backed store: one connection; a call that finds it cut by the server (a
/// restart, an idle timeout) fails, and the next one connects again.
pub struct PostgresStore {
    config: postgres::Config,
    /// `None` only while being dropped, or after a failed reconnection.
    client: Option<Client>,
    /// Whether a transaction is open on `client`: a connection cut during one is not replaced
    /// until it ends (the rest of it must not run outside the transaction).
    in_transaction: bool,
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
        let client = config
            .connect(NoTls)
            .map_err(Error::postgres(ctx.clone()))?;
        let mut store = PostgresStore {
            config,
            client: Some(client),
            in_transaction: false,
        };
        sql::migrate(&mut store, &ctx, MIGRATIONS)?;
        Ok(store)
    }

    /// The connection, opened again first if it was found closed outside a transaction: a
    /// broker outlives its database's restarts.
    fn client(&mut self) -> Result<&mut Client> {
        let client = match self.client.take() {
            Some(client) if !client.is_closed() || self.in_transaction => client,
            _ => self
                .config
                .connect(NoTls)
                .map_err(Error::postgres("reconnecting to the state database"))?,
        };
        Ok(self.client.insert(client))
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

/// The parameters as the client takes them.
fn bind<'a>(params: &'a [Param<'_>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| -> &'a (dyn ToSql + Sync) {
            match p {
                Param::Int(v) => v,
                Param::MaybeInt(v) => v,
                Param::Text(v) => v,
                Param::MaybeText(v) => v,
            }
        })
        .collect()
}

/// A row as the shared layer reads it: integer columns of any width and text.
fn row(r: &postgres::Row) -> std::result::Result<Row, postgres::Error> {
    let mut cells = Vec::with_capacity(r.len());
    for (i, column) in r.columns().iter().enumerate() {
        let ty = column.type_();
        let cell = if *ty == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map(Cell::Int)
        } else if *ty == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?.map(|v| Cell::Int(v.into()))
        } else if *ty == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?.map(|v| Cell::Int(v.into()))
        } else {
            r.try_get::<_, Option<String>>(i)?.map(Cell::Text)
        };
        cells.push(cell.unwrap_or(Cell::Null));
    }
    Ok(Row(cells))
}

impl Backend for PostgresStore {
    const DIALECT: Dialect = Dialect {
        placeholder: '$',
        begin: "BEGIN",
        lock_rows: " FOR UPDATE",
        skip_locked_work: " FOR UPDATE OF w SKIP LOCKED",
        advisory_lock: Some("SELECT pg_advisory_xact_lock(?1)"),
        integer: "BIGINT",
        unix_now: "EXTRACT(EPOCH FROM now())::BIGINT",
    };

    fn begin(&mut self, ctx: &str) -> Result<()> {
        // A transaction left open (a panic between begin and commit) is abandoned.
        if self.in_transaction {
            let _ = self.rollback(ctx);
        }
        self.batch(ctx, Self::DIALECT.begin)?;
        self.in_transaction = true;
        Ok(())
    }

    fn commit(&mut self, ctx: &str) -> Result<()> {
        let result = self.batch(ctx, "COMMIT");
        self.in_transaction = false;
        result
    }

    fn rollback(&mut self, ctx: &str) -> Result<()> {
        let result = self.batch(ctx, "ROLLBACK");
        self.in_transaction = false;
        result
    }

    fn batch(&mut self, ctx: &str, sql: &str) -> Result<()> {
        self.client()?
            .batch_execute(sql)
            .map_err(Error::postgres(ctx))
    }

    fn execute(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<u64> {
        let sql = Self::DIALECT.statement(sql);
        self.client()?
            .execute(sql.as_ref(), &bind(params))
            .map_err(Error::postgres(ctx))
    }

    fn query(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        let sql = Self::DIALECT.statement(sql);
        self.client()?
            .query(sql.as_ref(), &bind(params))
            .map_err(Error::postgres(ctx))?
            .iter()
            .map(row)
            .collect::<std::result::Result<_, _>>()
            .map_err(Error::postgres(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
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
        assert_eq!(versions(&url), vec![1, 2, 3, 4, 5, 6, 7]);
        // Opening again applies nothing.
        PostgresStore::connect(&url, None).unwrap();
        assert_eq!(versions(&url), vec![1, 2, 3, 4, 5, 6, 7]);
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
}
