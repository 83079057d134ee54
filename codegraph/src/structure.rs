//! The structure of one commit of a repository, for a reader who wants to copy its layout: top
//! directories, languages, manifests, entry points, role-classified files, modules with their
//! top-level definitions, HTTP routes and test files, over a bounded walk of its files.
//!
//! The walk takes at most `max_files` files of the commit, shallowest first and then by path
//! (so the top-level manifests and entry points are always in it), leaving out vendored files
//! and files whose extension says they are binary. Everything is read from git objects; every
//! array is sorted and nothing depends on the clock, the environment or the machine, so the
//! same (repository, commit, cap) gives the same value.
//!
//! Routes and entry-point frameworks are found by fixed textual patterns (listed in
//! [`ROUTE_PATTERNS`] and [`framework_of`]): what they report is what the text says, and a
//! route registered another way is not listed.

use crate::extract::Extractor;
use crate::files::{self, Language};
use crate::{Error, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

/// The walk's cap when the caller names none.
pub const DEFAULT_MAX_FILES: usize = 200;

/// The structure of one commit (its JSON field names are the reference-repositories contract's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoStructure {
    /// The root's directories, sorted.
    #[serde(rename = "topDirs")]
    pub top_dirs: Vec<String>,
    /// Walked files per language name (`airlock_policies::language_name`), files of no known
    /// language left out.
    pub languages: BTreeMap<String, u64>,
    /// Walked files the built-in policy classes as dependency manifests, sorted.
    pub manifests: Vec<String>,
    /// Walked files that start a program, sorted by path.
    #[serde(rename = "entryPoints")]
    pub entry_points: Vec<EntryPoint>,
    /// Every walked file with its language and role, sorted by path.
    pub files: Vec<FileEntry>,
    /// Walked source files (not tests) with their top-level definitions, sorted by path.
    pub modules: Vec<Module>,
    /// HTTP routes registered in walked source files, sorted by path, line and route.
    pub routes: Vec<Route>,
    /// Walked test files, sorted by path.
    pub tests: Vec<TestFile>,
}

/// A file that starts a program.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct EntryPoint {
    /// The file.
    pub path: String,
    /// The web or CLI framework its text names (`express`, `flask`, `axum`, ...), if any.
    pub framework: Option<String>,
}

/// What a walked file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A dependency manifest.
    Manifest,
    /// A test file (the policy's test rules).
    Test,
    /// A program's entry point.
    Entry,
    /// Documentation, examples or benchmarks.
    Docs,
    /// Source code.
    Source,
    /// Configuration or data (JSON, TOML, YAML, XML, INI).
    Config,
    /// Anything else.
    Other,
}

/// One walked file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// Path from the repository root.
    pub path: String,
    /// Its language name, `None` when unknown.
    pub language: Option<String>,
    /// What it is for.
    pub role: Role,
}

/// A source file and what it defines at its top level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Module {
    /// The file.
    pub path: String,
    /// Its language.
    pub language: String,
    /// Its top-level definitions, in line order.
    pub definitions: Vec<Definition>,
}

/// A top-level definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Definition {
    /// The name.
    pub name: String,
    /// `class`, `function`, `interface`, `type`, ... (the grammar's tag kind).
    pub kind: String,
    /// Its first line, 1-based.
    pub line: u32,
}

/// An HTTP route registration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Route {
    /// The file.
    pub path: String,
    /// 1-based line of the registration.
    pub line: u32,
    /// The HTTP method (`GET`, ...), `ANY` when the registration names none.
    pub method: String,
    /// The route as written (`/users/:id`).
    pub route: String,
    /// The framework whose pattern matched.
    pub framework: String,
}

/// A test file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestFile {
    /// The file.
    pub path: String,
    /// Its language name, `None` when unknown.
    pub language: Option<String>,
}

/// A structure and the paths its walk covered (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    /// The structure.
    pub structure: RepoStructure,
    /// Every walked path, sorted.
    pub inventory_paths: Vec<String>,
}

/// The structure of `commit` (40 hex) in the repository at `repo_path` (bare or not), over at
/// most `max_files` files.
pub fn repo_structure(repo_path: &Path, commit: &str, max_files: usize) -> Result<Walked> {
    let repo = git2::Repository::open(repo_path).map_err(|source| Error::OpenRepo {
        path: repo_path.to_path_buf(),
        source,
    })?;
    let oid = git2::Oid::from_str(commit).map_err(git_err("parsing a commit id"))?;
    let tree = repo
        .find_commit(oid)
        .and_then(|c| c.tree())
        .map_err(git_err("reading the commit's tree"))?;
    let mut top_dirs: Vec<String> = tree
        .iter()
        .filter(|e| e.kind() == Some(git2::ObjectType::Tree))
        .map(|e| String::from_utf8_lossy(e.name_bytes()).into_owned())
        .collect();
    top_dirs.sort();
    let mut blobs = Vec::new();
    crate::engine::walk_tree(&repo, &tree, "", true, &mut blobs)
        .map_err(git_err("listing the commit's files"))?;
    blobs.retain(|(path, _, _)| {
        !files::is_vendored_path(path) && !files::has_binary_extension(path)
    });
    blobs.sort_by(|a, b| depth(&a.0).cmp(&depth(&b.0)).then_with(|| a.0.cmp(&b.0)));
    blobs.truncate(max_files);
    blobs.sort_by(|a, b| a.0.cmp(&b.0));

    let mut extractor = Extractor::new()?;
    let mut s = RepoStructure {
        top_dirs,
        languages: BTreeMap::new(),
        manifests: Vec::new(),
        entry_points: Vec::new(),
        files: Vec::new(),
        modules: Vec::new(),
        routes: Vec::new(),
        tests: Vec::new(),
    };
    let mut inventory_paths = Vec::with_capacity(blobs.len());
    for (path, oid, _) in &blobs {
        inventory_paths.push(path.clone());
        let language = known_language(path);
        if let Some(name) = &language {
            *s.languages.entry(name.clone()).or_default() += 1;
        }
        let blob = repo
            .find_blob(*oid)
            .map_err(git_err("reading a file's blob"))?;
        let content = blob.content();
        let text = (content.len() <= files::MAX_FILE_BYTES && !files::looks_binary(content))
            .then(|| String::from_utf8_lossy(content));
        let is_test = files::is_test_path(path);
        let manifest = is_manifest(path);
        let entry = match (&text, is_test || manifest) {
            (Some(text), false) => entry_point(path, text),
            _ => None,
        };
        let role = if manifest {
            Role::Manifest
        } else if is_test {
            Role::Test
        } else if entry.is_some() {
            Role::Entry
        } else if files::is_docs_path(path) {
            Role::Docs
        } else if language.as_deref().is_some_and(is_config_language) {
            Role::Config
        } else if language.is_some() {
            Role::Source
        } else {
            Role::Other
        };
        if manifest {
            s.manifests.push(path.clone());
        }
        if is_test {
            s.tests.push(TestFile {
                path: path.clone(),
                language: language.clone(),
            });
        }
        if let Some(framework) = entry {
            s.entry_points.push(EntryPoint {
                path: path.clone(),
                framework,
            });
        }
        if let (Some(text), Role::Source | Role::Entry) = (&text, role) {
            s.routes.extend(routes(path, text));
            if let Some(lang) = Language::from_path(path)
                && content.len() <= files::MAX_PARSE_BYTES
            {
                let symbols = extractor.extract(lang, text)?;
                let mut definitions: Vec<Definition> = symbols
                    .defs
                    .into_iter()
                    .filter(|d| d.depth == 0)
                    .map(|d| Definition {
                        name: d.name,
                        kind: d.kind,
                        line: d.line,
                    })
                    .collect();
                definitions.sort_by(|a, b| (a.line, &a.name).cmp(&(b.line, &b.name)));
                s.modules.push(Module {
                    path: path.clone(),
                    language: lang.name().to_string(),
                    definitions,
                });
            }
        }
        s.files.push(FileEntry {
            path: path.clone(),
            language,
            role,
        });
    }
    // The walk is in path order already; routes need their own order.
    s.routes.sort();
    s.routes.dedup();
    Ok(Walked {
        structure: s,
        inventory_paths,
    })
}

fn git_err(action: &'static str) -> impl FnOnce(git2::Error) -> Error {
    move |source| Error::Git {
        action: action.to_string(),
        source,
    }
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

/// The language name of a path, `None` when the table does not know it.
fn known_language(path: &str) -> Option<String> {
    match airlock_policies::language_name(path) {
        "text" if !path.to_ascii_lowercase().ends_with(".txt") => None,
        name => Some(name.to_string()),
    }
}

fn is_config_language(name: &str) -> bool {
    matches!(name, "json" | "toml" | "yaml" | "xml" | "ini" | "text")
}

/// Whether the built-in policy classes `path` as a dependency manifest (the one table of them).
fn is_manifest(path: &str) -> bool {
    airlock_policies::Policy::builtin()
        .is_ok_and(|p| p.check_write(path).rule() == Some("dependency-manifest"))
}

fn file_stem(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.split_once('.').map_or(name, |(stem, _)| stem)
}

/// Whether a file starts a program, and the framework its text names: `Some(framework)` for an
/// entry point, `None` otherwise.
fn entry_point(path: &str, text: &str) -> Option<Option<String>> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let is_entry = match airlock_policies::language_of(path)? {
        airlock_policies::Language::Rust => {
            (name == "main.rs" || path.contains("src/bin/")) && text.contains("fn main(")
        }
        airlock_policies::Language::Python => {
            matches!(name, "__main__.py" | "manage.py" | "wsgi.py" | "asgi.py")
                || text.contains("if __name__ == \"__main__\"")
                || text.contains("if __name__ == '__main__'")
                || text.contains("= Flask(")
                || text.contains("= FastAPI(")
        }
        airlock_policies::Language::Javascript | airlock_policies::Language::Typescript => {
            matches!(file_stem(path), "server" | "index" | "main" | "app" | "cli")
                && depth(path) <= 1
                || text.contains(".listen(")
        }
        airlock_policies::Language::Go => {
            text.contains("package main") && text.contains("func main(")
        }
        airlock_policies::Language::Java | airlock_policies::Language::Kotlin => {
            text.contains("static void main(") || text.contains("fun main(")
        }
    };
    is_entry.then(|| framework_of(text).map(str::to_string))
}

/// The framework a file's text names, by fixed markers (the first that matches).
pub fn framework_of(text: &str) -> Option<&'static str> {
    const MARKERS: &[(&str, &str)] = &[
        ("require('express')", "express"),
        ("require(\"express\")", "express"),
        ("from 'express'", "express"),
        ("from \"express\"", "express"),
        ("fastify", "fastify"),
        ("from 'koa'", "koa"),
        ("require('koa')", "koa"),
        ("@nestjs/", "nestjs"),
        ("from flask", "flask"),
        ("import flask", "flask"),
        ("from fastapi", "fastapi"),
        ("django", "django"),
        ("use axum", "axum"),
        ("axum::", "axum"),
        ("actix_web", "actix-web"),
        ("rocket::", "rocket"),
        ("use warp", "warp"),
        ("github.com/gin-gonic/gin", "gin"),
        ("github.com/labstack/echo", "echo"),
        ("net/http", "net/http"),
        ("@SpringBootApplication", "spring"),
        ("org.springframework", "spring"),
        ("use clap", "clap"),
        ("import click", "click"),
        ("argparse", "argparse"),
    ];
    MARKERS
        .iter()
        .find(|(marker, _)| text.contains(marker))
        .map(|(_, framework)| *framework)
}

/// The route patterns: (framework, regex with the `method` and `route` groups; a pattern
/// without a `method` group registers every method).
pub const ROUTE_PATTERNS: &[(&str, &str)] = &[
    // Express, Koa routers, Fastify: app.get('/x', ...), router.post("/x", ...)
    (
        "express",
        r#"\b(?:app|router|server|api|routes|fastify)\.(?P<method>get|post|put|delete|patch|all|head|options)\(\s*['"`](?P<route>/[^'"`]*)['"`]"#,
    ),
    // Flask / FastAPI decorators: @app.route("/x"), @router.get("/x")
    ("flask", r#"^\s*@\w+\.route\(\s*['"](?P<route>[^'"]*)['"]"#),
    (
        "fastapi",
        r#"^\s*@\w+\.(?P<method>get|post|put|delete|patch|head|options)\(\s*['"](?P<route>[^'"]*)['"]"#,
    ),
    // Django: path("x/", view)
    (
        "django",
        r#"^\s*(?:re_)?path\(\s*r?['"](?P<route>[^'"]*)['"]"#,
    ),
    // axum: .route("/x", get(handler))
    (
        "axum",
        r#"\.route\(\s*"(?P<route>[^"]*)"\s*,\s*(?:axum::routing::)?(?P<method>get|post|put|delete|patch|any)\("#,
    ),
    // actix-web / Rocket attributes: #[get("/x")]
    (
        "actix-web",
        r#"^\s*#\[(?P<method>get|post|put|delete|patch)\(\s*"(?P<route>[^"]*)""#,
    ),
    // Go net/http and gin/echo: HandleFunc("/x", ...), r.GET("/x", ...)
    ("net/http", r#"\bHandle(?:Func)?\(\s*"(?P<route>/[^"]*)""#),
    (
        "gin",
        r#"\.(?P<method>GET|POST|PUT|DELETE|PATCH)\(\s*"(?P<route>/[^"]*)""#,
    ),
    // Spring: @GetMapping("/x"), @RequestMapping(value = "/x")
    (
        "spring",
        r#"@(?P<method>Get|Post|Put|Delete|Patch|Request)Mapping\(\s*(?:value\s*=\s*|path\s*=\s*)?"(?P<route>[^"]*)""#,
    ),
];

fn route_regexes() -> &'static [(&'static str, regex::Regex)] {
    static COMPILED: OnceLock<Vec<(&'static str, regex::Regex)>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        ROUTE_PATTERNS
            .iter()
            .filter_map(|(framework, pattern)| {
                regex::Regex::new(pattern).ok().map(|re| (*framework, re))
            })
            .collect()
    })
}

/// The routes registered in one file's text.
fn routes(path: &str, text: &str) -> Vec<Route> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for (framework, re) in route_regexes() {
            for caps in re.captures_iter(line) {
                let Some(route) = caps.name("route") else {
                    continue;
                };
                let method = caps.name("method").map_or("ANY".to_string(), |m| {
                    match m.as_str().to_ascii_uppercase().as_str() {
                        "REQUEST" | "ALL" => "ANY".to_string(),
                        other => other.to_string(),
                    }
                });
                found.push(Route {
                    path: path.to_string(),
                    line: u32::try_from(index + 1).unwrap_or(u32::MAX),
                    method,
                    route: route.as_str().to_string(),
                    framework: (*framework).to_string(),
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_pattern_compiles_and_finds_its_example() {
        assert_eq!(route_regexes().len(), ROUTE_PATTERNS.len());
        let cases = [
            (
                "app.get('/users/:id', show)",
                "express",
                "GET",
                "/users/:id",
            ),
            ("@app.route(\"/login\")", "flask", "ANY", "/login"),
            ("@router.post(\"/items\")", "fastapi", "POST", "/items"),
            (
                "    path(\"admin/\", admin.site.urls),",
                "django",
                "ANY",
                "admin/",
            ),
            (
                "    .route(\"/health\", get(health))",
                "axum",
                "GET",
                "/health",
            ),
            ("#[post(\"/echo\")]", "actix-web", "POST", "/echo"),
            (
                "http.HandleFunc(\"/ping\", ping)",
                "net/http",
                "ANY",
                "/ping",
            ),
            ("r.GET(\"/v1/x\", h)", "gin", "GET", "/v1/x"),
            ("@GetMapping(\"/orders\")", "spring", "GET", "/orders"),
        ];
        for (line, framework, method, route) in cases {
            let found = routes("f", line);
            assert!(
                found
                    .iter()
                    .any(|r| r.framework == framework && r.method == method && r.route == route),
                "{line}: {found:?}"
            );
        }
        assert!(routes("f", "let x = map.get(key);").is_empty());
    }

    #[test]
    fn entry_points_need_both_the_place_and_the_text() {
        assert_eq!(
            entry_point("src/main.rs", "use axum::Router;\nfn main() {}"),
            Some(Some("axum".into()))
        );
        assert_eq!(entry_point("src/lib.rs", "fn main() {}"), None);
        assert_eq!(
            entry_point("cmd/tool/main.go", "package main\nfunc main() {}"),
            Some(None)
        );
        assert_eq!(entry_point("pkg/util.go", "package util"), None);
        assert_eq!(
            entry_point("src/server.ts", "import express from 'express';"),
            Some(Some("express".into()))
        );
    }
}
