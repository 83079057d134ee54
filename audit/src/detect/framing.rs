//! Quoted examples: a line that quotes an attack string where the text around it (that line or
//! the five before it) says it is an example, a sample, a test vector or a known attack. Such a
//! line documents an injection rather than making one: a security guide, a detector's tests.
//! An attacker could dress an instruction up the same way; the price is stated in the README.

use super::normalize;
use regex::Regex;
use std::sync::OnceLock;

/// Words that say the text around them is about attacks: framing wherever they stand.
const FRAMING: &str = r"\b(?:test\W?vectors?|test\W+cases?|attack\w*|attackers?|injections?|malicious|payloads?|jailbreaks?|red\W?team\w*|adversarial|blocklist|denylist|known\W+(?:bad|attacks?|patterns?)|do\W+not\W+follow|never\W+follow|angriff\w*|атак\w*)\b|攻击|攻撃|공격";

/// Words that introduce an example: framing only right before what they introduce (`e.g.
/// "..."`, `Example: ...`), not anywhere ("not the example", "for example, run it").
const INTRODUCES: &str = r#"\b(?:examples?|e\.g\.|for\W+instance|such\W+as|samples?|beispiel\w*|z\.\W?b\.|par\W+exemple|exemples?|du\W+type|por\W+ejemplo|ejemplos?|por\W+exemplo|exemplos?|ad\W+esempio|esempi\w*|например|пример\w*)\W{0,3}\s*[:"“«„「『`']|(?:例如|比如|示例|例子|例えば|예를\W?들어|예시)\W{0,3}\s*[:："“「『`']"#;

const QUOTES: &[char] = &[
    '"', '“', '”', '«', '»', '„', '「', '」', '『', '』', '`', '\'',
];

/// URLs and host names ("paste.example.org") say nothing about framing.
const ADDRESS: &str = r"https?://\S+|[\w-]+(?:\.[\w-]+)+(?:/\S*)?";

struct Framing {
    about_attacks: Regex,
    introduces: Regex,
    address: Regex,
}

fn framing() -> Option<&'static Framing> {
    static R: OnceLock<Option<Framing>> = OnceLock::new();
    R.get_or_init(|| {
        Some(Framing {
            about_attacks: Regex::new(FRAMING).ok()?,
            introduces: Regex::new(INTRODUCES).ok()?,
            address: Regex::new(ADDRESS).ok()?,
        })
    })
    .as_ref()
}

/// Whether the patterns compiled.
pub(crate) fn ready() -> bool {
    framing().is_some()
}

/// Whether 0-based `line` of `lines` quotes something framed as an example.
pub(crate) fn quoted_example(lines: &[&str], line: usize) -> bool {
    let Some(f) = framing() else {
        return false;
    };
    let Some(text) = lines.get(line) else {
        return false;
    };
    if !text.contains(QUOTES) {
        return false;
    }
    lines[line.saturating_sub(5)..=line].iter().any(|l| {
        let line = normalize::line(l);
        let plain = f.address.replace_all(&line, " ");
        f.about_attacks.is_match(&plain) || f.introduces.is_match(&plain)
    })
}
