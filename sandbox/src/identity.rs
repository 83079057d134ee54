//! Who the sandboxed command is on the host, and the id maps that follow from it.
//!
//! Inside, the command is always uid and gid [`SANDBOX_ID`]. On the host, a
//! non-root caller's command runs as the caller itself (the only id an unprivileged process
//! may map). A root caller's command never runs as root: its uid and gid map to a
//! [`HostIdentity`] of their own, taken from [`HOST_ID_ENV`], else the first id of root's
//! subordinate ranges in `/etc/subuid` and `/etc/subgid`, else `nobody` (65534). The helper,
//! root in the host's user namespace, writes that map from outside (an id other than one's
//! own needs `CAP_SETUID` there), so no `newuidmap` is involved.
//!
//! Files the command writes in a read-write grant or an overlay's upper directory are owned by
//! that identity; a read-write grant must therefore belong to it before the run
//! ([`HostIdentity::hand_over`]). Read-only grants and overlay lowers are shown through
//! idmapped mounts ([`caller_to_sandbox_map`]): the caller's own files appear as the
//! command's, so it reads what the caller could, while nothing it writes lands as root.

use crate::error::{Error, Result};
use crate::types::SANDBOX_ID;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Environment variable that sets a root caller's sandbox identity on the host: `UID` or
/// `UID:GID` (neither 0).
pub const HOST_ID_ENV: &str = "AIRLOCK_SANDBOX_HOST_ID";

/// The uid and gid of `nobody`, a root caller's default sandbox identity.
pub const NOBODY_ID: u32 = 65534;

/// The largest valid id: `(uid_t)-1` is "no id".
const MAX_ID: u32 = u32::MAX - 1;

/// Where a [`HostIdentity`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentitySource {
    /// A non-root caller: the command runs as the caller's own uid and gid.
    Caller,
    /// A root caller, configured with [`HOST_ID_ENV`].
    Configured,
    /// A root caller: the first id of root's ranges in `/etc/subuid` and `/etc/subgid`.
    SubordinateIds,
    /// A root caller without configuration or subordinate ids: `nobody` (65534).
    Nobody,
}

/// The uid and gid the sandboxed command has on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostIdentity {
    /// The host uid.
    pub uid: u32,
    /// The host gid.
    pub gid: u32,
    /// Where it comes from.
    pub source: IdentitySource,
}

impl HostIdentity {
    /// True when the command runs as the caller itself (a non-root caller).
    pub fn is_caller(&self) -> bool {
        self.source == IdentitySource::Caller
    }

    /// Hand `path` (a directory or file the caller made for the sandbox to write, not what is
    /// inside it) over to this identity, so that a read-write grant of it is accepted. Does
    /// nothing for a non-root caller, whose command writes as the caller. Never follows a
    /// symlink.
    pub fn hand_over(&self, path: &Path) -> Result<()> {
        if self.is_caller() {
            return Ok(());
        }
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid)).map_err(|e| Error::Path {
            path: path.to_path_buf(),
            reason: format!(
                "cannot hand it over to the sandbox's host uid {}: {e}",
                self.uid
            ),
        })
    }

    /// Take back what this identity owns below `root` (`root` included), once the sandbox
    /// that wrote it is gone: every file, directory and symlink owned by it becomes the
    /// caller's, never following a symlink. A caller does this for a tree its later runs
    /// read (the environment `prepare` builds): read-only grants show the caller's files as
    /// the command's own, and this identity's as anyone's. `chown` clears set-id bits and
    /// file capabilities on the way. Does nothing for a non-root caller.
    pub fn take_back(&self, root: &Path) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        if self.is_caller() {
            return Ok(());
        }
        let (uid, gid) = crate::sys::ids();
        let failed = |path: &Path, e: std::io::Error| Error::Path {
            path: path.to_path_buf(),
            reason: format!(
                "cannot take it back from the sandbox's host uid {}: {e}",
                self.uid
            ),
        };
        let mut stack = vec![root.to_path_buf()];
        while let Some(path) = stack.pop() {
            let meta = path.symlink_metadata().map_err(|e| failed(&path, e))?;
            if meta.uid() == self.uid {
                std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
                    .map_err(|e| failed(&path, e))?;
            }
            if meta.is_dir() {
                for entry in std::fs::read_dir(&path).map_err(|e| failed(&path, e))? {
                    stack.push(entry.map_err(|e| failed(&path, e))?.path());
                }
            }
        }
        Ok(())
    }

    /// How a person reads it: `uid 65534, gid 65534 (nobody: ...)`.
    pub fn describe(&self) -> String {
        let why = match self.source {
            IdentitySource::Caller => "the caller's own ids; a non-root caller cannot map others",
            IdentitySource::Configured => "set by AIRLOCK_SANDBOX_HOST_ID",
            IdentitySource::SubordinateIds => {
                "the first of root's subordinate ids in /etc/subuid and /etc/subgid"
            }
            IdentitySource::Nobody => {
                "nobody, the default for a root caller; set AIRLOCK_SANDBOX_HOST_ID or give root \
                 a range in /etc/subuid and /etc/subgid for an id of its own"
            }
        };
        format!("uid {}, gid {} ({why})", self.uid, self.gid)
    }
}

/// The identity a run started by this process gets on the host.
pub fn host_identity() -> Result<HostIdentity> {
    let (uid, gid) = crate::sys::ids();
    resolve(
        uid,
        gid,
        std::env::var(HOST_ID_ENV).ok().as_deref(),
        &read_or_empty("/etc/subuid"),
        &read_or_empty("/etc/subgid"),
    )
}

fn read_or_empty(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// [`host_identity`] from its inputs: the caller's ids, [`HOST_ID_ENV`], and the contents of
/// `/etc/subuid` and `/etc/subgid`.
fn resolve(
    uid: u32,
    gid: u32,
    configured: Option<&str>,
    subuid: &str,
    subgid: &str,
) -> Result<HostIdentity> {
    if uid != 0 {
        return Ok(HostIdentity {
            uid,
            gid,
            source: IdentitySource::Caller,
        });
    }
    if let Some(text) = configured.filter(|t| !t.trim().is_empty()) {
        let (uid, gid) = parse_host_id(text)?;
        return Ok(HostIdentity {
            uid,
            gid,
            source: IdentitySource::Configured,
        });
    }
    let root = ["root", "0"];
    if let (Some(u), Some(g)) = (
        subordinate_range(subuid, &root),
        subordinate_range(subgid, &root),
    ) && u.start != 0
        && g.start != 0
    {
        return Ok(HostIdentity {
            uid: u.start,
            gid: g.start,
            source: IdentitySource::SubordinateIds,
        });
    }
    Ok(HostIdentity {
        uid: NOBODY_ID,
        gid: NOBODY_ID,
        source: IdentitySource::Nobody,
    })
}

fn parse_host_id(text: &str) -> Result<(u32, u32)> {
    let bad = |why: &str| {
        Error::Config(format!(
            "{HOST_ID_ENV}={text:?}: {why}; give UID or UID:GID, unprivileged host ids such as \
             65534:65534"
        ))
    };
    let (uid, gid) = match text.trim().split_once(':') {
        Some((u, g)) => (u, g),
        None => (text.trim(), text.trim()),
    };
    let number = |s: &str| -> Result<u32> {
        match s.parse::<u32>() {
            Ok(0) => Err(bad("0 is root, which the sandbox never runs as")),
            Ok(n) if n <= MAX_ID => Ok(n),
            _ => Err(bad("not a number from 1 to 4294967294")),
        }
    };
    Ok((number(uid)?, number(gid)?))
}

/// One range of subordinate ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRange {
    /// The first id.
    pub start: u32,
    /// How many.
    pub count: u32,
}

/// The first range that `/etc/subuid`-style `text` gives to any of `names` (a user name or
/// its uid as digits).
fn subordinate_range(text: &str, names: &[&str]) -> Option<IdRange> {
    text.lines().find_map(|line| {
        let mut parts = line.trim().split(':');
        let (name, start, count) = (parts.next()?, parts.next()?, parts.next()?);
        if !names.contains(&name) {
            return None;
        }
        let range = IdRange {
            start: start.parse().ok()?,
            count: count.parse().ok()?,
        };
        (range.count > 0).then_some(range)
    })
}

/// Whether the caller has subordinate ids, for `airlock doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubordinateIds {
    /// The caller's user name (or its uid when `/etc/passwd` does not name it).
    pub user: String,
    /// Its range in `/etc/subuid`, if any.
    pub uids: Option<IdRange>,
    /// Its range in `/etc/subgid`, if any.
    pub gids: Option<IdRange>,
    /// `newuidmap`, if installed (rootless container runtimes map a non-root user's ranges
    /// with it; the sandbox does not: a non-root caller's command runs as the caller).
    pub newuidmap: Option<PathBuf>,
}

impl SubordinateIds {
    /// True when both ranges are configured.
    pub fn configured(&self) -> bool {
        self.uids.is_some() && self.gids.is_some()
    }
}

/// The caller's subordinate ids.
pub fn subordinate_ids() -> SubordinateIds {
    let (uid, _) = crate::sys::ids();
    let digits = uid.to_string();
    let user = read_or_empty("/etc/passwd")
        .lines()
        .find_map(|line| {
            let mut parts = line.split(':');
            let name = parts.next()?;
            (parts.nth(1)? == digits).then(|| name.to_string())
        })
        .unwrap_or_else(|| digits.clone());
    let names = [user.as_str(), digits.as_str()];
    SubordinateIds {
        uids: subordinate_range(&read_or_empty("/etc/subuid"), &names),
        gids: subordinate_range(&read_or_empty("/etc/subgid"), &names),
        newuidmap: [
            "/usr/bin/newuidmap",
            "/bin/newuidmap",
            "/usr/sbin/newuidmap",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file()),
        user,
    }
}

/// The ids a user namespace maps, as `uid_map` or `gid_map` text: `caller` becomes `sandbox`
/// and every other id stays itself, except `sandbox`, which is left unmapped (an id maps to
/// one id only). Used for the idmapped mounts of read-only grants and overlay lowers: the
/// caller's files appear as the command's own.
pub(crate) fn caller_to_sandbox_map(caller: u32, sandbox: u32) -> String {
    let mut extents = vec![(caller, sandbox, 1u32)];
    // Identity for [0, MAX_ID] without `caller` and `sandbox`.
    let (lo, hi) = (caller.min(sandbox), caller.max(sandbox));
    for (start, end) in [(0, lo), (lo + 1, hi), (hi + 1, MAX_ID + 1)] {
        if end > start {
            extents.push((start, start, end - start));
        }
    }
    extents
        .iter()
        .map(|(inside, outside, count)| format!("{inside} {outside} {count}\n"))
        .collect()
}

/// Write the outer uid/gid maps of a freshly cloned process: its root is the caller, and for a
/// root caller (one whose command is not the caller itself) the command's id,
/// [`SANDBOX_ID`], is `host`'s. Only root in the host's user namespace may map an id
/// other than its own, which is why this is written from outside.
pub(crate) fn write_outer_maps(
    pid: libc::pid_t,
    uid: u32,
    gid: u32,
    host: &HostIdentity,
) -> std::io::Result<()> {
    let (uid_map, gid_map) = outer_maps(uid, gid, host);
    std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
    std::fs::write(format!("/proc/{pid}/uid_map"), uid_map)?;
    std::fs::write(format!("/proc/{pid}/gid_map"), gid_map)
}

/// The text of the outer `uid_map` and `gid_map` (see [`write_outer_maps`]).
fn outer_maps(uid: u32, gid: u32, host: &HostIdentity) -> (String, String) {
    let id = SANDBOX_ID;
    if host.is_caller() {
        (format!("0 {uid} 1\n"), format!("0 {gid} 1\n"))
    } else {
        (
            format!("0 {uid} 1\n{id} {} 1\n", host.uid),
            format!("0 {gid} 1\n{id} {} 1\n", host.gid),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(configured: Option<&str>, subuid: &str, subgid: &str) -> Result<HostIdentity> {
        resolve(0, 0, configured, subuid, subgid)
    }

    #[test]
    fn a_non_root_caller_runs_as_itself() {
        let id = resolve(1000, 100, Some("5000"), "", "").unwrap();
        assert_eq!(
            id,
            HostIdentity {
                uid: 1000,
                gid: 100,
                source: IdentitySource::Caller
            }
        );
        assert!(id.is_caller());
    }

    #[test]
    fn a_root_caller_never_runs_as_root() {
        let id = root(None, "", "").unwrap();
        assert_eq!(
            (id.uid, id.gid, id.source),
            (65534, 65534, IdentitySource::Nobody)
        );
        let id = root(
            None,
            "alice:100000:65536\nroot:200000:65536\n",
            "root:300000:10\n",
        )
        .unwrap();
        assert_eq!(
            (id.uid, id.gid, id.source),
            (200000, 300000, IdentitySource::SubordinateIds)
        );
        // Both files are needed; a uid-only range falls back to nobody.
        let id = root(None, "0:200000:65536\n", "").unwrap();
        assert_eq!(id.source, IdentitySource::Nobody);
        let id = root(Some("4242"), "root:200000:65536\n", "root:200000:65536\n").unwrap();
        assert_eq!(
            (id.uid, id.gid, id.source),
            (4242, 4242, IdentitySource::Configured)
        );
        let id = root(Some(" 4242:4343 "), "", "").unwrap();
        assert_eq!((id.uid, id.gid), (4242, 4343));
        for bad in ["0", "0:5", "5:0", "x", "5:", "4294967295", "-1"] {
            let err = root(Some(bad), "", "").unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{bad}: {err}");
            assert!(err.to_string().contains(HOST_ID_ENV), "{err}");
        }
    }

    #[test]
    fn subordinate_ranges_are_found_by_name_or_uid() {
        let text = "# comment\nbob:1:0\nbob:165536:65536\n1001:300000:5\n";
        assert_eq!(
            subordinate_range(text, &["bob"]),
            Some(IdRange {
                start: 165536,
                count: 65536
            })
        );
        assert_eq!(
            subordinate_range(text, &["carol", "1001"]).map(|r| r.start),
            Some(300000)
        );
        assert_eq!(subordinate_range(text, &["dave"]), None);
    }

    #[test]
    fn the_caller_to_sandbox_map_covers_every_id_once() {
        let map = caller_to_sandbox_map(0, 65534);
        assert_eq!(
            map, "0 65534 1\n1 1 65533\n65535 65535 4294901760\n",
            "{map}"
        );
        for (caller, sandbox) in [(0, 65534), (0, 1), (0, MAX_ID), (5000, 200000)] {
            let extents: Vec<(u64, u64, u64)> = caller_to_sandbox_map(caller, sandbox)
                .lines()
                .map(|l| {
                    let v: Vec<u64> = l.split(' ').map(|n| n.parse().unwrap()).collect();
                    (v[0], v[1], v[2])
                })
                .collect();
            // Inside ids: every id but `sandbox`, once; outside ids: every id but `caller`.
            let inside: u64 = extents.iter().map(|e| e.2).sum();
            assert_eq!(inside, u64::from(MAX_ID), "{caller} {sandbox}");
            assert!(
                extents
                    .iter()
                    .all(|e| e.0 != u64::from(sandbox) || e.2 == 0)
            );
            assert!(extents.contains(&(u64::from(caller), u64::from(sandbox), 1)));
            assert!(extents.len() <= 4);
        }
    }

    fn identity(uid: u32, gid: u32, source: IdentitySource) -> HostIdentity {
        HostIdentity { uid, gid, source }
    }

    #[test]
    fn a_root_callers_outer_maps_give_the_command_its_host_identity() {
        use crate::identity::IdentitySource::{Caller, Nobody};
        let (uid_map, gid_map) = outer_maps(0, 0, &identity(65534, 65533, Nobody));
        assert_eq!(uid_map, "0 0 1\n1000 65534 1\n");
        assert_eq!(gid_map, "0 0 1\n1000 65533 1\n");
        // A non-root caller maps only itself.
        let (uid_map, gid_map) = outer_maps(1234, 100, &identity(1234, 100, Caller));
        assert_eq!(
            (uid_map.as_str(), gid_map.as_str()),
            ("0 1234 1\n", "0 100 1\n")
        );
    }
}
