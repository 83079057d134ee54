//! The one error type of forge access: each variant names the request, the forge's answer and
//! what to do. None carries a token.

/// What went wrong talking to a forge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The token's source has nothing to give (an environment variable unset or empty).
    #[error("the forge token is missing: {var} is not set or is empty; export it")]
    TokenMissing {
        /// Where the token was to come from (a variable's name).
        var: String,
    },
    /// The configuration cannot address a forge (a bad `api_url` or project).
    #[error("forge configuration: {problem}")]
    Config {
        /// What is wrong and what to write instead.
        problem: String,
    },
    /// An issue reference is not one this forge understands.
    #[error("invalid issue reference {given:?}: {problem}")]
    Reference {
        /// What was given.
        given: String,
        /// What is wrong with it and the accepted shapes.
        problem: String,
    },
    /// A label a forge cannot carry in its request (GitLab separates labels with commas).
    #[error("label {label:?} cannot be sent: {problem}")]
    Label {
        /// The label.
        label: String,
        /// Why.
        problem: String,
    },
    /// A text longer than the forge accepts: it is refused before it is sent, so that nothing
    /// is cut silently.
    #[error("{what} is {chars} characters; the forge accepts at most {limit}: shorten it")]
    TooLong {
        /// What the text is (`a note`, `a merge request description`).
        what: &'static str,
        /// Its length in characters.
        chars: usize,
        /// The forge's limit.
        limit: usize,
    },
    /// The request did not complete (connection refused, TLS, timeout).
    #[error("{method} {url} failed: {message}")]
    Transport {
        /// `GET`, `POST`, ...
        method: &'static str,
        /// The URL (no credential is ever in one).
        url: String,
        /// The client's message, redacted.
        message: String,
    },
    /// The forge answered with an error status.
    #[error("{method} {url} answered {status}: {problem}")]
    Status {
        /// `GET`, `POST`, ...
        method: &'static str,
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What it means and what to do.
        problem: String,
    },
    /// The answer is not the shape the forge's API documents.
    #[error("unexpected answer to {method} {url}: {problem}")]
    Shape {
        /// `GET`, `POST`, ...
        method: &'static str,
        /// The URL.
        url: String,
        /// What was wrong.
        problem: String,
    },
    /// A webhook delivery that is not proven to come from the forge: it must be dropped
    /// unread.
    #[error("webhook delivery refused: {problem}")]
    Webhook {
        /// What was missing or wrong (never the secret or the token sent).
        problem: String,
    },
}

/// Result alias for forge access.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error with every occurrence of `token` in its texts replaced by `***`: what a
    /// request failed with never carries the token it was sent with (a URL echoed back, a
    /// transport error that quotes a header).
    pub(crate) fn redacted(self, token: Option<&str>) -> Error {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return self;
        };
        let clean = |s: String| s.replace(token, "***");
        match self {
            Error::Transport {
                method,
                url,
                message,
            } => Error::Transport {
                method,
                url: clean(url),
                message: clean(message),
            },
            Error::Status {
                method,
                url,
                status,
                problem,
            } => Error::Status {
                method,
                url: clean(url),
                status,
                problem: clean(problem),
            },
            Error::Shape {
                method,
                url,
                problem,
            } => Error::Shape {
                method,
                url: clean(url),
                problem: clean(problem),
            },
            other => other,
        }
    }
}
