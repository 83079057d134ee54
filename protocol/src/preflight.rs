//! What a run asks the broker before it pins anything (`preflight`): that the broker answers,
//! that it knows the repository, and which of the issue's queue items still wait for a human.

use serde::{Deserialize, Serialize};

/// A `preflight` request: the repository as `broker.toml` names it and the issue a run is
/// about to work on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preflight {
    /// Repository name as configured in `broker.toml` (`[broker] repository` of airlock.toml,
    /// else the repository as the run names it).
    pub repository: String,
    /// The issue id the run will register.
    pub issue_id: String,
}

/// A queue item of the issue that is still open: queued for a human, or approved and not yet
/// published (a failed publication included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenItem {
    /// Queue item id, as `airlock-broker show` takes it.
    pub queue_id: i64,
    /// The run that queued it.
    pub run_id: String,
    /// Its status as the broker shows it (`queued`, `approved`, `publish_failed`).
    pub status: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::{BrokerReply, PreflightReply, Request};

    #[test]
    fn a_preflight_round_trips_and_its_reply_is_typed() {
        let request = Request::Preflight(super::Preflight {
            repository: "acme/calc".into(),
            issue_id: "CALC-1".into(),
        });
        let line = serde_json::to_string(&request).unwrap();
        assert!(line.contains("\"op\":\"preflight\""), "{line}");
        let back: Request = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Request::Preflight(p) if p.issue_id == "CALC-1"));
        let err = serde_json::from_str::<Request>(r#"{"op": "preflight"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("preflight needs"), "{err}");
        let reply = BrokerReply::Preflight {
            repository_known: true,
            open_items: vec![super::OpenItem {
                queue_id: 3,
                run_id: "r".into(),
                status: "queued".into(),
            }],
        };
        let typed = PreflightReply::try_from(reply).unwrap();
        assert!(
            matches!(typed, PreflightReply::Preflight { open_items, .. } if open_items[0].queue_id == 3)
        );
    }
}
