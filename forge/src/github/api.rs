//! The REST API's request core: one [`GitHubApi`] per API base and token source, sending
//! GitHub's headers, reading pages, and turning an error status into what a person does next.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{GitHub, MAX_PAGES, PER_PAGE};
use crate::error::{Error, Result};
use crate::token::TokenSource;

/// The largest answer body read, in bytes.
const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// The API version every request names.
const API_VERSION: &str = "2022-11-28";

/// GitHub's REST API at one base URL, with one token source: what every request shares.
#[derive(Clone)]
pub struct GitHubApi {
    api: String,
    token: Arc<dyn TokenSource>,
    agent: ureq::Agent,
    user_agent: &'static str,
    token_hint: String,
}

impl std::fmt::Debug for GitHubApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubApi")
            .field("api", &self.api)
            .field("token", &self.token.describe())
            .finish()
    }
}

#[derive(Clone, Copy)]
enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

impl GitHubApi {
    /// The API at `api_url` (`https://api.github.com`, or a GitHub Enterprise
    /// `https://HOST/api/v3`), taking its token from `token` at each request.
    pub fn new(api_url: &str, token: Box<dyn TokenSource>) -> Result<GitHubApi> {
        let api = api_url.trim().trim_end_matches('/');
        let Some((scheme, rest)) = api.split_once("://") else {
            return Err(Error::Config {
                problem: format!("api_url {api:?} is not a URL; give https://api.github.com"),
            });
        };
        if !matches!(scheme, "https" | "http") || rest.is_empty() || rest.contains('@') {
            return Err(Error::Config {
                problem: format!("api_url {api:?} must be https://HOST[/api/v3] (no credentials)"),
            });
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build();
        Ok(GitHubApi {
            api: api.to_owned(),
            token: Arc::from(token),
            agent: ureq::Agent::new_with_config(config),
            user_agent: "airlock",
            token_hint: "configure a token".to_owned(),
        })
    }

    /// Repository `owner/repo` through this API.
    pub fn repository(&self, owner: &str, repo: &str) -> Result<GitHub> {
        let segment_ok = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        if !segment_ok(owner) || !segment_ok(repo) {
            return Err(Error::Config {
                problem: format!("{owner}/{repo} is not a GitHub repository OWNER/REPO"),
            });
        }
        Ok(GitHub {
            api: self.clone(),
            owner: owner.to_owned(),
            repo: repo.to_owned(),
        })
    }

    /// The same API sending `user_agent` (each airlock binary names itself).
    #[must_use]
    pub fn with_user_agent(mut self, user_agent: &'static str) -> GitHubApi {
        self.user_agent = user_agent;
        self
    }

    /// The same API, saying `hint` (what the operator writes to give a token, such as
    /// "set [github] token_env") where an answer asks for a token it did not send.
    #[must_use]
    pub fn with_token_hint(mut self, hint: &str) -> GitHubApi {
        hint.clone_into(&mut self.token_hint);
        self
    }

    /// `{api}{path}`: where a request for `path` goes.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api)
    }

    /// `GET {api}{path}` (`path` from the API's root, query included), read into `T`.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let text = self.send(Method::Get, path, None)?;
        self.parse(Method::Get, path, &text)
    }

    /// `POST {api}{path}` with `body` as JSON; the answer read into `T`.
    pub fn post_json<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        let text = self.send(Method::Post, path, Some(body))?;
        self.parse(Method::Post, path, &text)
    }

    /// `DELETE {api}{path}`; the answer's body is not read into anything.
    pub fn delete(&self, path: &str) -> Result<()> {
        self.send(Method::Delete, path, None).map(drop)
    }

    fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<String> {
        let url = self.url(path);
        let token = self.token.token()?;
        let result = self.send_with(method, &url, (body, token.as_deref()), read_text);
        // The token lives only for this request; whatever the client said, it is not in it.
        result.map_err(|e| e.redacted(token.as_deref()))
    }

    /// `GET {api}{path}` whose answer `read` reads as it streams (a job's log, larger than
    /// any JSON answer is let be): what `read` made of it. A 404 is an [`Error::Status`] as
    /// for every request.
    pub fn get_streamed<R>(
        &self,
        path: &str,
        read: impl FnOnce(&mut dyn std::io::Read) -> std::io::Result<R>,
    ) -> Result<R> {
        let url = self.url(path);
        let token = self.token.token()?;
        let result = self.send_with(Method::Get, &url, (None, token.as_deref()), |body| {
            read(&mut body.with_config().limit(u64::MAX).reader()).map_err(ureq::Error::Io)
        });
        result.map_err(|e| e.redacted(token.as_deref()))
    }

    fn send_with<R>(
        &self,
        method: Method,
        url: &str,
        (body, token): (Option<&Value>, Option<&str>),
        read: impl FnOnce(&mut ureq::Body) -> std::result::Result<R, ureq::Error>,
    ) -> Result<R> {
        let transport = |e: ureq::Error| Error::Transport {
            method: method.name(),
            url: url.to_owned(),
            message: e.to_string(),
        };
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut resp = match method {
            Method::Get | Method::Delete => {
                let mut r = match method {
                    Method::Get => self.agent.get(url),
                    _ => self.agent.delete(url),
                }
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", API_VERSION)
                .header("User-Agent", self.user_agent);
                if let Some(auth) = &auth {
                    r = r.header("Authorization", auth);
                }
                r.call().map_err(transport)?
            }
            Method::Post => {
                let mut r = self
                    .agent
                    .post(url)
                    .header("Accept", "application/vnd.github+json")
                    .header("X-GitHub-Api-Version", API_VERSION)
                    .header("User-Agent", self.user_agent)
                    .header("Content-Type", "application/json");
                if let Some(auth) = &auth {
                    r = r.header("Authorization", auth);
                }
                r.send(body.map(Value::to_string).unwrap_or_default())
                    .map_err(transport)?
            }
        };
        let status = resp.status().as_u16();
        let rate_limited = resp
            .headers()
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == "0");
        if !(200..300).contains(&status) {
            let text = read_text(resp.body_mut()).map_err(transport)?;
            return Err(Error::Status {
                method: method.name(),
                url: url.to_owned(),
                status,
                problem: self.status_problem(status, rate_limited, token.is_some(), &text),
            });
        }
        read(resp.body_mut()).map_err(transport)
    }

    /// What an error status means here, and what to do about it.
    fn status_problem(
        &self,
        status: u16,
        rate_limited: bool,
        sent_token: bool,
        text: &str,
    ) -> String {
        let source = self.token.describe();
        let hint = &self.token_hint;
        match status {
            401 if sent_token => {
                format!("GitHub rejected the token in {source} (expired, revoked or mistyped)")
            }
            401 => format!("GitHub asks for credentials: {hint}"),
            403 | 429 if rate_limited => {
                if sent_token {
                    "the API rate limit is used up; wait for it to reset".to_owned()
                } else {
                    format!(
                        "the API rate limit is used up; {hint} (authenticated requests get a \
                         higher limit)"
                    )
                }
            }
            404 if sent_token => {
                format!("not found, or the token in {source} cannot read this repository")
            }
            404 => format!("not found; a private repository needs a token: {hint}"),
            _ => serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| text.chars().take(200).collect())
                .escape_debug()
                .to_string(),
        }
    }

    fn parse<T: DeserializeOwned>(&self, method: Method, path: &str, text: &str) -> Result<T> {
        serde_json::from_str(text).map_err(|e| Error::Shape {
            method: method.name(),
            url: self.url(path),
            problem: format!("not the JSON expected: {e}"),
        })
    }

    /// Every page of the list at `path`, in GitHub's order.
    pub(super) fn get_all<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>> {
        let glue = if path.contains('?') { '&' } else { '?' };
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let paged = format!("{path}{glue}per_page={PER_PAGE}&page={page}");
            let items: Vec<T> = self.get_json(&paged)?;
            let full = items.len() >= PER_PAGE;
            all.extend(items);
            if !full {
                break;
            }
        }
        Ok(all)
    }
}

/// An answer's body as text, at most [`MAX_BODY_BYTES`].
fn read_text(body: &mut ureq::Body) -> std::result::Result<String, ureq::Error> {
    body.with_config().limit(MAX_BODY_BYTES).read_to_string()
}
