//! Rendering a proposal ([`Detected`]) as text: the commented `airlock.toml` and the
//! `[repositories."NAME"]` block of `broker.toml`. Both are `toml_edit` documents, so the library
//! does the quoting and escaping; the explanatory comments, blank lines and commented-out
//! optional keys are the decor of the key or table header they precede (the document's trailing
//! text after the last one). Nothing here inspects a tree or the host.

use super::proposal::{Detected, Remote, path_text};
use crate::config::{AsOf, Budgets};
use std::collections::BTreeMap;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Key, Table, Value};

/// How `init` recognises a project, as the generated file's header states it.
pub const DETECTION_RULES: &str = "\
How `airlock init` recognises a project (the first rule that matches wins):
  Cargo.toml -> cargo test; go.mod -> go test; package.json naming vitest or jest -> that runner;
  Python -> pytest when pytest.ini, [tool.pytest...] in pyproject.toml, [tool:pytest] in
  setup.cfg, [pytest] in tox.ini, a conftest.py or a test file importing pytest; else unittest
  when test files (test_*.py, *_test.py, tests.py) exist.
A Python environment is a venv prepare builds from what the project declares (extras, dependency
groups, requirements files, a lockfile), from a venv in the repository (.venv, venv), else the
interpreter each pin gets among the host's (auto) or the host's python3. A toolchain
outside the sandbox's system directories (/usr, /bin, /lib, ...) is granted read-only in `ro`,
since a test run sees nothing else of the host.";

/// Render the commented `airlock.toml` of `d`. It loads with [`Config::parse`] to exactly
/// `d.tests` and `d.allowlist`.
///
/// [`Config::parse`]: crate::config::Config::parse
pub fn render_airlock_toml(d: &Detected) -> String {
    let mut o = Writer::default();
    o.comment(&format!(
        "airlock.toml for {}, written by `airlock init` from the working tree at {}.",
        d.name,
        d.repo.display()
    ));
    o.comment(
        "It is operator input: airlock never reads it from a checkout, so keep it outside the \
         repository. Review each value; the line above every key says what it does.",
    );
    o.blank();
    for finding in &d.findings {
        o.comment(&format!("{finding}."));
    }
    for warning in &d.warnings {
        o.comment(&format!("Warning: {warning}."));
    }
    if let Some(note) = d.publication_note() {
        o.comment(&format!("Publication: {note}."));
    }
    if !d.findings.is_empty() || !d.warnings.is_empty() || d.publication_note().is_some() {
        o.blank();
    }
    for line in DETECTION_RULES.lines() {
        o.comment(line);
    }
    o.blank();

    let t = &d.tests;
    let mut tests = o.table();
    o.comment("The full-run command, as argv (no shell), run from the tree root; its program must be on the sandbox's PATH or under `ro`.");
    o.extra(d, "tests.command");
    o.key(&mut tests, "command", strings(&t.command));
    o.comment("Reads the results and selects one test: pytest | unittest | cargo | go | jest | vitest (checked against the command).");
    o.key(&mut tests, "runner", t.runner.name());
    o.comment("How a run_tests selector is appended: dotted | node-id | append.");
    o.key(&mut tests, "selector_style", t.selector_style.name());
    o.comment("Wall-clock limit of one test run, in seconds.");
    o.key(&mut tests, "timeout_secs", integer(t.timeout_secs));
    o.comment("Host paths every test run may read (each must exist; ~ is your HOME); nothing else of the host is visible but /usr, /bin, /sbin and /lib*.");
    o.extra(d, "tests.ro");
    o.key(&mut tests, "ro", strings(&t.ro));
    o.comment("Your variables passed through when set, e.g. [\"LANG\"].");
    o.key(&mut tests, "pass_env", strings(&t.pass_env));
    o.comment("The network of every test run and of the broker's witness: none | loopback (a private loopback, for the suite's own servers) | proxy (also the hosts in `allow`, through the egress proxy) | host.");
    o.key(&mut tests, "network", t.network.to_string());
    o.blank();
    let mut env = o.table();
    o.comment("Variables of every test run; {env} is the prepared environment directory. CI, PYTHONDONTWRITEBYTECODE, PYTHONPYCACHEPREFIX and CARGO_TARGET_DIR are fixed by airlock.");
    o.vars(d, "tests.env", &t.env, &mut env);
    tests.insert("env", Item::Table(env));
    let mut services = ArrayOfTables::new();
    for service in &t.services {
        o.blank();
        let mut table = o.table();
        o.comment(
            "A service started inside each test run's sandbox before the tests, stopped after.",
        );
        o.extra(d, &format!("tests.services.{}", service.name));
        o.key(&mut table, "name", service.name.as_str());
        o.key(&mut table, "command", strings(&service.command));
        if let Some(port) = service.ready_port {
            o.comment("Ready when 127.0.0.1:PORT accepts a connection.");
            o.key(&mut table, "ready_port", i64::from(port));
        } else {
            o.comment("Ready when this command exits 0.");
            o.key(&mut table, "ready_command", strings(&service.ready_command));
        }
        o.key(
            &mut table,
            "ready_timeout_secs",
            integer(service.ready_timeout_secs()),
        );
        let env: InlineTable = service
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        o.key(&mut table, "env", env);
        services.push(table);
    }
    if !services.is_empty() {
        tests.insert("services", Item::ArrayOfTables(services));
    }
    if let Some(p) = &t.prepare {
        o.blank();
        let mut prepare = o.table();
        o.comment("Builds {env} once per repository, commit and content of `inputs`, in the sandbox with the network, on the pinned files only.");
        if p.python.is_some() {
            o.comment("More steps after the recipe below, as argv (no shell); {env} is the environment directory.");
        } else {
            o.comment("The command, as argv (no shell); {env} is the environment directory.");
        }
        o.extra(d, "tests.prepare.command");
        o.key(&mut prepare, "command", strings(&p.command));
        o.comment("Globs of tracked files whose content keys the environment.");
        o.extra(d, "tests.prepare.inputs");
        o.key(&mut prepare, "inputs", strings(&p.inputs));
        o.comment("Paths prepare creates in the tree, shown read-only in every test run.");
        o.extra(d, "tests.prepare.links");
        o.key(&mut prepare, "links", strings(&p.links));
        o.comment("Wall-clock limit of the prepare command, in seconds.");
        o.key(&mut prepare, "timeout_secs", integer(p.timeout_secs));
        if let Some(r) = &p.python {
            o.blank();
            let mut python = o.table();
            o.comment("airlock builds a virtualenv of its own in {env}/venv, brings its pip up to date and installs what follows.");
            o.extra(d, "tests.prepare.python");
            o.comment("The venv's base interpreter.");
            o.key(&mut python, "interpreter", r.interpreter.as_str());
            o.comment("Install the project itself, editable: the files its build generates exist in every test run.");
            o.key(&mut python, "editable", r.editable);
            o.comment("Its extras installed with it, its PEP 735 dependency groups, requirements files of the tree, and more packages.");
            o.key(&mut python, "extras", strings(&r.extras));
            o.key(&mut python, "groups", strings(&r.groups));
            o.key(&mut python, "requirements", strings(&r.requirements));
            o.key(&mut python, "packages", strings(&r.packages));
            o.comment("Packages installed each on its own after the rest; one that does not install is left out (said by doctor).");
            o.key(&mut python, "optional", strings(&r.optional));
            o.comment(
                "\"pin\": releases uploaded before the pinned commit only; \"latest\": today's.",
            );
            o.key(
                &mut python,
                "as_of",
                match r.as_of {
                    AsOf::Pin => "pin",
                    AsOf::Latest => "latest",
                },
            );
            match &r.lockfile {
                Some(lock) => {
                    o.comment("The lockfile whose pins constrain every install.");
                    o.key(&mut python, "lockfile", lock.as_str());
                }
                None => o.commented_key(
                    "lockfile",
                    &quote("uv.lock"),
                    Some("or poetry.lock, Pipfile.lock, pylock.toml: its pins constrain every install"),
                ),
            }
            prepare.insert("python", Item::Table(python));
        }
        if !p.env.is_empty() {
            o.blank();
            let mut env = o.table();
            o.comment("Variables of the prepare command only, over [tests.env].");
            o.vars(d, "tests.prepare.env", &p.env, &mut env);
            prepare.insert("env", Item::Table(env));
        }
        tests.insert("prepare", Item::Table(prepare));
    } else {
        o.blank();
        o.comment("No [tests.prepare]: there is nothing to install. Add one to install dependencies into {env} (keys: command, inputs, links, env, timeout_secs).");
    }
    o.blank();

    let mut write = o.table();
    o.comment("Globs of the paths the agent may write; the refused classes (CI config, manifests, lockfiles, hooks, dot-directories) always win. Empty: the policy's default.");
    if let Some(e) = d.ecosystem {
        o.comment(&format!(
            "Suggested from the top-level directories holding {} files.",
            e.name()
        ));
    }
    o.key(&mut write, "allowlist", strings(&d.allowlist));
    o.blank();

    let b = Budgets::default();
    let budgets = o.table();
    o.comment(
        "Limits that end a run as an escalation; the defaults are shown, uncomment to change.",
    );
    for (key, value, what) in [
        ("max_turns", b.max_turns, "model turns of the supervisor"),
        (
            "max_full_runs",
            b.max_full_runs,
            "test runs without a selector",
        ),
        (
            "max_reads",
            b.max_reads,
            "read_file calls of the supervisor",
        ),
        (
            "max_repair_prompts",
            b.max_repair_prompts,
            "repair prompts for an invalid final message",
        ),
        (
            "reader_max_reads",
            b.reader_max_reads,
            "upper bound of a reader worker's reads",
        ),
        (
            "reader_max_turns",
            b.reader_max_turns,
            "upper bound of a reader worker's turns",
        ),
        ("max_refusals", b.max_refusals, "write refusals tolerated"),
    ] {
        o.commented_key(key, &value.to_string(), Some(what));
    }
    o.blank();

    let model = o.table();
    o.comment("The model that drives the run (`airlock run --model` overrides it), for example:");
    o.commented_key("spec", &quote("anthropic:claude-sonnet-4-5"), None);
    o.blank();

    let mut broker = o.table();
    o.comment("The broker's Unix socket: `socket` in broker.toml is the same.");
    o.key(&mut broker, "socket", path_text(&d.layout.socket));
    o.comment("This repository's key in broker.toml ([repositories.\"NAME\"], written by `airlock init --broker`).");
    o.key(&mut broker, "repository", d.name.as_str());
    o.blank();

    // The forge the remote is on gets its table; GitHub's (commented) when it is on neither.
    let (forge_name, forge) = match &d.remote {
        Remote::GitLab { project, api, .. } => ("gitlab", gitlab_table(&mut o, project, api)),
        _ => ("github", github_table(&mut o)),
    };

    let paths = &d.layout.paths;
    let mut paths_table = o.table();
    o.comment("Where the records go: airlock's data directory ($AIRLOCK_HOME, else $XDG_DATA_HOME/airlock, else ~/.local/share/airlock) when `init` ran; relative paths resolve against this file's directory.");
    o.comment("Each run writes <runs_root>/<run_id>/; `runs_root` in broker.toml is the same (the broker reads the run's tree there).");
    o.key(&mut paths_table, "runs_root", path_text(&paths.runs_root));
    o.comment("The hash-chained audit log every step is appended to (`airlock audit` reads it).");
    o.key(&mut paths_table, "audit_log", path_text(&paths.audit_log));
    o.comment("The repository mirror cache.");
    o.key(&mut paths_table, "cache_dir", path_text(&paths.cache_dir));
    o.comment("The retrieval index.");
    o.key(&mut paths_table, "index_dir", path_text(&paths.index_dir));
    o.comment(
        "Prepared test environments; broker.toml's `allow_ro` for this repository includes it.",
    );
    o.key(&mut paths_table, "envs_dir", path_text(&paths.envs_dir));
    let paths = paths_table;

    let mut doc = DocumentMut::new();
    for (name, table) in [
        ("tests", tests),
        ("write", write),
        ("budgets", budgets),
        ("model", model),
        ("broker", broker),
        (forge_name, forge),
        ("paths", paths),
    ] {
        doc.insert(name, Item::Table(table));
    }
    doc.set_trailing(o.take());
    doc.to_string()
}

/// `[github]`, every key commented: issues read from GitHub.
fn github_table(o: &mut Writer) -> Table {
    let github = o.table();
    o.comment("For `airlock run --issue https://github.com/OWNER/REPO/issues/N` (or github:OWNER/REPO#N).");
    o.comment("The REST API base (GitHub Enterprise: https://HOST/api/v3).");
    o.commented_key("api_url", &quote("https://api.github.com"), None);
    o.comment("The variable holding a read token (none is needed for a public repository).");
    o.commented_key("token_env", &quote("GITHUB_TOKEN"), None);
    o.comment("GitHub issue N becomes issue id KEY-N (2 to 6 capital letters).");
    o.commented_key("project_key", &quote("ACME"), None);
    o.comment("Include the issue's comments, each marked with its author.");
    o.commented_key("comments", "false", None);
    o.blank();
    github
}

/// `[gitlab]` for a remote on GitLab: its instance's API and its project set, the rest
/// commented.
fn gitlab_table(o: &mut Writer, project: &str, api: &str) -> Table {
    let mut gitlab = o.table();
    o.comment("The remote is on GitLab: for `airlock run --issue https://HOST/GROUP/NAME/-/issues/N` (or gitlab:GROUP/NAME#N), `airlock watch --repo gitlab:GROUP/NAME` and GitLab webhooks.");
    o.comment("The instance's REST API base (its host's name says gitlab, or `init --gitlab-api` named it).");
    o.key(&mut gitlab, "api_url", api);
    o.comment("The variable holding a read token (scope read_api; none is needed for a public project), sent as PRIVATE-TOKEN.");
    o.commented_key("token_env", &quote("GITLAB_TOKEN"), None);
    o.comment("GitLab issue N becomes issue id KEY-N (2 to 6 capital letters).");
    o.commented_key("project_key", &quote("ACME"), None);
    o.comment("Include the issue's notes, each marked with its author.");
    o.commented_key("comments", "false", None);
    o.comment("The projects `airlock webhook` takes GitLab deliveries for (any other is refused).");
    o.key(&mut gitlab, "projects", Array::from_iter([project]));
    o.blank();
    gitlab
}

/// Render the `[repositories."NAME"]` block of `broker.toml` for `d`, with every path the
/// generated `airlock.toml` grants under `allow_ro`.
pub fn render_broker_block(d: &Detected, name: &str) -> String {
    let mut o = Writer::default();
    o.comment(&format!(
        "For broker.toml: the repository at {} (written by `airlock init`).",
        d.repo.display()
    ));
    o.comment(&format!(
        "The broker's `runs_root` must be {} and its `socket` {}, as in the airlock.toml.",
        d.layout.paths.runs_root.display(),
        d.layout.socket.display()
    ));
    let repositories = repositories_table(&mut o, d, name);
    let mut doc = DocumentMut::new();
    doc.insert("repositories", Item::Table(repositories));
    doc.set_trailing(o.take());
    doc.to_string()
}

/// Render a whole `broker.toml` for `d`: its socket, runs root and the prepared environments
/// it allows are the generated `airlock.toml`'s, its state and audit log in the same data
/// directory, and the one repository, `name`.
pub fn render_broker_toml(d: &Detected, name: &str, airlock_toml: &std::path::Path) -> String {
    let layout = &d.layout;
    let mut o = Writer::default();
    o.comment(&format!(
        "broker.toml for {name}, written by `airlock init --broker` with {}:",
        airlock_toml.display()
    ));
    o.comment(
        "its socket, runs root and prepared environments are that file's; check the pair with",
    );
    o.comment(&format!(
        "`airlock doctor --config {}`.",
        airlock_toml.display()
    ));
    o.comment(
        "Every key: docs/configuration.md; every optional one: examples/broker.toml.template.",
    );
    o.blank();
    let mut doc = DocumentMut::new();
    let root = doc.as_table_mut();
    o.comment("The Unix socket runs connect to (`[broker] socket` in airlock.toml).");
    o.key(root, "socket", path_text(&layout.socket));
    o.comment(
        "The broker's state: runs, the queue, decisions (an SQLite file, or a postgres:// URL).",
    );
    o.key(root, "state_db", path_text(&layout.state_db));
    o.comment("Every run's worktree lies under it (`[paths] runs_root` in airlock.toml).");
    o.key(root, "runs_root", path_text(&layout.paths.runs_root));
    o.comment("The broker's own hash-chained audit log (`airlock audit verify` reads it).");
    o.key(root, "audit_log", path_text(&layout.broker_audit_log));
    o.comment("A queued pull request older than this expires.");
    o.key(root, "queue_max_age", "7d");
    o.blank();
    let repositories = repositories_table(&mut o, d, name);
    doc.insert("repositories", Item::Table(repositories));
    doc.set_trailing(o.take());
    doc.to_string()
}

/// The implicit `[repositories]` table holding `[repositories."NAME"]` for `d`.
fn repositories_table(o: &mut Writer, d: &Detected, name: &str) -> Table {
    let mut repository = o.table();
    let mut gitlab: Option<(String, String)> = None;
    o.comment("The broker's own clone (witness trees and approved commits are built from it; every pinned commit must be in it); a clone owned by the broker's user is safer than your working tree.");
    o.key(&mut repository, "clone", path_text(&d.repo));
    match &d.remote {
        Remote::GitHub {
            name: remote,
            url,
            slug,
            api,
        } => {
            o.comment(&format!(
                "The remote of the clone approved branches are pushed to ({url})."
            ));
            o.key(&mut repository, "remote", remote.as_str());
            o.comment("`owner/name` on GitHub: the draft pull request is opened there.");
            o.key(&mut repository, "forge_repo", slug.as_str());
            if let Some(api) = api {
                o.comment("The GitHub REST API (GitHub Enterprise).");
                o.key(&mut repository, "github_api", api.as_str());
            }
            o.comment("The variable holding the forge token (Contents and Pull requests: write), read where `approve` and `publish` run: the HTTPS push credential and the token that opens the draft pull request. Approval is refused while it is unset.");
            o.key(&mut repository, "forge_token_env", "AIRLOCK_FORGE_TOKEN");
        }
        Remote::GitLab {
            name: remote,
            url,
            project,
            api,
        } => {
            o.comment(&format!(
                "The remote of the clone approved branches are pushed to ({url}): GitLab's project {project} on {api}, where the forge table below opens the draft merge request."
            ));
            o.key(&mut repository, "remote", remote.as_str());
            gitlab = Some((project.clone(), api.clone()));
        }
        Remote::Other { name: remote, url } => {
            o.comment(&format!(
                "The remote of the clone approved branches are pushed to ({url}). It is neither on GitHub nor on GitLab: no pull request is opened."
            ));
            o.key(&mut repository, "remote", remote.as_str());
            o.comment("A variable holding an HTTPS push token (user x-access-token), if the remote needs one:");
            o.commented_key("forge_token_env", &quote("AIRLOCK_FORGE_TOKEN"), None);
        }
        Remote::None => {
            o.comment("The repository has no remote: approved branches (airlock/<issue>-<n>) are pushed into it, with no pull request. To publish on GitHub: `git remote add origin URL`, then `airlock init --broker --force`.");
            o.key(&mut repository, "remote", path_text(&d.repo));
        }
    }
    o.comment("Host paths its test runs may be granted read-only: airlock.toml's [tests] ro and its [paths] envs_dir.");
    // One path a line, as an operator edits the list.
    let mut allow_ro = Array::new();
    for path in d.granted_paths() {
        let mut path = Value::from(path);
        path.decor_mut().set_prefix("\n    ");
        path.decor_mut().set_suffix("");
        allow_ro.push_formatted(path);
    }
    allow_ro.set_trailing_comma(true);
    allow_ro.set_trailing("\n");
    o.key(&mut repository, "allow_ro", allow_ro);
    if let Some((project, api)) = gitlab {
        o.blank();
        o.comment("The forge the repository is published to (docs/publication.md): GitLab's REST API v4, the project the draft merge request is opened on.");
        let mut forge = o.table();
        o.key(&mut forge, "kind", "gitlab");
        o.key(&mut forge, "api_url", api.as_str());
        o.key(&mut forge, "project", project.as_str());
        o.comment("The variable holding the forge token (scope api), read where `approve` and `publish` run: the HTTPS push credential (user oauth2) and the token that opens the draft merge request, labels and notes. Approval is refused while it is unset.");
        o.key(&mut forge, "token_env", "AIRLOCK_FORGE_TOKEN");
        o.comment(
            "Review comments start a follow-up only from members at or above this access level.",
        );
        o.commented_key("feedback_min_access", &quote("developer"), None);
        repository.insert("forge", Item::Table(forge));
    }

    let mut repositories = Table::new();
    repositories.set_implicit(true);
    repositories.insert(name, Item::Table(repository));
    repositories
}

/// A string as TOML writes it (`toml_edit` chooses the quoting and escaping), for the
/// commented-out keys.
pub(super) fn quote(text: &str) -> String {
    Value::from(text).to_string()
}

/// An array of strings.
fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().map(String::as_str).collect())
}

/// A count of seconds as a TOML integer. TOML integers are signed 64-bit: a larger count (no
/// limit airlock proposes comes near it) is written as the largest one.
fn integer(n: u64) -> Value {
    Value::from(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The document being written, in reading order: comment and blank lines wait in `pending`
/// until the next key or table header takes them as the decor written before it, and tables are
/// numbered as they are begun, so the document lists them in that order.
#[derive(Default)]
struct Writer {
    pending: String,
    tables: isize,
}

impl Writer {
    fn blank(&mut self) {
        self.pending.push('\n');
    }

    /// A comment line; a control character (a newline in a path) would end the comment, so it
    /// is shown as `?`.
    fn comment(&mut self, text: &str) {
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        if text.is_empty() {
            self.pending.push_str("#\n");
        } else {
            self.pending.push_str(&format!("# {text}\n"));
        }
    }

    /// An optional key left out, shown as a comment with its value (already written as TOML)
    /// and what it is for.
    fn commented_key(&mut self, key: &str, value: &str, note: Option<&str>) {
        match note {
            Some(note) => self.comment(&format!("{key} = {value}  # {note}")),
            None => self.comment(&format!("{key} = {value}")),
        }
    }

    /// The extra comment lines of `d` for `key`.
    fn extra(&mut self, d: &Detected, key: &str) {
        for line in d.comments.get(key).into_iter().flatten() {
            self.comment(line);
        }
    }

    /// The comment and blank lines written since the last key or table header.
    fn take(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// A new table, its header after the pending lines.
    fn table(&mut self) -> Table {
        let mut table = Table::new();
        table.decor_mut().set_prefix(self.take());
        self.tables += 1;
        table.set_position(Some(self.tables));
        table
    }

    /// `key = value` in `table`, after the pending lines.
    fn key(&mut self, table: &mut Table, key: &str, value: impl Into<Value>) {
        let mut key = Key::new(key);
        key.leaf_decor_mut().set_prefix(self.take());
        table.insert_formatted(&key, Item::Value(value.into()));
    }

    /// One variable a line, each under its extra comments (names are valid bare keys: the
    /// config refuses others).
    fn vars(
        &mut self,
        d: &Detected,
        name: &str,
        vars: &BTreeMap<String, String>,
        table: &mut Table,
    ) {
        for (var, value) in vars {
            self.extra(d, &format!("{name}.{var}"));
            self.key(table, var, value.as_str());
        }
    }
}
