//! A GitHub REST stand-in on 127.0.0.1 for draft pull requests: `POST /repos/O/R/pulls` records
//! the pull request and answers 201 with GitHub's shape (`number`, `html_url`, `draft`, `state`,
//! `head.ref`); `GET /repos/O/R/pulls?head=O:BRANCH&state=...` lists the recorded ones of that
//! branch. `POST /repos/O/R/issues/N/labels` and `DELETE /repos/O/R/issues/N/labels/NAME` (the
//! broker's claim label) are recorded and answered 200. `POST /repos/O/R/pulls/N/reviews` (a
//! review the broker posts) is recorded and answered 200 with GitHub's shape (`id`,
//! `html_url`, `state`, `commit_id`); [`MockForge::posted_reviews`] returns what was posted. Any other `GET` is answered from fixed routes set with [`MockForge::route`] (an
//! issue, a repository) or [`MockForge::route_text`] (plain text: a job's log), 404 with
//! GitHub's `{"message": "Not Found"}` otherwise; a comment posted on an issue or pull request
//! is answered 201 with GitHub's shape (`id`, `body`, `user`, `html_url`) and listed by
//! [`MockForge::posted_comments`]. Every request
//! is recorded; `stall_posts` makes it record a POST and never answer. Merged pull requests set
//! with [`MockForge::merged_pull`] are listed by `GET /repos/O/R/pulls?state=closed&...`
//! (newest first, `per_page` and `page` honoured, GitHub's `merged_at` and `merge_commit_sha`)
//! and their files by `GET /repos/O/R/pulls/N/files`.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{read_request, write_json};

pub use crate::http::SeenRequest;

/// The running mock. Pull request `n` of `O/R` has `html_url`
/// `https://forge.example/O/R/pull/n`, numbered from 1 in the order of the POSTs.
pub struct MockForge {
    /// `http://127.0.0.1:PORT`: `github_api` for the broker.
    pub base: String,
    /// Every request so far.
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
    /// While set, a POST is recorded and never answered (the client is killed while waiting).
    pub stall_posts: Arc<AtomicBool>,
    /// Fixed answers to `GET`s by request target (query included): status and JSON body.
    routes: Arc<Mutex<Routes>>,
    /// Merged pull requests per `O/R`, in the order set: (the pull request, its files).
    merged: Arc<Mutex<Merged>>,
}

type Merged = BTreeMap<String, Vec<(Value, Value)>>;

/// Fixed answers by request target: status and body (JSON, or text set with
/// [`MockForge::route_text`]).
type Routes = BTreeMap<String, (u16, String)>;

impl MockForge {
    /// Start the mock on an ephemeral loopback port.
    pub fn start() -> MockForge {
        MockForge::start_on("127.0.0.1:0")
    }

    /// Start the mock listening on `addr` (an address of a network namespace the test made,
    /// or loopback); `base` names that address.
    pub fn start_on(addr: &str) -> MockForge {
        let listener = std::net::TcpListener::bind(addr).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::<SeenRequest>::new()));
        let stall = Arc::new(AtomicBool::new(false));
        let routes = Arc::new(Mutex::new(Routes::new()));
        let merged = Arc::new(Mutex::new(Merged::new()));
        let (seen2, stall2, routes2, merged2) =
            (seen.clone(), stall.clone(), routes.clone(), merged.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (seen, stall, routes, merged) = (
                    seen2.clone(),
                    stall2.clone(),
                    routes2.clone(),
                    merged2.clone(),
                );
                std::thread::spawn(move || serve(stream, &seen, &stall, &routes, &merged));
            }
        });
        MockForge {
            base,
            seen,
            stall_posts: stall,
            routes,
            merged,
        }
    }

    /// Add a merged pull request of `slug` (`O/R`): `pull` is GitHub's pull object (at least
    /// `number`, `title`, `body`, `merged_at`, `merge_commit_sha`), `files` the list
    /// `/pulls/N/files` answers (`filename`, `additions`, `deletions`). Set them oldest first.
    pub fn merged_pull(&self, slug: &str, pull: Value, files: Value) {
        self.merged
            .lock()
            .unwrap()
            .entry(slug.to_owned())
            .or_default()
            .push((pull, files));
    }

    /// Answer `GET target` (query included) with `status` and `body` from now on.
    pub fn route(&self, target: &str, status: u16, body: Value) {
        self.routes
            .lock()
            .unwrap()
            .insert(target.to_owned(), (status, body.to_string()));
    }

    /// Answer `GET target` with `status` and `text` as it is (a job's log) from now on.
    pub fn route_text(&self, target: &str, status: u16, text: &str) {
        self.routes
            .lock()
            .unwrap()
            .insert(target.to_owned(), (status, text.to_owned()));
    }

    /// The comments posted on issues and pull requests (`POST /repos/O/R/issues/N/comments`),
    /// as (path, body text).
    pub fn posted_comments(&self) -> Vec<(String, String)> {
        self.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/comments"))
            .filter(|r| r.path.contains("/issues/"))
            .map(|r| {
                let body: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
                (
                    r.path.clone(),
                    body["body"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// The label changes on issues so far, in order: (method, issue number, label) with
    /// method `POST` (added) or `DELETE` (removed).
    pub fn label_changes(&self) -> Vec<(String, u64, String)> {
        self.requests()
            .iter()
            .filter_map(|r| {
                let (_, rest) = r.path.split_once("/issues/")?;
                let (number, tail) = rest.split_once("/labels")?;
                let number: u64 = number.parse().ok()?;
                let label = match r.method.as_str() {
                    "POST" => {
                        let body: Value = serde_json::from_str(&r.body).ok()?;
                        body["labels"][0].as_str()?.to_owned()
                    }
                    _ => tail.trim_start_matches('/').to_owned(),
                };
                Some((r.method.clone(), number, label))
            })
            .collect()
    }

    /// The reviews posted (`POST /repos/O/R/pulls/N/reviews`), as (path, parsed body).
    pub fn posted_reviews(&self) -> Vec<(String, Value)> {
        self.requests()
            .iter()
            .filter(|r| is_review_post(r))
            .map(|r| {
                (
                    r.path.clone(),
                    serde_json::from_str(&r.body).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    /// The bodies of the pull requests created (`POST .../pulls`), parsed.
    pub fn created_pulls(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| is_pull_post(r))
            .map(|r| serde_json::from_str(&r.body).unwrap_or(Value::Null))
            .collect()
    }
}

fn is_pull_post(r: &SeenRequest) -> bool {
    r.method == "POST" && r.path.ends_with("/pulls")
}

fn is_comment_post(r: &SeenRequest) -> bool {
    r.method == "POST" && r.path.contains("/issues/") && r.path.ends_with("/comments")
}

/// GitHub's answer to a created issue comment: its id (numbered from 1 in the order of the
/// POSTs), the text, its author (the token's user, `airlock-bot`) and where it is shown.
fn comment(slug: &str, path: &str, n: usize, post: &SeenRequest) -> Value {
    let body: Value = serde_json::from_str(&post.body).unwrap_or(Value::Null);
    let number = path
        .split("/issues/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("0");
    json!({
        "id": n,
        "body": body["body"],
        "user": {"login": "airlock-bot", "id": 1},
        "author_association": "NONE",
        "created_at": "2026-01-01T00:00:00Z",
        "issue_url": format!("https://api.forge.example/repos/{slug}/issues/{number}"),
        "html_url": format!("https://forge.example/{slug}/issues/{number}#issuecomment-{n}"),
    })
}

fn is_review_post(r: &SeenRequest) -> bool {
    r.method == "POST" && r.path.contains("/pulls/") && r.path.ends_with("/reviews")
}

/// GitHub's answer to a created review: its id (numbered from 1 in the order of the POSTs),
/// the event as its state, the commit it is on, and where it is shown.
fn review(slug: &str, path: &str, n: usize, post: &SeenRequest) -> Value {
    let body: Value = serde_json::from_str(&post.body).unwrap_or(Value::Null);
    let number = path
        .split("/pulls/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("0");
    let state = match body["event"].as_str() {
        Some("APPROVE") => "APPROVED",
        Some("REQUEST_CHANGES") => "CHANGES_REQUESTED",
        Some("COMMENT") => "COMMENTED",
        _ => "PENDING",
    };
    json!({
        "id": n,
        "state": state,
        "commit_id": body["commit_id"],
        "body": body["body"],
        "html_url": format!("https://forge.example/{slug}/pull/{number}#pullrequestreview-{n}"),
    })
}

/// `/repos/O/R/pulls...` → `O/R`.
fn slug_of(path: &str) -> String {
    let rest = path.strip_prefix("/repos/").unwrap_or("");
    let mut parts = rest.split('/');
    format!(
        "{}/{}",
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("")
    )
}

fn query_param(path: &str, name: &str) -> Option<String> {
    let query = path.split_once('?')?.1;
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| v.replace("%3A", ":").replace("%2F", "/"))
    })
}

fn pull(slug: &str, n: usize, post: &SeenRequest) -> Value {
    let body: Value = serde_json::from_str(&post.body).unwrap_or(Value::Null);
    json!({
        "number": n,
        "html_url": format!("https://forge.example/{slug}/pull/{n}"),
        "url": format!("https://api.forge.example/repos/{slug}/pulls/{n}"),
        "state": "open",
        "draft": body["draft"].as_bool().unwrap_or(false),
        "title": body["title"],
        "head": {"ref": body["head"]},
        "base": {"ref": body["base"]},
    })
}

/// `GET .../pulls?state=closed...` (newest first, paged) and `GET .../pulls/N/files` for the
/// merged pull requests of `slug`, when there are any.
fn merged_route(path: &str, slug: &str, merged: &Merged) -> Option<Value> {
    let pulls = merged.get(slug)?;
    let (route, _) = path.split_once('?').unwrap_or((path, ""));
    if route.ends_with("/pulls") && query_param(path, "state").as_deref() == Some("closed") {
        let per_page: usize = query_param(path, "per_page")
            .and_then(|v| v.parse().ok())
            .unwrap_or(30);
        let page: usize = query_param(path, "page")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let list: Vec<Value> = pulls
            .iter()
            .rev()
            .skip(per_page * page.saturating_sub(1))
            .take(per_page)
            .map(|(p, _)| p.clone())
            .collect();
        return Some(Value::Array(list));
    }
    let number: u64 = route
        .strip_suffix("/files")?
        .rsplit_once("/pulls/")?
        .1
        .parse()
        .ok()?;
    pulls
        .iter()
        .find(|(p, _)| p["number"].as_u64() == Some(number))
        .map(|(_, files)| files.clone())
}

fn serve(
    stream: std::net::TcpStream,
    seen: &Mutex<Vec<SeenRequest>>,
    stall: &AtomicBool,
    routes: &Mutex<Routes>,
    merged: &Mutex<Merged>,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader) {
        let (method, path) = (req.method.clone(), req.path.clone());
        let slug = slug_of(&path);
        let prior_posts: Vec<SeenRequest> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| is_pull_post(r) && slug_of(&r.path) == slug)
            .cloned()
            .collect();
        seen.lock().unwrap().push(req.clone());
        let fixed = if method == "GET" {
            routes.lock().unwrap().get(&path).cloned()
        } else {
            None
        };
        let merged_answer = if method == "GET" {
            merged_route(&path, &slug, &merged.lock().unwrap())
        } else {
            None
        };
        let prior_reviews = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| is_review_post(r))
            .count();
        let (status, reply) = if let Some(answer) = merged_answer {
            (200, answer.to_string())
        } else if is_review_post(&req) {
            (200, review(&slug, &path, prior_reviews, &req).to_string())
        } else if path.contains("/issues/") && path.contains("/labels") {
            // The claim label: GitHub answers with the labels; the mock with the one
            // added (or none left after a removal).
            let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
            let added: Vec<Value> = body["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| json!({"name": l}))
                .collect();
            (200, Value::Array(added).to_string())
        } else if let Some((code, body)) = fixed {
            (code, body)
        } else if method == "GET" && !path.contains("/pulls") {
            (404, json!({"message": "Not Found"}).to_string())
        } else if method == "GET" {
            // Like GitHub, `head=owner:branch` lists only that branch's pull requests.
            let head = query_param(&path, "head")
                .map(|h| h.split_once(':').map_or(h.clone(), |(_, b)| b.to_owned()));
            let list: Vec<Value> = prior_posts
                .iter()
                .enumerate()
                .filter(|(_, p)| {
                    head.as_deref().is_none_or(|h| {
                        serde_json::from_str::<Value>(&p.body).is_ok_and(|b| b["head"] == h)
                    })
                })
                .map(|(i, p)| pull(&slug, i + 1, p))
                .collect();
            (200, serde_json::to_string(&list).unwrap())
        } else {
            if stall.load(Ordering::SeqCst) {
                // Never answer: the client is killed while waiting.
                std::thread::sleep(Duration::from_secs(600));
                return;
            }
            if is_comment_post(&req) {
                let n = seen
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|r| is_comment_post(r))
                    .count();
                (201, comment(&slug, &path, n, &req).to_string())
            } else {
                let n = prior_posts.len() + 1;
                (201, pull(&slug, n, &req).to_string())
            }
        };
        if !write_json(&mut writer, status, &reply) {
            return;
        }
    }
}
