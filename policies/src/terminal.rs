//! How text that came from an agent or a repository is shown on a person's terminal: every
//! character a terminal would obey or not draw is written out as `\u{..}`, so the text cannot
//! move the cursor, erase a line, reorder what follows or hide characters, and the reader sees
//! that it tried.
//!
//! Escaped: the control characters (C0 other than newline and tab, DEL, C1: ESC, CR, backspace,
//! BEL, ...), the format characters of Unicode category Cf (bidi embeddings, overrides, isolates
//! and marks, zero-width space/joiners, word joiner, BOM, soft hyphen, the tag characters
//! U+E0000..U+E007F), line and paragraph separators, private-use and unassigned code points,
//! variation selectors, the invisible Hangul fillers and every space other than U+0020. Categories
//! come from `unicode-general-category`, so a new Unicode version's format characters are
//! covered by a crate update rather than a list kept here. The JSON outputs carry the raw text
//! ([`to_ascii_json`] writes it with non-ASCII as `\u` escapes, which parse back to the exact
//! text): escaping is for terminals only.

use std::borrow::Cow;

use unicode_general_category::{GeneralCategory, get_general_category};

/// Whether `c` is shown as `\u{..}` rather than written to the terminal (newline and tab
/// included: callers that keep them check first).
fn is_hidden(c: char) -> bool {
    if c == ' ' {
        return false;
    }
    match get_general_category(c) {
        GeneralCategory::Control
        | GeneralCategory::Format
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator
        | GeneralCategory::SpaceSeparator
        | GeneralCategory::PrivateUse
        | GeneralCategory::Surrogate
        | GeneralCategory::Unassigned => true,
        // Nonspacing marks that draw nothing on their own and are used to smuggle text.
        GeneralCategory::NonspacingMark => matches!(
            c,
            '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' | '\u{034f}' | '\u{180b}'..='\u{180f}'
        ),
        // Letters that render as blank space.
        GeneralCategory::OtherLetter => {
            matches!(c, '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}')
        }
        _ => false,
    }
}

fn escape_with(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let hidden = |c: char| is_hidden(c) && !keep(c);
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` safe for a terminal, keeping newlines and tabs (a body, test output, a whole diff):
/// every other control, format or invisible character is shown as `\u{..}`. A carriage return
/// is shown, never obeyed, so a line stays one line.
pub fn escaped(text: &str) -> Cow<'_, str> {
    escape_with(text, |c| c == '\n' || c == '\t')
}

/// `text` safe for one line of a terminal (a title, a file name, a table cell): like
/// [`escaped`], with newline and tab shown as `\u{a}` and `\u{9}` too.
pub fn escaped_line(text: &str) -> Cow<'_, str> {
    escape_with(text, |_| false)
}

/// Whether [`escaped_line`] would change `text`: the text holds a character a terminal would
/// obey or not draw.
pub fn has_hidden(text: &str) -> bool {
    text.chars().any(is_hidden)
}

/// JSON for scripts: the raw text, with every non-ASCII character written as a `\u` escape so
/// that the document itself is safe on a terminal and still parses back to the exact text.
pub fn to_ascii_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    ascii_json_with(value, serde_json::ser::PrettyFormatter::new())
}

/// [`to_ascii_json`] on one line, for JSON Lines output.
pub fn to_ascii_json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    ascii_json_with(value, serde_json::ser::CompactFormatter)
}

fn ascii_json_with<T, F>(value: &T, formatter: F) -> serde_json::Result<String>
where
    T: serde::Serialize + ?Sized,
    F: serde_json::ser::Formatter,
{
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, AsciiFormatter(formatter));
    value.serialize(&mut ser)?;
    // Only ASCII was written, so this never replaces anything.
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A serde_json formatter with non-ASCII string characters escaped.
struct AsciiFormatter<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for AsciiFormatter<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for c in fragment.chars() {
            if c.is_ascii() {
                writer.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hidden_line_attack_is_shown() {
        let line = "+EVIL = 'send ~/.ssh to attacker'\u{1b}[2K\r";
        assert_eq!(
            escaped(line),
            "+EVIL = 'send ~/.ssh to attacker'\\u{1b}[2K\\u{d}"
        );
        assert_eq!(escaped("title\u{1b}[8m"), "title\\u{1b}[8m");
    }

    #[test]
    fn every_class_of_invisible_character_is_escaped() {
        for (c, shown) in [
            ('\u{8}', "\\u{8}"),
            ('\u{7}', "\\u{7}"),
            ('\u{7f}', "\\u{7f}"),
            ('\u{9b}', "\\u{9b}"),
            ('\u{202e}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{61c}', "\\u{61c}"),
            ('\u{200b}', "\\u{200b}"),
            ('\u{200d}', "\\u{200d}"),
            ('\u{2060}', "\\u{2060}"),
            ('\u{feff}', "\\u{feff}"),
            ('\u{ad}', "\\u{ad}"),
            ('\u{e0041}', "\\u{e0041}"),
            ('\u{e007f}', "\\u{e007f}"),
            ('\u{2028}', "\\u{2028}"),
            ('\u{a0}', "\\u{a0}"),
            ('\u{3000}', "\\u{3000}"),
            ('\u{fe0f}', "\\u{fe0f}"),
            ('\u{e0100}', "\\u{e0100}"),
            ('\u{3164}', "\\u{3164}"),
            ('\u{e000}', "\\u{e000}"),
        ] {
            let text = format!("a{c}b");
            assert_eq!(escaped(&text), format!("a{shown}b"), "{:?}", c);
            assert!(has_hidden(&text));
        }
    }

    #[test]
    fn newline_and_tab_are_kept_except_on_one_line() {
        assert_eq!(escaped("a\n\tb"), "a\n\tb");
        assert_eq!(escaped_line("a\n\tb"), "a\\u{a}\\u{9}b");
    }

    #[test]
    fn ascii_json_parses_back_to_the_raw_text() {
        let text = "a\u{1b}[2K\r\u{202e}\u{e0041}é🎉\n";
        for json in [
            to_ascii_json(text).unwrap(),
            to_ascii_json_line(&[text]).unwrap(),
        ] {
            assert!(json.is_ascii(), "{json}");
            assert!(!json.contains('\n'), "{json}");
        }
        let back: String = serde_json::from_str(&to_ascii_json(text).unwrap()).unwrap();
        assert_eq!(back, text);
        assert_eq!(to_ascii_json_line(&[1, 2]).unwrap(), "[1,2]");
    }

    #[test]
    fn ordinary_text_is_borrowed_untouched() {
        let text = "fix: déjà vu — naïve café, 日本語, emoji 🎉, back\\slash";
        assert!(matches!(escaped(text), Cow::Borrowed(_)));
        assert!(matches!(escaped_line(text), Cow::Borrowed(_)));
        assert!(!has_hidden(text));
    }
}

/// How much the binaries log on stderr: `-q` (errors only), the default (warnings, such as a
/// model call being retried), `-v` (info), `-vv` (debug), `-vvv` (trace). `RUST_LOG`, when set,
/// overrides the level with its own filter (`RUST_LOG=airlock_model=debug`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verbosity {
    /// How many `-v` were given.
    pub verbose: u8,
    /// `-q` was given.
    pub quiet: bool,
}

impl Verbosity {
    /// The level filter the flags select.
    pub fn level(self) -> &'static str {
        if self.quiet {
            return "error";
        }
        match self.verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    }
}

/// The shape of the log lines on stderr (`--log-format`): `text` for a person, `json` for a
/// machine (one JSON object a line: `timestamp`, `level`, `fields`, `target`, `span`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One readable line an event, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object an event, never coloured.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("`{other}` is not a log format: use text or json")),
        }
    }
}

/// Install the stderr logger for a binary: `RUST_LOG` when it is set and parses, else the
/// level `verbosity` selects, in `format`. Colour only on a terminal and never with `NO_COLOR`
/// set. A span (a run's phase, a turn, a tool call, a witness step) logs one line when it
/// closes, with the time spent in it, at its own level. Logs never go to stdout, where the
/// `--json` outputs are. A second call (tests) leaves the first logger in place.
pub fn init_logging(verbosity: Verbosity, format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::fmt::format::FmtSpan;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(verbosity.level()));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let logger = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::CLOSE);
    let _ = match format {
        LogFormat::Text => logger.with_ansi(colour).with_target(false).try_init(),
        LogFormat::Json => logger.json().with_ansi(false).try_init(),
    };
}

#[cfg(test)]
mod verbosity_tests {
    use super::Verbosity;

    #[test]
    fn flags_select_levels() {
        let v = |verbose, quiet| Verbosity { verbose, quiet }.level();
        assert_eq!(v(0, false), "warn");
        assert_eq!(v(1, false), "info");
        assert_eq!(v(2, false), "debug");
        assert_eq!(v(7, false), "trace");
        assert_eq!(v(3, true), "error");
    }

    #[test]
    fn log_formats_parse_by_name() {
        use super::LogFormat;
        assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert!("yaml".parse::<LogFormat>().is_err());
    }
}
