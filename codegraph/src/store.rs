//! The on-disk index: per-blob records shared by every commit of a repository, and one
//! manifest per commit mapping paths to blobs.
//!
//! Layout under the index directory (`N` is [`FORMAT_VERSION`]):
//! `vN/<repo-key>/blobs/<aa>/<blob-id>.<language|text>.json` (a [`BlobRecord`]),
//! `vN/<repo-key>/blobs/<aa>/<blob-id>.skip` (the blob is binary or huge; the file holds why),
//! `vN/<repo-key>/commits/<sha>.json` (a [`Manifest`]),
//! `vN/<repo-key>/fulltext/<sha>-<digest>.bin` (the commit's tantivy index, a cache: see
//! [`crate::fulltext`]; the newest [`MAX_FULLTEXT_BUNDLES`] are kept).
//! A blob record depends only on the blob's bytes and the language it is parsed as, so moving
//! to another commit re-extracts only blobs never seen before. Files are written to a temporary
//! name and renamed, so a reader never sees half a file.

use crate::extract::Symbols;
use crate::files::Language;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Version of the on-disk layout; bumped when a record's meaning changes (so records an
/// older extractor wrote are never mixed with new ones). 2: docs of definitions wrapped in a
/// statement or behind attributes (`export function`, `proto.f = function`, `#[derive]`).
pub const FORMAT_VERSION: u32 = 2;

/// How many saved full-text indexes (one per commit) a repository keeps; older ones are removed.
pub const MAX_FULLTEXT_BUNDLES: usize = 64;

/// What the index keeps about one blob (as one language).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobRecord {
    /// Number of lines.
    pub lines: u32,
    /// Size in bytes.
    pub bytes: u64,
    /// Term frequencies of the file text (sorted by term).
    pub lexical: Vec<(String, u32)>,
    /// Term frequencies of the structural text (sorted by term); empty for text files.
    pub structural: Vec<(String, u32)>,
    /// Extracted symbols, for files in a supported language that parsed.
    pub symbols: Option<Symbols>,
}

/// Why a file is in the manifest but not searchable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkipReason {
    /// A NUL byte in the first 8 KB, or a binary extension.
    Binary,
    /// Larger than [`crate::files::MAX_FILE_BYTES`].
    Huge,
    /// Not in the object database (a partial clone); never stored as a skip marker.
    Missing,
    /// The path is not valid UTF-8 (listed under a lossy name; never stored as a skip marker).
    #[serde(rename = "non_utf8_path")]
    NonUtf8Path,
}

/// One tracked file of a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Path relative to the repository root, `/`-separated.
    pub path: String,
    /// Git blob id (40 hex).
    pub blob: String,
    /// Language with a structural channel, if any.
    pub language: Option<Language>,
    /// Set when the file is not indexed.
    pub skipped: Option<SkipReason>,
}

/// The files of one commit, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT_VERSION`] at the time of writing.
    pub format: u32,
    /// The full commit id.
    pub commit: String,
    /// Every tracked regular file, sorted by path.
    pub files: Vec<ManifestEntry>,
}

/// The index directory of one repository.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// The cache key of a blob parsed as a language (or as text).
pub fn blob_key(blob: &str, language: Option<Language>) -> String {
    format!("{blob}.{}", language.map_or("text", Language::name))
}

/// A stable directory name for a repository: its folder name plus a hash of its canonical path.
///
/// Records are keyed by blob id and manifests by commit id, so checkouts of one project may
/// share a key: a run indexes its throwaway worktree under its mirror's key (see
/// [`crate::Engine::open_keyed`]), and so pays only for the blobs earlier runs have not seen.
pub fn repo_key(repo_path: &Path) -> String {
    let canonical = repo_path
        .canonicalize()
        .unwrap_or_else(|_| repo_path.to_path_buf());
    let mut name = String::new();
    for comp in canonical.components().rev() {
        let part = comp.as_os_str().to_string_lossy();
        if part != "repo" && part != ".git" && !part.is_empty() && part != "/" {
            name = part.to_string();
            break;
        }
    }
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = Sha256::digest(canonical.to_string_lossy().as_bytes());
    format!("{name}-{}", &hex::encode(digest)[..12])
}

/// Whether `key` can name a repository's index: one directory name of letters, digits, `.`,
/// `_`, `+` and `-` (as [`repo_key`] makes), at most 200 bytes, not `.` or `..`.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 200
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

pub(crate) fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The exclusive right to build in one repository's index, held until dropped: an `flock` on
/// `<repo-key>/build.lock`, so it is released when its holder exits, even by a crash.
#[derive(Debug)]
pub struct BuildLock {
    _file: std::fs::File,
}

impl Store {
    /// Wait for, then take, the repository's build lock. Runs of one project share one index
    /// (their worktrees use the mirror's key): with this lock, when several start at once one
    /// extracts the commit's blobs and builds its full-text index, and the others wait and then
    /// find everything built.
    pub fn lock_build(&self) -> Result<BuildLock> {
        std::fs::create_dir_all(&self.root).map_err(io_err("create", &self.root))?;
        let path = self.root.join("build.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        file.lock().map_err(io_err("lock", &path))?;
        Ok(BuildLock { _file: file })
    }

    /// The store of `repo_path` under `index_dir` (created lazily on first write).
    pub fn new(index_dir: &Path, repo_path: &Path) -> Store {
        Store::keyed(index_dir, &repo_key(repo_path))
    }

    /// The store named `key` under `index_dir` (the key is not checked; see [`valid_key`]).
    pub fn keyed(index_dir: &Path, key: &str) -> Store {
        Store {
            root: index_dir.join(format!("v{FORMAT_VERSION}")).join(key),
        }
    }

    /// The repository's directory inside the index directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Remove this repository's index in older formats (`v1/<repo-key>`, ... below
    /// [`FORMAT_VERSION`]), and a format's directory once it is empty: records of an older
    /// extractor are never read again, and would otherwise stay on disk for good. Best effort:
    /// a directory that cannot be removed is left as it is. Returns how many were removed.
    pub fn remove_older_formats(&self) -> usize {
        let (Some(key), Some(index_dir)) = (
            self.root.file_name(),
            self.root.parent().and_then(Path::parent),
        ) else {
            return 0;
        };
        let mut removed = 0;
        for version in 1..FORMAT_VERSION {
            let format_dir = index_dir.join(format!("v{version}"));
            let old = format_dir.join(key);
            if old.is_dir() && std::fs::remove_dir_all(&old).is_ok() {
                removed += 1;
            }
            // Only succeeds when no other repository's index is left in it.
            let _ = std::fs::remove_dir(&format_dir);
        }
        removed
    }

    fn blob_path(&self, key: &str, suffix: &str) -> PathBuf {
        let shard = key.get(..2).unwrap_or("xx");
        self.root
            .join("blobs")
            .join(shard)
            .join(format!("{key}{suffix}"))
    }

    fn skip_path(&self, blob: &str) -> PathBuf {
        self.blob_path(blob, ".skip")
    }

    fn manifest_path(&self, commit: &str) -> PathBuf {
        self.root.join("commits").join(format!("{commit}.json"))
    }

    /// Whether a record for this key is stored.
    pub fn has_record(&self, key: &str) -> bool {
        self.blob_path(key, ".json").is_file()
    }

    /// The stored skip reason of a blob, if it was found binary or huge before.
    pub fn skip_reason(&self, blob: &str) -> Option<SkipReason> {
        let text = std::fs::read_to_string(self.skip_path(blob)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Load a blob record.
    pub fn load_record(&self, key: &str) -> Result<BlobRecord> {
        let path = self.blob_path(key, ".json");
        let bytes = std::fs::read(&path).map_err(io_err("read", &path))?;
        serde_json::from_slice(&bytes).map_err(|source| Error::Corrupt { path, source })
    }

    /// Store a blob record.
    pub fn save_record(&self, key: &str, record: &BlobRecord) -> Result<()> {
        let path = self.blob_path(key, ".json");
        write_json(&path, record)
    }

    /// Remember that a blob is not indexed, and why.
    pub fn save_skip(&self, blob: &str, reason: SkipReason) -> Result<()> {
        write_json(&self.skip_path(blob), &reason)
    }

    /// Load a commit's manifest, `None` if the commit was never indexed.
    pub fn load_manifest(&self, commit: &str) -> Result<Option<Manifest>> {
        let path = self.manifest_path(commit);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|source| Error::Corrupt { path, source })?;
        Ok((manifest.format == FORMAT_VERSION).then_some(manifest))
    }

    fn fulltext_dir(&self) -> PathBuf {
        self.root.join("fulltext")
    }

    fn fulltext_path(&self, commit: &str, digest: &str) -> PathBuf {
        let digest = digest.get(..16).unwrap_or(digest);
        self.fulltext_dir().join(format!("{commit}-{digest}.bin"))
    }

    /// The saved full-text index of a commit built from documents with this digest, if any.
    pub fn load_fulltext(&self, commit: &str, digest: &str) -> Option<Vec<u8>> {
        std::fs::read(self.fulltext_path(commit, digest)).ok()
    }

    /// Save a commit's full-text index; drop the commit's bundles of other documents, and the
    /// oldest bundles beyond [`MAX_FULLTEXT_BUNDLES`].
    pub fn save_fulltext(&self, commit: &str, digest: &str, bundle: &[u8]) -> Result<()> {
        let path = self.fulltext_path(commit, digest);
        write_bytes(&path, bundle)?;
        let Ok(entries) = std::fs::read_dir(self.fulltext_dir()) else {
            return Ok(());
        };
        let mut bundles = Vec::new();
        for entry in entries.flatten() {
            let entry_path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".bin") || entry_path == path {
                continue;
            }
            if name.starts_with(&format!("{commit}-")) {
                let _ = std::fs::remove_file(&entry_path);
                continue;
            }
            let modified = entry.metadata().and_then(|m| m.modified()).ok();
            bundles.push((modified, entry_path));
        }
        if bundles.len() >= MAX_FULLTEXT_BUNDLES {
            bundles.sort();
            let excess = bundles.len() + 1 - MAX_FULLTEXT_BUNDLES;
            for (_, old) in bundles.into_iter().take(excess) {
                let _ = std::fs::remove_file(old);
            }
        }
        Ok(())
    }

    /// Store a commit's manifest (last, once every record it names is stored).
    ///
    /// An identical manifest already on disk is left as it is, so a search of an indexed commit
    /// only reads the index directory (which may then be read-only).
    pub fn save_manifest(&self, manifest: &Manifest) -> Result<()> {
        let path = self.manifest_path(&manifest.commit);
        let bytes = encode_json(&path, manifest)?;
        if std::fs::read(&path).is_ok_and(|old| old == bytes) {
            return Ok(());
        }
        write_bytes(&path, &bytes)
    }
}

fn encode_json<T: Serialize>(path: &Path, value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|source| Error::Corrupt {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_bytes(path, &encode_json(path, value)?)
}

/// Write a file under a temporary name and rename it into place.
fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    // Unique per process and per write: indexing threads may write the same file at once (two
    // paths of one blob), and each must rename its own complete copy.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io_err("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err("rename into place", path))?;
    Ok(())
}
