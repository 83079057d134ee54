//! Claims through the real `airlock-broker serve`: concurrent workers on their own
//! connections, each claiming every issue, get exactly one winner per issue; a lapsed lease is
//! taken over after a kill -9 of the broker; the claim label is what the mock GitHub sees.

use std::time::{Duration, Instant};

use airlock_broker::{BrokerClient, BrokerReply};
use airlock_protocol::{
    ClaimEnd, ClaimRelease, ClaimRequest, ClaimState, ForgeMark, IssueKey, Request,
};
use airlock_testkit::mockgithub::MockForge;

use crate::harness::{Fixture, Options};

const TOKEN_VAR: &str = "AIRLOCK_IT_CLAIM_TOKEN";

fn claim(holder: &str, n: u64, lease_secs: u64) -> Request {
    Request::Claim(ClaimRequest {
        issue: IssueKey {
            repository: "acme/calc".to_owned(),
            issue_number: n,
        },
        holder: holder.to_owned(),
        lease_secs,
    })
}

#[test]
fn concurrent_claimers_get_one_winner_per_issue_and_the_label_is_posted_once() {
    let api = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((api.base.clone(), TOKEN_VAR.to_owned())),
        ..Options::default()
    });
    fx.start_with_env(&[(TOKEN_VAR, "tok-claims")]);
    let socket = fx.socket.clone();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let (socket, barrier) = (socket.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut client = BrokerClient::connect(&socket).unwrap();
                barrier.wait();
                (1..=5)
                    .map(|n| {
                        client
                            .request(&claim(&format!("worker-{w}"), n, 600))
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let replies: Vec<Vec<BrokerReply>> = workers.into_iter().map(|h| h.join().unwrap()).collect();
    for n in 0..5 {
        let winners: Vec<&BrokerReply> = replies
            .iter()
            .map(|r| &r[n])
            .filter(|r| matches!(r, BrokerReply::Claimed { acquired: true, .. }))
            .collect();
        assert_eq!(winners.len(), 1, "issue {}: {replies:?}", n + 1);
        assert!(
            matches!(
                winners[0],
                BrokerReply::Claimed {
                    forge: ForgeMark::Posted,
                    ..
                }
            ),
            "{winners:?}"
        );
        let others = replies
            .iter()
            .filter(|r| matches!(r[n], BrokerReply::ClaimTaken { .. }))
            .count();
        assert_eq!(others, 5, "{replies:?}");
    }
    // The forge saw the fixed label once per issue, with the broker's token.
    let mut changes = api.label_changes();
    changes.sort();
    assert_eq!(
        changes,
        (1..=5)
            .map(|n| ("POST".to_owned(), n, "airlock-claimed".to_owned()))
            .collect::<Vec<_>>()
    );
    assert!(
        api.requests()
            .iter()
            .all(|r| r.header("authorization") == Some("Bearer tok-claims"))
    );

    // The winner of issue 1 ends it as done: nobody takes it again. Issue 2 is abandoned:
    // its label comes off and the next worker takes it at once.
    let holder_of = |n: usize| match &replies
        .iter()
        .map(|r| &r[n])
        .find(|r| matches!(r, BrokerReply::Claimed { acquired: true, .. }))
    {
        Some(BrokerReply::Claimed { claim, .. }) => claim.holder.clone(),
        other => panic!("{other:?}"),
    };
    let mut client = fx.client();
    for (n, end) in [(1, ClaimEnd::Done), (2, ClaimEnd::Abandoned)] {
        let reply = client
            .request(&Request::ReleaseClaim(ClaimRelease {
                issue: IssueKey {
                    repository: "acme/calc".to_owned(),
                    issue_number: n,
                },
                holder: holder_of(usize::try_from(n).unwrap() - 1),
                end,
            }))
            .unwrap();
        assert!(matches!(reply, BrokerReply::Released { .. }), "{reply:?}");
    }
    assert!(matches!(
        client.request(&claim("late", 1, 600)).unwrap(),
        BrokerReply::ClaimTaken { claim } if claim.state == ClaimState::Done
    ));
    assert!(matches!(
        client.request(&claim("late", 2, 600)).unwrap(),
        BrokerReply::Claimed { acquired: true, .. }
    ));
    assert!(
        api.label_changes()
            .contains(&("DELETE".to_owned(), 2, "airlock-claimed".to_owned()))
    );
    // The operator sees every claim.
    let listed = fx.cli(&["claims"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("acme/calc#1 done by worker-"), "{listed}");
    assert!(listed.contains("acme/calc#2 held by late"), "{listed}");
    assert_eq!(listed.lines().count(), 5, "{listed}");
    // A release by a worker that does not hold the claim is refused with who holds it.
    let reply = client
        .request(&Request::ReleaseClaim(ClaimRelease {
            issue: IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: 3,
            },
            holder: "not-the-holder".to_owned(),
            end: ClaimEnd::Done,
        }))
        .unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("not held by \"not-the-holder\"")),
        "{reply:?}"
    );
    // A repository the broker does not serve cannot be claimed.
    let reply = client
        .request(&Request::Claim(ClaimRequest {
            issue: IssueKey {
                repository: "evil/elsewhere".to_owned(),
                issue_number: 1,
            },
            holder: "w".to_owned(),
            lease_secs: 60,
        }))
        .unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("not configured")),
        "{reply:?}"
    );
}

#[test]
fn a_claim_whose_holder_died_lapses_at_its_lease_and_survives_a_broker_kill() {
    let mut fx = Fixture::new();
    fx.start();
    let mut client = fx.client();
    let reply = client.request(&claim("dies", 4, 1)).unwrap();
    let BrokerReply::Claimed {
        claim: held,
        acquired: true,
        forge: ForgeMark::NotConfigured,
    } = reply
    else {
        panic!("{reply:?}")
    };
    // The broker itself dies; the claim is in its store and lapses all the same.
    fx.kill();
    fx.start();
    let mut client = fx.client();
    // Wait for the lease to lapse (the store counts in whole Unix seconds).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        if i64::try_from(now).unwrap() > held.lease_expires_at {
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let reply = client.request(&claim("survivor", 4, 600)).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Claimed { acquired: true, claim, .. } if claim.holder == "survivor"),
        "{reply:?}"
    );
    // The dead holder's renewal, had it come back, tells it to stop.
    let reply = client
        .request(&Request::RenewClaim(ClaimRequest {
            issue: IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: 4,
            },
            holder: "dies".to_owned(),
            lease_secs: 1,
        }))
        .unwrap();
    assert!(
        matches!(&reply, BrokerReply::ClaimTaken { claim } if claim.holder == "survivor"),
        "{reply:?}"
    );
}
