//! `airlock-broker ui`: the approver's and the security team's web page, served on a loopback
//! address by default. Server-rendered HTML (`page`), the diff highlighted by `syntect`
//! (`diff`), one small same-origin script that reloads the queue when it changes.
//!
//! It has no operation of its own: approving, denying and requesting changes call the same
//! [`Broker`] methods as `airlock-broker approve|deny`, the pages read through
//! [`crate::approver`] as `queue` and `show` do, and triage is `airlock_audit::triage`, the
//! operation of `airlock audit triage`.
//!
//! The page defends itself: a named approver's token (`airlock-broker approver add`, looked up
//! by its hash, compared in constant time) buys a session cookie (`HttpOnly`,
//! `SameSite=Strict`) that records the approver's name, and every decision made in it is that
//! approver's; a session ends as soon as its approver is removed (checked on every request).
//! While no approver is registered, the one operator token (printed at start or read from a
//! file the operator names) logs in instead, its sessions recording the name `ui` was started
//! with. Every state-changing request
//! carries the session's CSRF token and an `Origin` of this server (and `Sec-Fetch-Site:
//! same-origin` when the browser sends it); a `Host` other than the listening address is
//! refused (DNS rebinding); every response carries a strict Content-Security-Policy.

mod diff;
pub mod page;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::service::{Broker, unix_now};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "airlock_session";
/// How long a session lasts after login.
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The Content-Security-Policy of every response: nothing but this origin's stylesheet and
/// script files; no inline script or style, no frames, forms only to this origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const APP_CSS: &str = include_str!("assets/app.css");
const QUEUE_JS: &str = include_str!("assets/queue.js");

/// Whose session it is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    /// A named approver (`airlock-broker approver add`): valid while they are registered.
    Approver(String),
    /// The operator token's holder, under the name `ui` was started with: valid while no
    /// approver is registered.
    Operator(String),
}

impl Holder {
    fn name(&self) -> &str {
        match self {
            Holder::Approver(name) | Holder::Operator(name) => name,
        }
    }
}

struct Session {
    csrf: String,
    started: Instant,
    holder: Holder,
}

/// A live session as a handler sees it: its CSRF token and whose it is.
#[derive(Debug, Clone)]
struct Live {
    csrf: String,
    name: String,
}

/// The login for a broker with no named approver yet: the operator's token and the name its
/// sessions decide as (the one `ui` was started with, never looked up per request).
#[derive(Debug, Clone)]
pub struct OperatorLogin {
    /// The token (16 characters or more).
    pub token: String,
    /// The name decisions made in its sessions are recorded as.
    pub name: String,
}

/// The web page's state: the broker, the operator's login (if any), the sessions and the
/// addresses the page answers to.
pub struct Ui {
    broker: Arc<Broker>,
    operator: Option<OperatorLogin>,
    sessions: Mutex<HashMap<String, Session>>,
    hosts: Vec<String>,
}

impl Ui {
    /// The page for `broker`, logged into with a named approver's token (or, while none is
    /// registered, `operator`'s), answering to `listen`.
    pub fn new(broker: Arc<Broker>, operator: Option<OperatorLogin>, listen: SocketAddr) -> Self {
        let mut hosts = vec![listen.to_string()];
        if listen.ip().is_loopback() {
            hosts.push(format!("localhost:{}", listen.port()));
        }
        Ui {
            broker,
            operator,
            sessions: Mutex::new(HashMap::new()),
            hosts,
        }
    }

    /// The live session of the request: its CSRF token and holder's name.
    fn session(&self, headers: &HeaderMap) -> Option<Live> {
        let id = session_cookie(headers)?;
        let mut sessions = self.sessions();
        sessions.retain(|_, s| s.started.elapsed() < SESSION_LIFETIME);
        sessions.get(&id).map(|s| Live {
            csrf: s.csrf.clone(),
            name: s.holder.name().to_owned(),
        })
    }

    /// End the request's session unless its holder may still log in: an approver who is still
    /// registered, or the operator while no approver is. Run before every handler, so no page
    /// and no form serves a removed approver's cookie; a store that cannot say ends it too.
    async fn revalidate(&self, headers: &HeaderMap) {
        let Some(id) = session_cookie(headers) else {
            return;
        };
        let Some(holder) = self.sessions().get(&id).map(|s| s.holder.clone()) else {
            return;
        };
        let broker = self.broker.clone();
        let approvers = blocking(move || broker.approvers()).await;
        let valid = match (&holder, approvers) {
            (Holder::Approver(name), Ok(list)) => list.iter().any(|a| &a.name == name),
            (Holder::Operator(_), Ok(list)) => list.is_empty(),
            (_, Err(_)) => false,
        };
        if !valid {
            self.sessions().remove(&id);
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The CSRF token of the request's live session, if it has one.
    fn session_csrf(&self, headers: &HeaderMap) -> Option<String> {
        self.session(headers).map(|live| live.csrf)
    }
}

pub use crate::approver::random_token;

/// The login token in `path`: its first line, which must be at least 16 characters.
pub fn read_token_file(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(Error::io(format!(
        "reading the login token file {}",
        path.display()
    )))?;
    let token = text.lines().next().unwrap_or("").trim().to_owned();
    if token.chars().count() < 16 {
        return Err(Error::Ui(format!(
            "the login token in {} is shorter than 16 characters",
            path.display()
        )));
    }
    Ok(token)
}

use crate::approver::same_secret;

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.to_owned())
}

/// Every route, behind the guard (host check, origin check on POST, security headers).
pub fn router(ui: Arc<Ui>) -> Router {
    Router::new()
        .route("/", get(queue_page))
        .route("/queue.json", get(queue_json))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/items/{id}", get(item_page))
        .route("/items/{id}/approve", post(approve))
        .route("/items/{id}/deny", post(deny))
        .route("/items/{id}/request-changes", post(request_changes))
        .route("/security", get(security_page))
        .route("/security/{seq}/triage", post(triage))
        .route(
            "/static/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route(
            "/static/queue.js",
            get(|| async { asset("text/javascript; charset=utf-8", QUEUE_JS) }),
        )
        .layer(middleware::from_fn_with_state(ui.clone(), guard))
        .with_state(ui)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Refuse a request for another host name (DNS rebinding) and a POST from another origin;
/// put the security headers on every response.
async fn guard(State(ui): State<Arc<Ui>>, request: Request, next: Next) -> Response {
    ui.revalidate(request.headers()).await;
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let mut response = if !ui.hosts.iter().any(|h| h == host) {
        refused(
            StatusCode::MISDIRECTED_REQUEST,
            "this page answers only to its own address",
        )
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        let origin_ok = headers
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .is_some_and(|o| o == format!("http://{host}"));
        let site_ok = headers
            .get("sec-fetch-site")
            .and_then(|s| s.to_str().ok())
            .is_none_or(|s| s == "same-origin");
        if origin_ok && site_ok {
            next.run(request).await
        } else {
            refused(StatusCode::FORBIDDEN, "cross-origin request refused")
        }
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        // Not `no-referrer`: under it a browser sends `Origin: null` with its own forms.
        ("referrer-policy", "same-origin"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("cache-control", "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, Html(page::error(None, message))).into_response()
}

fn to_login() -> Response {
    Redirect::to("/login").into_response()
}

/// Run `f` on the blocking pool (the broker's store and git are synchronous).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Ui(format!("a request's task failed: {e}")))?
}

/// The page of a failed operation, with the status its error deserves.
fn error_response(csrf: Option<&str>, err: &Error) -> Response {
    let status = match err {
        Error::UnknownQueueItem(_) => StatusCode::NOT_FOUND,
        Error::WrongState { .. }
        | Error::MissingForgeToken { .. }
        | Error::FollowUpStale { .. }
        | Error::RiskNotConfirmed { .. }
        | Error::SeniorRouteWithoutApprovers { .. }
        | Error::AlreadyApproved { .. }
        | Error::AlreadyPublished { .. } => StatusCode::CONFLICT,
        Error::BadReason | Error::BadFeedback { .. } | Error::BadApprovalReason => {
            StatusCode::BAD_REQUEST
        }
        Error::UnknownApprover(_) | Error::NoDecider => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Html(page::error(csrf, &err.to_string()))).into_response()
}

async fn login_page() -> Response {
    Html(page::login(None)).into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

async fn login(State(ui): State<Arc<Ui>>, Form(form): Form<LoginForm>) -> Response {
    let broker = ui.broker.clone();
    let token = form.token.trim().to_owned();
    let found = blocking(move || {
        let approver = broker.approver_for_token(&token)?;
        let any = approver.is_some() || !broker.approvers()?.is_empty();
        Ok((approver, any, token))
    })
    .await;
    let holder = match found {
        Ok((Some(approver), _, _)) => Holder::Approver(approver.name),
        // The operator's token logs in only while no approver is registered.
        Ok((None, false, token)) => match &ui.operator {
            Some(op) if same_secret(&token, &op.token) => Holder::Operator(op.name.clone()),
            _ => {
                return (
                    StatusCode::FORBIDDEN,
                    Html(page::login(Some("wrong login token"))),
                )
                    .into_response();
            }
        },
        Ok((None, true, _)) => {
            return (
                StatusCode::FORBIDDEN,
                Html(page::login(Some(
                    "wrong login token: log in with your own approver token (`airlock-broker approver add NAME` printed it)",
                ))),
            )
                .into_response();
        }
        Err(e) => return error_response(None, &e),
    };
    let (Ok(id), Ok(csrf)) = (random_token(), random_token()) else {
        return refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no randomness for a session",
        );
    };
    ui.sessions().insert(
        id.clone(),
        Session {
            csrf,
            started: Instant::now(),
            holder,
        },
    );
    let cookie = format!("{SESSION_COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/");
    match HeaderValue::from_str(&cookie) {
        Ok(value) => ([(header::SET_COOKIE, value)], Redirect::to("/")).into_response(),
        Err(_) => refused(StatusCode::INTERNAL_SERVER_ERROR, "no session cookie"),
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The live session when the request carries one and its CSRF token; else why it is refused
/// (403).
fn checked(ui: &Ui, headers: &HeaderMap, csrf: &str) -> std::result::Result<Live, &'static str> {
    let Some(live) = ui.session(headers) else {
        return Err("not logged in");
    };
    if csrf.is_empty() || !same_secret(csrf, &live.csrf) {
        return Err("missing or wrong CSRF token");
    }
    Ok(live)
}

async fn logout(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(why) = checked(&ui, &headers, &form.csrf) {
        return refused(StatusCode::FORBIDDEN, why);
    }
    if let Some(id) = session_cookie(&headers) {
        ui.sessions().remove(&id);
    }
    let expired = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    match HeaderValue::from_str(&expired) {
        Ok(value) => ([(header::SET_COOKIE, value)], Redirect::to("/login")).into_response(),
        Err(_) => to_login(),
    }
}

async fn queue_page(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Query(filter): Query<page::QueueFilter>,
) -> Response {
    let Some(Live { csrf, name }) = ui.session(&headers) else {
        return to_login();
    };
    let broker = ui.broker.clone();
    match blocking(move || crate::approver::scored_queue_rows(&broker)).await {
        Ok(rows) => Html(page::queue(&rows, &filter, unix_now(), &csrf, &name)).into_response(),
        Err(e) => error_response(Some(&csrf), &e),
    }
}

/// What the queue page's script polls.
#[derive(Debug, Serialize)]
struct QueueStamp {
    stamp: String,
}

async fn queue_json(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    if ui.session(&headers).is_none() {
        return refused(StatusCode::FORBIDDEN, "not logged in");
    }
    let broker = ui.broker.clone();
    // The store only: the poll every few seconds must not rescan the audit log.
    match blocking(move || broker.queue()).await {
        Ok(items) => axum::Json(QueueStamp {
            stamp: page::queue_stamp(items.iter().map(|i| (i.id, i.status.as_str()))),
        })
        .into_response(),
        Err(e) => error_response(None, &e),
    }
}

#[derive(Deserialize)]
struct ItemQuery {
    #[serde(default)]
    diff: String,
    #[serde(default)]
    done: String,
}

async fn item_page(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(query): Query<ItemQuery>,
) -> Response {
    let Some(Live { csrf, name }) = ui.session(&headers) else {
        return to_login();
    };
    let broker = ui.broker.clone();
    let layout = if query.diff == "split" {
        page::DiffLayout::SideBySide
    } else {
        page::DiffLayout::Unified
    };
    // The notice is one of the page's own words, never text from the query.
    let notice = match query.done.as_str() {
        "approved" => Some("Approved: pushed and published."),
        "pushed" => Some("Approved: pushed; no pull request: no forge token configured."),
        "approval-recorded" => Some(
            "Approval recorded; the item stays queued: its senior route needs another approver, one of them senior.",
        ),
        "denied" => Some("Denied; the reason goes back to the run."),
        "changes-requested" => Some("Changes requested; the feedback goes back to the run."),
        _ => None,
    };
    match blocking(move || crate::approver::item_view(&broker, id)).await {
        Ok((view, score)) => Html(page::item(
            &view,
            score.as_ref(),
            layout,
            notice,
            &csrf,
            &name,
        ))
        .into_response(),
        Err(e) => error_response(Some(&csrf), &e),
    }
}

#[derive(Deserialize)]
struct ApproveForm {
    #[serde(default)]
    csrf: String,
    /// A risky item's typed confirmation: its id.
    #[serde(default)]
    confirm: String,
    /// One line saying why (required on a risky item).
    #[serde(default)]
    reason: String,
}

async fn approve(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Form(form): Form<ApproveForm>,
) -> Response {
    let live = match checked(&ui, &headers, &form.csrf) {
        Ok(live) => live,
        Err(why) => return refused(StatusCode::FORBIDDEN, why),
    };
    let broker = ui.broker.clone();
    // The broker decides whether the item needs these; the page only carries them.
    let request = crate::decisions::ApprovalRequest {
        by: live.name,
        reason: Some(form.reason).filter(|r| !r.trim().is_empty()),
        confirm_risk: form.confirm.trim() == id.to_string(),
    };
    match blocking(move || broker.approve(id, &request)).await {
        // A pull request's item published without one was pushed only (no forge token).
        Ok(crate::decisions::Approval::Published(item))
            if item.review.is_none() && item.pr_url.is_none() =>
        {
            Redirect::to(&format!("/items/{id}?done=pushed")).into_response()
        }
        Ok(crate::decisions::Approval::Published(_)) => {
            Redirect::to(&format!("/items/{id}?done=approved")).into_response()
        }
        Ok(crate::decisions::Approval::Pending { .. }) => {
            Redirect::to(&format!("/items/{id}?done=approval-recorded")).into_response()
        }
        Err(e) => error_response(Some(&live.csrf), &e),
    }
}

#[derive(Deserialize)]
struct DenyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

async fn deny(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Form(form): Form<DenyForm>,
) -> Response {
    let Live { csrf, name: by } = match checked(&ui, &headers, &form.csrf) {
        Ok(live) => live,
        Err(why) => return refused(StatusCode::FORBIDDEN, why),
    };
    let broker = ui.broker.clone();
    match blocking(move || broker.deny(id, &by, &form.reason)).await {
        Ok(_) => Redirect::to(&format!("/items/{id}?done=denied")).into_response(),
        Err(e) => error_response(Some(&csrf), &e),
    }
}

#[derive(Deserialize)]
struct ChangesForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    feedback: String,
}

pub use crate::followups::change_request_reason;

async fn request_changes(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Form(form): Form<ChangesForm>,
) -> Response {
    let Live { csrf, name: by } = match checked(&ui, &headers, &form.csrf) {
        Ok(live) => live,
        Err(why) => return refused(StatusCode::FORBIDDEN, why),
    };
    let broker = ui.broker.clone();
    match blocking(move || broker.request_changes(id, &by, &form.feedback)).await {
        Ok(_) => Redirect::to(&format!("/items/{id}?done=changes-requested")).into_response(),
        Err(e) => error_response(Some(&csrf), &e),
    }
}

#[derive(Deserialize)]
struct SecurityQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    done: String,
}

async fn security_page(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Query(query): Query<SecurityQuery>,
) -> Response {
    let Some(csrf) = ui.session_csrf(&headers) else {
        return to_login();
    };
    let path = ui.broker.config().audit_log.clone();
    let broker = ui.broker.clone();
    let list = blocking(move || {
        // The findings of every queue item, from the store `show` reads.
        let items = broker.queue()?;
        if !path.exists() {
            return Ok((items, Vec::new(), Vec::new()));
        }
        let scan = airlock_audit::scan(&path).map_err(|e| Error::Audit(e.to_string()))?;
        Ok((
            items,
            airlock_audit::injections(&scan, None),
            airlock_audit::borderline_opinions(&scan, None),
        ))
    })
    .await;
    let notice = (query.done == "triaged").then_some("Triage recorded.");
    let filter = page::SecurityFilter {
        status: query.status,
    };
    match list {
        Ok((items, list, borderline)) => Html(page::security(
            &items,
            &list,
            &borderline,
            &filter,
            notice,
            &csrf,
        ))
        .into_response(),
        Err(e) => error_response(Some(&csrf), &e),
    }
}

#[derive(Deserialize)]
struct TriageForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    note: String,
}

async fn triage(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Path(seq): Path<u64>,
    Form(form): Form<TriageForm>,
) -> Response {
    let Live { csrf, name: by } = match checked(&ui, &headers, &form.csrf) {
        Ok(live) => live,
        Err(why) => return refused(StatusCode::FORBIDDEN, why),
    };
    let status: airlock_audit::TriageStatus = match form.status.parse() {
        Ok(s) => s,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Html(page::error(Some(&csrf), &e.to_string())),
            )
                .into_response();
        }
    };
    let path = ui.broker.config().audit_log.clone();
    let request = airlock_audit::TriageRequest {
        finding: seq,
        status,
        note: Some(form.note).filter(|n| !n.trim().is_empty()),
        by,
    };
    let outcome = tokio::task::spawn_blocking(move || {
        let log = airlock_audit::AuditLog::open(&path)?;
        airlock_audit::triage(&log, &request)
    })
    .await;
    match outcome {
        Ok(Ok(_)) => Redirect::to("/security?done=triaged").into_response(),
        Ok(Err(e)) => {
            let status = match e {
                airlock_audit::Error::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::BAD_REQUEST,
            };
            (status, Html(page::error(Some(&csrf), &e.to_string()))).into_response()
        }
        Err(e) => error_response(Some(&csrf), &Error::Ui(e.to_string())),
    }
}

/// Serve the page on `listener` until the process ends.
pub fn serve(ui: Arc<Ui>, listener: std::net::TcpListener) -> Result<()> {
    listener
        .set_nonblocking(true)
        .map_err(Error::io("setting the UI listener non-blocking"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .enable_time()
        .build()
        .map_err(Error::io("starting the UI's runtime"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(Error::io("listening for the UI"))?;
        axum::serve(listener, router(ui))
            .await
            .map_err(Error::io("serving the UI"))
    })
}
