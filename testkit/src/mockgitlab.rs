//! A GitLab REST v4 stand-in on 127.0.0.1, under `/api/v4` like an instance: `POST
//! /projects/:id/merge_requests` records the merge request and answers 201 with GitLab's shape
//! (`iid`, `web_url`, `draft` set when the title starts with `Draft:`, `work_in_progress`,
//! `state`, `source_branch`, `target_branch`); `GET /projects/:id/merge_requests?source_branch=B`
//! lists the recorded ones of that branch. `PUT /projects/:id/issues/:iid` (`add_labels`,
//! `remove_labels`) is recorded and answered 200 with the issue's labels as changed so far;
//! [`MockGitLab::label_changes`] lists them. `POST /projects/:id/issues/:iid/notes` is answered
//! 201 with the note and listed by [`MockGitLab::posted_notes`], as is a merge request's
//! (`.../merge_requests/:iid/notes`). Any other `GET` is answered
//! from fixed routes set with [`MockGitLab::route`] (an issue, a list page with its
//! `X-Next-Page`), 404 with GitLab's `{"message": "404 Not found"}` otherwise;
//! [`MockGitLab::only_projects`] makes every other project 404;
//! [`MockGitLab::route_text`] answers with plain text (a job's log). With
//! [`MockGitLab::require_token`] set, a request whose `PRIVATE-TOKEN` is not that token is
//! answered 401 `{"message": "401 Unauthorized"}`. Every request is recorded. `:id` is kept
//! as sent (a number or a path with `%2F`); merge requests are numbered per project from 1.

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::http::{read_request, status_line};

pub use crate::http::SeenRequest;

/// A fixed answer: status, JSON body, and the `X-Next-Page` header (empty on a list's last
/// page, absent on a single object).
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    body: String,
    next_page: Option<String>,
}

#[derive(Default)]
struct State {
    seen: Vec<SeenRequest>,
    routes: BTreeMap<String, Answer>,
    token: Option<String>,
    /// When set, the only projects that exist (`:id` as sent); any other is 404.
    projects: Option<Vec<String>>,
    /// Labels per (project, iid), as changed by `PUT`s.
    labels: BTreeMap<(String, u64), Vec<String>>,
}

/// The running stand-in. Merge request `n` of project `P` has `web_url`
/// `https://gitlab.example/P/-/merge_requests/n` (P decoded).
pub struct MockGitLab {
    /// `http://127.0.0.1:PORT/api/v4`: the `api_url` of the instance.
    pub api_url: String,
    state: Arc<Mutex<State>>,
}

impl MockGitLab {
    /// Start the stand-in on an ephemeral loopback port.
    pub fn start() -> MockGitLab {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let api_url = format!("http://{}/api/v4", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        MockGitLab { api_url, state }
    }

    /// From now on, answer 401 to any request whose `PRIVATE-TOKEN` header is not `token`.
    pub fn require_token(&self, token: &str) {
        self.state.lock().unwrap().token = Some(token.to_owned());
    }

    /// From now on, only these projects exist (`:id` as sent: `42` or `group%2Fname`); a
    /// request about any other is answered 404 `{"message": "404 Project Not Found"}`.
    pub fn only_projects(&self, ids: &[&str]) {
        self.state.lock().unwrap().projects = Some(ids.iter().map(|s| (*s).to_owned()).collect());
    }

    /// Answer `GET target` (below `/api/v4`, query included) with `status` and `body`.
    pub fn route(&self, target: &str, status: u16, body: Value) {
        self.insert(target, status, body, None);
    }

    /// Answer `GET target` with `text` as it is (a job's log: `.../jobs/:id/trace`).
    pub fn route_text(&self, target: &str, status: u16, text: &str) {
        self.state.lock().unwrap().routes.insert(
            format!("/api/v4{target}"),
            Answer {
                status,
                body: text.to_owned(),
                next_page: None,
            },
        );
    }

    /// Answer `GET target` with one page of a list and `X-Next-Page: next` (`None`: this is
    /// the last page, the header is sent empty as GitLab does).
    pub fn route_page(&self, target: &str, items: Value, next: Option<u32>) {
        let next = Some(next.map(|n| n.to_string()).unwrap_or_default());
        self.insert(target, 200, items, next);
    }

    fn insert(&self, target: &str, status: u16, body: Value, next_page: Option<String>) {
        self.state.lock().unwrap().routes.insert(
            format!("/api/v4{target}"),
            Answer {
                status,
                body: body.to_string(),
                next_page,
            },
        );
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.state.lock().unwrap().seen.clone()
    }

    /// The notes posted on issues (`POST .../issues/:iid/notes`), as (path, body text).
    pub fn posted_notes(&self) -> Vec<(String, String)> {
        self.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/notes"))
            .map(|r| {
                let body: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
                (
                    r.path.clone(),
                    body["body"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// The label changes on issues so far, in order: (iid, `add_labels` or `remove_labels`,
    /// the labels as sent).
    pub fn label_changes(&self) -> Vec<(u64, String, String)> {
        self.requests()
            .iter()
            .filter(|r| r.method == "PUT")
            .filter_map(|r| {
                let iid = issue_iid(&r.path)?;
                let body: Value = serde_json::from_str(&r.body).ok()?;
                let (key, labels) = body
                    .as_object()?
                    .iter()
                    .find(|(k, _)| *k == "add_labels" || *k == "remove_labels")?;
                Some((iid, key.clone(), labels.as_str()?.to_owned()))
            })
            .collect()
    }

    /// The bodies of the merge requests created (`POST .../merge_requests`), parsed.
    pub fn created_merge_requests(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| is_mr_post(r))
            .map(|r| serde_json::from_str(&r.body).unwrap_or(Value::Null))
            .collect()
    }
}

fn is_mr_post(r: &SeenRequest) -> bool {
    r.method == "POST"
        && r.path
            .split('?')
            .next()
            .unwrap_or("")
            .ends_with("/merge_requests")
}

/// `/api/v4/projects/:id/...` → `:id` as sent.
fn project_of(path: &str) -> String {
    path.strip_prefix("/api/v4/projects/")
        .and_then(|rest| rest.split(['/', '?']).next())
        .unwrap_or("")
        .to_owned()
}

/// `/api/v4/projects/:id/issues/:iid` (no further segment) → `:iid`.
fn issue_iid(path: &str) -> Option<u64> {
    let (_, rest) = path.split_once("/issues/")?;
    rest.split('?').next()?.parse().ok()
}

fn query_param(path: &str, name: &str) -> Option<String> {
    let query = path.split_once('?')?.1;
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| v.replace("%2F", "/").replace("%3A", ":"))
    })
}

fn merge_request(project: &str, n: usize, post: &SeenRequest) -> Value {
    let body: Value = serde_json::from_str(&post.body).unwrap_or(Value::Null);
    let title = body["title"].as_str().unwrap_or("");
    let draft = title.starts_with("Draft:") || title.starts_with("[Draft]");
    let web_project = project.replace("%2F", "/");
    json!({
        "id": 1000 + n,
        "iid": n,
        "web_url": format!("https://gitlab.example/{web_project}/-/merge_requests/{n}"),
        "state": "opened",
        "draft": draft,
        "work_in_progress": draft,
        "title": title,
        "description": body["description"],
        "source_branch": body["source_branch"],
        "target_branch": body["target_branch"],
    })
}

fn answer(state: &Mutex<State>, req: &SeenRequest) -> Answer {
    let json_answer = |status: u16, body: Value| Answer {
        status,
        body: body.to_string(),
        next_page: None,
    };
    let mut state = state.lock().unwrap();
    if let Some(token) = &state.token
        && req.header("PRIVATE-TOKEN") != Some(token.as_str())
    {
        return json_answer(401, json!({"message": "401 Unauthorized"}));
    }
    let project = project_of(&req.path);
    if state
        .projects
        .as_ref()
        .is_some_and(|known| !known.contains(&project))
    {
        return json_answer(404, json!({"message": "404 Project Not Found"}));
    }
    let prior: Vec<SeenRequest> = state
        .seen
        .iter()
        .filter(|r| is_mr_post(r) && project_of(&r.path) == project)
        .cloned()
        .collect();
    let route = req.path.split('?').next().unwrap_or("");
    match req.method.as_str() {
        // A list set with `route_page` is answered as set; any other, from what was created.
        "GET" if route.ends_with("/merge_requests") && !state.routes.contains_key(&req.path) => {
            let branch = query_param(&req.path, "source_branch");
            let list: Vec<Value> = prior
                .iter()
                .enumerate()
                .map(|(i, p)| merge_request(&project, i + 1, p))
                .filter(|mr| branch.as_deref().is_none_or(|b| mr["source_branch"] == b))
                .collect();
            Answer {
                status: 200,
                body: Value::Array(list).to_string(),
                next_page: Some(String::new()),
            }
        }
        "GET" => state
            .routes
            .get(&req.path)
            .cloned()
            .unwrap_or_else(|| json_answer(404, json!({"message": "404 Not found"}))),
        "POST" if is_mr_post(req) => {
            json_answer(201, merge_request(&project, prior.len() + 1, req))
        }
        "POST" if route.ends_with("/notes") => {
            let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
            let n = state.seen.iter().filter(|r| r.method == "POST").count();
            json_answer(
                201,
                json!({
                    "id": 5000 + n,
                    "body": body["body"],
                    "author": {"id": 1, "username": "airlock-bot"},
                    "system": false,
                    "created_at": "2026-01-01T00:00:00Z",
                }),
            )
        }
        "PUT" => {
            let Some(iid) = issue_iid(&req.path) else {
                return json_answer(404, json!({"message": "404 Not found"}));
            };
            let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
            let labels = state.labels.entry((project.clone(), iid)).or_default();
            let split = |v: &Value| -> Vec<String> {
                v.as_str()
                    .unwrap_or("")
                    .split(',')
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            for add in split(&body["add_labels"]) {
                if !labels.contains(&add) {
                    labels.push(add);
                }
            }
            let removed = split(&body["remove_labels"]);
            labels.retain(|l| !removed.contains(l));
            json_answer(
                200,
                json!({
                    "iid": iid,
                    "title": "",
                    "description": null,
                    "state": "opened",
                    "author": {"id": 1, "username": "someone"},
                    "labels": labels.clone(),
                    "web_url": format!("https://gitlab.example/{}/-/issues/{iid}",
                        project.replace("%2F", "/")),
                }),
            )
        }
        _ => json_answer(404, json!({"message": "404 Not found"})),
    }
}

fn serve(stream: std::net::TcpStream, state: &Mutex<State>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader) {
        let reply = answer(state, &req);
        state.lock().unwrap().seen.push(req);
        let next = reply
            .next_page
            .map(|n| format!("X-Next-Page: {n}\r\n"))
            .unwrap_or_default();
        let resp = format!(
            "HTTP/1.1 {}\r\nContent-Type: application/json\r\n{next}Content-Length: {}\r\n\r\n{}",
            status_line(reply.status),
            reply.body.len(),
            reply.body
        );
        if writer.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}
