//! The HTTP adapter: one blocking reqwest client (rustls, ring provider) per model, the
//! provider's authentication headers, retries with backoff, and cassette recording.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use reqwest::blocking::Client;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::cassette::{
    CassetteEntry, CassetteWriter, REDACTED, RecordedRequest, RecordedResponse,
    is_sensitive_header, scrub_str, scrub_value,
};
use crate::spec::{ModelSpec, OLLAMA_BASE_URL};
use crate::wire::{WireProtocol, body_value, provider_error_message, with_defaults};
use crate::{ChatModel, ChatRequest, ChatResponse, Error, ModelConfig, Result, RetryConfig};

const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

/// An API key. Its `Debug` never shows the value.
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A model behind an HTTP API: OpenAI chat completions (OpenAI, Ollama, any compatible server)
/// or Anthropic Messages.
///
/// Retries 408, 409, 429, 5xx and connection failures up to `retry.max_retries` times, sleeping
/// `Retry-After`/`retry-after-ms` when the server says so and exponential backoff with jitter
/// otherwise, every sleep capped at `retry.max_delay_ms`. A timeout is not retried: the
/// provider may still be generating (and billing) the first answer.
#[derive(Debug)]
pub struct HttpModel {
    name: String,
    provider: &'static str,
    protocol: WireProtocol,
    model: String,
    url: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    recorded_headers: BTreeMap<String, String>,
    api_key: Option<Secret>,
    client: Client,
    retry: RetryConfig,
    timeout_ms: u64,
    config: ModelConfig,
    recorder: Option<CassetteWriter>,
}

impl HttpModel {
    /// Builds the adapter for an HTTP spec (`openai:`, `anthropic:`, `ollama:`,
    /// `openai-compatible:`); reads the API key from the process environment now.
    pub fn new(spec: &ModelSpec, config: &ModelConfig) -> Result<Self> {
        Self::with_env(spec, config, &|var| std::env::var(var).ok())
    }

    /// As [`HttpModel::new`], looking environment variables up with `env` (tests and embedders
    /// that hold keys elsewhere).
    pub fn with_env(
        spec: &ModelSpec,
        config: &ModelConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let (provider, protocol, model, default_base, default_key_env) = match spec {
            ModelSpec::OpenAi { model } => (
                "openai",
                WireProtocol::OpenaiChat,
                model,
                OPENAI_BASE_URL.to_string(),
                Some("OPENAI_API_KEY"),
            ),
            ModelSpec::Anthropic { model } => (
                "anthropic",
                WireProtocol::AnthropicMessages,
                model,
                ANTHROPIC_BASE_URL.to_string(),
                Some("ANTHROPIC_API_KEY"),
            ),
            ModelSpec::Ollama { model } => (
                "ollama",
                WireProtocol::OpenaiCompatibleChat,
                model,
                OLLAMA_BASE_URL.to_string(),
                None,
            ),
            ModelSpec::OpenAiCompatible { base_url, model } => (
                "openai-compatible",
                WireProtocol::OpenaiCompatibleChat,
                model,
                base_url.clone(),
                None,
            ),
            ModelSpec::Scripted { .. } | ModelSpec::Replay { .. } => {
                return Err(Error::Config(
                    "scripted and replay specs are not HTTP models".to_string(),
                ));
            }
        };
        let base = match (spec, &config.base_url) {
            (ModelSpec::OpenAiCompatible { .. }, _) | (_, None) => default_base,
            (_, Some(url)) => url.trim_end_matches('/').to_string(),
        };
        let url = format!("{base}{}", protocol.endpoint());
        let name = match spec {
            ModelSpec::OpenAiCompatible { base_url, model } => {
                format!("openai-compatible:{base_url}#{model}")
            }
            _ => format!("{provider}:{model}"),
        };

        let key_env = config.api_key_env.as_deref().or(default_key_env);
        let api_key = match key_env {
            Some(var) => match env(var) {
                Some(v) if !v.trim().is_empty() => Some(Secret(v.trim().to_string())),
                _ => {
                    return Err(Error::MissingApiKey {
                        env_var: var.to_string(),
                    });
                }
            },
            None => None,
        };

        let mut headers = Vec::new();
        let mut recorded_headers = BTreeMap::new();
        let mut push = |name: &str, value: &str, sensitive: bool| -> Result<()> {
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| Error::Config(format!("header name {name:?}: {e}")))?;
            let mut header_value = HeaderValue::from_str(value).map_err(|e| {
                // The value may be a secret: name the header, never the value.
                Error::Config(format!(
                    "value of header {name:?} is not a valid header: {e}"
                ))
            })?;
            header_value.set_sensitive(sensitive);
            let shown = if sensitive {
                REDACTED.to_string()
            } else {
                value.to_string()
            };
            recorded_headers.insert(header_name.as_str().to_string(), shown);
            headers.push((header_name, header_value));
            Ok(())
        };
        push("content-type", "application/json", false)?;
        match (protocol, &api_key) {
            (WireProtocol::AnthropicMessages, key) => {
                push("anthropic-version", &config.anthropic_version, false)?;
                if let Some(Secret(k)) = key {
                    push("x-api-key", k, true)?;
                }
            }
            (_, Some(Secret(k))) => push("authorization", &format!("Bearer {k}"), true)?,
            (_, None) => {}
        }
        let key_text = api_key.as_ref().map(|Secret(k)| k.as_str());
        for (name, value) in &config.extra_headers {
            let sensitive =
                is_sensitive_header(name) || key_text.is_some_and(|k| value.contains(k));
            push(name, value, sensitive)?;
        }

        // Without a process-wide provider reqwest (built with `rustls-no-provider`) has no
        // crypto; installing fails harmlessly when someone already installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;

        let recorder = match &config.record_cassette {
            Some(path) => Some(CassetteWriter::open(path)?),
            None => None,
        };

        Ok(HttpModel {
            name,
            provider,
            protocol,
            model: model.clone(),
            url,
            headers,
            recorded_headers,
            api_key,
            client,
            retry: config.retry.clone(),
            timeout_ms: config.timeout_ms,
            config: config.clone(),
            recorder,
        })
    }

    fn key(&self) -> Option<&str> {
        self.api_key.as_ref().map(|Secret(k)| k.as_str())
    }

    fn record(&self, body: &serde_json::Value, response: RecordedResponse) -> Result<()> {
        let Some(recorder) = &self.recorder else {
            return Ok(());
        };
        let key = self.key();
        let response = match response {
            RecordedResponse::Http { status, body } => RecordedResponse::Http {
                status,
                body: scrub_value(&body, key),
            },
            RecordedResponse::Connection { message } => RecordedResponse::Connection {
                message: scrub_str(&message, key),
            },
            other => other,
        };
        recorder.append(&CassetteEntry {
            provider: self.provider.to_string(),
            protocol: self.protocol,
            model: self.model.clone(),
            request: RecordedRequest {
                method: "POST".to_string(),
                url: scrub_str(&self.url, key),
                headers: self.recorded_headers.clone(),
                body: scrub_value(body, key),
            },
            response,
        })
    }
}

/// The sleep before retry number `retry` (1-based): what the server asked for, else
/// `base * 2^(retry-1)` jittered to between half and all of it; never more than the cap.
fn retry_delay(policy: &RetryConfig, retry: u32, retry_after: Option<Duration>) -> Duration {
    let cap = Duration::from_millis(policy.max_delay_ms);
    if let Some(d) = retry_after {
        return d.min(cap);
    }
    let exp = policy
        .base_delay_ms
        .saturating_mul(1u64 << retry.saturating_sub(1).min(30));
    let full = exp.min(policy.max_delay_ms);
    Duration::from_millis(fastrand::u64(full / 2..=full))
}

fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// `retry-after-ms` (OpenAI) or `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

impl ChatModel for HttpModel {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse> {
        let req = with_defaults(req, &self.config);
        let body = self
            .protocol
            .encode(&self.model, &req, self.config.prompt_cache);
        let body_text = serde_json::to_string(&body)
            .map_err(|e| Error::Config(format!("cannot serialise the request: {e}")))?;
        let key = self.key();
        let mut attempts: u32 = 0;
        loop {
            attempts += 1;
            let mut request = self.client.post(&self.url).body(body_text.clone());
            for (name, value) in &self.headers {
                request = request.header(name.clone(), value.clone());
            }
            let transport_error = match request.send() {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let wait = retry_after(response.headers());
                    match response.text() {
                        Ok(text) => {
                            let value = body_value(&text);
                            if (200..300).contains(&status) {
                                self.record(
                                    &body,
                                    RecordedResponse::Http {
                                        status,
                                        body: value.clone(),
                                    },
                                )?;
                                let (message, stop_reason, usage) = self
                                    .protocol
                                    .decode(self.provider, &value)
                                    .map_err(|e| scrub_error(e, key))?;
                                return Ok(ChatResponse {
                                    cost_usd: self.config.cost_usd(
                                        &self.model,
                                        &usage,
                                        self.protocol.cache_rates(),
                                    ),
                                    message,
                                    stop_reason,
                                    usage,
                                });
                            }
                            if is_retryable_status(status) && attempts <= self.retry.max_retries {
                                let sleep = retry_delay(&self.retry, attempts, wait);
                                tracing::warn!(
                                    provider = self.provider,
                                    status,
                                    attempt = attempts,
                                    sleep_ms = sleep.as_millis() as u64,
                                    "retrying model call"
                                );
                                std::thread::sleep(sleep);
                                continue;
                            }
                            self.record(
                                &body,
                                RecordedResponse::Http {
                                    status,
                                    body: value.clone(),
                                },
                            )?;
                            return Err(Error::Http {
                                provider: self.provider.to_string(),
                                status,
                                message: scrub_str(&provider_error_message(&value), key),
                                attempts,
                            });
                        }
                        Err(e) => e,
                    }
                }
                Err(e) => e,
            };
            if transport_error.is_timeout() {
                self.record(
                    &body,
                    RecordedResponse::Timeout {
                        timeout_ms: self.timeout_ms,
                    },
                )?;
                return Err(Error::Timeout {
                    provider: self.provider.to_string(),
                    timeout_ms: self.timeout_ms,
                    attempts,
                });
            }
            let message = scrub_str(&error_chain(&transport_error), key);
            if attempts <= self.retry.max_retries {
                let sleep = retry_delay(&self.retry, attempts, None);
                tracing::warn!(provider = self.provider, attempt = attempts, sleep_ms = sleep.as_millis() as u64, error = %message, "retrying model call after a connection failure");
                std::thread::sleep(sleep);
                continue;
            }
            self.record(
                &body,
                RecordedResponse::Connection {
                    message: message.clone(),
                },
            )?;
            return Err(Error::Connection {
                provider: self.provider.to_string(),
                message,
                attempts,
            });
        }
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// The error and its sources, joined, so "connection refused" is not hidden behind
/// "error sending request".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn scrub_error(e: Error, key: Option<&str>) -> Error {
    match e {
        Error::MalformedResponse { provider, detail } => Error::MalformedResponse {
            provider,
            detail: scrub_str(&detail, key),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")])),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")])),
            Some(Duration::from_millis(1500))
        );
        // OpenAI's millisecond header wins over the coarser one.
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        // A date in the past means "now".
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            Some(Duration::ZERO)
        );
        let future = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let d = retry_after(&headers(&[("retry-after", &future)])).unwrap();
        assert!(
            d > Duration::from_secs(3000) && d <= Duration::from_secs(3600),
            "{d:?}"
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")])), None);
        assert_eq!(retry_after(&headers(&[])), None);
    }

    #[test]
    fn delays_honour_retry_after_and_the_cap() {
        let policy = RetryConfig {
            max_retries: 5,
            base_delay_ms: 100,
            max_delay_ms: 1_000,
        };
        assert_eq!(
            retry_delay(&policy, 1, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            retry_delay(&policy, 1, Some(Duration::from_secs(60))),
            Duration::from_millis(1_000)
        );
        for _ in 0..200 {
            let d1 = retry_delay(&policy, 1, None).as_millis();
            assert!((50..=100).contains(&d1), "{d1}");
            let d3 = retry_delay(&policy, 3, None).as_millis();
            assert!((200..=400).contains(&d3), "{d3}");
            let d9 = retry_delay(&policy, 9, None).as_millis();
            assert!((500..=1_000).contains(&d9), "{d9}");
            let huge = retry_delay(&policy, u32::MAX, None).as_millis();
            assert!(huge <= 1_000, "{huge}");
        }
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
