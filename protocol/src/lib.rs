//! The broker's wire protocol, the one place both sides take it from: one JSON object per line
//! over the Unix socket, one reply line per request. The open_pr arguments travel as raw JSON so
//! the approver sees them byte for byte. The supervisor builds its requests and reads its
//! replies with these types; the broker parses and answers with them.

mod claims;
mod findings;
mod judge;
mod preflight;
mod questions;
mod reply;
mod request;
mod review;
mod run;
pub mod tls;

pub use airlock_policies::testrun::{TestEnvironment, TestRunner};
pub use claims::*;
pub use findings::*;
pub use judge::*;
pub use preflight::*;
pub use questions::*;
pub use reply::*;
pub use request::*;
pub use review::*;
pub use run::*;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn requests_round_trip_and_bad_lines_say_what_the_operation_needs() {
        let key = open_pr_call_id("run-1", 1);
        let open = Request::open_pr("run-1", "{\"b\": 1,  \"a\": 2}", &key).unwrap();
        let line = serde_json::to_string(&open).unwrap();
        assert!(line.contains("\"op\":\"open_pr\""), "{line}");
        // The arguments travel byte for byte, spacing and key order kept.
        assert!(line.contains("{\"b\": 1,  \"a\": 2}"), "{line}");
        let back: Request = serde_json::from_str(&line).unwrap();
        let Request::OpenPr { request_id, .. } = &back else {
            panic!("{back:?}")
        };
        assert_eq!(request_id, &key);
        for (line, says) in [
            (r#"{"op": "register_run"}"#, "register_run needs \"run\""),
            (r#"{"op": "open_pr", "run_id": "r"}"#, "open_pr needs"),
            // No key is derived from the arguments: the sender names its call.
            (
                r#"{"op": "open_pr", "run_id": "r", "args": {"x":1}}"#,
                "open_pr needs \"run_id\", \"request_id\"",
            ),
            (r#"{"op": "decision"}"#, "decision needs \"run_id\""),
            (r#"{"op": "claim"}"#, "claim needs \"claim\""),
            (r#"{"op": "release_claim"}"#, "release_claim needs"),
            (r#"{"op": "follow_up"}"#, "follow_up needs \"queue_id\""),
            (r#"{"op": "take_work"}"#, "take_work needs \"take\""),
            (
                r#"{"op": "enqueue_work"}"#,
                "enqueue_work needs \"enqueue\"",
            ),
            (r#"{"op": "pr_feedback"}"#, "pr_feedback needs \"feedback\""),
            (
                r#"{"op": "judge_subjects"}"#,
                "judge_subjects needs \"select\"",
            ),
            (r#"{"op": "judge_score"}"#, "judge_score needs \"score\""),
            (
                r#"{"op": "submit_review"}"#,
                "submit_review needs \"submission\"",
            ),
            (
                r#"{"op": "approve", "run_id": "r"}"#,
                "unknown op \"approve\"",
            ),
        ] {
            let err = serde_json::from_str::<Request>(line)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn claim_requests_travel_flat_and_round_trip() {
        let claim = ClaimRequest {
            issue: IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: 7,
            },
            holder: "w-1".to_owned(),
            lease_secs: 60,
        };
        let line = serde_json::to_string(&Request::RenewClaim(claim.clone())).unwrap();
        assert_eq!(
            line,
            r#"{"op":"renew_claim","claim":{"repository":"acme/calc","issue_number":7,"holder":"w-1","lease_secs":60}}"#
        );
        let back: Request = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Request::RenewClaim(c) if c == claim));
        let release = Request::ReleaseClaim(ClaimRelease {
            issue: claim.issue.clone(),
            holder: "w-1".to_owned(),
            end: ClaimEnd::Done,
        });
        let line = serde_json::to_string(&release).unwrap();
        assert!(line.contains(r#""end":"done""#), "{line}");
        let reply = BrokerReply::ClaimTaken {
            claim: ClaimStatus {
                issue: claim.issue,
                holder: "w-2".to_owned(),
                state: ClaimState::Held,
                claimed_at: 1,
                lease_expires_at: 61,
            },
        };
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<BrokerReply>(&text).unwrap(), reply);
    }

    #[test]
    fn a_review_submission_travels_with_its_review_byte_for_byte() {
        let line = r#"{"op":"submit_review","submission":{"run_id":"r","pull":{"owner":"acme","repo":"calc","number":3,"head_sha":"ab"},"review":{"verdict": "comment",  "summary":"s","comments":[]}}}"#;
        let request: Request = serde_json::from_str(line).unwrap();
        let Request::SubmitReview(submission) = &request else {
            panic!("{request:?}")
        };
        assert_eq!(submission.pull.number, 3);
        assert_eq!(
            submission.review.get(),
            r#"{"verdict": "comment",  "summary":"s","comments":[]}"#
        );
        assert_eq!(serde_json::to_string(&request).unwrap(), line);
        let unknown = line.replace("\"number\":3", "\"number\":3,\"extra\":1");
        assert!(serde_json::from_str::<Request>(&unknown).is_err());
    }

    #[test]
    fn an_open_pr_with_its_change_round_trips() {
        let change = SubmittedChange::new(&"a".repeat(40), b"diff --git a/x b/x\n\0binary");
        assert_eq!(change.patch().unwrap(), b"diff --git a/x b/x\n\0binary");
        let with = Request::open_pr_with_change("r", "{}", change.clone(), "k").unwrap();
        let line = serde_json::to_string(&with).unwrap();
        let back: Request = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Request::OpenPr { change: Some(c), .. } if *c == change));
        // A change that is not base64, or larger than the bound, says so.
        let bad = SubmittedChange {
            base_commit: "a".repeat(40),
            patch_base64: "***".to_owned(),
        };
        assert!(bad.patch().unwrap_err().contains("base64"));
        let huge = SubmittedChange {
            base_commit: "a".repeat(40),
            patch_base64: "A".repeat(MAX_PATCH_BYTES / 3 * 4 + 8),
        };
        assert!(huge.patch().unwrap_err().contains("larger than"));
        let take = Request::TakeWork(TakeWork {
            holder: "w".to_owned(),
            lease_secs: 60,
            repository: None,
        });
        let line = serde_json::to_string(&take).unwrap();
        assert_eq!(
            line,
            r#"{"op":"take_work","take":{"holder":"w","lease_secs":60}}"#
        );
        assert_eq!(
            serde_json::to_string(&BrokerReply::NoWork).unwrap(),
            r#"{"status":"no_work"}"#
        );
    }

    #[test]
    fn the_request_id_is_sha256_of_run_nul_args() {
        assert_eq!(
            request_id_for("r", "{}"),
            hex::encode(Sha256::digest(b"r\0{}"))
        );
    }

    #[test]
    fn an_open_pr_call_is_keyed_by_its_run_and_its_number_not_its_arguments() {
        assert_eq!(
            open_pr_call_id("r", 2),
            hex::encode(Sha256::digest(b"r\x00open_pr\x002"))
        );
        assert_ne!(open_pr_call_id("r", 1), open_pr_call_id("r", 2));
        assert_ne!(open_pr_call_id("r", 1), open_pr_call_id("s", 1));
    }
}
