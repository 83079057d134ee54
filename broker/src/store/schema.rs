//! The tables, written once for both dialects: each macro expands to one backend's DDL (a
//! string literal, so a released migration stays a constant) from the dialect's spelling of
//! `CREATE TABLE`, of a 64-bit integer and of an auto-numbered key. The SQLite store creates
//! the first release's tables and the claims table `IF NOT EXISTS` (its migration 1 adopts
//! databases from before versioned migrations); PostgreSQL started versioned.

/// The first release's tables (runs, submissions, queue, change requests, judge scores);
/// `$queue_tail` ends the queue's column list (PostgreSQL's baseline has the columns SQLite
/// adds by migration).
macro_rules! first_release_tables {
    ($create:literal, $int:literal, $serial:literal, $queue_tail:literal) => {
        concat!(
            "
",
            $create,
            " runs (
    run_id TEXT PRIMARY KEY,
    registration TEXT NOT NULL,
    state TEXT NOT NULL,
    registered_at ",
            $int,
            " NOT NULL,
    issue_number ",
            $int,
            "
);
",
            $create,
            " submissions (
    run_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    args TEXT NOT NULL,
    received_at ",
            $int,
            " NOT NULL,
    attempts ",
            $int,
            " NOT NULL,
    reply TEXT,
    finished_at ",
            $int,
            ",
    PRIMARY KEY (run_id, request_id)
);
",
            $create,
            " queue (
    id ",
            $serial,
            ",
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
    queued_at ",
            $int,
            " NOT NULL,
    decided_at ",
            $int,
            ",
    decided_by TEXT,
    reason TEXT,
    branch TEXT,
    commit_oid TEXT,
    pr_url TEXT,
    publish_error TEXT,
    abandoned_by TEXT,
    abandon_reason TEXT,
    abandoned_at ",
            $int,
            $queue_tail,
            "
);
",
            $create,
            " change_requests (
    id ",
            $serial,
            ",
    queue_id ",
            $int,
            " NOT NULL REFERENCES queue(id),
    feedback TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requested_at ",
            $int,
            " NOT NULL
);
",
            $create,
            " judge_scores (
    queue_id ",
            $int,
            " PRIMARY KEY REFERENCES queue(id),
    judgement TEXT NOT NULL,
    judged_at ",
            $int,
            " NOT NULL
);
"
        )
    };
}

/// The claims table: one row per (repository, issue number), its holder, state and lease.
macro_rules! claims_table {
    ($create:literal, $int:literal) => {
        concat!(
            "
",
            $create,
            " claims (
    repository TEXT NOT NULL,
    issue_number ",
            $int,
            " NOT NULL,
    holder TEXT NOT NULL,
    state TEXT NOT NULL,
    claimed_at ",
            $int,
            " NOT NULL,
    lease_expires_at ",
            $int,
            " NOT NULL,
    PRIMARY KEY (repository, issue_number)
);
"
        )
    };
}

/// The shared work queue (migration 2; its claims are rows of `claims`).
macro_rules! work_queue_table {
    ($create:literal, $int:literal) => {
        concat!(
            "
",
            $create,
            " work_queue (
    repository TEXT NOT NULL,
    issue_number ",
            $int,
            " NOT NULL,
    enqueued_at ",
            $int,
            " NOT NULL,
    attempts ",
            $int,
            " NOT NULL DEFAULT 0,
    PRIMARY KEY (repository, issue_number)
);
"
        )
    };
}

pub(super) use {claims_table, first_release_tables, work_queue_table};

/// The named approvers and the approvals recorded on queue items (migration 5). An approver's
/// token is kept only as its SHA-256; an approval keeps the approver's name and seniority as
/// they were when it was given (a removed approver's approvals stay on record).
macro_rules! approver_tables {
    ($create:literal, $int:literal) => {
        concat!(
            "
",
            $create,
            " approvers (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL UNIQUE,
    senior ",
            $int,
            " NOT NULL,
    added_at ",
            $int,
            " NOT NULL
);
",
            $create,
            " approvals (
    queue_id ",
            $int,
            " NOT NULL REFERENCES queue(id),
    approver TEXT NOT NULL,
    senior ",
            $int,
            " NOT NULL,
    reason TEXT,
    approved_at ",
            $int,
            " NOT NULL,
    PRIMARY KEY (queue_id, approver)
);
"
        )
    };
}

pub(super) use approver_tables;

/// What the broker did with each failed CI check of its pull requests (migration 6): one row
/// per (repository, pull request, head commit, check name), so a check that fails twice on one
/// head starts one follow-up at most.
macro_rules! ci_checks_table {
    ($create:literal, $int:literal) => {
        concat!(
            "
",
            $create,
            " ci_checks (
    repository TEXT NOT NULL,
    pull_request ",
            $int,
            " NOT NULL,
    head_sha TEXT NOT NULL,
    check_name TEXT NOT NULL,
    check_run_id ",
            $int,
            " NOT NULL,
    outcome TEXT NOT NULL,
    queue_id ",
            $int,
            " NOT NULL REFERENCES queue(id),
    recorded_at ",
            $int,
            " NOT NULL,
    PRIMARY KEY (repository, pull_request, head_sha, check_name)
);
"
        )
    };
}

pub(super) use ci_checks_table;

/// The questions asked on issues (migration 7): one row per (repository, issue, round), the
/// question as its run asked it (JSON), whether it is open, answered or ended, and the last
/// reply on the forge the broker read (never read again).
macro_rules! questions_table {
    ($create:literal, $int:literal) => {
        concat!(
            "
",
            $create,
            " questions (
    repository TEXT NOT NULL,
    issue_number ",
            $int,
            " NOT NULL,
    round ",
            $int,
            " NOT NULL,
    run_id TEXT NOT NULL,
    question TEXT NOT NULL,
    state TEXT NOT NULL,
    last_reply_id ",
            $int,
            " NOT NULL,
    asked_at ",
            $int,
            " NOT NULL,
    closed_at ",
            $int,
            ",
    closed_by TEXT,
    PRIMARY KEY (repository, issue_number, round)
);
"
        )
    };
}

pub(super) use questions_table;
