//! Questions on the issue, for the triggers: a triggered run that escalates with a question
//! asks it through the broker ([`Worker::ask_question`]), which keeps it open in its store. A
//! reply on the issue (a webhook delivery, [`Worker::take_reply`], from any forge's trigger),
//! or a poll ([`Worker::check_replies`], `airlock watch`), asks the broker to read the issue's
//! replies from the forge itself: a reply by the issue's author or a member answers the
//! question and starts the next run with it as data; anyone else's starts nothing and is
//! recorded; an issue deleted or closed meanwhile closes its question with a record.

use std::time::Duration;

use airlock_protocol::{
    AskQuestionReply, CloseQuestionReply, IssueKey, IssueQuestion, OpenQuestion, OpenQuestionReply,
    QuestionLookup, QuestionReply, Request,
};
use airlock_schemas::Outcome;

use super::worker::{Job, RunResult, WorkOutcome, Worker};
use super::{Result, TriggerError};
use crate::adapters::{BrokerSocket, typed};
use crate::config::Config;
use crate::github::IssueSource;
use crate::questions::{Answer, likely_files, question_of};
use crate::transport::BrokerEndpoint;

/// A reply on an issue, as a trigger was told of it (by a webhook delivery). Only the issue
/// and the comment id are acted on: who wrote it, their standing and the text are read again
/// from the forge by the broker before anything starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueReply {
    /// The comment's id on the forge, when the delivery named it.
    pub comment_id: Option<u64>,
    /// The replier's login, as the delivery says.
    pub author: String,
    /// The replier's standing, as the delivery says (GitHub's `author_association`, a GitLab
    /// access level).
    pub standing: String,
    /// The reply's text, as the delivery carries it.
    pub text: String,
}

/// The broker's key of an issue that can carry a question: a forge issue; `None` for a file,
/// a follow-up or a merged pull request's task.
fn question_key(config: &Config, source: &IssueSource) -> Option<IssueKey> {
    match source {
        IssueSource::GitHub(_) | IssueSource::GitLab(_) => Worker::claim_key_of(config, source),
        IssueSource::Merged(_) | IssueSource::File(_) | IssueSource::FollowUp(_) => None,
    }
}

impl Worker {
    /// After a claimed run: when it escalated with a question (`crate::questions::question_of`),
    /// `[questions]` allows another round, and the issue is a forge one, ask the broker to
    /// post it (and keep it open) with what the run established and the files it read. True
    /// when the question was posted.
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
        let Ok(config) = self.load_config() else {
            return false;
        };
        if !config.questions.enabled || question_key(&config, &job.issue).is_none() {
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
        let round = job
            .answer
            .as_ref()
            .map_or(1, |a| a.question.question.round + 1);
        if round > config.questions.max_rounds {
            return false;
        }
        let request = Request::AskQuestion(Box::new(IssueQuestion {
            issue: key.clone(),
            run_id: run_id.clone(),
            round,
            established: asked.established,
            ruled_out: asked.ruled_out,
            question: asked.question,
            summary: parsed.summary,
            likely_files: likely_files(&config.paths.audit_log, run_id),
        }));
        match BrokerSocket::new(endpoint, Duration::from_secs(60))
            .request(&request)
            .and_then(typed)
        {
            Ok(AskQuestionReply::QuestionAsked { .. }) => true,
            Ok(AskQuestionReply::Failed { message }) => {
                tracing::warn!("asking the question on #{}: {message}", key.issue_number);
                false
            }
            Err(e) => {
                tracing::warn!("asking the question on #{}: {e}", key.issue_number);
                false
            }
        }
    }

    /// A reply on issue `issue` as a trigger was told of it (any forge's: the GitHub webhook,
    /// GitLab's Note Hook). What the delivery says of its author is not believed: the broker
    /// reads the issue's replies from the forge ([`Worker::check_replies`]).
    pub fn take_reply(&self, issue: &IssueSource, reply: &IssueReply) -> WorkOutcome {
        tracing::debug!(
            "a reply on {issue:?} (comment {:?}, by {:?} as {:?}, as the delivery says)",
            reply.comment_id,
            reply.author.escape_debug().to_string(),
            reply.standing.escape_debug().to_string(),
        );
        self.check_replies(issue)
    }

    /// Ask the broker whether a reply on `issue` answers its open question: one by the
    /// issue's author or a member starts the next run with the question and the answer as
    /// data (the broker took the label off); others start nothing (the broker recorded them);
    /// an issue deleted or closed meanwhile closes its question and starts nothing.
    pub fn check_replies(&self, issue: &IssueSource) -> WorkOutcome {
        let config = match self.load_config() {
            Ok(c) => c,
            Err(e) => {
                return WorkOutcome::Failed {
                    error: e.to_string(),
                };
            }
        };
        let Some(key) = question_key(&config, issue) else {
            return WorkOutcome::Ignored {
                reason: "not a forge issue: it has no question".to_owned(),
            };
        };
        match self.close_question(&config, &key) {
            Ok(reply) => self.act_on(issue, key.issue_number, reply),
            Err(e) => WorkOutcome::Failed {
                error: e.to_string(),
            },
        }
    }

    /// For `airlock watch` (deployments without webhooks): every open question the broker
    /// keeps for the repository of the issues `source_of` names is checked for replies, as a
    /// delivery would have it checked. Returns what became of each issue where something
    /// happened (a run, a reply ignored, a question closed); a question with no new reply is
    /// left out.
    pub fn poll_replies(
        &self,
        config: &Config,
        source_of: &dyn Fn(u64) -> Option<IssueSource>,
    ) -> Result<Vec<(u64, WorkOutcome)>> {
        let Some(repository) = source_of(1)
            .and_then(|s| question_key(config, &s))
            .map(|k| k.repository)
        else {
            return Ok(Vec::new());
        };
        let mut numbers: Vec<u64> = self
            .open_questions(config, &repository)?
            .iter()
            .map(|q| q.question.issue.issue_number)
            .collect();
        numbers.dedup();
        let mut done = Vec::new();
        for number in numbers {
            let Some(issue) = source_of(number) else {
                continue;
            };
            let key = IssueKey {
                repository: repository.clone(),
                issue_number: number,
            };
            match self.close_question(config, &key) {
                Ok(CloseQuestionReply::QuestionWaiting { ignored }) if ignored.is_empty() => {}
                Ok(reply) => done.push((number, self.act_on(&issue, number, reply))),
                Err(e) => done.push((
                    number,
                    WorkOutcome::Failed {
                        error: e.to_string(),
                    },
                )),
            }
        }
        Ok(done)
    }

    /// `close_question` for `key`: the broker reads the issue's replies from the forge.
    fn close_question(&self, config: &Config, key: &IssueKey) -> Result<CloseQuestionReply> {
        let endpoint = self.broker_endpoint(config)?;
        let request = Request::CloseQuestion(QuestionReply {
            issue: key.clone(),
            by: self.holder.clone(),
        });
        BrokerSocket::new(&endpoint, Duration::from_secs(60))
            .request(&request)
            .and_then(typed)
            .map_err(|e| TriggerError::Broker(e.to_string()))
    }

    /// What the broker's verdict on the replies of issue `number` starts: the next run with
    /// the answer, or nothing (with why).
    fn act_on(&self, issue: &IssueSource, number: u64, reply: CloseQuestionReply) -> WorkOutcome {
        let ignored = |reason: String| WorkOutcome::Ignored { reason };
        let failed = |error: String| WorkOutcome::Failed { error };
        match reply {
            CloseQuestionReply::NoQuestion => ignored(format!("#{number}: no open question")),
            CloseQuestionReply::QuestionEnded { reason } => ignored(format!(
                "#{number}: {}; its question is closed and nothing starts",
                reason.as_str().replace('_', " ")
            )),
            CloseQuestionReply::QuestionWaiting { ignored: others } if others.is_empty() => {
                ignored(format!("#{number}: no new reply answers the question"))
            }
            CloseQuestionReply::QuestionWaiting { ignored: others } => ignored(format!(
                "#{number}: replies by {}, who may not answer the question",
                others
                    .iter()
                    .map(|o| format!("{} ({})", o.by.escape_debug(), o.standing.escape_debug()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            CloseQuestionReply::Failed { message } => failed(format!("close_question: {message}")),
            CloseQuestionReply::QuestionAnswered {
                question, answer, ..
            } => self.work_on(&Job {
                issue: issue.clone(),
                repo: None,
                commit: None,
                agent: None,
                answer: Some(Answer {
                    question: *question,
                    answer,
                }),
            }),
        }
    }

    /// The open questions the broker keeps for `repository` (its name at the broker).
    pub fn open_questions(&self, config: &Config, repository: &str) -> Result<Vec<OpenQuestion>> {
        let endpoint = self.broker_endpoint(config)?;
        let request = Request::OpenQuestion(QuestionLookup {
            repository: repository.to_owned(),
            issue_number: None,
        });
        match BrokerSocket::new(&endpoint, Duration::from_secs(60))
            .request(&request)
            .and_then(typed)
            .map_err(|e| TriggerError::Broker(e.to_string()))?
        {
            OpenQuestionReply::OpenQuestions { questions } => Ok(questions),
            OpenQuestionReply::Failed { message } => {
                Err(TriggerError::Broker(format!("open_question: {message}")))
            }
        }
    }
}
