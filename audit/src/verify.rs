//! Walking the chain and naming what is wrong with it.

use crate::error::{Result, io};
use crate::log::head_path;
use crate::record::{self, GENESIS, LineFault, Record};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};

/// What is wrong at one place of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A record's content was changed after it was written.
    Edited,
    /// Records are missing from the middle or the start of the chain.
    Removed,
    /// A record that is not part of the chain was put into the file.
    Inserted,
    /// A record is not where the chain puts it.
    Reordered,
    /// A line that is not a record at all.
    Malformed,
    /// Records are missing at the end (the head file names a newer record).
    Truncated,
    /// The last line has no newline: a writer died mid-append. Not tampering; the next append
    /// records a `tail_repaired` event.
    TornTail,
}

/// One finding of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// What kind of damage.
    pub kind: ProblemKind,
    /// 1-based line of the file where it was found (for `truncated`, the line after the last).
    pub line: u64,
    /// The seq of the record concerned, when there is one.
    pub seq: Option<u64>,
    /// A sentence for the operator.
    pub message: String,
}

/// A torn write that a later append already recorded with `tail_repaired`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairedTail {
    /// Line of the `tail_repaired` record.
    pub line: u64,
    /// Its seq.
    pub seq: u64,
    /// Byte offset of the torn bytes.
    pub offset: u64,
    /// Their length.
    pub len: u64,
}

/// The result of walking a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The log verified.
    pub path: PathBuf,
    /// Lines read (complete or not).
    pub lines: u64,
    /// Records that parsed and matched their own hash.
    pub records: u64,
    /// The highest seq in the chain.
    pub last_seq: u64,
    /// SHA-256 of the last record's line: keep it somewhere else to detect a rewrite later.
    pub head_hash: Option<String>,
    /// Whether a head file was found and compared.
    pub head_checked: bool,
    /// Torn writes already repaired by a later append (not problems).
    pub repaired: Vec<RepairedTail>,
    /// Everything wrong, in file order.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// No problem at all.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }

    /// A problem other than a torn tail: evidence of tampering or corruption.
    pub fn is_tampered(&self) -> bool {
        self.problems
            .iter()
            .any(|p| p.kind != ProblemKind::TornTail)
    }
}

#[derive(Deserialize)]
struct Head {
    seq: u64,
    hash: String,
}

struct Line<'a> {
    number: u64,
    offset: u64,
    bytes: &'a [u8],
    hash: String,
    decoded: std::result::Result<Record, LineFault>,
}

/// Verify the log at `path` (and its head file, when present).
pub fn verify(path: impl AsRef<Path>) -> Result<VerifyReport> {
    let path = path.as_ref();
    let file = File::open(path).map_err(io(path, "open"))?;
    // A shared lock keeps appends out while the log and its head file are read together.
    file.lock_shared().map_err(io(path, "lock"))?;
    let data = std::fs::read(path).map_err(io(path, "read"));
    let head = std::fs::read(head_path(path)).ok();
    let _ = file.unlock();
    let data = data?;
    let head: Option<Head> = head.and_then(|h| serde_json::from_slice(&h).ok());
    Ok(verify_bytes(path, &data, head.as_ref()))
}

fn verify_bytes(path: &Path, data: &[u8], head: Option<&Head>) -> VerifyReport {
    let mut lines = Vec::new();
    let mut offset = 0usize;
    let mut torn = None;
    for (i, piece) in data.split_inclusive(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if piece.last() != Some(&b'\n') {
            torn = Some((number, offset as u64, piece.len() as u64));
        } else {
            let bytes = &piece[..piece.len() - 1];
            lines.push(Line {
                number,
                offset: offset as u64,
                bytes,
                hash: record::sha256_hex(bytes),
                decoded: record::decode(bytes),
            });
        }
        offset += piece.len();
    }
    let total_lines = lines.len() as u64 + u64::from(torn.is_some());

    let mut problems = Vec::new();
    let mut repaired = Vec::new();
    // Torn regions that a later `tail_repaired` record vouches for.
    let mut vouched: Vec<(u64, u64)> = Vec::new();
    for l in &lines {
        if let Ok(r) = &l.decoded
            && r.kind == "tail_repaired"
        {
            let off = r.payload.get("offset").and_then(serde_json::Value::as_u64);
            let len = r.payload.get("len").and_then(serde_json::Value::as_u64);
            let sha = r.payload.get("sha256").and_then(serde_json::Value::as_str);
            if let (Some(off), Some(len), Some(sha)) = (off, len, sha) {
                let region = usize::try_from(off)
                    .ok()
                    .zip(usize::try_from(off.saturating_add(len)).ok())
                    .and_then(|(a, b)| data.get(a..b));
                if region.is_some_and(|bytes| record::sha256_hex(bytes) == sha) {
                    vouched.push((off, off + len));
                    repaired.push(RepairedTail {
                        line: l.number,
                        seq: r.seq,
                        offset: off,
                        len,
                    });
                } else {
                    problems.push(Problem {
                        kind: ProblemKind::Edited,
                        line: l.number,
                        seq: Some(r.seq),
                        message: format!(
                            "tail_repaired record seq {} names torn bytes at offset {off} that are no longer what it recorded",
                            r.seq
                        ),
                    });
                }
            }
        }
    }

    // First occurrence wins, so a pasted copy of a record never redirects the chain forward.
    let mut by_hash: HashMap<&str, usize> = HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        if l.decoded.is_ok() {
            by_hash.entry(l.hash.as_str()).or_insert(i);
        }
    }
    let mut referenced_by: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        match &l.decoded {
            Ok(r) => referenced_by.entry(r.prev.as_str()).or_default().push(i),
            Err(LineFault::HashMismatch(r)) => {
                referenced_by.entry(r.prev.as_str()).or_default().push(i)
            }
            Err(LineFault::Malformed(_)) => {}
        }
    }

    // Whether some line after `i` links to the current chain head (so `i` is not its successor).
    let head_still_linked = |head_at: Option<(usize, u64, bool)>, i: usize| {
        head_at.is_some_and(|(p, _, _)| {
            referenced_by
                .get(lines[p].hash.as_str())
                .is_some_and(|ks| ks.iter().any(|&k| k > i))
        })
    };
    // The chain head so far: line index, its seq, and whether it was already reported edited.
    let mut head_at: Option<(usize, u64, bool)> = None;
    let mut out_of_place: HashSet<usize> = HashSet::new();
    let mut valid = 0u64;
    for (i, l) in lines.iter().enumerate() {
        let (r, self_edited) = match &l.decoded {
            Ok(r) => {
                valid += 1;
                (r, false)
            }
            Err(LineFault::HashMismatch(r)) => {
                let r: &Record = r;
                problems.push(Problem {
                    kind: ProblemKind::Edited,
                    line: l.number,
                    seq: Some(r.seq),
                    message: format!(
                        "record seq {} at line {} was edited: its content no longer matches its own hash",
                        r.seq, l.number
                    ),
                });
                (r, true)
            }
            Err(LineFault::Malformed(why)) => {
                let end = l.offset + l.bytes.len() as u64;
                if !vouched.iter().any(|&(a, b)| l.offset >= a && end <= b) {
                    problems.push(Problem {
                        kind: ProblemKind::Malformed,
                        line: l.number,
                        seq: None,
                        message: format!("line {} is not a valid record: {why}", l.number),
                    });
                }
                continue;
            }
        };
        let (expected, want_prev, prev_edited) = match head_at {
            Some((p, seq, edited)) => (seq + 1, lines[p].hash.as_str(), edited),
            None => (1, GENESIS, false),
        };
        if r.prev == want_prev || (prev_edited && r.seq == expected) {
            if r.seq != expected {
                problems.push(Problem {
                    kind: ProblemKind::Edited,
                    line: l.number,
                    seq: Some(r.seq),
                    message: format!(
                        "record at line {} says seq {} but follows seq {}: its seq was rewritten",
                        l.number,
                        r.seq,
                        expected - 1
                    ),
                });
            }
            head_at = Some((i, r.seq, self_edited));
            continue;
        }
        match by_hash.get(r.prev.as_str()).copied() {
            Some(j) if j > i => {
                out_of_place.insert(i);
                problems.push(Problem {
                    kind: ProblemKind::Reordered,
                    line: l.number,
                    seq: Some(r.seq),
                    message: format!(
                        "record seq {} at line {} is out of order: it follows the record at line {}, which comes after it",
                        r.seq, l.number, lines[j].number
                    ),
                });
            }
            Some(j) if out_of_place.contains(&j) => {
                // The chain continues through a record already reported as out of order.
                head_at = Some((i, r.seq, self_edited));
            }
            Some(_) if head_still_linked(head_at, i) => {
                // The chain goes on from the current head after this line: this one is extra.
                out_of_place.insert(i);
                problems.push(Problem {
                    kind: ProblemKind::Inserted,
                    line: l.number,
                    seq: Some(r.seq),
                    message: format!(
                        "record seq {} at line {} was inserted: it is a copy or forgery linked to an earlier record",
                        r.seq, l.number
                    ),
                });
            }
            Some(j) => {
                for k in j + 1..i {
                    if out_of_place.contains(&k) {
                        continue;
                    }
                    let seq = match &lines[k].decoded {
                        Ok(x) => Some(x.seq),
                        Err(LineFault::HashMismatch(x)) => Some(x.seq),
                        Err(LineFault::Malformed(_)) => None,
                    };
                    if let Some(seq) = seq {
                        problems.push(Problem {
                            kind: ProblemKind::Inserted,
                            line: lines[k].number,
                            seq: Some(seq),
                            message: format!(
                                "record seq {seq} at line {} was inserted: the chain goes from line {} straight to line {}",
                                lines[k].number, lines[j].number, l.number
                            ),
                        });
                    }
                }
                head_at = Some((i, r.seq, self_edited));
            }
            None => {
                let head_still_linked = head_still_linked(head_at, i);
                if r.seq > expected && !head_still_linked {
                    problems.push(Problem {
                        kind: ProblemKind::Removed,
                        line: l.number,
                        seq: Some(expected),
                        message: if r.seq - 1 == expected {
                            format!(
                                "record seq {expected} was removed (missing before line {})",
                                l.number
                            )
                        } else {
                            format!(
                                "records seq {expected}..={} were removed (missing before line {})",
                                r.seq - 1,
                                l.number
                            )
                        },
                    });
                    head_at = Some((i, r.seq, self_edited));
                } else if r.seq < expected || head_still_linked {
                    out_of_place.insert(i);
                    problems.push(Problem {
                        kind: ProblemKind::Inserted,
                        line: l.number,
                        seq: Some(r.seq),
                        message: format!(
                            "record seq {} at line {} was inserted: it links to no record of this log",
                            r.seq, l.number
                        ),
                    });
                } else {
                    if let Some((p, seq, _)) = head_at {
                        problems.push(Problem {
                            kind: ProblemKind::Edited,
                            line: lines[p].number,
                            seq: Some(seq),
                            message: format!(
                                "record seq {seq} at line {} was edited: the next record (line {}) was chained to different bytes",
                                lines[p].number, l.number
                            ),
                        });
                    } else {
                        problems.push(Problem {
                            kind: ProblemKind::Edited,
                            line: l.number,
                            seq: Some(r.seq),
                            message: format!(
                                "record seq {} at line {} should start the chain but its prev is not the genesis value",
                                r.seq, l.number
                            ),
                        });
                    }
                    head_at = Some((i, r.seq, self_edited));
                }
            }
        }
    }

    if let Some((number, off, len)) = torn {
        problems.push(Problem {
            kind: ProblemKind::TornTail,
            line: number,
            seq: None,
            message: format!(
                "line {number} is torn: {len} bytes at offset {off} without a newline (a writer stopped mid-append); the next append records a tail_repaired event"
            ),
        });
    }

    let last_seq = head_at.map(|(_, s, _)| s).unwrap_or(0);
    let head_hash = head_at.map(|(p, _, _)| lines[p].hash.clone());
    if let Some(h) = head {
        let at = lines
            .iter()
            .rev()
            .find(|l| matches!(&l.decoded, Ok(r) if r.seq == h.seq));
        match at {
            None if h.seq > last_seq => problems.push(Problem {
                kind: ProblemKind::Truncated,
                line: total_lines + 1,
                seq: Some(last_seq + 1),
                message: format!(
                    "the log ends at seq {last_seq} but its head file records seq {}: records seq {}..={} are missing from the end (cut off, or lost in a crash before reaching the disk)",
                    h.seq,
                    last_seq + 1,
                    h.seq
                ),
            }),
            Some(l) if l.hash != h.hash && !problems.iter().any(|p| p.line == l.number) => {
                problems.push(Problem {
                    kind: ProblemKind::Edited,
                    line: l.number,
                    seq: Some(h.seq),
                    message: format!(
                        "record seq {} at line {} was edited: it no longer matches the head file",
                        h.seq, l.number
                    ),
                });
            }
            _ => {}
        }
    }
    problems.sort_by_key(|p| (p.line, p.kind));
    VerifyReport {
        path: path.to_path_buf(),
        lines: total_lines,
        records: valid,
        last_seq,
        head_hash,
        head_checked: head.is_some(),
        repaired,
        problems,
    }
}
