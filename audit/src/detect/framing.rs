//! Quoted examples: a line that quotes an attack string where the text around it (that line or
//! the five before it) says it is an example, a sample, a test vector or a known attack. Such a
//! line documents an injection rather than making one: a security guide, a detector's tests.
//! An attacker could dress an instruction up the same way; the price is stated in the README.

use super::normalize;
use regex::Regex;
use std::sync::OnceLock;

const FRAMING: &str = r"\b(?:examples?|e\.g\.|for\W+instance|such\W+as|samples?|test\W?vectors?|test\W+cases?|attack\w*|attackers?|injections?|malicious|payloads?|jailbreaks?|red\W?team\w*|adversarial|blocklist|denylist|known\W+(?:bad|attacks?|patterns?)|do\W+not\W+follow|never\W+follow|beispiel\w*|z\.\W?b\.|angriff\w*|par\W+exemple|exemples?|du\W+type|por\W+ejemplo|ejemplos?|por\W+exemplo|exemplos?|ad\W+esempio|esempi\w*|например|пример\w*|атак\w*)\b|例如|比如|示例|例子|攻击|例えば|攻撃|예를\W?들어|예시|공격";

const QUOTES: &[char] = &[
    '"', '“', '”', '«', '»', '„', '「', '」', '『', '』', '`', '\'',
];

/// URLs and host names ("paste.example.org") say nothing about framing.
const ADDRESS: &str = r"https?://\S+|[\w-]+(?:\.[\w-]+)+(?:/\S*)?";

fn framing() -> Option<&'static (Regex, Regex)> {
    static R: OnceLock<Option<(Regex, Regex)>> = OnceLock::new();
    R.get_or_init(|| Some((Regex::new(FRAMING).ok()?, Regex::new(ADDRESS).ok()?)))
        .as_ref()
}

/// Whether the patterns compiled.
pub(crate) fn ready() -> bool {
    framing().is_some()
}

/// Whether 0-based `line` of `lines` quotes something framed as an example.
pub(crate) fn quoted_example(lines: &[&str], line: usize) -> bool {
    let Some((re, address)) = framing() else {
        return false;
    };
    let Some(text) = lines.get(line) else {
        return false;
    };
    if !text.contains(QUOTES) {
        return false;
    }
    lines[line.saturating_sub(5)..=line]
        .iter()
        .any(|l| re.is_match(&address.replace_all(&normalize::line(l), " ")))
}
