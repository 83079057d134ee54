//! The merged-pull-request memory over a fixture repository with known merged fixes: merge and
//! squash commits read, the right pull request found for a query, nothing merged after the pin
//! visible, forge records kept only when merged into the pin's history, records reused.

use airlock_codegraph::history::{ForgeFile, ForgePull, HistoryIndex, PrSource, save_forge_pulls};
use airlock_codegraph::store::repo_key;
use airlock_testkit::git::merged_history;

fn numbers(index: &HistoryIndex) -> Vec<u64> {
    index.pulls().iter().map(|p| p.number).collect()
}

#[test]
fn merge_and_squash_commits_become_pull_requests_with_their_files_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("client");
    let h = merged_history(&repo);
    let idx = dir.path().join("index");
    let index = HistoryIndex::build(&repo, &idx, None, &h.pin).unwrap();
    // `Merge branch 'docs'` is no pull request; #20 comes after the pin.
    assert_eq!(numbers(&index), vec![12, 15]);
    let merged = &index.pulls()[0];
    assert_eq!(merged.title, "Stop following redirects in a loop");
    assert!(merged.body.contains("points to itself"), "{merged:?}");
    assert_eq!(merged.files, vec!["src/http/redirects.py"]);
    assert_eq!(merged.source, PrSource::Merge);
    assert_eq!((merged.insertions, merged.deletions), (3, 1));
    let squash = &index.pulls()[1];
    assert_eq!(
        squash.title,
        "Keep the cookie domain when merging cookie jars"
    );
    assert_eq!(squash.files, vec!["src/http/cookies.py"]);
    assert_eq!(squash.source, PrSource::Squash);
    assert_eq!(squash.merged_at, "2020-01-01T00:00:00Z");
}

#[test]
fn the_right_pull_request_is_found_for_a_query() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("client");
    let h = merged_history(&repo);
    let index = HistoryIndex::build(&repo, &dir.path().join("index"), None, &h.pin).unwrap();
    let hits = index.search("the client loops forever on a 301 redirect", 5);
    assert_eq!(hits.first().map(|h| h.pr.number), Some(12), "{hits:?}");
    let hits = index.search("CookieJar.update loses the cookie domain", 5);
    assert_eq!(hits.first().map(|h| h.pr.number), Some(15), "{hits:?}");
    assert!(hits[0].score > 0.0);
    // A query about nothing merged finds nothing.
    assert!(index.search("websocket handshake", 5).is_empty());
}

#[test]
fn nothing_merged_after_the_pin_is_visible() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("client");
    let h = merged_history(&repo);
    let idx = dir.path().join("index");
    let query = "JSON body with a UTF-16 byte order mark fails to decode";
    let at_pin = HistoryIndex::build(&repo, &idx, None, &h.pin).unwrap();
    assert!(
        at_pin
            .search(query, 5)
            .iter()
            .all(|hit| hit.pr.number != 20)
    );
    assert!(!numbers(&at_pin).contains(&20));
    let later = HistoryIndex::build(&repo, &idx, None, &h.after_pin).unwrap();
    assert_eq!(
        later.search(query, 5).first().map(|h| h.pr.number),
        Some(20)
    );
    // The records of the pin's pull requests were reused: only #20's is new.
    assert_eq!(later.stats().records_new, 1);
    let again = HistoryIndex::build(&repo, &idx, None, &h.pin).unwrap();
    assert_eq!(again.stats().records_new, 0);
    assert_eq!(again.pulls(), at_pin.pulls());
}

fn forge_pull(
    number: u64,
    title: &str,
    merged_at: &str,
    sha: Option<&str>,
    file: &str,
) -> ForgePull {
    ForgePull {
        number,
        title: title.into(),
        body: String::new(),
        merged_at: merged_at.into(),
        merge_commit_sha: sha.map(str::to_owned),
        files: vec![ForgeFile {
            filename: file.into(),
            additions: 4,
            deletions: 2,
            previous_filename: None,
        }],
    }
}

#[test]
fn forge_records_are_seen_only_when_merged_into_the_pins_history() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("client");
    let h = merged_history(&repo);
    let idx = dir.path().join("index");
    let key = repo_key(&repo.join(".git"));
    save_forge_pulls(
        &idx,
        &key,
        &[
            // The forge's own record of #15 (its squash commit is in the pin's history).
            forge_pull(
                15,
                "Cookie domain kept across jar merges",
                "2020-01-01T00:00:00Z",
                None,
                "src/http/cookies.py",
            ),
            // Merged before the pin's time into a commit the mirror lacks: visible.
            forge_pull(
                9,
                "Proxy auth header leaked on redirect",
                "2019-12-30T10:00:00Z",
                Some("1111111111111111111111111111111111111111"),
                "src/http/proxy.py",
            ),
            // Merged after the pin's time: not visible.
            forge_pull(
                30,
                "Retry idempotent requests on reset",
                "2021-03-01T00:00:00Z",
                None,
                "src/http/retry.py",
            ),
            // Its merge commit is the one after the pin: not visible, whatever its date says.
            forge_pull(
                20,
                "Decode UTF-16 JSON with a BOM",
                "2019-01-01T00:00:00Z",
                Some(&h.after_pin),
                "src/json/decoder.py",
            ),
        ],
    )
    .unwrap();
    let index = HistoryIndex::build(&repo, &idx, None, &h.pin).unwrap();
    assert_eq!(numbers(&index), vec![9, 12, 15]);
    assert_eq!(index.stats().from_forge, 2);
    let fifteen = &index.pulls()[2];
    assert_eq!(fifteen.source, PrSource::Forge);
    assert_eq!(fifteen.title, "Cookie domain kept across jar merges");
    assert_eq!(index.search("proxy auth redirect", 1)[0].pr.number, 9);
    assert!(index.search("retry connection reset", 5).is_empty());
    let later = HistoryIndex::build(&repo, &idx, None, &h.after_pin).unwrap();
    assert!(numbers(&later).contains(&20));
}
