//! Bounded reads and path-safe writes inside one directory tree.
//!
//! Every path is checked twice. First lexically and component by component with
//! `symlink_metadata`, resolving symlinks ourselves, so that a refusal names its exact reason
//! (absolute, `..`, which symlink escapes, where a path stops existing). Then the actual open
//! goes through a `cap_std` directory handle, which by construction cannot reach outside the
//! root even if the tree changes between the two steps.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize, Serializer};

use crate::{Result, io_err};

/// The most content one read returns, in bytes (10 KB).
pub const READ_CAP_BYTES: usize = 10240;

/// Most bytes of a file [`BoundedReader::read_for_edit`] takes whole (an edit rewrites the
/// file; a generated file larger than this is not source to edit by hand).
pub const EDIT_CAP_BYTES: u64 = 8 * 1024 * 1024;

/// A NUL byte within this many leading bytes marks a file as binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;

/// How many symlinks one path may pass through before it is treated as a loop.
const MAX_SYMLINK_HOPS: usize = 40;

/// The result of a successful [`BoundedReader::read`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOutcome {
    /// The requested path, normalised (`./` and repeated `/` removed).
    pub path: String,
    /// The returned text: the requested lines (the whole file without a window), cut to at
    /// most [`READ_CAP_BYTES`] bytes at a line boundary, or at a character boundary when a
    /// single line is longer than the cap. Invalid UTF-8 is replaced with U+FFFD.
    pub content: String,
    /// Best-effort language from the file name (`"text"` when unknown).
    pub language: String,
    /// Lines in the whole file (a last line without a newline counts; an empty file has 0).
    pub line_count: u32,
    /// First line returned, 1-based (0 for an empty file).
    pub line_start: u32,
    /// Last line returned, 1-based and inclusive, possibly only partly returned when
    /// `truncated` (0 for an empty file).
    pub line_end: u32,
    /// True when `content` is shorter than the requested window (the cap cut it): read again
    /// from `line_end` with a narrower window to see the rest.
    pub truncated: bool,
    /// Bytes in `content`.
    pub bytes_returned: u64,
    /// Bytes in the whole file.
    pub bytes_total: u64,
}

/// The result of a successful [`BoundedReader::write`] or [`BoundedReader::remove`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOutcome {
    /// The path written, normalised.
    pub path: String,
    /// Bytes written (0 for a removal).
    pub bytes_written: u64,
    /// Whether the file did not exist before (for a removal: always false).
    pub created: bool,
}

/// Stable machine-readable reason of a [`ReadRefusal`]; serialised in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalCode {
    /// The path starts with `/`.
    AbsolutePath,
    /// The path has a `..` segment.
    ParentSegment,
    /// Following the path's symlinks leads outside the root.
    EscapesRoot,
    /// Nothing exists at the path.
    NotFound,
    /// The path is a directory.
    IsDirectory,
    /// The file has a NUL byte in its first [`BINARY_SNIFF_BYTES`] bytes.
    Binary,
    /// The line window is empty, starts at 0, or starts past the end of the file.
    InvalidRange,
    /// The path is empty or has a NUL character.
    InvalidPath,
    /// The path is a FIFO, socket or device, which could block or never end.
    SpecialFile,
    /// A write or removal under `.git/`, which would change the repository itself.
    GitMetadata,
    /// A write or removal through a symlink (inside the tree), which would change a file
    /// other than the one named.
    WriteThroughSymlink,
    /// The filesystem failed in a way none of the above describes.
    Io,
    /// The file is larger than [`EDIT_CAP_BYTES`] (edits only; reads are windowed).
    TooLargeToEdit,
    /// The file is not valid UTF-8, so an edit could not rewrite it faithfully (edits only).
    NotUtf8,
}

impl RefusalCode {
    /// The snake_case code, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::AbsolutePath => "absolute_path",
            RefusalCode::ParentSegment => "parent_segment",
            RefusalCode::EscapesRoot => "escapes_root",
            RefusalCode::NotFound => "not_found",
            RefusalCode::IsDirectory => "is_directory",
            RefusalCode::Binary => "binary",
            RefusalCode::InvalidRange => "invalid_range",
            RefusalCode::InvalidPath => "invalid_path",
            RefusalCode::SpecialFile => "special_file",
            RefusalCode::GitMetadata => "git_metadata",
            RefusalCode::WriteThroughSymlink => "write_through_symlink",
            RefusalCode::Io => "io",
            RefusalCode::TooLargeToEdit => "too_large_to_edit",
            RefusalCode::NotUtf8 => "not_utf8",
        }
    }
}

impl std::fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a read or write was refused. The message (`Display`) says how to fix the call; the
/// code ([`ReadRefusal::code`]) is stable. Serialises as `{"code", "path", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadRefusal {
    /// See [`RefusalCode::AbsolutePath`].
    #[error(
        "`{path}` is an absolute path: give a path relative to the repository root, such as \
         `src/main.rs`"
    )]
    AbsolutePath {
        /// The path as given.
        path: String,
    },
    /// See [`RefusalCode::ParentSegment`].
    #[error(
        "`{path}` has a `..` segment: paths may not climb; give the path from the repository \
         root without `..`"
    )]
    ParentSegment {
        /// The path as given.
        path: String,
    },
    /// See [`RefusalCode::EscapesRoot`].
    #[error(
        "`{path}` leaves the repository through the symlink `{link}`: only files inside the \
         repository can be accessed; open the symlink's in-tree target directly if it has one"
    )]
    EscapesRoot {
        /// The path as given.
        path: String,
        /// The symlink (relative to the root) whose target is outside.
        link: String,
    },
    /// See [`RefusalCode::NotFound`].
    #[error(
        "`{path}` does not exist{}: check the spelling against the file tree, or search for \
         the file",
        if existing_prefix.is_empty() { String::new() } else { format!(" (`{existing_prefix}` does)") }
    )]
    NotFound {
        /// The path as given.
        path: String,
        /// The longest leading part of the path that does exist, as a directory (empty when
        /// nothing matched).
        existing_prefix: String,
    },
    /// See [`RefusalCode::IsDirectory`].
    #[error("`{path}` is a directory: read a file inside it; the file tree lists what it contains")]
    IsDirectory {
        /// The path as given.
        path: String,
    },
    /// See [`RefusalCode::Binary`].
    #[error(
        "`{path}` is binary ({bytes_total} bytes, NUL byte near the start): only text files \
         can be read; look for the source it was generated from"
    )]
    Binary {
        /// The path as given.
        path: String,
        /// The file's size.
        bytes_total: u64,
    },
    /// See [`RefusalCode::InvalidRange`].
    #[error(
        "lines {start}-{end} of `{path}` are not a valid window: the file has {line_count} \
         lines; give 1-based inclusive lines with start <= end and start <= {line_count}"
    )]
    InvalidRange {
        /// The path as given.
        path: String,
        /// First line asked for.
        start: u32,
        /// Last line asked for.
        end: u32,
        /// Lines in the file.
        line_count: u32,
    },
    /// See [`RefusalCode::InvalidPath`].
    #[error("`{path}` is not a usable path: {reason}")]
    InvalidPath {
        /// The path as given (NUL characters shown as `\0`).
        path: String,
        /// What is wrong and what to give instead.
        reason: String,
    },
    /// See [`RefusalCode::SpecialFile`].
    #[error("`{path}` is not a regular file (a FIFO, socket or device): read source files only")]
    SpecialFile {
        /// The path as given.
        path: String,
    },
    /// See [`RefusalCode::GitMetadata`].
    #[error(
        "`{path}` is inside `.git/`: the repository's metadata cannot be changed; edit \
         working files only"
    )]
    GitMetadata {
        /// The path as given.
        path: String,
    },
    /// See [`RefusalCode::WriteThroughSymlink`].
    #[error(
        "`{path}` goes through the symlink `{link}`: writing there would change another file; \
         write to the symlink's target path `{target}` instead"
    )]
    WriteThroughSymlink {
        /// The path as given.
        path: String,
        /// The symlink on the way.
        link: String,
        /// Where the whole path resolves inside the tree.
        target: String,
    },
    /// See [`RefusalCode::Io`].
    #[error("`{path}` could not be accessed: {detail}")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's message.
        detail: String,
    },
    /// The file is too large to be rewritten by an edit.
    #[error(
        "`{path}` has {bytes_total} bytes, more than the {cap} an edit may rewrite: it is not \
         source to edit by hand; change the source it is generated from"
    )]
    TooLargeToEdit {
        /// The path as given.
        path: String,
        /// Bytes in the file.
        bytes_total: u64,
        /// [`EDIT_CAP_BYTES`].
        cap: u64,
    },
    /// The file is not UTF-8 text.
    #[error(
        "`{path}` is not valid UTF-8: an edit would not write it back faithfully; rewrite it \
         whole with write_file if it must change"
    )]
    NotUtf8 {
        /// The path as given.
        path: String,
    },
}

impl ReadRefusal {
    /// The stable code of this refusal.
    pub fn code(&self) -> RefusalCode {
        match self {
            ReadRefusal::AbsolutePath { .. } => RefusalCode::AbsolutePath,
            ReadRefusal::ParentSegment { .. } => RefusalCode::ParentSegment,
            ReadRefusal::EscapesRoot { .. } => RefusalCode::EscapesRoot,
            ReadRefusal::NotFound { .. } => RefusalCode::NotFound,
            ReadRefusal::IsDirectory { .. } => RefusalCode::IsDirectory,
            ReadRefusal::Binary { .. } => RefusalCode::Binary,
            ReadRefusal::InvalidRange { .. } => RefusalCode::InvalidRange,
            ReadRefusal::InvalidPath { .. } => RefusalCode::InvalidPath,
            ReadRefusal::SpecialFile { .. } => RefusalCode::SpecialFile,
            ReadRefusal::GitMetadata { .. } => RefusalCode::GitMetadata,
            ReadRefusal::WriteThroughSymlink { .. } => RefusalCode::WriteThroughSymlink,
            ReadRefusal::Io { .. } => RefusalCode::Io,
            ReadRefusal::TooLargeToEdit { .. } => RefusalCode::TooLargeToEdit,
            ReadRefusal::NotUtf8 { .. } => RefusalCode::NotUtf8,
        }
    }

    /// The path the refused call named, as given.
    pub fn path(&self) -> &str {
        match self {
            ReadRefusal::AbsolutePath { path }
            | ReadRefusal::ParentSegment { path }
            | ReadRefusal::EscapesRoot { path, .. }
            | ReadRefusal::NotFound { path, .. }
            | ReadRefusal::IsDirectory { path }
            | ReadRefusal::Binary { path, .. }
            | ReadRefusal::InvalidRange { path, .. }
            | ReadRefusal::InvalidPath { path, .. }
            | ReadRefusal::SpecialFile { path }
            | ReadRefusal::GitMetadata { path }
            | ReadRefusal::WriteThroughSymlink { path, .. }
            | ReadRefusal::Io { path, .. }
            | ReadRefusal::TooLargeToEdit { path, .. }
            | ReadRefusal::NotUtf8 { path } => path,
        }
    }
}

impl Serialize for ReadRefusal {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            code: RefusalCode,
            path: &'a str,
            message: String,
        }
        Wire {
            code: self.code(),
            path: self.path(),
            message: self.to_string(),
        }
        .serialize(serializer)
    }
}

/// The one way to read (and write) files of a tree: paths are relative to the root given to
/// [`BoundedReader::open`], and nothing outside it can be reached.
#[derive(Debug)]
pub struct BoundedReader {
    root: Dir,
    root_path: PathBuf,
}

/// Where a path leads inside the tree.
struct Resolved {
    /// Normalised path as given.
    given: String,
    /// Path after following in-tree symlinks (no symlink components left).
    real: String,
    /// The first symlink passed through, if any.
    first_link: Option<String>,
}

impl BoundedReader {
    /// Opens `root` (the only use of ambient authority; everything else is relative to it).
    pub fn open(root: &Path) -> Result<BoundedReader> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())
            .map_err(io_err("open tree root", root))?;
        Ok(BoundedReader {
            root: dir,
            root_path: root.to_path_buf(),
        })
    }

    /// The root directory this reader was opened on.
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// Reads `path` (relative, `/`-separated), optionally only `lines` (1-based, inclusive;
    /// an end past the last line is clamped), capped at [`READ_CAP_BYTES`].
    pub fn read(
        &self,
        path: &str,
        lines: Option<(u32, u32)>,
    ) -> std::result::Result<ReadOutcome, ReadRefusal> {
        let resolved = self.resolve_path(path)?;
        let meta = self
            .root
            .metadata(&resolved.real)
            .map_err(|e| self.io_refusal(path, &e))?;
        if meta.is_dir() {
            return Err(ReadRefusal::IsDirectory {
                path: path.to_owned(),
            });
        }
        if !meta.is_file() {
            return Err(ReadRefusal::SpecialFile {
                path: path.to_owned(),
            });
        }
        let file = self
            .root
            .open(&resolved.real)
            .map_err(|e| self.io_refusal(path, &e))?;
        let io_refusal = |e: io::Error| self.io_refusal(path, &e);
        let mut reader = io::BufReader::with_capacity(64 * 1024, file);

        // Binary sniff on the leading bytes, kept for the scan below.
        let mut head = vec![0u8; BINARY_SNIFF_BYTES];
        let head_len = read_full(&mut reader, &mut head).map_err(io_refusal)?;
        head.truncate(head_len);
        if head.contains(&0) {
            return Err(ReadRefusal::Binary {
                path: path.to_owned(),
                bytes_total: meta.len(),
            });
        }

        let (start, end_asked) = match lines {
            None => (1, u32::MAX),
            Some((start, end)) => {
                if start == 0 || end < start {
                    // The line count is not known yet; count it for the message.
                    let mut scan = LineScan::new(1, 0);
                    scan.feed(&head);
                    scan_rest(&mut reader, &mut scan).map_err(io_refusal)?;
                    return Err(ReadRefusal::InvalidRange {
                        path: path.to_owned(),
                        start,
                        end,
                        line_count: scan.line_count(),
                    });
                }
                (start, end)
            }
        };
        let mut scan = LineScan::new(start, end_asked);
        scan.feed(&head);
        scan_rest(&mut reader, &mut scan).map_err(io_refusal)?;
        let line_count = scan.line_count();
        if line_count == 0 {
            if lines.is_some_and(|(s, _)| s > 1) {
                return Err(ReadRefusal::InvalidRange {
                    path: path.to_owned(),
                    start,
                    end: end_asked,
                    line_count,
                });
            }
            return Ok(ReadOutcome {
                path: resolved.given,
                content: String::new(),
                language: airlock_policies::language_name(&resolved.real).to_owned(),
                line_count: 0,
                line_start: 0,
                line_end: 0,
                truncated: false,
                bytes_returned: 0,
                bytes_total: scan.bytes_total,
            });
        }
        if start > line_count {
            return Err(ReadRefusal::InvalidRange {
                path: path.to_owned(),
                start,
                end: end_asked,
                line_count,
            });
        }
        let end = end_asked.min(line_count);
        let (content, truncated) = cap_content(&scan.window, scan.window_total);
        let newlines =
            u32::try_from(content.bytes().filter(|&b| b == b'\n').count()).unwrap_or(u32::MAX);
        let line_end = if !truncated {
            end
        } else if content.ends_with('\n') {
            start.saturating_add(newlines).saturating_sub(1).max(start)
        } else {
            start.saturating_add(newlines)
        };
        Ok(ReadOutcome {
            path: resolved.given,
            language: airlock_policies::language_name(&resolved.real).to_owned(),
            bytes_returned: content.len() as u64,
            content,
            line_count,
            line_start: start,
            line_end,
            truncated,
            bytes_total: scan.bytes_total,
        })
    }

    /// The whole text of `path` for an exact-match edit, whatever its size up to
    /// [`EDIT_CAP_BYTES`]: the read cap bounds what one read hands a model, not what may be
    /// edited. Refused like [`BoundedReader::read`] (absolute, `..`, escapes, directories,
    /// special and binary files), and also when the file is larger than the edit cap or not
    /// UTF-8 (a lossy read would corrupt it when written back).
    pub fn read_for_edit(&self, path: &str) -> std::result::Result<String, ReadRefusal> {
        // The windowed read applies every refusal class (and the binary sniff) first.
        let first = self.read(path, Some((1, 1)))?;
        if first.bytes_total > EDIT_CAP_BYTES {
            return Err(ReadRefusal::TooLargeToEdit {
                path: path.to_owned(),
                bytes_total: first.bytes_total,
                cap: EDIT_CAP_BYTES,
            });
        }
        let resolved = self.resolve_path(path)?;
        let bytes = self
            .root
            .read(&resolved.real)
            .map_err(|e| self.io_refusal(path, &e))?;
        String::from_utf8(bytes).map_err(|_| ReadRefusal::NotUtf8 {
            path: path.to_owned(),
        })
    }

    /// Where `path` leads inside the tree once in-tree symlinks are followed, as a normalised
    /// relative path: what a write policy should be checked against. Refuses like
    /// [`BoundedReader::read`] for absolute paths, `..`, escapes and missing components.
    pub fn resolve(&self, path: &str) -> std::result::Result<String, ReadRefusal> {
        Ok(self.resolve_path(path)?.real)
    }

    /// Writes `bytes` to `path`, creating missing parent directories. Refuses every path a
    /// read refuses, plus anything under `.git/` and any path through a symlink (so the file
    /// changed is exactly the one named, which is what write policies are checked against).
    /// An existing file keeps its permissions.
    pub fn write(
        &self,
        path: &str,
        bytes: &[u8],
    ) -> std::result::Result<WriteOutcome, ReadRefusal> {
        let given = self.check_writable(path)?;
        let existed = match self.root.symlink_metadata(&given) {
            Ok(meta) if meta.is_dir() => {
                return Err(ReadRefusal::IsDirectory {
                    path: path.to_owned(),
                });
            }
            Ok(meta) if !meta.is_file() => {
                return Err(ReadRefusal::SpecialFile {
                    path: path.to_owned(),
                });
            }
            Ok(_) => true,
            Err(_) => false,
        };
        if let Some((parent, _)) = given.rsplit_once('/') {
            self.root
                .create_dir_all(parent)
                .map_err(|e| self.io_refusal(path, &e))?;
        }
        self.root
            .write(&given, bytes)
            .map_err(|e| self.io_refusal(path, &e))?;
        Ok(WriteOutcome {
            path: given,
            bytes_written: bytes.len() as u64,
            created: !existed,
        })
    }

    /// Removes the file at `path`, with the same refusals as [`BoundedReader::write`].
    pub fn remove(&self, path: &str) -> std::result::Result<WriteOutcome, ReadRefusal> {
        let given = self.check_writable(path)?;
        match self.root.symlink_metadata(&given) {
            Ok(meta) if meta.is_dir() => {
                return Err(ReadRefusal::IsDirectory {
                    path: path.to_owned(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(self.not_found(path, &given));
            }
            Err(e) => return Err(self.io_refusal(path, &e)),
        }
        self.root
            .remove_file(&given)
            .map_err(|e| self.io_refusal(path, &e))?;
        Ok(WriteOutcome {
            path: given,
            bytes_written: 0,
            created: false,
        })
    }

    /// Lexical checks plus the write-only refusals; returns the normalised path.
    fn check_writable(&self, path: &str) -> std::result::Result<String, ReadRefusal> {
        let components = lexical_components(path)?;
        if components.is_empty() {
            return Err(ReadRefusal::IsDirectory {
                path: path.to_owned(),
            });
        }
        if components[0] == ".git" {
            return Err(ReadRefusal::GitMetadata {
                path: path.to_owned(),
            });
        }
        let given = components.join("/");
        // Walk the existing prefix: every existing component must be a real directory (or,
        // for the last one, a real file); a symlink anywhere is refused.
        let mut prefix = String::new();
        for (i, component) in components.iter().enumerate() {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(component);
            match self.root.symlink_metadata(&prefix) {
                Ok(meta) if meta.is_symlink() => {
                    let resolved = self.resolve_path(path)?;
                    return Err(ReadRefusal::WriteThroughSymlink {
                        path: path.to_owned(),
                        link: resolved.first_link.unwrap_or_else(|| prefix.clone()),
                        target: resolved.real,
                    });
                }
                Ok(meta) if i + 1 < components.len() && !meta.is_dir() => {
                    return Err(ReadRefusal::InvalidPath {
                        path: path.to_owned(),
                        reason: format!("`{prefix}` is a file, so nothing can be created below it"),
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(self.io_refusal(path, &e)),
            }
        }
        Ok(given)
    }

    /// Follows `path` component by component inside the tree, resolving symlinks by hand so
    /// each refusal names its cause. The later `cap_std` open enforces the same boundary.
    fn resolve_path(&self, path: &str) -> std::result::Result<Resolved, ReadRefusal> {
        let components = lexical_components(path)?;
        let given = components.join("/");
        if components.is_empty() {
            return Err(ReadRefusal::IsDirectory {
                path: path.to_owned(),
            });
        }
        let mut pending: VecDeque<String> = components.into_iter().collect();
        let mut real: Vec<String> = Vec::new();
        let mut first_link: Option<String> = None;
        let mut last_link = String::new();
        let mut hops = 0;
        while let Some(component) = pending.pop_front() {
            match component.as_str() {
                "" | "." => continue,
                ".." => {
                    // Only symlink targets reach here; `real` holds real directories, so `..`
                    // is their parent.
                    if real.pop().is_none() {
                        return Err(ReadRefusal::EscapesRoot {
                            path: path.to_owned(),
                            link: last_link,
                        });
                    }
                    continue;
                }
                _ => {}
            }
            let candidate = if real.is_empty() {
                component.clone()
            } else {
                format!("{}/{component}", real.join("/"))
            };
            let meta = match self.root.symlink_metadata(&candidate) {
                Ok(meta) => meta,
                Err(e) if is_not_found(&e) => {
                    return Err(ReadRefusal::NotFound {
                        path: path.to_owned(),
                        existing_prefix: real.join("/"),
                    });
                }
                Err(e) => return Err(self.io_refusal(path, &e)),
            };
            if meta.is_symlink() {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(ReadRefusal::Io {
                        path: path.to_owned(),
                        detail: format!(
                            "more than {MAX_SYMLINK_HOPS} symlinks on the way (a symlink loop)"
                        ),
                    });
                }
                if first_link.is_none() {
                    first_link = Some(candidate.clone());
                }
                last_link = candidate.clone();
                let target = self
                    .root
                    .read_link_contents(&candidate)
                    .map_err(|e| self.io_refusal(path, &e))?;
                if target.is_absolute() {
                    return Err(ReadRefusal::EscapesRoot {
                        path: path.to_owned(),
                        link: candidate,
                    });
                }
                let target = target.to_string_lossy().into_owned();
                for part in target.split('/').rev() {
                    pending.push_front(part.to_owned());
                }
                continue;
            }
            if !pending.is_empty() && !meta.is_dir() {
                return Err(ReadRefusal::NotFound {
                    path: path.to_owned(),
                    existing_prefix: real.join("/"),
                });
            }
            real.push(component);
        }
        if real.is_empty() {
            return Err(ReadRefusal::IsDirectory {
                path: path.to_owned(),
            });
        }
        Ok(Resolved {
            given,
            real: real.join("/"),
            first_link,
        })
    }

    fn not_found(&self, path: &str, normalised: &str) -> ReadRefusal {
        let mut existing = String::new();
        let mut prefix = String::new();
        for component in normalised.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(component);
            if self.root.is_dir(&prefix) {
                existing = prefix.clone();
            } else {
                break;
            }
        }
        ReadRefusal::NotFound {
            path: path.to_owned(),
            existing_prefix: existing,
        }
    }

    /// Maps an error from a `cap_std` call. An escape the hand resolution missed (the tree
    /// changed in between) surfaces here as a sandbox error and is reported as such.
    fn io_refusal(&self, path: &str, e: &io::Error) -> ReadRefusal {
        const EXDEV: i32 = 18;
        if e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside")
            || e.raw_os_error() == Some(EXDEV)
        {
            return ReadRefusal::EscapesRoot {
                path: path.to_owned(),
                link: String::new(),
            };
        }
        if is_not_found(e) {
            return ReadRefusal::NotFound {
                path: path.to_owned(),
                existing_prefix: String::new(),
            };
        }
        ReadRefusal::Io {
            path: path.to_owned(),
            detail: e.to_string(),
        }
    }
}

fn is_not_found(e: &io::Error) -> bool {
    const ENOTDIR: i32 = 20;
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(ENOTDIR)
}

/// Splits a relative path into its components, refusing absolute paths, `..`, NUL bytes and
/// empty input. `.` and empty components are dropped.
fn lexical_components(path: &str) -> std::result::Result<Vec<String>, ReadRefusal> {
    if path.is_empty() {
        return Err(ReadRefusal::InvalidPath {
            path: String::new(),
            reason: "the path is empty; give a file path relative to the repository root"
                .to_owned(),
        });
    }
    if path.contains('\0') {
        return Err(ReadRefusal::InvalidPath {
            path: path.replace('\0', "\\0"),
            reason: "it contains a NUL character; give a plain relative path".to_owned(),
        });
    }
    if path.starts_with('/') {
        return Err(ReadRefusal::AbsolutePath {
            path: path.to_owned(),
        });
    }
    let mut components = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                return Err(ReadRefusal::ParentSegment {
                    path: path.to_owned(),
                });
            }
            other => components.push(other.to_owned()),
        }
    }
    Ok(components)
}

fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn scan_rest(reader: &mut impl Read, scan: &mut LineScan) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        scan.feed(&buf[..n]);
    }
}

/// Streams a file once: counts lines and bytes, and keeps the bytes of the requested window
/// (up to a little more than the cap, enough to cut it).
struct LineScan {
    start: u32,
    end: u32,
    /// 1-based number of the line the next byte belongs to.
    line: u32,
    newlines: u32,
    last_byte: Option<u8>,
    bytes_total: u64,
    window: Vec<u8>,
    window_total: u64,
}

impl LineScan {
    fn new(start: u32, end: u32) -> LineScan {
        LineScan {
            start,
            end,
            line: 1,
            newlines: 0,
            last_byte: None,
            bytes_total: 0,
            window: Vec::new(),
            window_total: 0,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.line >= self.start && self.line <= self.end {
                self.window_total += 1;
                if self.window.len() <= READ_CAP_BYTES + 4 {
                    self.window.push(b);
                }
            }
            if b == b'\n' {
                self.newlines = self.newlines.saturating_add(1);
                self.line = self.line.saturating_add(1);
            }
        }
        if let Some(&last) = bytes.last() {
            self.last_byte = Some(last);
        }
        self.bytes_total += bytes.len() as u64;
    }

    fn line_count(&self) -> u32 {
        match self.last_byte {
            None => 0,
            Some(b'\n') => self.newlines,
            Some(_) => self.newlines.saturating_add(1),
        }
    }
}

/// Cuts the window to the cap: at the last newline within it, or at a character boundary
/// when the first line alone is longer. Returns the text and whether anything was cut.
fn cap_content(window: &[u8], window_total: u64) -> (String, bool) {
    let over = window_total > READ_CAP_BYTES as u64;
    let bytes = if over {
        let prefix = &window[..READ_CAP_BYTES.min(window.len())];
        match prefix.iter().rposition(|&b| b == b'\n') {
            Some(i) => &prefix[..=i],
            None => without_split_char(prefix),
        }
    } else {
        window
    };
    let text = String::from_utf8_lossy(bytes).into_owned();
    if text.len() <= READ_CAP_BYTES {
        return (text, over);
    }
    // Replacement characters (3 bytes each) made it longer than the cap: cut the text.
    (cut_text(&text), true)
}

/// Drops a multi-byte UTF-8 sequence that the byte cut left incomplete at the end.
fn without_split_char(bytes: &[u8]) -> &[u8] {
    let len = bytes.len();
    let mut lead = len;
    for back in 1..=4.min(len) {
        let b = bytes[len - back];
        if b & 0b1100_0000 != 0b1000_0000 {
            lead = len - back;
            break;
        }
    }
    if lead == len {
        return bytes;
    }
    let needed = match bytes[lead] {
        b if b >= 0b1111_0000 => 4,
        b if b >= 0b1110_0000 => 3,
        b if b >= 0b1100_0000 => 2,
        _ => 1,
    };
    if lead + needed > len {
        &bytes[..lead]
    } else {
        bytes
    }
}

/// The longest prefix of `text` within the cap that ends at a newline, or at a character
/// boundary when there is no newline within the cap.
fn cut_text(text: &str) -> String {
    let mut limit = READ_CAP_BYTES.min(text.len());
    while !text.is_char_boundary(limit) {
        limit -= 1;
    }
    let head = &text[..limit];
    match head.rfind('\n') {
        Some(i) => head[..=i].to_owned(),
        None => head.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_cuts_at_line_then_char_boundary() {
        let line = "x".repeat(99) + "\n";
        let big = line.repeat(200);
        let (text, cut) = cap_content(big.as_bytes(), big.len() as u64);
        assert!(cut);
        assert_eq!(text.len(), 10200);
        assert!(text.ends_with('\n'));

        let one_line = "é".repeat(6000); // 12000 bytes, no newline
        let (text, cut) = cap_content(&one_line.as_bytes()[..READ_CAP_BYTES + 4], 12000);
        assert!(cut);
        assert!(text.len() <= READ_CAP_BYTES);
        assert_eq!(text.len(), READ_CAP_BYTES);
        assert!(text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn lossy_text_never_exceeds_cap() {
        let latin1 = vec![0xE9u8; 9000];
        let (text, cut) = cap_content(&latin1, 9000);
        assert!(cut);
        assert!(text.len() <= READ_CAP_BYTES);
    }

    #[test]
    fn refusal_serialises_code_path_message() {
        let r = ReadRefusal::ParentSegment {
            path: "../x".into(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["code"], "parent_segment");
        assert_eq!(v["path"], "../x");
        assert!(v["message"].as_str().unwrap().contains("without `..`"));
    }
}
