//! What a project's own CI configuration says of its tests, for `airlock init`: the services
//! its jobs start (a PostgreSQL or Redis image), the variables they set, the Python versions
//! of their matrix, and the commands that run the tests. Read from GitHub Actions workflows
//! (`.github/workflows/*.yml`), `.gitlab-ci.yml`, `tox.ini`, `tox.toml`, `[tool.tox]` of
//! `pyproject.toml` and `noxfile.py`; never run.
//!
//! Values that are expressions (`${{ secrets.X }}`, `$CI_JOB_TOKEN`) are left out: they hold
//! what only the CI has. A file that does not parse is a warning naming it, never an error.

use serde_json::Value;
use std::collections::BTreeMap;

/// A service image a CI job starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiService {
    /// The file that names it.
    pub file: String,
    /// The image (`postgres:16`), as written.
    pub image: String,
    /// The port the job's steps reach it on (the host's side of `5433:5432`), as published.
    pub port: Option<u16>,
    /// The variables the job gives the image (`POSTGRES_USER`), expressions left out.
    pub env: BTreeMap<String, String>,
}

impl CiService {
    /// `postgres`, `redis`, `mysql`: the image's name without registry, path or tag.
    pub fn kind(&self) -> String {
        let name = self.image.rsplit('/').next().unwrap_or(&self.image);
        name.split([':', '@'])
            .next()
            .unwrap_or(name)
            .to_ascii_lowercase()
    }
}

/// What the CI files say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiFacts {
    /// Services, in file order.
    pub services: Vec<CiService>,
    /// Variables the jobs set (literal values only), with the file that sets each.
    pub env: BTreeMap<String, (String, String)>,
    /// Python versions of the matrices and envlists (`3.11`), sorted, once each.
    pub pythons: Vec<String>,
    /// Commands that run the tests (`pytest -m "not slow"`), with their file.
    pub test_commands: Vec<(String, String)>,
    /// What the test jobs install (not those of lint, docs, typing or release jobs).
    pub installs: Installs,
    /// Files that could not be read, with why.
    pub problems: Vec<String>,
}

/// What a project's CI installs before its tests, each name with the file that says it (the
/// first file wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installs {
    /// Extras of the project itself (`pip install -e ".[tests]"`, tox's `extras`).
    pub extras: BTreeMap<String, String>,
    /// Requirements files (`pip install -r requirements/test.txt`, tox's `deps = -r...`), as
    /// paths from the tree's root.
    pub requirements: BTreeMap<String, String>,
    /// Packages named directly (`pip install pytest-mock`, tox's `deps`), as written
    /// (`pytest>=7`); the installers and CI tools themselves (pip, tox, codecov) left out.
    pub packages: BTreeMap<String, String>,
}

/// Jobs, tox environments and nox sessions whose name says they do not run the tests.
const NOT_TEST_JOBS: [&str; 14] = [
    "lint",
    "doc",
    "mypy",
    "typing",
    "typecheck",
    "format",
    "style",
    "release",
    "publish",
    "deploy",
    "pre-commit",
    "precommit",
    "benchmark",
    "spell",
];

/// Whether a job, tox environment or nox session of this name runs the tests.
pub fn is_test_job(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    !NOT_TEST_JOBS.iter().any(|w| name.contains(w))
}

/// Packages a CI installs to run its tooling rather than the tests.
const CI_TOOLS: [&str; 16] = [
    "pip",
    "setuptools",
    "wheel",
    "tox",
    "nox",
    "build",
    "twine",
    "virtualenv",
    "uv",
    "codecov",
    "coveralls",
    "pre-commit",
    "tox-gh-actions",
    "tox-gh",
    "tox-uv",
    "nox-uv",
];

/// The distribution name at the start of a requirement (`pytest-mock>=3` -> `pytest-mock`),
/// when the text is one.
pub fn requirement_name(spec: &str) -> Option<&str> {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    let name = &spec[..end];
    let rest = spec[end..].trim_start();
    let ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && (rest.is_empty() || rest.starts_with(['<', '>', '=', '!', '~', '[', ';', '(']));
    ok.then_some(name)
}

impl Installs {
    fn merge(&mut self, other: Installs) {
        for (mine, theirs) in [
            (&mut self.extras, other.extras),
            (&mut self.requirements, other.requirements),
            (&mut self.packages, other.packages),
        ] {
            for (k, v) in theirs {
                mine.entry(k).or_insert(v);
            }
        }
    }

    fn extra(&mut self, name: &str, file: &str) {
        let name = name.trim();
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            self.extras
                .entry(name.to_string())
                .or_insert_with(|| file.to_string());
        }
    }

    fn requirement_file(&mut self, path: &str, file: &str) {
        let path = path
            .trim()
            .trim_start_matches("{toxinidir}/")
            .trim_start_matches("./");
        let safe = !path.is_empty()
            && !path.starts_with('/')
            && !path.contains(['$', '{', '}'])
            && !path.split('/').any(|p| p == "..");
        if safe {
            self.requirements
                .entry(path.to_string())
                .or_insert_with(|| file.to_string());
        }
    }

    /// One installed thing as pip takes it: the project (`.`, `.[tests]`), or a requirement.
    fn target(&mut self, word: &str, file: &str) {
        let word = word.trim();
        let local = word
            .strip_prefix("./")
            .or_else(|| word.strip_prefix('.'))
            .or_else(|| word.strip_prefix("{toxinidir}"));
        if let Some(rest) = local {
            if let Some(extras) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                for e in extras.split(',') {
                    self.extra(e, file);
                }
            }
            return;
        }
        if word.contains(['$', '{', '/', '@']) || word.contains("://") {
            return;
        }
        if let Some(name) = requirement_name(word)
            && !CI_TOOLS.iter().any(|t| t.eq_ignore_ascii_case(name))
        {
            self.packages
                .entry(word.to_string())
                .or_insert_with(|| file.to_string());
        }
    }

    /// The arguments of one `pip install` (after `install`).
    fn pip_args(&mut self, args: &[String], file: &str) {
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            let next = args.get(i + 1).map(String::as_str);
            match a {
                "-r" | "--requirement" => {
                    if let Some(n) = next {
                        self.requirement_file(n, file);
                    }
                    i += 2;
                    continue;
                }
                "-e" | "--editable" => {
                    if let Some(n) = next {
                        self.target(n, file);
                    }
                    i += 2;
                    continue;
                }
                "-c" | "--constraint" | "-i" | "--index-url" | "--extra-index-url" | "-f"
                | "--find-links" | "--python" | "-p" | "--target" | "-t" | "--prefix" => {
                    i += 2;
                    continue;
                }
                _ => {}
            }
            if let Some(path) = a.strip_prefix("--requirement=") {
                self.requirement_file(path, file);
            } else if let Some(path) = a.strip_prefix("--editable=") {
                self.target(path, file);
            } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.starts_with('-')) {
                // Short options, possibly together (`-Ur FILE`, `-Urrequirements.txt`): the
                // first that takes a value takes the rest of the word, else the next word.
                if let Some(at) = cluster.find(['r', 'e', 'c', 'i', 'f', 't', 'd']) {
                    let value = &cluster[at + 1..];
                    let value = if value.is_empty() {
                        i += 1;
                        args.get(i).map(String::as_str).unwrap_or("")
                    } else {
                        value
                    };
                    match &cluster[at..at + 1] {
                        "r" => self.requirement_file(value, file),
                        "e" => self.target(value, file),
                        _ => {}
                    }
                }
            } else if !a.starts_with('-') {
                self.target(a, file);
            }
            i += 1;
        }
    }

    /// The `pip install` commands of a script (lines, `&&` and `;` chains).
    fn script(&mut self, script: &str, file: &str) {
        for line in script.lines() {
            for part in line.split("&&").flat_map(|p| p.split(';')) {
                let Some(words) = shlex::split(part.trim()) else {
                    continue;
                };
                let at = words.iter().position(|w| w == "install");
                let Some(at) = at else { continue };
                let before: Vec<&str> = words[..at].iter().map(String::as_str).collect();
                let is_pip = matches!(before.as_slice(), [.., "pip"] | [.., "pip3"])
                    || before.last().is_some_and(|w| w.ends_with("/pip"));
                if is_pip {
                    self.pip_args(&words[at + 1..], file);
                }
            }
        }
    }
}

/// Read the CI files among `files` (path, text).
pub fn read(files: &[(String, String)]) -> CiFacts {
    let mut facts = CiFacts::default();
    for (path, text) in files {
        let is_workflow = path.starts_with(".github/workflows/")
            && (path.ends_with(".yml") || path.ends_with(".yaml"));
        if is_workflow || path == ".gitlab-ci.yml" {
            match serde_saphyr::from_str::<Value>(text) {
                Ok(doc) if is_workflow => github(path, &doc, &mut facts),
                Ok(doc) => gitlab(path, &doc, &mut facts),
                Err(e) => facts.problems.push(format!(
                    "{path} is not YAML airlock can read ({e}); it was skipped"
                )),
            }
        } else if path == "tox.ini" {
            tox(path, text, &mut facts);
        } else if path == "tox.toml" || path == "pyproject.toml" {
            match text.parse::<toml::Table>() {
                Ok(doc) if path == "tox.toml" => tox_toml(path, &doc, &mut facts),
                Ok(doc) => {
                    if let Some(tox) = doc
                        .get("tool")
                        .and_then(|t| t.get("tox"))
                        .and_then(toml::Value::as_table)
                    {
                        tox_toml(path, tox, &mut facts);
                    }
                }
                Err(_) if path == "tox.toml" => facts.problems.push(format!(
                    "{path} is not TOML airlock can read; it was skipped"
                )),
                Err(_) => {}
            }
        } else if path == "noxfile.py" {
            nox(path, text, &mut facts);
        }
    }
    facts.pythons.sort_by_key(|v| {
        v.split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    facts.pythons.dedup();
    facts
}

fn literal(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    (!text.contains("${{") && !text.contains('$')).then_some(text)
}

fn env_of(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), literal(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

fn port_of(ports: Option<&Value>) -> Option<u16> {
    let first = ports?.as_array()?.first()?;
    let text = match first {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return None,
    };
    // `HOST:CONTAINER`: the tests on the runner connect to the host's side.
    let parts: Vec<&str> = text.split(':').collect();
    let host = if parts.len() >= 2 {
        parts[parts.len() - 2]
    } else {
        parts[0]
    };
    host.split('/').next()?.parse().ok()
}

fn add_python(facts: &mut CiFacts, value: &Value) {
    let versions: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for v in versions {
        if let Some(text) = literal(v) {
            let text = text.trim().to_string();
            if text.starts_with("3.") && text[2..].chars().all(|c| c.is_ascii_digit()) {
                facts.pythons.push(text);
            }
        }
    }
}

fn add_commands(facts: &mut CiFacts, file: &str, script: &str) {
    for line in script.lines().flat_map(|l| l.split("&&")) {
        let line = line.trim();
        let runs_tests = line.split_whitespace().any(|w| {
            matches!(w, "pytest" | "tox" | "nox" | "unittest")
                || w.ends_with("/pytest")
                || w == "test" && line.starts_with("npm")
                || w == "test" && line.starts_with("cargo")
                || w == "test" && line.starts_with("go ")
        });
        let installs = [
            "pip ",
            "pip3 ",
            "python -m pip",
            "python3 -m pip",
            "uv pip",
            "uv tool",
            "pipx ",
            "apt",
            "npm install",
            "npm ci",
            "brew ",
        ]
        .iter()
        .any(|p| line.starts_with(p));
        if runs_tests && !installs && !line.starts_with('#') {
            facts
                .test_commands
                .push((file.to_string(), line.to_string()));
        }
    }
}

fn github(path: &str, doc: &Value, facts: &mut CiFacts) {
    for (k, v) in env_of(doc.get("env")) {
        facts.env.insert(k, (v, path.to_string()));
    }
    let Some(jobs) = doc.get("jobs").and_then(Value::as_object) else {
        return;
    };
    for (job_name, job) in jobs {
        let tests_job = is_test_job(job_name);
        // What this job installs counts when the job runs the tests.
        let commands_before = facts.test_commands.len();
        let mut installs = Installs::default();
        for (k, v) in env_of(job.get("env")) {
            facts.env.insert(k, (v, path.to_string()));
        }
        if let Some(matrix) = job.get("strategy").and_then(|s| s.get("matrix")) {
            for key in ["python-version", "python", "python_version"] {
                if let Some(v) = matrix.get(key) {
                    add_python(facts, v);
                }
            }
        }
        if let Some(services) = job.get("services").and_then(Value::as_object) {
            for service in services.values() {
                let image = match service {
                    Value::String(s) => Some(s.clone()),
                    other => other.get("image").and_then(literal),
                };
                if let Some(image) = image {
                    facts.services.push(CiService {
                        file: path.to_string(),
                        image,
                        port: port_of(service.get("ports")),
                        env: env_of(service.get("env")),
                    });
                }
            }
        }
        for step in job
            .get("steps")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for (k, v) in env_of(step.get("env")) {
                facts.env.insert(k, (v, path.to_string()));
            }
            if let Some(v) = step.get("with").and_then(|w| w.get("python-version")) {
                add_python(facts, v);
            }
            if let Some(run) = step.get("run").and_then(Value::as_str) {
                // The environment of the job's first test run: what later steps add is for
                // later, narrower runs (one module with an optional dependency).
                if tests_job && facts.test_commands.len() == commands_before {
                    installs.script(run, path);
                }
                add_commands(facts, path, run);
            }
        }
        if facts.test_commands.len() > commands_before {
            facts.installs.merge(installs);
        }
    }
}

fn gitlab(path: &str, doc: &Value, facts: &mut CiFacts) {
    let Some(top) = doc.as_object() else {
        return;
    };
    fn add_services(
        facts: &mut CiFacts,
        path: &str,
        value: Option<&Value>,
        env: &BTreeMap<String, String>,
    ) {
        for service in value.and_then(Value::as_array).into_iter().flatten() {
            let image = match service {
                Value::String(s) => Some(s.clone()),
                other => other.get("name").and_then(literal),
            };
            if let Some(image) = image {
                facts.services.push(CiService {
                    file: path.to_string(),
                    image,
                    port: None,
                    env: env.clone(),
                });
            }
        }
    }
    let global_env = env_of(top.get("variables"));
    add_services(facts, path, top.get("services"), &global_env);
    let mut jobs_env = Vec::new();
    for (name, job) in top {
        if name.starts_with('.') || !job.is_object() || name == "variables" {
            continue;
        }
        let mut env = global_env.clone();
        env.extend(env_of(job.get("variables")));
        add_services(facts, path, job.get("services"), &env);
        jobs_env.push(env_of(job.get("variables")));
        if let Some(v) = job.get("image").and_then(Value::as_str)
            && let Some(version) = v.strip_prefix("python:")
        {
            let minor: String = version
                .split('-')
                .next()
                .unwrap_or(version)
                .split('.')
                .take(2)
                .collect::<Vec<_>>()
                .join(".");
            add_python(facts, &Value::String(minor));
        }
        let commands_before = facts.test_commands.len();
        let mut installs = Installs::default();
        for key in ["script", "before_script"] {
            for line in job.get(key).and_then(Value::as_array).into_iter().flatten() {
                if let Some(text) = line.as_str() {
                    if is_test_job(name) && facts.test_commands.len() == commands_before {
                        installs.script(text, path);
                    }
                    add_commands(facts, path, text);
                }
            }
        }
        if facts.test_commands.len() > commands_before {
            facts.installs.merge(installs);
        }
    }
    for (k, v) in global_env.into_iter().chain(jobs_env.into_iter().flatten()) {
        facts.env.insert(k, (v, path.to_string()));
    }
}

fn tox(path: &str, text: &str, facts: &mut CiFacts) {
    // The environments `tox` runs by default: what a named `[testenv:NAME]` installs counts
    // when NAME is one of them (or a `py*`/`test*` environment), not a helper task's.
    let envlist: Vec<String> = {
        let mut inside = false;
        let mut out = Vec::new();
        let mut in_envlist = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with('[') {
                inside = trimmed == "[tox]" || trimmed == "[tox:tox]";
                in_envlist = false;
                continue;
            }
            if !inside {
                continue;
            }
            let value = if line.starts_with(char::is_whitespace) && in_envlist {
                trimmed
            } else if let Some((k, v)) = trimmed.split_once('=') {
                in_envlist = k.trim() == "envlist" || k.trim() == "env_list";
                v.trim()
            } else {
                continue;
            };
            if in_envlist {
                out.extend(value.split([',', ' ']).map(|e| e.trim().to_string()));
            }
        }
        out
    };
    let default_env = |name: &str| {
        name.is_empty()
            || name.starts_with("py")
            || name.starts_with("test")
            || envlist.iter().any(|e| e == name)
    };
    let mut section = String::new();
    let mut key = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            section = trimmed[1..trimmed.len() - 1].to_string();
            key.clear();
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with(['#', ';']) {
            continue;
        }
        let continued = line.starts_with(char::is_whitespace);
        let value = if continued {
            trimmed.to_string()
        } else if let Some((k, v)) = trimmed.split_once('=') {
            key = k.trim().to_string();
            v.trim().to_string()
        } else {
            continue;
        };
        if (section == "tox" || section == "tox:tox") && key == "envlist" {
            for env in value.split([',', ' ']) {
                let env = env.trim();
                // py38, py3.11, py311-django42
                if let Some(digits) = env
                    .strip_prefix("py")
                    .map(|d| d.split('-').next().unwrap_or(d))
                {
                    let digits = digits.replace('.', "");
                    if digits.len() >= 2
                        && digits.starts_with('3')
                        && digits.chars().all(|c| c.is_ascii_digit())
                    {
                        add_python(facts, &Value::String(format!("3.{}", &digits[1..])));
                    }
                }
            }
        }
        let env_name = section
            .strip_prefix("testenv")
            .map(|n| n.trim_start_matches(':'));
        if env_name.is_some() && key == "commands" && !value.is_empty() {
            add_commands(facts, path, &value);
        }
        if env_name.is_some_and(|n| is_test_job(n) && default_env(n)) {
            match key.as_str() {
                "extras" => {
                    for e in value.split([',', ' ']) {
                        facts.installs.extra(e, path);
                    }
                }
                "deps" => tox_dep(&value, path, &mut facts.installs),
                "commands_pre" => facts.installs.script(&value, path),
                _ => {}
            }
        }
    }
}

/// tox 4's TOML configuration (`tox.toml`, or `[tool.tox]` of `pyproject.toml`): a
/// `legacy_tox_ini` string is read as `tox.ini`; else `env_list`, `env_run_base` and `env.NAME`
/// tables with `deps`, `extras` and `commands` (argv arrays).
fn tox_toml(path: &str, tox_doc: &toml::Table, facts: &mut CiFacts) {
    if let Some(ini) = tox_doc.get("legacy_tox_ini").and_then(toml::Value::as_str) {
        tox(path, ini, facts);
        return;
    }
    let strings = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let envlist = {
        let mut l = strings(tox_doc.get("env_list"));
        l.extend(strings(tox_doc.get("envlist")));
        l
    };
    let mut envs: Vec<(String, &toml::Table)> = Vec::new();
    if let Some(base) = tox_doc.get("env_run_base").and_then(toml::Value::as_table) {
        envs.push((String::new(), base));
    }
    for (name, env) in tox_doc
        .get("env")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
    {
        if let Some(env) = env.as_table() {
            envs.push((name.clone(), env));
        }
    }
    for (name, env) in envs {
        let default_env = name.is_empty()
            || name.starts_with("py")
            || name.starts_with("test")
            || envlist.contains(&name);
        for command in env
            .get("commands")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
        {
            let argv = strings(Some(command));
            if !argv.is_empty() {
                add_commands(facts, path, &argv.join(" "));
            }
        }
        if !(default_env && is_test_job(&name)) {
            continue;
        }
        for e in strings(env.get("extras")) {
            facts.installs.extra(&e, path);
        }
        for dep in strings(env.get("deps")) {
            tox_dep(&dep, path, &mut facts.installs);
        }
    }
}

/// One line of a tox `deps`: a requirement, `-r FILE`, or the project; lines conditional on
/// factors (`py27: mock`) and references to other sections (`{[base]deps}`) are left out.
fn tox_dep(value: &str, path: &str, installs: &mut Installs) {
    let value = value.split(" #").next().unwrap_or(value).trim();
    if let Some((factors, _)) = value.split_once(": ")
        && factors
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ',' | '-' | '.' | '!' | '_'))
    {
        return;
    }
    if value.starts_with("{[") {
        return;
    }
    if let Some(words) = shlex::split(value) {
        installs.pip_args(&words, path);
    }
}

/// The leading string literals of a Python call's arguments (`"pytest", "-x", *posargs)`).
fn quoted_args(rest: &str) -> Vec<String> {
    rest.split(',')
        .map_while(|w| {
            let w = w.trim().trim_end_matches(')');
            (w.starts_with('"') || w.starts_with('\''))
                .then(|| w.trim_matches(|c| c == '"' || c == '\'').to_string())
        })
        .collect()
}

fn nox(path: &str, text: &str, facts: &mut CiFacts) {
    let mut session = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("def ") {
            session = name.split('(').next().unwrap_or(name).to_string();
        }
        if let Some(rest) = line.split("session.install(").nth(1)
            && is_test_job(&session)
        {
            let words = quoted_args(rest);
            facts.installs.pip_args(&words, path);
        }
        if let Some(rest) = line.split("session.run(").nth(1) {
            let words = quoted_args(rest);
            if !words.is_empty() {
                add_commands(facts, path, &words.join(" "));
            }
        }
        if let Some(rest) = line.split("python=").nth(1) {
            for quoted in rest.split(['"', '\'']).skip(1).step_by(2) {
                add_python(facts, &Value::String(quoted.to_string()));
            }
        }
    }
}

/// The directory of the host's PostgreSQL server binaries: beside the `initdb` on `PATH`
/// (through its link, as Debian's), else the newest `/usr/lib/postgresql/*/bin`.
pub fn postgres_bin() -> Option<std::path::PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("initdb"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf))
        .filter(|d| d.join("postgres").is_file());
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn sql_name(value: Option<&String>, default: &str) -> String {
    value
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

/// A `[[tests.services]]` for a PostgreSQL image of the CI, run from the host's binaries in
/// `bin`: a cluster in the sandbox's `/tmp` owned by the image's `POSTGRES_USER` (trust
/// authentication: the sandbox's loopback is its own), on the port the tests expect, and the
/// image's `POSTGRES_DB` created once the server answers.
pub fn postgres_service(
    service: &CiService,
    bin: &std::path::Path,
) -> crate::config::ServiceConfig {
    let user = sql_name(service.env.get("POSTGRES_USER"), "postgres");
    let db = sql_name(service.env.get("POSTGRES_DB"), &user);
    let port = service.port.unwrap_or(5432);
    let bin = bin.display();
    crate::config::ServiceConfig {
        name: "postgres".into(),
        command: vec![
            "sh".into(),
            "-c".into(),
            format!(
                "{bin}/initdb -D /tmp/airlock-pg -A trust -E UTF8 --locale=C -U {user} >/dev/null && exec \
                 {bin}/postgres -D /tmp/airlock-pg -k /tmp -c listen_addresses=127.0.0.1 -p {port}"
            ),
        ],
        env: [
            ("PGHOST", "127.0.0.1".to_string()),
            ("PGPORT", port.to_string()),
            ("PGUSER", user.clone()),
            ("PGDATABASE", db.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        ready_port: None,
        ready_command: vec![
            "sh".into(),
            "-c".into(),
            format!(
                "{bin}/pg_isready -q -h 127.0.0.1 -p {port} && ({bin}/psql -h 127.0.0.1 -p {port} \
                 -U {user} -d postgres -tAc \"select 1 from pg_database where datname = '{db}'\" \
                 | grep -q 1 || {bin}/createdb -h 127.0.0.1 -p {port} -U {user} {db})"
            ),
        ],
        ready_timeout_secs: 60,
    }
}

/// A `[[tests.services]]` for a Redis image of the CI, run from the host's `redis-server`
/// without persistence, on the port the tests expect.
pub fn redis_service(service: &CiService, exe: &std::path::Path) -> crate::config::ServiceConfig {
    let port = service.port.unwrap_or(6379);
    crate::config::ServiceConfig {
        name: "redis".into(),
        command: vec![
            exe.display().to_string(),
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            "/tmp".into(),
        ],
        env: BTreeMap::new(),
        ready_port: Some(port),
        ready_command: Vec::new(),
        ready_timeout_secs: 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn a_github_workflow_gives_services_variables_pythons_and_commands() {
        let workflow = r#"
name: tests
env:
  FORCE_COLOR: "1"
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        python-version: ["3.9", "3.12", "3.10"]
    env:
      DATABASE_URL: postgres://app:app@localhost:5432/app_test
      TOKEN: ${{ secrets.TOKEN }}
    services:
      postgres:
        image: postgres:16
        env:
          POSTGRES_USER: app
          POSTGRES_PASSWORD: app
          POSTGRES_DB: app_test
        ports: ["5432:5432"]
      cache:
        image: redis:7-alpine
        ports:
          - 6380:6379
    steps:
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python-version }}
      - run: |
          pip install -e .[test]
          pytest -m "not slow" tests/
"#;
        let facts = read(&files(&[(".github/workflows/ci.yml", workflow)]));
        assert_eq!(facts.pythons, ["3.9", "3.10", "3.12"]);
        assert_eq!(facts.services.len(), 2);
        let of = |kind: &str| facts.services.iter().find(|s| s.kind() == kind).unwrap();
        assert_eq!(of("postgres").port, Some(5432));
        assert_eq!(of("postgres").env["POSTGRES_DB"], "app_test");
        assert_eq!(of("redis").port, Some(6380));
        assert_eq!(
            facts.env["DATABASE_URL"].0,
            "postgres://app:app@localhost:5432/app_test"
        );
        assert!(
            !facts.env.contains_key("TOKEN"),
            "an expression is the CI's"
        );
        assert_eq!(
            facts.test_commands,
            [(
                ".github/workflows/ci.yml".to_string(),
                "pytest -m \"not slow\" tests/".to_string()
            )]
        );
    }

    #[test]
    fn gitlab_tox_and_nox_are_read_and_a_broken_file_is_named() {
        let gitlab = "variables:\n  PGHOST: postgres\nimage: python:3.11-slim\n\
                      test:\n  image: python:3.12\n  services:\n    - postgres:15\n    - name: redis:7\n  \
                      script:\n    - pip install tox\n    - tox -e py312\n";
        let tox = "[tox]\nenvlist = py38, py311-django42, lint\n\n[testenv]\ndeps = pytest\n\
                   commands =\n    pytest {posargs}\n";
        let nox = "@nox.session(python=[\"3.10\", \"3.13\"])\ndef tests(session):\n    \
                   session.run(\"pytest\", \"-x\", *session.posargs)\n";
        let facts = read(&files(&[
            (".gitlab-ci.yml", gitlab),
            ("tox.ini", tox),
            ("noxfile.py", nox),
            (".github/workflows/bad.yml", "jobs: [unclosed\n"),
        ]));
        assert_eq!(facts.pythons, ["3.8", "3.10", "3.11", "3.12", "3.13"]);
        let kinds: Vec<String> = facts.services.iter().map(CiService::kind).collect();
        assert_eq!(kinds, ["postgres", "redis"]);
        assert_eq!(facts.env["PGHOST"].0, "postgres");
        let commands: Vec<&str> = facts
            .test_commands
            .iter()
            .map(|(_, c)| c.as_str())
            .collect();
        assert_eq!(commands, ["tox -e py312", "pytest {posargs}", "pytest -x"]);
        assert_eq!(facts.problems.len(), 1);
        assert!(facts.problems[0].starts_with(".github/workflows/bad.yml"));
    }

    #[test]
    fn tox_in_toml_is_read_from_pyproject_or_tox_toml() {
        let pyproject = "[project]\nname = 'd'\n[tool.tox]\nenv_list = ['py', 'docs']\n\
                         [tool.tox.env_run_base]\ndeps = ['pytest', 'pytz', 'twine']\nextras = ['speed']\n\
                         commands = [['python', '-m', 'pytest', '-v', 'test']]\n\
                         [tool.tox.env.docs]\ndeps = ['sphinx']\n";
        let facts = read(&files(&[("pyproject.toml", pyproject)]));
        let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&facts.installs.packages), ["pytest", "pytz"]);
        assert_eq!(keys(&facts.installs.extras), ["speed"]);
        assert_eq!(facts.test_commands[0].1, "python -m pytest -v test");
        let legacy = "[tool.tox]\nlegacy_tox_ini = \"\"\"\n[testenv]\ndeps = mock\n\"\"\"\n";
        let facts = read(&files(&[("pyproject.toml", legacy)]));
        assert_eq!(keys(&facts.installs.packages), ["mock"]);
        let facts = read(&files(&[("tox.toml", "env_list = [")]));
        assert_eq!(facts.problems.len(), 1, "a broken tox.toml is named");
        assert!(
            read(&files(&[("pyproject.toml", "[project")]))
                .problems
                .is_empty()
        );
    }

    #[test]
    fn what_the_test_jobs_install_is_read_and_the_tooling_jobs_are_not() {
        let workflow = "jobs:\n  lint:\n    steps:\n      - run: pip install flake8 -r requirements/lint.txt\n  \
                        tests:\n    steps:\n      - run: |\n          python -m pip install --upgrade pip setuptools\n          \
                        python -m pip install -e \".[tests,socks]\" -Ur requirements/test.txt pytest-xdist>=3 && pytest\n      \
                        - run: pip install -c constraints.txt --index-url https://example.invalid/simple ./[speedups] $EXTRA\n      \
                        - run: pytest tests/test_speedups.py\n  \
                        integration:\n    steps:\n      - run: pip install huge-downstream\n      - run: downstream selftest\n";
        let tox = "[tox]\nenvlist = py38, docs\n\n[testenv]\nextras = tests, reco\ndeps =\n    mock>=2\n    \
                   py27: unittest2\n    -Ur{toxinidir}/requirements-dev.txt\n    {[base]deps}\n\n[testenv:docs]\n\
                   extras = docs\ndeps = sphinx\n\n[testenv:watch-readme]\ndeps = restview\n";
        let nox = "@nox.session\ndef lint(session):\n    session.install(\"ruff\")\n\n@nox.session\n\
                   def tests(session):\n    session.install(\"-e\", \".[testing]\")\n    session.install(\"hypothesis\")\n";
        let facts = read(&files(&[
            (".github/workflows/ci.yml", workflow),
            ("tox.ini", tox),
            ("noxfile.py", nox),
        ]));
        assert!(facts.problems.is_empty(), "{:?}", facts.problems);
        let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(&facts.installs.extras),
            ["reco", "socks", "testing", "tests"],
            "what a job installs after its first test run is for a later, narrower run"
        );
        assert_eq!(
            keys(&facts.installs.requirements),
            ["requirements-dev.txt", "requirements/test.txt"]
        );
        assert_eq!(
            keys(&facts.installs.packages),
            ["hypothesis", "mock>=2", "pytest-xdist>=3"],
            "linters, docs tools, installers and helper tasks are left out"
        );
        assert_eq!(facts.installs.extras["tests"], ".github/workflows/ci.yml");
        assert_eq!(facts.installs.packages["mock>=2"], "tox.ini");
        assert_eq!(requirement_name("pytest-mock >= 3"), Some("pytest-mock"));
        assert_eq!(requirement_name("not a requirement"), None);
    }
}
