//! What a run checks before it pins, so that a mistake costs nothing: the model spec and the
//! API key its kind reads, the security model's key, and the broker: that it answers, that it
//! knows the repository, and whether the issue has a queue item still open. A failure here
//! leaves nothing behind: no run id, no run directory, no audit record.

use super::RunError;
use crate::adapters::BrokerSocket;
use crate::config::Config;
use crate::ports::ToolFailure;
use crate::second_opinion::SecondOpinion;
use airlock_model::ModelConfig;
use airlock_protocol::{Preflight, PreflightReply, Request};
use std::time::Duration;

/// How long the broker has to answer the check: it reads its configuration and its queue only.
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(15);

/// What a run does about an issue that already has a queue item waiting for a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenItems {
    /// Run anyway (the triggers: their claims keep one run per issue at a time).
    #[default]
    Allow,
    /// Refuse, naming the item (`airlock run` without `--again`).
    Refuse,
}

/// The model spec parses, its API key variable is set, its script or cassette reads; and the
/// security model's key, when `[security_model]` names one. `from_flag`: the spec came from
/// `--model` (else `[model] spec` of `config_origin`), named in the error.
pub(super) fn check_models(
    spec_text: &str,
    model_config: &ModelConfig,
    from_flag: bool,
    config: &Config,
    config_origin: &str,
) -> Result<(), RunError> {
    airlock_model::check_spec(spec_text, model_config).map_err(|e| {
        let origin = if from_flag {
            "--model".to_owned()
        } else {
            format!("[model] spec in {config_origin}")
        };
        RunError::Model(format!("{e} (the spec given by {origin})"))
    })?;
    if let Some(security) = &config.security_model {
        SecondOpinion::connect(security)
            .map_err(|e| RunError::Model(format!("[security_model] in {config_origin}: {e}")))?;
    }
    Ok(())
}

/// Ask the broker `[broker]` names whether it knows `repository` (the name the run registers
/// under) and which of `issue_id`'s items are open; with [`OpenItems::Refuse`], an open item
/// stops the run.
pub(super) fn check_broker(
    config: &Config,
    config_origin: &str,
    repository: &str,
    issue_id: &str,
    open_items: OpenItems,
) -> Result<(), RunError> {
    let endpoint = super::broker_endpoint(config, config_origin)?;
    let shown = endpoint.to_string();
    let request = Request::Preflight(Preflight {
        repository: repository.to_owned(),
        issue_id: issue_id.to_owned(),
    });
    let reply = BrokerSocket::new(endpoint, PREFLIGHT_TIMEOUT)
        .request(&request)
        .and_then(crate::adapters::typed::<PreflightReply>)
        .map_err(|failure: ToolFailure| match failure.code.as_str() {
            "broker_unreachable" => RunError::BrokerUnreachable {
                endpoint: shown.clone(),
                config: config_origin.to_owned(),
                cause: failure.message,
            },
            _ => RunError::BrokerCheck {
                message: failure.message,
            },
        })?;
    let (repository_known, items) = match reply {
        PreflightReply::Preflight {
            repository_known,
            open_items,
        } => (repository_known, open_items),
        PreflightReply::Failed { message } => return Err(RunError::BrokerCheck { message }),
    };
    if !repository_known {
        return Err(RunError::UnknownRepository {
            repository: repository.to_owned(),
            config: config_origin.to_owned(),
        });
    }
    match (open_items, items.into_iter().next()) {
        (OpenItems::Refuse, Some(item)) => Err(RunError::OpenItem {
            issue_id: issue_id.to_owned(),
            queue_id: item.queue_id,
            status: item.status,
            run_id: item.run_id,
        }),
        _ => Ok(()),
    }
}
