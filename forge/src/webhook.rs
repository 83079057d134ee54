//! A webhook delivery as received, and the constant-time comparison that proves its origin.

use sha2::{Digest, Sha256};

/// One delivery as the listener received it: headers as sent and the raw body, unparsed.
#[derive(Debug, Clone, Copy)]
pub struct WebhookDelivery<'a> {
    /// The headers, names in any case.
    pub headers: &'a [(String, String)],
    /// The body's bytes.
    pub body: &'a [u8],
}

impl WebhookDelivery<'_> {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a verified delivery is: the event it reports and the id that makes a replay
/// recognisable (the caller records ids and refuses one seen before).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifiedDelivery {
    /// The forge's event name (`Issue Hook`, `Note Hook`, `Merge Request Hook`, ...).
    pub event: String,
    /// The forge's id of this delivery (GitLab's `X-Gitlab-Event-UUID`), when it sent one.
    pub delivery_id: Option<String>,
}

/// Whether `given` equals `expected`, in time that depends on neither's content nor length:
/// both are hashed and the digests compared byte by byte without an early exit.
pub fn secrets_match(given: &[u8], expected: &[u8]) -> bool {
    let a = Sha256::digest(given);
    let b = Sha256::digest(expected);
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[cfg(test)]
mod tests {
    use super::secrets_match;

    #[test]
    fn equal_secrets_match_and_others_do_not() {
        assert!(secrets_match(b"s3cret", b"s3cret"));
        assert!(!secrets_match(b"s3cret", b"s3cres"));
        assert!(!secrets_match(b"s3cret", b"s3cret-longer"));
        assert!(!secrets_match(b"", b"s3cret"));
    }
}
