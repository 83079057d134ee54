//! Questions on the issue, for the triggers: a triggered run that escalates with a question
//! asks it through the broker ([`Worker::ask_question`]), and a reply on the issue
//! ([`Worker::take_reply`]) starts the next run when its author may answer, with the question
//! and the reply as data; any other reply starts nothing and is recorded by the broker.

use std::time::Duration;

use airlock_protocol::{
    AskQuestionReply, CloseQuestionReply, IssueKey, IssueQuestion, QuestionReply, Request,
};
use airlock_schemas::Outcome;

use super::worker::{Job, RunResult, WorkOutcome, Worker};
use crate::adapters::{BrokerSocket, typed};
use crate::github::IssueSource;
use crate::questions::{Answer, QuestionRecord, may_answer, question_of};
use crate::transport::BrokerEndpoint;

/// A reply on an issue, as a trigger saw it.
#[derive(Debug, Clone)]
pub struct IssueReply {
    /// `OWNER/REPO` on GitHub.
    pub repository: String,
    /// The issue number.
    pub number: u64,
    /// The replier's login.
    pub author: String,
    /// The replier's `author_association`.
    pub association: String,
    /// Whether the replier opened the issue.
    pub by_issue_author: bool,
    /// The reply's text.
    pub text: String,
}

impl Worker {
    /// After a claimed run: when it escalated with a question (`crate::questions::question_of`),
    /// `[questions]` allows another round, and the issue is a GitHub one, ask the broker to
    /// post it and keep the question. True when the question was posted.
    pub fn ask_question(
        &self,
        job: &Job,
        endpoint: &BrokerEndpoint,
        key: &IssueKey,
        outcome: &WorkOutcome,
    ) -> bool {
        let WorkOutcome::Ran {
            result: RunResult::Escalated,
            run_id,
            outcome_path,
            ..
        } = outcome
        else {
            return false;
        };
        if !matches!(job.issue, IssueSource::GitHub(_)) {
            return false;
        }
        let Ok(config) = self.load_config() else {
            return false;
        };
        if !config.questions.enabled {
            return false;
        }
        let Some(parsed) = std::fs::read_to_string(outcome_path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            // `outcome.json` holds the model's outcome under `outcome`, beside the run's record.
            .and_then(|v| serde_json::from_value::<Outcome>(v["outcome"].clone()).ok())
        else {
            return false;
        };
        let Some(asked) = question_of(&parsed) else {
            return false;
        };
        let runs_root = &config.paths.runs_root;
        let round = QuestionRecord::load(runs_root, key).map_or(1, |r| r.round + 1);
        if round > config.questions.max_rounds {
            return false;
        }
        let request = Request::AskQuestion(Box::new(IssueQuestion {
            issue: key.clone(),
            run_id: run_id.clone(),
            round,
            established: asked.established.clone(),
            ruled_out: asked.ruled_out.clone(),
            question: asked.question.clone(),
        }));
        match BrokerSocket::new(endpoint, Duration::from_secs(60))
            .request(&request)
            .and_then(typed)
        {
            Ok(AskQuestionReply::QuestionAsked { .. }) => {}
            Ok(AskQuestionReply::Failed { message }) => {
                tracing::warn!("asking the question on #{}: {message}", key.issue_number);
                return false;
            }
            Err(e) => {
                tracing::warn!("asking the question on #{}: {e}", key.issue_number);
                return false;
            }
        }
        let record = QuestionRecord {
            issue: key.clone(),
            run_id: run_id.clone(),
            round,
            established: asked.established,
            summary: parsed.summary,
            question: asked.question,
            answered: false,
        };
        if let Err(e) = record.save(runs_root) {
            tracing::warn!("keeping the question of #{}: {e}", key.issue_number);
        }
        true
    }

    /// A reply on an issue labelled `needs-info`: with no open question it starts nothing
    /// (as any comment without `@airlock`); from the issue's author or a member it answers the
    /// question (the broker takes the label off) and the issue runs again with it; from
    /// anyone else it is recorded by the broker and starts nothing.
    pub fn take_reply(&self, reply: &IssueReply) -> WorkOutcome {
        let ignored = |reason: String| WorkOutcome::Ignored { reason };
        let config = match self.load_config() {
            Ok(c) => c,
            Err(e) => {
                return WorkOutcome::Failed {
                    error: e.to_string(),
                };
            }
        };
        let Ok(issue @ IssueSource::GitHub(_)) =
            IssueSource::parse(&format!("github:{}#{}", reply.repository, reply.number))
        else {
            return ignored("the repository or issue number is not a GitHub one".to_owned());
        };
        let IssueSource::GitHub(reference) = &issue else {
            return ignored("not a GitHub issue".to_owned());
        };
        let key = Self::claim_key(&config, reference);
        let runs_root = &config.paths.runs_root;
        let Some(mut record) = QuestionRecord::load(runs_root, &key).filter(|r| !r.answered) else {
            return ignored(format!("#{}: no open question", reply.number));
        };
        let accepted = may_answer(&reply.association, reply.by_issue_author);
        let endpoint = match self.broker_endpoint(&config) {
            Ok(e) => e,
            Err(e) => {
                return WorkOutcome::Failed {
                    error: e.to_string(),
                };
            }
        };
        let request = Request::CloseQuestion(QuestionReply {
            issue: key.clone(),
            by: format!("github:{}", reply.author),
            association: reply.association.clone(),
            accepted,
        });
        match BrokerSocket::new(&endpoint, Duration::from_secs(60))
            .request(&request)
            .and_then(typed)
        {
            Ok(CloseQuestionReply::QuestionClosed { .. }) => {}
            Ok(CloseQuestionReply::Failed { message }) => {
                return WorkOutcome::Failed {
                    error: format!("close_question: {message}"),
                };
            }
            Err(e) => {
                return WorkOutcome::Failed {
                    error: e.to_string(),
                };
            }
        }
        if !accepted {
            return ignored(format!(
                "#{}: a reply by {} ({}), who may not answer the question",
                reply.number, reply.author, reply.association
            ));
        }
        record.answered = true;
        if let Err(e) = record.save(runs_root) {
            return WorkOutcome::Failed {
                error: format!("keeping the answered question: {e}"),
            };
        }
        self.work_on(&Job {
            issue,
            repo: None,
            commit: None,
            agent: None,
            answer: Some(Answer {
                question: record,
                by: reply.author.clone(),
                reply: reply.text.clone(),
            }),
        })
    }
}
