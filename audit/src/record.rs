//! One line of the log and the two hashes that chain it.
//!
//! A line is `{"seq":..,"ts":..,"run_id":..,"kind":..,"payload":{..},"prev":"<hex>","hash":"<hex>"}`.
//! `hash` is the SHA-256 of the same line without its `,"hash":"..."` member (so a record
//! proves its own content); `prev` is the SHA-256 of the previous line's exact bytes (without
//! the newline), or [`GENESIS`] for the first record. Both are computed over bytes, never over
//! a re-serialisation, so verification does not depend on how JSON is formatted.

use crate::error::Result;
use crate::event::Event;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `prev` of the first record of a log.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

const HASH_MEMBER: &str = ",\"hash\":\"";
/// Bytes of `,"hash":"<64 hex>"}` at the end of every line.
const HASH_SUFFIX_LEN: usize = HASH_MEMBER.len() + 64 + 2;

/// One record of the audit log as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the chain, from 1, without gaps.
    pub seq: u64,
    /// When it was appended (RFC 3339, UTC).
    pub ts: String,
    /// The run it belongs to.
    pub run_id: String,
    /// Event kind (see [`Event::kind`]).
    pub kind: String,
    /// Event fields.
    pub payload: serde_json::Value,
    /// SHA-256 of the previous line's bytes.
    pub prev: String,
    /// SHA-256 of this line without its `hash` member.
    pub hash: String,
}

#[derive(Serialize)]
struct Body<'a> {
    seq: u64,
    ts: &'a str,
    run_id: &'a str,
    kind: &'a str,
    payload: &'a serde_json::Value,
    prev: &'a str,
}

impl Record {
    /// The typed event of this record.
    pub fn event(&self) -> Result<Event> {
        Event::from_kind_payload(self.seq, &self.kind, &self.payload)
    }
}

/// SHA-256 hex of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Build the exact line (without newline) of a new record and its self-hash.
pub(crate) fn encode(
    seq: u64,
    ts: &str,
    run_id: &str,
    kind: &str,
    payload: &serde_json::Value,
    prev: &str,
) -> std::result::Result<(String, String), serde_json::Error> {
    let body = serde_json::to_string(&Body {
        seq,
        ts,
        run_id,
        kind,
        payload,
        prev,
    })?;
    let hash = sha256_hex(body.as_bytes());
    let mut line = String::with_capacity(body.len() + HASH_SUFFIX_LEN);
    line.push_str(&body[..body.len() - 1]);
    line.push_str(HASH_MEMBER);
    line.push_str(&hash);
    line.push_str("\"}");
    Ok((line, hash))
}

/// Why a line is not a valid record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LineFault {
    /// Not JSON of the record shape.
    Malformed(String),
    /// Parses, but its content does not match its own `hash`.
    HashMismatch(Box<Record>),
}

/// Parse one line and check its self-hash.
pub(crate) fn decode(line: &[u8]) -> std::result::Result<Record, LineFault> {
    let record: Record = serde_json::from_slice(line)
        .map_err(|e| LineFault::Malformed(format!("not a JSON audit record ({e})")))?;
    if line.len() < HASH_SUFFIX_LEN + 2
        || !line.ends_with(b"\"}")
        || &line[line.len() - HASH_SUFFIX_LEN..line.len() - HASH_SUFFIX_LEN + HASH_MEMBER.len()]
            != HASH_MEMBER.as_bytes()
    {
        return Err(LineFault::Malformed(
            "the hash member is not the last member of the line".into(),
        ));
    }
    let mut body = line[..line.len() - HASH_SUFFIX_LEN].to_vec();
    body.push(b'}');
    if sha256_hex(&body) != record.hash {
        return Err(LineFault::HashMismatch(Box::new(record)));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode() {
        let payload = serde_json::json!({"a": "x\ny"});
        let (line, _) = encode(
            3,
            "2026-01-01T00:00:00.000000Z",
            "run-1",
            "k",
            &payload,
            GENESIS,
        )
        .unwrap();
        assert!(!line.contains('\n'));
        let r = decode(line.as_bytes()).unwrap();
        assert_eq!(r.seq, 3);
        assert_eq!(r.payload, payload);
        let edited = line.replace("run-1", "run-2");
        assert!(matches!(
            decode(edited.as_bytes()),
            Err(LineFault::HashMismatch(_))
        ));
        assert!(matches!(
            decode(b"{\"seq\":1"),
            Err(LineFault::Malformed(_))
        ));
    }
}
