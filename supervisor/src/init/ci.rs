//! `airlock init` reads the project's own CI ([`crate::ci_files`]): its test commands and Python
//! versions as findings, its database services as `[[tests.services]]`.

use super::host::HostFacts;
use super::proposal::Detected;
use super::tree::Tree;
use std::collections::BTreeSet;

/// The project's CI files among the tree's (a tree that is not a git work tree is walked
/// without its dot-directories: the workflows are looked for where they live), read.
pub(super) fn read_ci(tree: &Tree) -> crate::ci_files::CiFacts {
    let mut names: BTreeSet<String> = tree.files.clone();
    if let Ok(entries) = std::fs::read_dir(tree.root.join(".github/workflows")) {
        names.extend(
            entries
                .flatten()
                .filter(|e| e.path().is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .map(|n| format!(".github/workflows/{n}")),
        );
    }
    let files: Vec<(String, String)> = names
        .iter()
        .filter(|f| {
            (f.starts_with(".github/workflows/") && (f.ends_with(".yml") || f.ends_with(".yaml")))
                || matches!(
                    f.as_str(),
                    ".gitlab-ci.yml" | "tox.ini" | "tox.toml" | "pyproject.toml" | "noxfile.py"
                )
        })
        .filter_map(|f| Some((f.clone(), tree.read(f)?)))
        .collect();
    crate::ci_files::read(&files)
}

/// What the project's own CI files say: the commands and Python versions it tests with (as
/// findings), the services its jobs start (as `[[tests.services]]` from the host's binaries,
/// with the job's variables that point at them), and files that could not be read (warnings).
pub(super) fn from_ci(
    tree: &Tree,
    facts: &crate::ci_files::CiFacts,
    host: &HostFacts,
    d: &mut Detected,
) {
    d.warnings.extend(facts.problems.iter().cloned());
    let mut commands: Vec<String> = Vec::new();
    for (file, command) in &facts.test_commands {
        let line = format!("`{command}` ({file})");
        if !commands.contains(&line) {
            commands.push(line);
        }
    }
    if !commands.is_empty() {
        commands.truncate(4);
        d.findings.push(format!(
            "The project's CI runs its tests with {}",
            commands.join(", ")
        ));
    }
    if !facts.pythons.is_empty() {
        d.findings.push(format!(
            "The project's CI tests on Python {}",
            facts.pythons.join(", ")
        ));
    }
    let mut proposed = Vec::new();
    for service in &facts.services {
        let kind = service.kind();
        let made = match kind.as_str() {
            "postgres" | "postgis" => host
                .postgres_bin
                .as_deref()
                .map(|bin| crate::ci_files::postgres_service(service, bin)),
            "redis" | "valkey" => host
                .redis_server
                .as_deref()
                .map(|exe| crate::ci_files::redis_service(service, exe)),
            _ => None,
        };
        match made {
            Some(config) if !d.tests.services.iter().any(|s| s.name == config.name) => {
                d.comment(
                    &format!("tests.services.{}", config.name),
                    format!(
                        "{} starts {} ({}); here it runs from the host's binaries inside each \
                         test run's sandbox.",
                        service.file, service.image, kind
                    ),
                );
                proposed.push(kind.clone());
                d.tests.services.push(config);
            }
            Some(_) => {}
            None => d.warnings.push(format!(
                "{} starts the service {}: airlock runs services from the host's binaries, and \
                 none was found for it; install it and add a [[tests.services]] table",
                service.file, service.image
            )),
        }
    }
    from_tests(tree, host, d, &mut proposed);
    if !proposed.is_empty() {
        for (name, (value, file)) in &facts.env {
            let points_here = value.contains("localhost") || value.contains("127.0.0.1");
            let named = ["PG", "POSTGRES", "REDIS", "DATABASE", "DB_"]
                .iter()
                .any(|p| name.starts_with(p));
            if (points_here || named)
                && airlock_policies::testrun::valid_env_name(name)
                && !airlock_policies::testrun::is_fixed(name)
                && !name.starts_with("POSTGRES_")
            {
                d.tests.env.insert(name.clone(), value.clone());
                d.comment(&format!("tests.env.{name}"), format!("From {file}."));
            }
        }
    }
}

/// Most test files read for signs of a server the tests expect.
const MAX_TEST_FILES_READ: usize = 400;

/// Where the tests themselves show that they expect a database server on the loopback
/// (a project whose CI files are not in the tree, as in an sdist): the libpq variables
/// (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`) or a `postgres://` URL on
/// localhost for PostgreSQL; `REDIS_URL`, `REDIS_HOST` or a Redis URL or port on localhost for
/// Redis. The first file and line that shows it is named in the comment.
pub(super) fn service_signs(text: &str) -> Vec<(&'static str, usize)> {
    let mut found: Vec<(&'static str, usize)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let local = |after: &str| {
            let host: String = after.chars().take(80).collect();
            host.contains("localhost") || host.contains("127.0.0.1")
        };
        let url_local = |scheme: &str| {
            line.match_indices(scheme)
                .any(|(at, _)| local(&line[at + scheme.len()..]))
        };
        let postgres = ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"]
            .iter()
            .any(|v| line.contains(v))
            || url_local("postgres://")
            || url_local("postgresql://")
            || url_local("postgresql+");
        let redis = ["REDIS_URL", "REDIS_HOST"].iter().any(|v| line.contains(v))
            || url_local("redis://")
            || line.contains("localhost:6379")
            || line.contains("127.0.0.1:6379");
        for (kind, hit) in [("postgres", postgres), ("redis", redis)] {
            if hit && !found.iter().any(|(k, _)| *k == kind) {
                found.push((kind, n + 1));
            }
        }
    }
    found
}

/// Services the tests expect ([`service_signs`]) that the CI did not already give, started
/// from the host's binaries as the CI's would be.
fn from_tests(tree: &Tree, host: &HostFacts, d: &mut Detected, proposed: &mut Vec<String>) {
    let test_files = tree
        .files
        .iter()
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            let in_tests = f
                .split('/')
                .any(|part| matches!(part, "test" | "tests" | "testing"));
            let code = [".py", ".js", ".ts", ".go", ".rs"]
                .iter()
                .any(|ext| name.ends_with(ext));
            code && (in_tests
                || name == "conftest.py"
                || name.starts_with("test_")
                || name.ends_with("_test.py")
                || name.ends_with("_test.go"))
        })
        .take(MAX_TEST_FILES_READ);
    let mut seen: Vec<(&'static str, String)> = Vec::new();
    for file in test_files {
        let Some(text) = tree.read(file) else {
            continue;
        };
        for (kind, line) in service_signs(&text) {
            if !seen.iter().any(|(k, _)| *k == kind) {
                seen.push((kind, format!("{file}:{line}")));
            }
        }
        if seen.len() == 2 {
            break;
        }
    }
    for (kind, at) in seen {
        if proposed.iter().any(|p| p == kind) || d.tests.services.iter().any(|s| s.name == kind) {
            continue;
        }
        let service = crate::ci_files::CiService {
            file: at.clone(),
            image: kind.to_string(),
            port: None,
            env: Default::default(),
        };
        let made = match kind {
            "postgres" => host
                .postgres_bin
                .as_deref()
                .map(|bin| crate::ci_files::postgres_service(&service, bin)),
            _ => host
                .redis_server
                .as_deref()
                .map(|exe| crate::ci_files::redis_service(&service, exe)),
        };
        match made {
            Some(config) => {
                d.comment(
                    &format!("tests.services.{}", config.name),
                    format!(
                        "The tests expect a {kind} server on the loopback ({at}); here it runs \
                         from the host's binaries inside each test run's sandbox."
                    ),
                );
                d.findings
                    .push(format!("The tests expect a {kind} server ({at})"));
                proposed.push(kind.to_string());
                d.tests.services.push(config);
            }
            None => d.warnings.push(format!(
                "the tests expect a {kind} server ({at}), and the host has none: install it and \
                 add a [[tests.services]] table"
            )),
        }
    }
}
