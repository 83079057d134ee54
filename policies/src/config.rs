//! The policy file's top-level shape, and compiling it: each rule module owns its section's
//! type and checks it (globs, regexes, every example); this module only puts them together.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::detect::DetectorSection;
use crate::languages::Language;
use crate::locate::{line_col, line_of, rule_error};
use crate::paths::RefuseSection;
use crate::testfiles::TestSection;
use crate::{Error, Policy, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    version: u32,
    write: WriteSection,
    #[serde(default)]
    repos: BTreeMap<String, RepoSection>,
    tests: BTreeMap<Language, TestSection>,
    #[serde(default, rename = "detector")]
    detectors: Vec<DetectorSection>,
    #[serde(default)]
    test_code: Vec<crate::testcode::TestCodeSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteSection {
    allow: Vec<String>,
    #[serde(default)]
    refuse: Vec<RefuseSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepoSection {
    allow: Vec<String>,
}

pub(crate) fn build(text: &str, file: &str) -> Result<Policy> {
    let parsed: PolicyFile = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((0, 0), |span| line_col(text, span.start));
        Error::Toml {
            file: file.to_string(),
            line,
            column,
            message: e.message().to_string(),
        }
    })?;
    if parsed.version != 1 {
        return Err(Error::Toml {
            file: file.to_string(),
            line: line_of(text, "version"),
            column: 1,
            message: format!("unsupported policy version {}; expected 1", parsed.version),
        });
    }
    let write =
        crate::paths::WritePolicy::build(&parsed.write.allow, &parsed.write.refuse, text, file)?;
    let tests = crate::testfiles::TestRules::build(&parsed.tests, text, file)?;
    let detectors = crate::detect::Detectors::build(&parsed.detectors, text, file)?;
    let test_code = crate::testcode::TestCodeRules::build(&parsed.test_code, text, file)?;
    let mut repos = BTreeMap::new();
    for (slug, section) in parsed.repos {
        // Compile now so a bad per-repository glob is a load error, not a surprise later.
        let mut probe = write.clone();
        probe
            .set_allowlist(&section.allow, file)
            .map_err(|e| match e {
                Error::Rule { message, .. } => rule_error(text, file, &slug, message),
                other => other,
            })?;
        repos.insert(slug, section.allow);
    }
    Ok(Policy {
        write,
        tests,
        detectors,
        test_code,
        repos,
        origin: file.to_string(),
    })
}
