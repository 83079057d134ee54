//! `airlock-broker ui` in a real headless Chromium driven over WebDriver (`chromedriver`):
//! log in, open items, approve one and deny one with a reason through the page's buttons and
//! check the store and the audit log changed as the CLI would; XSS payloads render as text and
//! never run; a POST without the CSRF token is refused; the queue page picks up a new item by
//! itself. With `AIRLOCK_UI_SCREENSHOTS=DIR` it saves the queue and an item page as PNGs there
//! (`docs/ui-screenshots.sh` makes the README's).
//!
//! Chromium is required: without `chromium` and `chromium-driver` this test fails with the
//! packages' names (CI installs them).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::harness::{BIN, Fixture, queue_honest};
use crate::ui::{TOKEN, XSS_TITLE, add_approver, queue_xss, record_finding};

/// A child process killed when the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real `airlock-broker ui` on a free loopback port; its base URL.
fn start_ui(fx: &Fixture) -> (Killed, String) {
    let token_file = fx.dir.path().join("ui-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .args(["ui", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .env("AIRLOCK_REVIEWER", "rev")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Killed(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("airlock-broker ui ended before it listened")
            .unwrap();
        if let Some(url) = line.strip_prefix("airlock-broker: ui at ") {
            break url.trim_end_matches('/').to_owned();
        }
    };
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

fn start_chromedriver() -> (Killed, String) {
    let missing = |what: &str| {
        panic!(
            "{what} not found on PATH: the browser tests need Debian's `chromium` and `chromium-driver` packages (apt-get install -y chromium chromium-driver)"
        )
    };
    let driver = find_program(&["chromedriver"]).unwrap_or_else(|| missing("chromedriver"));
    find_program(&["chromium", "chromium-browser"]).unwrap_or_else(|| missing("chromium"));
    let port = free_port();
    let child = Killed(
        Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not start listening"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, format!("http://127.0.0.1:{port}"))
}

async fn browser(driver: &str) -> Client {
    let binary = find_program(&["chromium", "chromium-browser"]).unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": binary,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars"]
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("a Chromium session from chromedriver")
}

async fn wait_for(c: &Client, css: &str) -> fantoccini::elements::Element {
    match c
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css(css))
        .await
    {
        Ok(element) => element,
        Err(e) => {
            let url = c
                .current_url()
                .await
                .map(|u| u.to_string())
                .unwrap_or_default();
            let source = c.source().await.unwrap_or_default();
            panic!("{css} never appeared ({e}) on {url}:\n{source}")
        }
    }
}

async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    if let Some(dir) = std::env::var_os("AIRLOCK_UI_SCREENSHOTS") {
        let path = Path::new(&dir).join(name);
        std::fs::write(&path, &png).unwrap();
        eprintln!("saved {}", path.display());
    }
}

fn show_json(fx: &Fixture, id: i64) -> Value {
    serde_json::from_slice(&fx.cli(&["show", &id.to_string(), "--json"]).stdout).unwrap()
}

#[test]
fn in_chromium_an_approver_logs_in_approves_denies_and_nothing_an_agent_wrote_runs() {
    let (_driver, driver_url) = start_chromedriver();
    let mut fx = Fixture::new();
    fx.start();
    let approve_id = queue_honest(&fx, "run-browser-approve");
    let deny_id = queue_honest(&fx, "run-browser-deny");
    let xss_id = queue_xss(&fx, "run-browser-xss");
    record_finding(&fx, "run-browser-xss");
    let (_ui, base) = start_ui(&fx);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let c = browser(&driver_url).await;

        // Log in.
        c.goto(&format!("{base}/")).await.unwrap();
        let token = wait_for(&c, "input[name=token]").await;
        token.send_keys(TOKEN).await.unwrap();
        c.find(Locator::Css("#login")).await.unwrap().click().await.unwrap();
        wait_for(&c, "#queue").await;
        // The session cookie is HttpOnly: the page's script cannot read it.
        assert_eq!(c.execute("return document.cookie", vec![]).await.unwrap(), json!(""));
        let rows = c.find_all(Locator::Css("#queue tbody tr")).await.unwrap();
        assert_eq!(rows.len(), 3);
        screenshot(&c, "ui-queue.png").await;

        // The XSS item: every payload is text, and none ran (a dialog would be open).
        c.goto(&format!("{base}/items/{xss_id}")).await.unwrap();
        let title = wait_for(&c, "#title").await.text().await.unwrap();
        assert_eq!(title, XSS_TITLE.replace('\u{1b}', "\\u{1b}").trim_end());
        assert!(c.get_alert_text().await.is_err(), "a payload opened a dialog");
        assert_eq!(
            c.execute("return document.querySelectorAll('main script, main img, main svg, main iframe, a[href^=\"javascript:\"]').length", vec![])
                .await
                .unwrap(),
            json!(0)
        );
        c.goto(&format!("{base}/items/{xss_id}?diff=split")).await.unwrap();
        wait_for(&c, "table.diff.split").await;
        assert!(c.get_alert_text().await.is_err(), "a payload opened a dialog");
        c.goto(&format!("{base}/security")).await.unwrap();
        wait_for(&c, "#findings").await;
        assert!(c.get_alert_text().await.is_err(), "a finding's excerpt opened a dialog");

        // A POST without the CSRF token, sent by the page's own origin, is refused.
        c.goto(&format!("{base}/items/{xss_id}")).await.unwrap();
        wait_for(&c, "#approve").await;
        let status = c
            .execute_async(
                &format!("const done = arguments[0]; fetch('/items/{xss_id}/approve', {{method: 'POST', credentials: 'same-origin', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: 'csrf='}}).then(r => done(r.status), e => done(String(e)));"),
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(status, json!(403));
        assert_eq!(show_json(&fx, xss_id)["status"], "queued");

        // Approve one through its button.
        c.goto(&format!("{base}/items/{approve_id}")).await.unwrap();
        wait_for(&c, "#approve").await;
        screenshot(&c, "ui-item.png").await;
        c.goto(&format!("{base}/items/{approve_id}?diff=split#file-0")).await.unwrap();
        wait_for(&c, "table.diff.split").await;
        screenshot(&c, "ui-diff.png").await;
        c.goto(&format!("{base}/items/{approve_id}")).await.unwrap();
        wait_for(&c, "#approve").await;
        let audit_before = fx.audit_kinds().len();
        c.find(Locator::Css("#approve")).await.unwrap().click().await.unwrap();
        let notice = wait_for(&c, "#notice").await.text().await.unwrap();
        assert!(notice.starts_with("Approved"), "{notice}");
        assert_eq!(c.find(Locator::Css("#status")).await.unwrap().text().await.unwrap(), "published");
        let view = show_json(&fx, approve_id);
        assert_eq!(view["status"], "published");
        assert_eq!(view["decided_by"], "rev");
        assert!(fx.remote_ref(&format!("airlock/CALC-42-{approve_id}")).is_some());
        let kinds: Vec<String> = fx.audit_kinds().into_iter().skip(audit_before).map(|(k, _)| k).collect();
        assert_eq!(kinds.first().map(String::as_str), Some("approval"), "{kinds:?}");

        // Deny one with a reason.
        c.goto(&format!("{base}/items/{deny_id}")).await.unwrap();
        let reason = wait_for(&c, "#deny-reason").await;
        reason.send_keys("fixes the symptom, not the cause").await.unwrap();
        c.find(Locator::Css("#deny")).await.unwrap().click().await.unwrap();
        wait_for(&c, "#notice").await;
        assert_eq!(c.find(Locator::Css("#reason")).await.unwrap().text().await.unwrap(), "fixes the symptom, not the cause");
        let view = show_json(&fx, deny_id);
        assert_eq!(view["status"], "denied");
        assert_eq!(view["reason"], "fixes the symptom, not the cause");
        let (kind, payload) = fx.audit_kinds().pop().unwrap();
        assert_eq!(kind, "denial");
        assert_eq!(payload["reason"], "fixes the symptom, not the cause");
        assert_eq!(payload["reviewer"], "rev");

        // The queue page shows a new item without being reloaded by hand.
        c.goto(&format!("{base}/")).await.unwrap();
        wait_for(&c, "#queue").await;
        let new_id = queue_honest(&fx, "run-browser-new");
        wait_for(&c, &format!("#queue tr[data-id=\"{new_id}\"]")).await;

        c.close().await.unwrap();
    });
}

#[test]
fn in_chromium_a_named_approver_sees_the_findings_first_and_must_confirm_a_flagged_item() {
    let (_driver, driver_url) = start_chromedriver();
    let mut fx = Fixture::new();
    fx.start();
    let flagged = queue_xss(&fx, "run-browser-flagged");
    let token = add_approver(&fx, "alice", true);
    // Approvers exist: the operator token start_ui writes is ignored, alice's logs in.
    let (_ui, base) = start_ui(&fx);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let c = browser(&driver_url).await;
        c.goto(&format!("{base}/")).await.unwrap();
        wait_for(&c, "input[name=token]").await.send_keys(&token).await.unwrap();
        c.find(Locator::Css("#login")).await.unwrap().click().await.unwrap();
        let who = wait_for(&c, "#who").await.text().await.unwrap();
        assert_eq!(who, "logged in as alice");

        // The findings, marked with an icon, come before the decision form.
        c.goto(&format!("{base}/items/{flagged}")).await.unwrap();
        wait_for(&c, "#approve").await;
        let order = c
            .execute(
                "const f = document.querySelector('#injections li.finding .warn-icon'); const form = document.querySelector('#approve'); return f && form ? Boolean(f.compareDocumentPosition(form) & Node.DOCUMENT_POSITION_FOLLOWING) : null;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(order, json!(true));
        // The risk summary stands out: its own colour, not only its text.
        let colours = c
            .execute(
                "const s = getComputedStyle(document.querySelector('#risk')); const i = getComputedStyle(document.querySelector('.warn-icon')); return [s.backgroundColor, i.color];",
                vec![],
            )
            .await
            .unwrap();
        assert_ne!(colours[0], json!("rgb(255, 255, 255)"), "{colours}");
        assert_ne!(colours[1], json!("rgb(27, 31, 36)"), "{colours}");

        // Approve with a reason but without the typed id: refused, the item stays queued.
        c.find(Locator::Css("#confirm-risk")).await.unwrap().send_keys("yes").await.unwrap();
        c.find(Locator::Css("#approve-reason")).await.unwrap().send_keys("read every finding").await.unwrap();
        c.find(Locator::Css("#approve")).await.unwrap().click().await.unwrap();
        let error = wait_for(&c, "#error").await.text().await.unwrap();
        assert!(error.contains("risky") && error.contains("nothing was recorded"), "{error}");
        assert_eq!(show_json(&fx, flagged)["status"], "queued");

        // With the id typed: approved as alice.
        c.goto(&format!("{base}/items/{flagged}")).await.unwrap();
        wait_for(&c, "#confirm-risk").await.send_keys(&flagged.to_string()).await.unwrap();
        c.find(Locator::Css("#approve-reason")).await.unwrap().send_keys("the note is inert").await.unwrap();
        c.find(Locator::Css("#approve")).await.unwrap().click().await.unwrap();
        let notice = wait_for(&c, "#notice").await.text().await.unwrap();
        assert!(notice.starts_with("Approved"), "{notice}");
        let view = show_json(&fx, flagged);
        assert_eq!(view["status"], "published");
        assert_eq!(view["decided_by"], "alice");

        c.close().await.unwrap();
    });
}
