//! Finding the program to exec the way `execvp` would, on the child's own `PATH`: for the
//! command (`target`) and for each of its services (`services`).

use crate::report::Failure;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Find the program the way `execvp` would, using the child's own `PATH`.
pub(crate) fn resolve_program(program: &str, env: &[(String, String)]) -> Result<PathBuf, Failure> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/bin:/bin");
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if let Ok(meta) = fs::metadata(&candidate)
            && meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
        {
            return Ok(candidate);
        }
    }
    Err(Failure {
        feature: None,
        stage: "exec".into(),
        detail: format!("{program}: command not found in the sandbox's PATH ({path})"),
    })
}
