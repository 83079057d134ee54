//! The seam between the shared query layer (`query`, `claims`) and a database: the [`Backend`]
//! trait a connection implements (run a statement with typed parameters, read rows as typed
//! cells, begin and end a transaction) and the [`Dialect`], the one table of what SQLite and
//! PostgreSQL spell differently. Everything else — the statements, the transactions, the
//! decoding of rows — is written once above it.

use sha2::Digest;

use crate::error::{Error, Result};
use airlock_protocol::PullRequestKey;

/// What the two SQL dialects spell differently. Statements are written once with SQLite's
/// numbered placeholders (`?1`); both databases take `INSERT ... ON CONFLICT`, `RETURNING` and
/// `excluded.`, so the differences left are locking, types and the clock.
pub(super) struct Dialect {
    /// How the n-th parameter is written: `?` (`?1`, SQLite) or `$` (`$1`, PostgreSQL).
    pub(super) placeholder: char,
    /// The statement that begins a write transaction. SQLite's IMMEDIATE transaction takes
    /// the database's single write lock at once, which serialises every writer.
    pub(super) begin: &'static str,
    /// Appended to a `SELECT` of rows the transaction goes on to change: PostgreSQL locks
    /// them until it ends; SQLite's write lock already keeps everyone else out.
    pub(super) lock_rows: &'static str,
    /// Appended to the `SELECT` of the next ready issue of the work queue (aliased `w`): on
    /// PostgreSQL a row another taker holds is passed over, so concurrent takers get
    /// different issues.
    pub(super) skip_locked_work: &'static str,
    /// A statement taking a transaction-scoped lock on the key `?1`, for a rule with no row to
    /// lock (one review per head commit, one migrator at a time); `None` where the write lock
    /// serialises transactions anyway.
    pub(super) advisory_lock: Option<&'static str>,
    /// The 64-bit integer column type.
    pub(super) integer: &'static str,
    /// An expression for the current Unix time in seconds.
    pub(super) unix_now: &'static str,
}

impl Dialect {
    /// `sql`, written with `?N` placeholders, in this dialect.
    pub(super) fn statement<'s>(&self, sql: &'s str) -> std::borrow::Cow<'s, str> {
        if self.placeholder == '?' {
            std::borrow::Cow::Borrowed(sql)
        } else {
            std::borrow::Cow::Owned(sql.replace('?', &self.placeholder.to_string()))
        }
    }
}

/// A value bound to a statement's parameter.
#[derive(Debug, Clone, Copy)]
pub(super) enum Param<'a> {
    Int(i64),
    MaybeInt(Option<i64>),
    Text(&'a str),
    MaybeText(Option<&'a str>),
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(v: Option<i64>) -> Self {
        Param::MaybeInt(v)
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Param::MaybeText(v)
    }
}

/// One column of a row as read: the store keeps only integers and text.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// A row as read, its cells in the statement's column order.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row(pub(super) Vec<Cell>);

impl Row {
    fn take(&mut self, i: usize) -> Cell {
        self.0
            .get_mut(i)
            .map(|c| std::mem::replace(c, Cell::Null))
            .unwrap_or(Cell::Null)
    }

    fn mismatch(i: usize, want: &str, got: &Cell) -> Error {
        Error::StoreCorrupt {
            what: format!("column {i}"),
            message: format!("expected {want}, found {got:?}"),
        }
    }

    /// Column `i` as a nullable integer.
    pub(super) fn opt_int(&mut self, i: usize) -> Result<Option<i64>> {
        match self.take(i) {
            Cell::Null => Ok(None),
            Cell::Int(v) => Ok(Some(v)),
            other => Err(Self::mismatch(i, "an integer", &other)),
        }
    }

    /// Column `i` as an integer.
    pub(super) fn int(&mut self, i: usize) -> Result<i64> {
        self.opt_int(i)?
            .ok_or_else(|| Self::mismatch(i, "an integer", &Cell::Null))
    }

    /// Column `i` as nullable text.
    pub(super) fn opt_text(&mut self, i: usize) -> Result<Option<String>> {
        match self.take(i) {
            Cell::Null => Ok(None),
            Cell::Text(v) => Ok(Some(v)),
            other => Err(Self::mismatch(i, "text", &other)),
        }
    }

    /// Column `i` as text.
    pub(super) fn text(&mut self, i: usize) -> Result<String> {
        self.opt_text(i)?
            .ok_or_else(|| Self::mismatch(i, "text", &Cell::Null))
    }
}

/// A connection to one SQL database: what the shared query layer needs of it. Statements are
/// given in SQLite's spelling and put into the backend's [`Backend::DIALECT`] by it.
pub(super) trait Backend: Send {
    /// How this database spells what differs.
    const DIALECT: Dialect;
    /// Begin a write transaction ([`Dialect::begin`]).
    fn begin(&mut self, ctx: &str) -> Result<()>;
    /// Commit the transaction.
    fn commit(&mut self, ctx: &str) -> Result<()>;
    /// Roll the transaction back.
    fn rollback(&mut self, ctx: &str) -> Result<()>;
    /// Run statements without parameters (schema changes).
    fn batch(&mut self, ctx: &str, sql: &str) -> Result<()>;
    /// Run a statement; how many rows it changed.
    fn execute(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<u64>;
    /// Run a statement that returns rows (a `SELECT`, or a change with `RETURNING`).
    fn query(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>>;

    /// The first row the statement returns, if any.
    fn query_opt(&mut self, ctx: &str, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>> {
        Ok(self.query(ctx, sql, params)?.into_iter().next())
    }
}

/// How often a transaction that lost a race to a concurrent one (a row inserted or claimed
/// between its look and its write) starts again before giving up; each lost race means another
/// transaction committed, so this bounds nothing but a pathological storm.
const RACE_RETRIES: usize = 64;

/// How a transaction that may race a concurrent one ended.
pub(super) enum Race<T> {
    /// It did its work: commit it.
    Won(T),
    /// A concurrent transaction changed a row between this one's look and its write: roll back
    /// and start again (only PostgreSQL's row locks let this happen).
    Lost,
}

/// Run `f` in a write transaction and commit it; an error (of `f` or of the commit) rolls it
/// back.
pub(super) fn atomically<B: Backend, T>(
    b: &mut B,
    ctx: &str,
    f: impl FnOnce(&mut B) -> Result<T>,
) -> Result<T> {
    b.begin(ctx)?;
    let result = f(b);
    finish(b, ctx, result)
}

/// Commit the open transaction after `result` succeeded; roll it back after it, or the
/// commit, failed.
fn finish<B: Backend, T>(b: &mut B, ctx: &str, result: Result<T>) -> Result<T> {
    match result.and_then(|value| b.commit(ctx).map(|()| value)) {
        Ok(value) => Ok(value),
        Err(err) => {
            // The error is what the caller needs; a failed rollback (a cut connection) leaves
            // nothing committed either.
            let _ = b.rollback(ctx);
            Err(err)
        }
    }
}

/// [`atomically`] for a transaction that may lose a race: when `f` lost, the transaction is
/// rolled back and `f` runs again in a new one.
pub(super) fn retrying<B: Backend, T>(
    b: &mut B,
    ctx: &str,
    mut f: impl FnMut(&mut B) -> Result<Race<T>>,
) -> Result<T> {
    for _ in 0..RACE_RETRIES {
        b.begin(ctx)?;
        match f(b) {
            Ok(Race::Won(value)) => return finish(b, ctx, Ok(value)),
            Ok(Race::Lost) => b.rollback(ctx)?,
            Err(err) => return finish(b, ctx, Err(err)),
        }
    }
    Err(Error::StoreCorrupt {
        what: "contended row".to_owned(),
        message: format!(
            "{ctx}: lost the race to concurrent writers {RACE_RETRIES} times in a row"
        ),
    })
}

/// Take the transaction-scoped lock on `key` where the dialect has one.
pub(super) fn advisory_lock<B: Backend>(b: &mut B, key: i64, ctx: &str) -> Result<()> {
    if let Some(sql) = B::DIALECT.advisory_lock {
        b.execute(ctx, sql, &[key.into()])?;
    }
    Ok(())
}

/// An advisory-lock key for "a review of this head commit": the same for every spelling of the
/// owner and repository that [`super::QueueItem::reviews_head`] takes as the same.
pub(super) fn head_lock_key(pull: &PullRequestKey) -> i64 {
    let text = format!(
        "review {}/{}#{}@{}",
        pull.owner.to_ascii_lowercase(),
        pull.repo.to_ascii_lowercase(),
        pull.number,
        pull.head_sha
    );
    let digest = sha2::Sha256::digest(text.as_bytes());
    let mut bytes = [0u8; 8];
    for (byte, d) in bytes.iter_mut().zip(digest.iter()) {
        *byte = *d;
    }
    i64::from_be_bytes(bytes)
}

/// Any fixed key: brokers opening one database at once take turns applying migrations.
const MIGRATION_LOCK: i64 = 0x6169_726c_6f63_6b01;

/// One step of a backend's schema; `version` orders them and is the row it leaves in
/// `schema_migrations`. Both backends' lists have the same versions for the same tables.
pub(super) struct Migration<B> {
    pub(super) version: i64,
    pub(super) name: &'static str,
    pub(super) apply: fn(&mut B, &str) -> Result<()>,
}

/// Apply the migrations the database lacks, in order, in one write transaction (holding the
/// migration lock where the dialect has one), so brokers opening one database at once apply
/// each step once. A database some newer broker migrated past the steps this one knows is
/// refused rather than written with an older idea of its tables.
pub(super) fn migrate<B: Backend>(b: &mut B, ctx: &str, migrations: &[Migration<B>]) -> Result<()> {
    let int = B::DIALECT.integer;
    atomically(b, ctx, |b| {
        advisory_lock(b, MIGRATION_LOCK, ctx)?;
        b.batch(
            ctx,
            &format!(
                "CREATE TABLE IF NOT EXISTS schema_migrations (
            version {int} PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at {int} NOT NULL
        );"
            ),
        )?;
        let applied: Vec<i64> = b
            .query(
                ctx,
                "SELECT version FROM schema_migrations ORDER BY version",
                &[],
            )?
            .into_iter()
            .map(|mut r| r.int(0))
            .collect::<Result<_>>()?;
        super::check_schema_version(&applied, migrations.iter().map(|m| m.version))?;
        for migration in migrations {
            if applied.contains(&migration.version) {
                continue;
            }
            (migration.apply)(
                b,
                &format!(
                    "{ctx}: migration {} ({})",
                    migration.version, migration.name
                ),
            )?;
            b.execute(
                ctx,
                &format!(
                    "INSERT INTO schema_migrations (version, name, applied_at)
             VALUES (?1, ?2, {})",
                    B::DIALECT.unix_now
                ),
                &[migration.version.into(), migration.name.into()],
            )?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn postgres_numbers_its_placeholders_with_a_dollar() {
        let pg = Dialect {
            placeholder: '$',
            begin: "BEGIN",
            lock_rows: "",
            skip_locked_work: "",
            advisory_lock: None,
            integer: "BIGINT",
            unix_now: "0",
        };
        assert_eq!(
            pg.statement("UPDATE t SET a = ?2 WHERE id = ?1"),
            "UPDATE t SET a = $2 WHERE id = $1"
        );
    }
}
