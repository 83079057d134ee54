//! The sandbox's own `/etc/passwd`, `/etc/group` and, with a loopback of its own,
//! `/etc/hosts`: what they say, and writing them into the new root where no grant provides
//! them.

use super::paths::fail;
use crate::report::Failure;
use crate::types::NetworkAccess;
use std::fs;
use std::path::Path;

/// The files that name the sandbox's user and group, as the child sees them.
pub(crate) const IDENTITY_FILES: [&str; 3] = ["/etc/passwd", "/etc/group", "/etc/hosts"];
/// The sandbox's `/etc/passwd` and `/etc/group`: its user and group `airlock` (id
/// [`crate::types::SANDBOX_ID`], home `/tmp`, the default `HOME`), plus root and nobody, which
/// owners outside the sandbox's id map show as; and, when the command has a loopback of its
/// own with inet sockets, its `/etc/hosts`, which names loopback `localhost` (a test suite's
/// own server is reached by that name, and there is no resolver).
fn identity_texts(network: NetworkAccess) -> Vec<(&'static str, String)> {
    let id = crate::types::SANDBOX_ID;
    let mut texts = vec![
        (
            "passwd",
            format!(
                "root:x:0:0:root:/root:/usr/sbin/nologin\n\
                 airlock:x:{id}:{id}:airlock sandbox:/tmp:/bin/sh\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        (
            "group",
            format!("root:x:0:\nairlock:x:{id}:\nnogroup:x:65534:\n"),
        ),
    ];
    if matches!(network, NetworkAccess::Loopback | NetworkAccess::Proxy) {
        texts.push((
            "hosts",
            "127.0.0.1\tlocalhost airlock\n::1\tlocalhost ip6-localhost ip6-loopback\n".into(),
        ));
    }
    texts
}

/// Name the sandbox's user and group for the programs that look them up (`id -un`, `whoami`,
/// Python's `getpass.getuser()`, `~` without `HOME`): a minimal `/etc/passwd` and `/etc/group`
/// written into the new root's own tmpfs, which becomes read-only with it. Only where no
/// granted path provides them, and never into a granted directory: `/etc` must be missing or a
/// directory of the root tmpfs itself.
pub(super) fn identity_files(new_root: &Path, network: NetworkAccess) -> Result<(), Failure> {
    use std::io::Write as _;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let root_dev = fs::metadata(new_root)
        .map_err(|e| fail("stat the new root", e))?
        .dev();
    let etc = new_root.join("etc");
    match fs::symlink_metadata(&etc) {
        Ok(meta) if meta.is_dir() && meta.dev() == root_dev => {}
        Ok(_) => return Ok(()),
        Err(_) => fs::create_dir(&etc).map_err(|e| fail("mkdir /etc", e))?,
    }
    for (name, content) in identity_texts(network) {
        let path = etc.join(name);
        if fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .and_then(|mut f| f.write_all(content.as_bytes()))
            .map_err(|e| fail(format!("write /etc/{name}"), e))?;
    }
    Ok(())
}
