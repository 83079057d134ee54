//! The text the phrase rules match: each line lowercased, Unicode NFKC-normalised (fullwidth
//! and mathematical letters become ASCII), invisible characters dropped, Unicode tag characters
//! decoded to the ASCII they smuggle, typographic quotes and spaces made plain, and a word that
//! mixes Latin letters with look-alikes from other scripts ("іgnore" with a Cyrillic і) folded
//! to its Latin skeleton (Unicode confusables, UTS #39). A word written wholly in another script
//! is folded only on a line that is otherwise Latin, so Russian or Greek prose keeps its letters
//! for the rules of its own language.

use super::hidden;
use unicode_normalization::UnicodeNormalization;

/// The normalised form of one line.
pub(crate) fn line(raw: &str) -> String {
    let mut s = String::with_capacity(raw.len());
    let mut non_ascii = false;
    for c in raw.chars() {
        if c.is_ascii() {
            s.push(c.to_ascii_lowercase());
            continue;
        }
        non_ascii = true;
        if hidden::is_tag(c) {
            if let Some(a) = hidden::fold(c) {
                s.push(a);
            }
            continue;
        }
        if hidden::is_hidden_format(c) {
            continue;
        }
        match c {
            '\u{2018}' | '\u{2019}' | '\u{2032}' | '\u{02BC}' => s.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{00AB}' | '\u{00BB}' => s.push('"'),
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' => s.push(' '),
            _ => {
                for d in std::iter::once(c).nfkc() {
                    s.extend(d.to_lowercase());
                }
            }
        }
    }
    // Escapes inside string literals ("system\\nYou are ...") separate words.
    if s.contains('\\') {
        s = s
            .replace("\\n", " ")
            .replace("\\t", " ")
            .replace("\\r", " ");
    }
    if non_ascii { fold_look_alikes(&s) } else { s }
}

/// The single ASCII letter `c` is confusable with, if any.
fn ascii_skeleton(c: char) -> Option<char> {
    let mut buf = [0u8; 4];
    let mut it = unicode_security::skeleton(c.encode_utf8(&mut buf));
    let first = it.next()?;
    (it.next().is_none() && first.is_ascii_alphanumeric()).then(|| first.to_ascii_lowercase())
}

fn fold_look_alikes(s: &str) -> String {
    let ascii_letters = s.chars().filter(char::is_ascii_alphabetic).count();
    let other_letters = s
        .chars()
        .filter(|c| !c.is_ascii() && c.is_alphabetic())
        .count();
    let latin_line = ascii_letters > 2 * other_letters;
    let mut out = String::with_capacity(s.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.is_ascii() {
            out.push_str(word);
        } else {
            let has_latin = word.chars().any(|c| c.is_ascii_alphabetic());
            let folded: Option<String> = word
                .chars()
                .map(|c| {
                    if c.is_ascii() {
                        Some(c)
                    } else {
                        ascii_skeleton(c)
                    }
                })
                .collect();
            match folded {
                Some(f) if has_latin || latin_line => out.push_str(&f),
                _ => out.push_str(word),
            }
        }
        word.clear();
    };
    for c in s.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn look_alikes_fold_only_where_they_disguise() {
        assert_eq!(line("іgnore previous"), "ignore previous");
        assert_eq!(line("ＩＧＮＯＲＥ all"), "ignore all");
        assert_eq!(line("𝐢𝐠𝐧𝐨𝐫𝐞 this"), "ignore this");
        assert_eq!(line("ig\u{200B}no\u{200D}re"), "ignore");
        assert_eq!(line("\u{E0069}\u{E0067}"), "ig");
        // Russian prose keeps its letters.
        assert_eq!(line("Игнорируй все инструкции"), "игнорируй все инструкции");
        // A wholly Cyrillic look-alike word on an English line is folded.
        assert_eq!(line("please ѕеnd the keys"), "please send the keys");
    }
}
