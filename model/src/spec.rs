//! Model spec strings (`openai:gpt-4o`, `scripted:demo.jsonl`, ...) parsed into a
//! [`ModelSpec`]; `factory` turns one into a [`crate::ChatModel`].

use std::path::PathBuf;

use crate::{Error, Result};

/// The forms [`ModelSpec::parse`] accepts, quoted in its errors.
pub const ACCEPTED_SPECS: &str = "openai:MODEL, anthropic:MODEL, ollama:MODEL, \
openai-compatible:BASE_URL#MODEL, scripted:PATH, replay:PATH";

/// The kinds a spec may start with, as `KIND:` (the forms of [`ACCEPTED_SPECS`]).
pub const KINDS: [&str; 6] = [
    "openai",
    "anthropic",
    "ollama",
    "openai-compatible",
    "scripted",
    "replay",
];

/// The known kind `kind` is most likely a misspelling of: one or two letters off (an edit
/// distance of at most 2), else none.
fn closest_kind(kind: &str) -> Option<&'static str> {
    KINDS
        .iter()
        .map(|k| (edit_distance(&kind.to_ascii_lowercase(), k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Where Ollama serves the OpenAI protocol by default.
pub const OLLAMA_BASE_URL: &str = "http://127.0.0.1:11434/v1";

/// A parsed model spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `openai:MODEL`: OpenAI's hosted chat completions.
    OpenAi {
        /// The model name.
        model: String,
    },
    /// `anthropic:MODEL`: Anthropic's hosted Messages API.
    Anthropic {
        /// The model name.
        model: String,
    },
    /// `ollama:MODEL`: the OpenAI protocol on Ollama's usual local port.
    Ollama {
        /// The model name.
        model: String,
    },
    /// `openai-compatible:BASE_URL#MODEL`: any server speaking OpenAI chat completions.
    OpenAiCompatible {
        /// The base URL, up to and including `/v1`.
        base_url: String,
        /// The model name.
        model: String,
    },
    /// `scripted:PATH`: plays a script of assistant turns.
    Scripted {
        /// The script file.
        path: PathBuf,
    },
    /// `replay:PATH`: replays a recorded cassette strictly in order.
    Replay {
        /// The cassette file.
        path: PathBuf,
    },
}

impl ModelSpec {
    /// Parses a spec string; the error lists the accepted forms.
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |reason: &str| Error::BadSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
            accepted: ACCEPTED_SPECS,
        };
        let Some((kind, rest)) = spec.split_once(':') else {
            return Err(bad(&format!(
                "missing the `KIND:` prefix (KIND is one of {}; e.g. anthropic:{spec})",
                KINDS.join(", ")
            )));
        };
        let rest = rest.trim();
        if rest.is_empty() {
            return Err(bad("nothing after the `:`"));
        }
        let model = || rest.to_string();
        match kind {
            "openai" => Ok(ModelSpec::OpenAi { model: model() }),
            "anthropic" => Ok(ModelSpec::Anthropic { model: model() }),
            "ollama" => Ok(ModelSpec::Ollama { model: model() }),
            "openai-compatible" => {
                // A base URL has no use for a fragment, so the first `#` ends it.
                let Some((base_url, model)) = rest.split_once('#') else {
                    return Err(bad("openai-compatible needs BASE_URL#MODEL"));
                };
                if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                    return Err(bad("the base URL must start with http:// or https://"));
                }
                if model.is_empty() {
                    return Err(bad("empty model name after `#`"));
                }
                Ok(ModelSpec::OpenAiCompatible {
                    base_url: base_url.trim_end_matches('/').to_string(),
                    model: model.to_string(),
                })
            }
            "scripted" => Ok(ModelSpec::Scripted {
                path: PathBuf::from(rest),
            }),
            "replay" => Ok(ModelSpec::Replay {
                path: PathBuf::from(rest),
            }),
            _ => Err(bad(&match closest_kind(kind) {
                Some(near) => format!("unknown kind `{kind}` (did you mean `{near}`?)"),
                None => format!("unknown kind `{kind}` (known: {})", KINDS.join(", ")),
            })),
        }
    }
}

impl std::str::FromStr for ModelSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        ModelSpec::parse(s)
    }
}
