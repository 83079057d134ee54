//! Appending to the log: locking, the tail, torn writes and durability.

use crate::error::{Error, Result, io};
use crate::event::Event;
use crate::record::{self, GENESIS, LineFault, Record};
use crate::time::Timestamp;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How hard [`AuditLog::append`] works to make a record durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// fsync after every record, not only after the ones [`Event::must_sync`] names.
    pub sync_all: bool,
}

/// Bytes at the end of the log left by a writer that died mid-append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the torn bytes start.
    pub offset: u64,
    /// Number of torn bytes.
    pub len: u64,
}

/// An append-only, hash-chained JSONL audit log shared by several processes.
///
/// Every append takes an exclusive `flock` on the log file, re-reads the tail under the lock to
/// learn the last `seq` and hash, writes one line with a single `write` in append mode, and
/// releases the lock. Within one process the handle is also guarded by a mutex, so it can be
/// shared between threads (`&self`).
///
/// A torn tail (a line without its newline, the mark of a writer that crashed mid-append) is
/// reported by [`AuditLog::torn_tail`] after `open` and by `verify`. The next append keeps the
/// torn bytes exactly where they are, ends them with a newline and records a `tail_repaired`
/// event naming their offset, length and SHA-256 before its own record: nothing is deleted, the
/// chain continues from the last good record, and the log keeps accepting the broker's
/// decisions after a crash instead of stopping until someone intervenes. A last line that is
/// complete but invalid is not a crash signature; appends then refuse with
/// [`Error::CorruptTail`].
///
/// Next to the log, `<log>.head` holds the seq and line hash of the newest record, so
/// `verify` also notices records cut off the end at a line boundary.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
    options: LogOptions,
    torn_at_open: Option<TornTail>,
}

struct FlockGuard<'a>(&'a File);

impl Drop for FlockGuard<'_> {
    fn drop(&mut self) {
        // Closing or exiting releases the lock too; an unlock error leaves nothing to undo.
        let _ = self.0.unlock();
    }
}

/// The newest valid record and whatever follows it.
struct Tail {
    last: Option<(u64, String)>,
    torn: Option<(u64, Vec<u8>)>,
}

impl AuditLog {
    /// Open (creating it and its directory if needed) the log at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<AuditLog> {
        Self::open_with(path, LogOptions::default())
    }

    /// Open with explicit options. Fails with [`Error::CorruptTail`] when the last line is
    /// complete but not a valid record.
    pub fn open_with(path: impl AsRef<Path>, options: LogOptions) -> Result<AuditLog> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io(parent, "create directory"))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io(&path, "open"))?;
        let torn_at_open = {
            file.lock_shared().map_err(io(&path, "lock"))?;
            let guard = FlockGuard(&file);
            let tail = read_tail(&path, guard.0)?;
            tail.torn.map(|(offset, bytes)| TornTail {
                offset,
                len: bytes.len() as u64,
            })
        };
        Ok(AuditLog {
            path,
            file: Mutex::new(file),
            options,
            torn_at_open,
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A torn tail found when the log was opened (the next append records its repair).
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn_at_open.as_ref()
    }

    /// Append one event of run `run_id` and return the record as written.
    pub fn append(&self, run_id: &str, event: Event) -> Result<Record> {
        check_run_id(run_id)?;
        let (kind, payload) = event.to_kind_payload()?;
        let sync = self.options.sync_all || event.must_sync();
        let file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.lock().map_err(io(&self.path, "lock"))?;
        let guard = FlockGuard(&file);
        let tail = read_tail(&self.path, guard.0)?;
        let (mut seq, mut prev) = tail.last.unwrap_or((0, GENESIS.to_string()));
        let mut buf = Vec::new();
        let ts = Timestamp::now().to_rfc3339();
        if let Some((offset, torn)) = &tail.torn {
            let repair = Event::TailRepaired {
                offset: *offset,
                len: torn.len() as u64,
                sha256: record::sha256_hex(torn),
                excerpt: String::from_utf8_lossy(&torn[..torn.len().min(512)]).into_owned(),
            };
            let (rkind, rpayload) = repair.to_kind_payload()?;
            let (line, _) = record::encode(seq + 1, &ts, run_id, rkind, &rpayload, &prev).map_err(
                |source| Error::Serialize {
                    kind: rkind,
                    source,
                },
            )?;
            if !torn.ends_with(b"\n") {
                buf.push(b'\n');
            }
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            seq += 1;
            prev = record::sha256_hex(line.as_bytes());
        }
        let (line, self_hash) = record::encode(seq + 1, &ts, run_id, kind, &payload, &prev)
            .map_err(|source| Error::Serialize { kind, source })?;
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        (&*file).write_all(&buf).map_err(io(&self.path, "append"))?;
        if sync || tail.torn.is_some() {
            file.sync_data().map_err(io(&self.path, "fsync"))?;
        }
        write_head(&self.path, seq + 1, &record::sha256_hex(line.as_bytes()))?;
        drop(guard);
        Ok(Record {
            seq: seq + 1,
            ts,
            run_id: run_id.to_string(),
            kind: kind.to_string(),
            payload,
            prev,
            hash: self_hash,
        })
    }
}

fn check_run_id(run_id: &str) -> Result<()> {
    let reason = if run_id.is_empty() {
        "empty"
    } else if run_id.len() > 200 {
        "longer than 200 bytes"
    } else if run_id.chars().any(char::is_control) {
        "contains control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidRunId {
        run_id: run_id.to_string(),
        reason,
    })
}

/// Path of the head file that sits next to a log.
pub fn head_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".head");
    PathBuf::from(name)
}

/// Record the newest seq and line hash; written by rename so a crash leaves the old or the new.
/// Rewrite the head file in place, under the log's lock. In place, not a new file renamed over
/// it: the head changes with every record, and creating a file per record costs an inode
/// allocation on each append (the most expensive step of an append on a busy ext4). A head cut
/// short by a crash does not parse, and `verify` then treats it as absent (as it does a missing
/// one); the next append writes it whole again.
fn write_head(log: &Path, seq: u64, hash: &str) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let head = head_path(log);
    let body = format!("{{\"seq\":{seq},\"hash\":\"{hash}\"}}\n");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&head)
        .map_err(io(&head, "open head"))?;
    file.write_all_at(body.as_bytes(), 0)
        .map_err(io(&head, "write head"))?;
    file.set_len(body.len() as u64)
        .map_err(io(&head, "trim head"))?;
    Ok(())
}

/// Read the last valid record and any torn bytes after it, reading backwards in growing chunks.
fn read_tail(path: &Path, file: &File) -> Result<Tail> {
    let len = file.metadata().map_err(io(path, "stat"))?.len();
    let mut chunk: u64 = 64 * 1024;
    loop {
        let start = len.saturating_sub(chunk);
        let mut buf = vec![0u8; usize::try_from(len - start).unwrap_or(usize::MAX)];
        file.read_exact_at(&mut buf, start)
            .map_err(io(path, "read tail"))?;
        if let Some(tail) = scan_tail(path, file, &buf, start)? {
            return Ok(tail);
        }
        chunk = chunk.saturating_mul(4);
    }
}

/// `None` when the buffer does not reach back far enough to decide.
fn scan_tail(path: &Path, file: &File, buf: &[u8], start: u64) -> Result<Option<Tail>> {
    if buf.is_empty() {
        return Ok(Some(Tail {
            last: None,
            torn: None,
        }));
    }
    let whole_torn = || Tail {
        last: None,
        torn: Some((start, buf.to_vec())),
    };
    // Bytes from `torn_start` to the end are torn; `end` is the exclusive end of the next
    // candidate line, newline excluded.
    let (mut torn_start, mut end) = if buf.last() == Some(&b'\n') {
        (buf.len(), buf.len() - 1)
    } else {
        match buf.iter().rposition(|&b| b == b'\n') {
            Some(p) => (p + 1, p),
            None if start == 0 => return Ok(Some(whole_torn())),
            None => return Ok(None),
        }
    };
    loop {
        let line_start = match buf[..end].iter().rposition(|&b| b == b'\n') {
            Some(p) => p + 1,
            None if start == 0 => 0,
            None => return Ok(None),
        };
        let line = &buf[line_start..end];
        match record::decode(line) {
            Ok(r) => {
                let torn = (torn_start < buf.len())
                    .then(|| (start + torn_start as u64, buf[torn_start..].to_vec()));
                return Ok(Some(Tail {
                    last: Some((r.seq, record::sha256_hex(line))),
                    torn,
                }));
            }
            Err(fault) if torn_start == buf.len() => {
                let offset = start + line_start as u64;
                return Err(Error::CorruptTail {
                    path: path.to_path_buf(),
                    line: line_number_at(file, offset),
                    offset,
                    reason: match fault {
                        LineFault::Malformed(m) => m,
                        LineFault::HashMismatch(r) => {
                            format!("record seq {} does not match its own hash (edited)", r.seq)
                        }
                    },
                });
            }
            Err(_) => {
                // Part of a torn region left by more than one crash: keep walking back.
                torn_start = line_start;
                if line_start == 0 {
                    return Ok(Some(whole_torn()));
                }
                end = line_start - 1;
            }
        }
    }
}

fn line_number_at(file: &File, offset: u64) -> u64 {
    let mut buf = vec![0u8; usize::try_from(offset).unwrap_or(0)];
    if file.read_exact_at(&mut buf, 0).is_err() {
        return 0;
    }
    buf.iter().filter(|&&b| b == b'\n').count() as u64 + 1
}
