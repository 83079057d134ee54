//! Allowlist presets for each ecosystem's package registries (`@python`, `@node`, `@rust`,
//! `@go`), each read from that installer's own configuration on this host, never from host
//! names written into airlock: a corporate mirror configured for pip, npm, cargo or go is what
//! the preset admits, unchanged.
//!
//! - `@python`: pip's configured index URLs (`pip config list`: files and `PIP_*` variables)
//!   and uv's (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `UV_INDEX`, `UV_EXTRA_INDEX_URL`); with none
//!   configured, pip's own default index and file host, as pip itself names them.
//! - `@node`: `npm config get registry`.
//! - `@rust`: cargo's configuration (`$CARGO_HOME/config.toml`: source replacement and
//!   `[registries]`) and, for the registries cargo has used, each index's host and the
//!   download and API hosts its `config.json` names.
//! - `@go`: `go env GOPROXY GOSUMDB`.

use airlock_policies::network::{AllowEntry, AllowTarget};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A preset that could not be read from its installer's configuration.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    /// Not one of the presets.
    #[error("{0:?} is not a preset: use @python, @node, @rust or @go")]
    Unknown(String),
    /// The installer's configuration names no registry.
    #[error(
        "{preset}: {reason}; list the registry's hosts instead of the preset, or configure the \
         installer on this host"
    )]
    Unavailable {
        /// The preset.
        preset: String,
        /// What was missing.
        reason: String,
    },
}

/// The preset names.
pub const PRESETS: [&str; 4] = ["@python", "@node", "@rust", "@go"];

/// Expand a written allowlist: presets to their hosts, other entries parsed. `Err` names the
/// entry that failed.
pub fn expand(written: &[String]) -> Result<Vec<AllowEntry>, ExpandError> {
    expand_with(written, false)
}

/// [`expand`], leaving out, with `skip_unavailable`, a preset whose installer is not
/// configured on this host (the default allowlist of a prepare step names them all).
pub fn expand_with(
    written: &[String],
    skip_unavailable: bool,
) -> Result<Vec<AllowEntry>, ExpandError> {
    let mut out: Vec<AllowEntry> = Vec::new();
    for (index, text) in written.iter().enumerate() {
        let entries = if text.starts_with('@') {
            match preset(text) {
                Ok(entries) => entries,
                Err(PresetError::Unavailable { .. }) if skip_unavailable => continue,
                Err(e) => {
                    return Err(ExpandError {
                        index,
                        message: e.to_string(),
                    });
                }
            }
        } else {
            vec![
                text.parse()
                    .map_err(|e: airlock_policies::network::NetworkError| ExpandError {
                        index,
                        message: e.to_string(),
                    })?,
            ]
        };
        for entry in entries {
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
    }
    Ok(out)
}

/// One entry of a written allowlist that could not be expanded.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExpandError {
    /// Its index in the list.
    pub index: usize,
    /// What went wrong.
    pub message: String,
}

/// The hosts of one preset.
pub fn preset(name: &str) -> Result<Vec<AllowEntry>, PresetError> {
    let unavailable = |reason: String| PresetError::Unavailable {
        preset: name.to_string(),
        reason,
    };
    let urls = match name {
        "@python" => python_indexes().map_err(unavailable)?,
        "@node" => node_registry().map_err(unavailable)?,
        "@rust" => cargo_registries(&cargo_home()).map_err(unavailable)?,
        "@go" => go_proxies().map_err(unavailable)?,
        other => return Err(PresetError::Unknown(other.to_string())),
    };
    let mut entries: Vec<AllowEntry> = Vec::new();
    for url in urls {
        if let Some(entry) = entry_of_url(&url)
            && !entries.contains(&entry)
        {
            entries.push(entry);
        }
    }
    if entries.is_empty() {
        return Err(PresetError::Unavailable {
            preset: name.to_string(),
            reason: "its installer's configuration names no registry host".into(),
        });
    }
    Ok(entries)
}

/// The allowlist entry of a URL's host (its port when it is not the scheme's default), or
/// `None` for a URL without a network host (a `file:` index, a path).
pub fn entry_of_url(text: &str) -> Option<AllowEntry> {
    let text = text.trim();
    let text = text.strip_prefix("sparse+").unwrap_or(text);
    let text = text.strip_prefix("registry+").unwrap_or(text);
    let url = url::Url::parse(text).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    let written = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let entry: AllowEntry = written.parse().ok()?;
    // A registry's port that is the scheme's default admits as a plain host does.
    match (&entry.target, entry.port) {
        (AllowTarget::Host(h), Some(80 | 443)) => Some(AllowEntry {
            target: AllowTarget::Host(h.clone()),
            port: None,
        }),
        _ => Some(entry),
    }
}

fn output_of(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("`{program}` could not run ({e})"))?;
    if !out.status.success() {
        return Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn python() -> &'static str {
    "python3"
}

/// pip's and uv's configured indexes, else pip's default.
fn python_indexes() -> Result<Vec<String>, String> {
    let mut urls = Vec::new();
    for var in [
        "UV_DEFAULT_INDEX",
        "UV_INDEX_URL",
        "UV_INDEX",
        "UV_EXTRA_INDEX_URL",
    ] {
        if let Ok(v) = std::env::var(var) {
            urls.extend(v.split_whitespace().map(str::to_string));
        }
    }
    // `pip config list` prints `SCOPE.KEY='VALUE'` for its files and its `PIP_*` variables.
    if let Ok(listing) = output_of(python(), &["-m", "pip", "config", "list"]) {
        urls.extend(pip_config_urls(&listing));
    }
    let configured_index = urls.iter().any(|u| entry_of_url(u).is_some());
    if !configured_index {
        let default = output_of(
            python(),
            &[
                "-c",
                "from pip._internal.models.index import PyPI; print(PyPI.url); \
                 print('https://' + PyPI.file_storage_domain + '/')",
            ],
        )
        .map_err(|e| format!("pip names no index and its default could not be read: {e}"))?;
        urls.extend(default.lines().map(str::to_string));
    }
    Ok(urls)
}

/// pip's own configuration that a pip in a new virtualenv must share to reach the same index
/// the same way, as `PIP_*` variables: the index URLs, trusted hosts, the certificate bundle
/// TLS is checked against and the timeout (never a client certificate or anything else). Read
/// from `pip config list` of the host's interpreter; empty when it does not answer.
pub fn pip_settings() -> Vec<(String, String)> {
    output_of(python(), &["-m", "pip", "config", "list"])
        .map(|listing| pip_config_settings(&listing))
        .unwrap_or_default()
}

/// The settings [`pip_settings`] carries, from `pip config list` output: a variable
/// (`:env:.cert`) wins over a file's value, as in pip.
pub fn pip_config_settings(listing: &str) -> Vec<(String, String)> {
    const CARRIED: [&str; 5] = [
        "index-url",
        "extra-index-url",
        "trusted-host",
        "cert",
        "default-timeout",
    ];
    let mut out: std::collections::BTreeMap<String, (bool, String)> = Default::default();
    for line in listing.lines() {
        let Some((scoped, value)) = line.split_once('=') else {
            continue;
        };
        let key = scoped.rsplit('.').next().unwrap_or(scoped);
        if !CARRIED.contains(&key) {
            continue;
        }
        let from_env = scoped.starts_with(":env:");
        let value = value
            .trim()
            .trim_matches(|c| c == '\'' || c == '"')
            .to_string();
        let name = format!("PIP_{}", key.replace('-', "_").to_ascii_uppercase());
        match out.get(&name) {
            Some((true, _)) if !from_env => {}
            _ => {
                out.insert(name, (from_env, value));
            }
        }
    }
    out.into_iter().map(|(k, (_, v))| (k, v)).collect()
}

/// The index URLs in `pip config list` output (`index-url`, `extra-index-url`,
/// `find-links`), each value possibly several, space- or newline-separated.
pub fn pip_config_urls(listing: &str) -> Vec<String> {
    let mut urls = Vec::new();
    for line in listing.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.rsplit('.').next().unwrap_or(key);
        if !matches!(key, "index-url" | "extra-index-url" | "find-links") {
            continue;
        }
        let value = value.trim().trim_matches(|c| c == '\'' || c == '"');
        urls.extend(
            value
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|v| v.contains("://"))
                .map(str::to_string),
        );
    }
    urls
}

fn node_registry() -> Result<Vec<String>, String> {
    let registry = output_of("npm", &["config", "get", "registry"])?;
    Ok(vec![registry.trim().to_string()])
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from(".cargo"))
}

/// The registries of cargo's configuration and those it has used, as URLs.
pub fn cargo_registries(home: &Path) -> Result<Vec<String>, String> {
    let mut urls = Vec::new();
    for name in ["config.toml", "config"] {
        let Ok(text) = std::fs::read_to_string(home.join(name)) else {
            continue;
        };
        let value: toml::Table = toml::from_str(&text)
            .map_err(|e| format!("{} is not TOML: {e}", home.join(name).display()))?;
        for table in ["source", "registries"] {
            if let Some(toml::Value::Table(entries)) = value.get(table) {
                for entry in entries.values() {
                    for key in ["registry", "index"] {
                        if let Some(toml::Value::String(url)) = entry.get(key) {
                            urls.push(url.clone());
                        }
                    }
                }
            }
        }
    }
    // Each index cargo has used: `registry/index/HOST-HASH/`, with the download and API
    // addresses in its `config.json`.
    if let Ok(dirs) = std::fs::read_dir(home.join("registry").join("index")) {
        let mut dirs: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path())).collect();
        dirs.sort();
        for dir in dirs {
            if let Some(host) = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit_once('-'))
                .map(|(host, _)| host.to_string())
            {
                urls.push(format!("https://{host}/"));
            }
            if let Ok(text) = std::fs::read_to_string(dir.join("config.json"))
                && let Ok(serde_json::Value::Object(map)) = serde_json::from_str(&text)
            {
                for key in ["dl", "api"] {
                    if let Some(serde_json::Value::String(url)) = map.get(key) {
                        urls.push(url.clone());
                    }
                }
            }
        }
    }
    if urls.is_empty() {
        return Err(format!(
            "cargo has no registry configured in {} and has used none yet (run `cargo fetch` \
             once)",
            home.display()
        ));
    }
    Ok(urls)
}

fn go_proxies() -> Result<Vec<String>, String> {
    let text = output_of("go", &["env", "GOPROXY", "GOSUMDB"])?;
    Ok(go_env_urls(&text))
}

/// The URLs in `go env GOPROXY GOSUMDB` output (`direct` and `off` name none; a GOSUMDB
/// written as `NAME+KEY URL` or a bare host name counts by its host).
pub fn go_env_urls(text: &str) -> Vec<String> {
    let mut urls = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for part in line.split([',', '|', ' ']) {
            let part = part.trim();
            if part.is_empty() || part == "direct" || part == "off" {
                continue;
            }
            if part.contains("://") {
                urls.push(part.to_string());
            } else if i == 1 && !part.contains('+') {
                urls.push(format!("https://{part}/"));
            }
        }
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_become_host_entries() {
        let e = |u: &str| entry_of_url(u).map(|e| e.to_string());
        assert_eq!(
            e("https://mirror.corp.example/simple/").as_deref(),
            Some("mirror.corp.example")
        );
        assert_eq!(
            e("https://mirror.corp.example:443/x").as_deref(),
            Some("mirror.corp.example")
        );
        assert_eq!(
            e("http://10.1.2.3:8081/pypi").as_deref(),
            Some("10.1.2.3:8081")
        );
        assert_eq!(
            e("sparse+https://idx.example/").as_deref(),
            Some("idx.example")
        );
        assert_eq!(e("file:///opt/wheels"), None);
        assert_eq!(e("/opt/wheels"), None);
    }

    #[test]
    fn pip_listing_yields_its_index_urls() {
        let listing = "global.cert='/etc/ssl/certs/ca.crt'\n\
                       global.index-url='https://pypi.corp.example/simple'\n\
                       :env:.extra-index-url='https://a.example/simple https://b.example:8443/s'\n\
                       :env:.find-links='/opt/wheels'\n";
        assert_eq!(
            pip_config_urls(listing),
            vec![
                "https://pypi.corp.example/simple",
                "https://a.example/simple",
                "https://b.example:8443/s"
            ]
        );
    }

    #[test]
    fn pip_listing_yields_the_settings_a_new_pip_shares_and_variables_win() {
        let listing = ":env:.cert='/etc/ssl/certs/ca.crt'\n\
                       :env:.default-timeout='180'\n\
                       :env:.find-links='/opt/wheels'\n\
                       global.cert='/etc/other.pem'\n\
                       global.index-url='https://pypi.corp.example/simple'\n\
                       global.client-cert='/home/me/key.pem'\n";
        assert_eq!(
            pip_config_settings(listing),
            vec![
                ("PIP_CERT".to_string(), "/etc/ssl/certs/ca.crt".to_string()),
                ("PIP_DEFAULT_TIMEOUT".to_string(), "180".to_string()),
                (
                    "PIP_INDEX_URL".to_string(),
                    "https://pypi.corp.example/simple".to_string()
                ),
            ]
        );
    }

    #[test]
    fn cargo_reads_its_config_and_used_indexes() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "[source.crates-io]\nreplace-with = \"corp\"\n[source.corp]\nregistry = \"sparse+https://cargo.corp.example/index/\"\n",
        )
        .unwrap();
        let dir = home
            .path()
            .join("registry/index/idx.corp.example-0123456789abcdef");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            r#"{"dl":"https://dl.corp.example/crates","api":"https://api.corp.example"}"#,
        )
        .unwrap();
        let urls = cargo_registries(home.path()).unwrap();
        let hosts: Vec<String> = urls
            .iter()
            .filter_map(|u| entry_of_url(u))
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            hosts,
            vec![
                "cargo.corp.example",
                "idx.corp.example",
                "dl.corp.example",
                "api.corp.example"
            ]
        );
        let empty = tempfile::tempdir().unwrap();
        assert!(
            cargo_registries(empty.path())
                .unwrap_err()
                .contains("cargo fetch")
        );
    }

    #[test]
    fn go_env_yields_proxies_and_the_checksum_database() {
        let urls = go_env_urls("https://goproxy.corp.example,direct\nsum.corp.example\n");
        assert_eq!(
            urls,
            vec!["https://goproxy.corp.example", "https://sum.corp.example/"]
        );
        assert!(go_env_urls("off\noff\n").is_empty());
    }

    #[test]
    fn unknown_presets_and_bad_entries_are_named() {
        let err = expand(&["ok.example".into(), "@perl".into()]).unwrap_err();
        assert_eq!(err.index, 1);
        assert!(err.message.contains("@perl"), "{}", err.message);
        let err = expand(&["*.com".into()]).unwrap_err();
        assert!(err.message.contains("public suffix"));
    }
}
