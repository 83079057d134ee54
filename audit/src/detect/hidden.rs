//! Hidden text: invisible, bidirectional-control and tag characters, and the character folding
//! the phrase rules match against.

use super::Rule;

pub(crate) fn is_rtl_letter(c: char) -> bool {
    matches!(c as u32, 0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFC | 0x10800..=0x10FFF | 0x1E800..=0x1EFFF)
}

pub(crate) fn is_bidi_override(c: char) -> bool {
    matches!(c as u32, 0x202A..=0x202E | 0x2066..=0x2069)
}

pub(crate) fn is_bidi_mark(c: char) -> bool {
    matches!(c as u32, 0x200E | 0x200F | 0x061C)
}

pub(crate) fn is_tag(c: char) -> bool {
    matches!(c as u32, 0xE0000..=0xE007F)
}

pub(crate) fn is_joiner(c: char) -> bool {
    matches!(c as u32, 0x200C | 0x200D)
}

/// Invisible characters with no legitimate use inside source text.
pub(crate) fn is_zero_width(c: char) -> bool {
    matches!(c as u32, 0x200B | 0x2060 | 0x180E | 0xFEFF)
}

/// Invisible math operators (legitimate in math text; hiding when inside a word).
fn is_invisible_operator(c: char) -> bool {
    matches!(c as u32, 0x2061..=0x2064)
}

/// Hangul fillers: blank glyphs, legitimate only in Korean text.
pub(crate) fn is_hangul_filler(c: char) -> bool {
    matches!(c as u32, 0x115F | 0x1160 | 0x3164 | 0xFFA0)
}

pub(crate) fn is_hangul(c: char) -> bool {
    !is_hangul_filler(c)
        && matches!(c as u32, 0x1100..=0x11FF | 0x3130..=0x318F | 0xA960..=0xA97F | 0xAC00..=0xD7FF | 0xFFA1..=0xFFDC)
}

/// Format characters that render as nothing: dropped from the text the phrase rules match
/// (a word split by them is matched whole). Tag characters are decoded instead.
pub(crate) fn is_hidden_format(c: char) -> bool {
    is_zero_width(c)
        || is_joiner(c)
        || is_bidi_override(c)
        || is_bidi_mark(c)
        || is_invisible_operator(c)
        || is_hangul_filler(c)
        || matches!(c as u32, 0x00AD | 0x034F | 0x180B..=0x180F | 0x206A..=0x206F | 0xFE00..=0xFE0F | 0xE0100..=0xE01EF)
}

/// Characters shown as `<U+XXXX>` in excerpts.
pub(crate) fn is_invisible_or_control(c: char) -> bool {
    (c.is_control() && c != '\t')
        || is_zero_width(c)
        || is_invisible_operator(c)
        || is_hangul_filler(c)
        || is_joiner(c)
        || is_bidi_override(c)
        || is_bidi_mark(c)
        || is_tag(c)
}

/// Findings for hidden characters, as (0-based line, rule).
pub(crate) fn scan(lines: &[&str]) -> Vec<(usize, Rule)> {
    let mut hits = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.is_ascii() {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut rtl = None;
        let mut hangul = None;
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            let before = k.checked_sub(1).and_then(|j| chars.get(j)).copied();
            let after = chars.get(k + 1).copied();
            // A lone character literal ('X') names the character on purpose (Unicode tables).
            let char_literal = before == Some('\'') && after == Some('\'');
            let rule = if char_literal {
                None
            } else if is_tag(c) {
                let run = chars[k..].iter().take_while(|&&x| is_tag(x)).count();
                let letters = chars[k..k + run]
                    .iter()
                    .filter(|&&x| fold(x).is_some_and(|a| a.is_ascii_alphabetic()))
                    .count();
                let emoji_flag = before == Some('\u{1F3F4}');
                k += run - 1;
                (!emoji_flag && letters >= 2).then_some(Rule::TagCharacters)
            } else if is_bidi_override(c) {
                Some(Rule::BidiControl)
            } else if is_bidi_mark(c) {
                let has_rtl = *rtl.get_or_insert_with(|| chars.iter().any(|&x| is_rtl_letter(x)));
                (!has_rtl).then_some(Rule::BidiControl)
            } else if c == '\u{FEFF}' && i == 0 && k == 0 {
                None // a byte-order mark at the start of the text
            } else if is_zero_width(c) {
                Some(Rule::InvisibleCharacter)
            } else if is_invisible_operator(c) {
                let letter = |x: Option<char>| x.is_some_and(|x| x.is_ascii_alphabetic());
                (letter(before) && letter(after)).then_some(Rule::InvisibleCharacter)
            } else if is_hangul_filler(c) {
                let has_hangul = *hangul.get_or_insert_with(|| chars.iter().any(|&x| is_hangul(x)));
                (!has_hangul).then_some(Rule::InvisibleCharacter)
            } else if is_joiner(c) {
                // ZWJ/ZWNJ shape emoji sequences and Indic/Arabic/Persian script; between ASCII
                // (or at a word edge) they only hide something.
                // A run of joiners (as in code-page tables) is judged by what surrounds the run.
                let run = chars[k..].iter().take_while(|&&x| is_joiner(x)).count();
                let after_run = chars.get(k + run).copied();
                k += run - 1;
                let joins_script = |x: Option<char>| {
                    x.is_some_and(|x| {
                        !x.is_ascii() && !x.is_whitespace() && !is_invisible_or_control(x)
                    })
                };
                (!(joins_script(before) && joins_script(after_run)))
                    .then_some(Rule::InvisibleCharacter)
            } else {
                None
            };
            if let Some(rule) = rule {
                hits.push((i, rule));
            }
            k += 1;
        }
    }
    hits
}

/// Fold a character for phrase matching: `None` drops it (invisible), otherwise the lowercase
/// Latin look-alike (or the lowercased character itself).
pub(crate) fn fold(c: char) -> Option<char> {
    if is_tag(c) {
        // Tag characters mirror ASCII at U+E0000; decode what they smuggle.
        let ascii = (c as u32) - 0xE0000;
        return (0x20..0x7F)
            .contains(&ascii)
            .then(|| char::from(ascii as u8).to_ascii_lowercase());
    }
    if is_zero_width(c)
        || is_joiner(c)
        || is_bidi_override(c)
        || is_bidi_mark(c)
        || is_invisible_operator(c)
    {
        return None;
    }
    if c.is_ascii() {
        return Some(c.to_ascii_lowercase());
    }
    let code = c as u32;
    if (0xFF01..=0xFF5E).contains(&code) {
        // Fullwidth ASCII.
        return char::from_u32(code - 0xFF01 + 0x21).map(|x| x.to_ascii_lowercase());
    }
    let folded = match c {
        'а' | 'А' | 'α' | 'Α' => 'a',
        'в' | 'В' | 'β' | 'Β' => 'b',
        'с' | 'С' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'Е' | 'ε' | 'Ε' => 'e',
        'ɡ' => 'g',
        'һ' | 'Н' | 'Η' => 'h',
        'і' | 'І' | 'ι' | 'Ι' | 'ӏ' => 'i',
        'ј' | 'Ј' => 'j',
        'к' | 'К' | 'κ' | 'Κ' => 'k',
        'м' | 'М' | 'Μ' => 'm',
        'п' | 'Ν' | 'η' => 'n',
        'о' | 'О' | 'ο' | 'Ο' | 'σ' => 'o',
        'р' | 'Р' | 'ρ' | 'Ρ' => 'p',
        'ԛ' => 'q',
        'ѕ' | 'Ѕ' => 's',
        'т' | 'Т' | 'τ' | 'Τ' => 't',
        'υ' | 'ս' => 'u',
        'ν' | 'ѵ' => 'v',
        'ԝ' | 'ѡ' => 'w',
        'х' | 'Х' | 'χ' | 'Χ' => 'x',
        'у' | 'У' | 'γ' | 'Υ' => 'y',
        'Ζ' => 'z',
        '\u{2018}' | '\u{2019}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' => '"',
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => return Some(other.to_lowercase().next().unwrap_or(other)),
    };
    Some(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emoji_and_persian_joiners_are_not_flagged() {
        let lines = ["family 👨\u{200D}👩\u{200D}👧", "می\u{200C}خواهم"];
        assert!(scan(&lines).is_empty());
        let lines = ["ig\u{200D}nore"];
        assert_eq!(scan(&lines), vec![(0, Rule::InvisibleCharacter)]);
    }

    #[test]
    fn rtl_marks_only_flagged_without_rtl_text() {
        assert!(scan(&["שלום\u{200F} world"]).is_empty());
        assert_eq!(scan(&["price\u{200F} = 1"]), vec![(0, Rule::BidiControl)]);
    }

    #[test]
    fn legitimate_uses_are_not_flagged() {
        // Unicode tables, math, Korean text and an emoji subdivision flag.
        assert!(scan(&["('\u{200B}', '\u{200F}'),"]).is_empty());
        assert!(scan(&["1\u{2064}1⁄2"]).is_empty());
        assert!(scan(&["\"chars\": \"œ\u{200C}\u{200D}ں\""]).is_empty());
        assert!(scan(&["('\u{115F}', 'ᆢ') 한\u{3164}글"]).is_empty());
        assert!(
            scan(&["\u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}"]).is_empty()
        );
        assert_eq!(
            scan(&["let \u{3164} = 1;"]),
            vec![(0, Rule::InvisibleCharacter)]
        );
        assert_eq!(scan(&["ab\u{2062}cd"]), vec![(0, Rule::InvisibleCharacter)]);
        assert_eq!(
            scan(&["x\u{E0068}\u{E0069}"]),
            vec![(0, Rule::TagCharacters)]
        );
    }

    #[test]
    fn bom_at_start_is_fine() {
        assert!(scan(&["\u{FEFF}fn main() {}"]).is_empty());
        assert_eq!(
            scan(&["x", "a\u{FEFF}b"]),
            vec![(1, Rule::InvisibleCharacter)]
        );
    }
}
