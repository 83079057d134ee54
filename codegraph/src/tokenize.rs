//! The code-aware tokenizer shared by indexing and querying.
//!
//! One function turns any text (source code, a path, an issue) into lowercase terms: every
//! identifier is kept whole and also split at `_`, at camelCase humps and at letter/digit
//! boundaries, so `parse_HTTPHeader2` yields `parse_httpheader2`, `parse`, `http`, `header`.
//! Indexing and querying must use the same function, or terms would not meet.

/// Terms longer than this are dropped (base64 blobs, minified code): they never match a query.
const MAX_TERM_CHARS: usize = 64;

/// Words too common in prose and code to carry signal; dropping them keeps postings short.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have",
    "he", "here", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no",
    "not", "of", "on", "one", "or", "our", "so", "some", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "was", "we",
    "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would",
    "you", "your", "self", "def", "return", "import", "none", "true", "false", "else", "elif",
    "let", "fn", "pub", "var", "const", "function", "new", "null",
];

static STOPWORD_SET: std::sync::LazyLock<std::collections::HashSet<&'static str>> =
    std::sync::LazyLock::new(|| STOPWORDS.iter().copied().collect());

fn is_stopword(term: &str) -> bool {
    STOPWORD_SET.contains(term)
}

fn keep(term: &str) -> bool {
    let chars = term.chars().count();
    (2..=MAX_TERM_CHARS).contains(&chars)
        && !term.chars().all(|c| c.is_ascii_digit())
        && !is_stopword(term)
}

/// Split one identifier into its parts: at `_`, at lower-to-upper humps, before the last
/// capital of an acronym followed by lowercase (`HTTPServer` -> `HTTP`, `Server`) and at
/// letter/digit boundaries.
pub fn split_identifier(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = piece.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let prev = chars[i - 1];
            let cur = chars[i];
            let next_is_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (prev.is_lowercase() && cur.is_uppercase())
                || (prev.is_uppercase() && cur.is_uppercase() && next_is_lower)
                || (prev.is_alphabetic() && cur.is_ascii_digit())
                || (prev.is_ascii_digit() && cur.is_alphabetic());
            if boundary {
                parts.push(chars[start..i].iter().collect::<String>());
                start = i;
            }
        }
        parts.push(chars[start..].iter().collect::<String>());
    }
    parts
}

/// Call `emit` with every term of `text`, in order of appearance (whole identifier first,
/// then its parts when it has more than one).
pub fn for_each_term(text: &str, mut emit: impl FnMut(&str)) {
    let mut lowered = String::new();
    for word in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        let trimmed = word.trim_matches('_');
        if trimmed.is_empty() || trimmed.len() > MAX_TERM_CHARS * 4 {
            continue;
        }
        lowered.clear();
        lowered.extend(trimmed.chars().flat_map(char::to_lowercase));
        if keep(&lowered) {
            emit(&lowered);
        }
        let parts = split_identifier(trimmed);
        if parts.len() > 1 {
            for part in parts {
                let part = part.to_lowercase();
                if keep(&part) {
                    emit(&part);
                }
            }
        }
    }
}

/// All terms of `text`, in order of appearance (with repeats).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t.to_string()));
    out
}
