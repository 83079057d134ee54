//! `airlock init` reads the project's own CI ([`crate::ci_files`]): its test commands and Python
//! versions as findings, its database services as `[[tests.services]]`.

use super::*;

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
                || matches!(f.as_str(), ".gitlab-ci.yml" | "tox.ini" | "noxfile.py")
        })
        .filter_map(|f| Some((f.clone(), tree.read(f)?)))
        .collect();
    crate::ci_files::read(&files)
}

/// What the project's own CI files say: the commands and Python versions it tests with (as
/// findings), the services its jobs start (as `[[tests.services]]` from the host's binaries,
/// with the job's variables that point at them), and files that could not be read (warnings).
pub(super) fn from_ci(facts: &crate::ci_files::CiFacts, host: &HostFacts, d: &mut Detected) {
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
