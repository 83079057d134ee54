//! Where a forge token comes from. A forge client holds a [`TokenSource`], never a token: it
//! asks for the token as each request is built and drops it when the request returns.

use crate::error::{Error, Result};

/// Gives the token for one request.
pub trait TokenSource: Send + Sync {
    /// The token now; `None` when the forge is to be read without one (a public project).
    fn token(&self) -> Result<Option<String>>;

    /// What to name in an error about the token (a variable's name, never its value).
    fn describe(&self) -> String;
}

/// The token in an environment variable of this process, read at each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvToken {
    /// The variable's name (`[gitlab] token_env`).
    pub var: String,
}

impl TokenSource for EnvToken {
    fn token(&self) -> Result<Option<String>> {
        match std::env::var(&self.var) {
            Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_owned())),
            _ => Err(Error::TokenMissing {
                var: self.var.clone(),
            }),
        }
    }

    fn describe(&self) -> String {
        self.var.clone()
    }
}

/// No token: a public project read anonymously.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoToken;

impl TokenSource for NoToken {
    fn token(&self) -> Result<Option<String>> {
        Ok(None)
    }

    fn describe(&self) -> String {
        "no token".to_owned()
    }
}
