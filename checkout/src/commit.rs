//! The pinned commit id every later step uses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{CheckoutError, Result};

/// A full commit id: exactly 40 lowercase hexadecimal characters (SHA-1 object format).
///
/// Short ids, ref names and uppercase hex are rejected on construction: a `CommitId` is what
/// [`crate::Mirror::resolve`] returns, so holding one means "this run is pinned".
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitId(String);

impl CommitId {
    /// Number of hex characters in a full id.
    pub const LEN: usize = 40;

    /// Validates `s` as a full lowercase 40-hex commit id.
    pub fn parse(s: &str) -> Result<CommitId> {
        let valid = s.len() == Self::LEN
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if valid {
            Ok(CommitId(s.to_owned()))
        } else {
            Err(CheckoutError::InvalidCommitId {
                value: s.to_owned(),
            })
        }
    }

    /// The id as 40 lowercase hex characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first `n` characters (at most 40), for display in logs and prompts.
    pub fn short(&self, n: usize) -> &str {
        &self.0[..n.min(Self::LEN)]
    }

    pub(crate) fn from_oid(oid: git2::Oid) -> Result<CommitId> {
        CommitId::parse(&oid.to_string())
    }

    pub(crate) fn to_oid(&self) -> Result<git2::Oid> {
        git2::Oid::from_str(&self.0).map_err(|source| CheckoutError::Git {
            op: "parse commit id".to_owned(),
            source,
        })
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommitId({})", self.0)
    }
}

impl FromStr for CommitId {
    type Err = CheckoutError;

    fn from_str(s: &str) -> Result<CommitId> {
        CommitId::parse(s)
    }
}

impl AsRef<str> for CommitId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for CommitId {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CommitId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        CommitId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_full_lowercase_hex_only() {
        let ok = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(CommitId::parse(ok).unwrap().as_str(), ok);
        for bad in [
            "",
            "0123456",
            "0123456789ABCDEF0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef0123456g",
            "0123456789abcdef0123456789abcdef012345678",
            "main",
        ] {
            let err = CommitId::parse(bad).unwrap_err();
            assert!(
                matches!(err, CheckoutError::InvalidCommitId { .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn serde_round_trip_validates() {
        let id = CommitId::parse("89abcdef0123456789abcdef0123456789abcdef").unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"89abcdef0123456789abcdef0123456789abcdef\"");
        let back: CommitId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, id);
        assert!(serde_json::from_str::<CommitId>("\"abc\"").is_err());
        assert_eq!(id.short(7), "89abcde");
    }
}
