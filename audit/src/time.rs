//! RFC 3339 timestamps without a calendar dependency.
//!
//! Audit records carry wall-clock time on purpose (they say when something happened, they are
//! not meant to be reproducible); everything here is UTC.

use crate::error::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Self::from_system(SystemTime::now())
    }

    /// Convert a `SystemTime`; times before 1970 clamp to the epoch.
    pub fn from_system(t: SystemTime) -> Self {
        let micros = t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0);
        Timestamp(i64::try_from(micros).unwrap_or(i64::MAX))
    }

    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            sod / 3600,
            (sod / 60) % 60,
            sod % 60
        )
    }

    /// Parse RFC 3339 (`2026-11-29T18:00:00Z`, fractional seconds and `+hh:mm` offsets allowed)
    /// or a bare date (`2026-11-29`, meaning midnight UTC).
    pub fn parse_rfc3339(input: &str) -> Result<Self> {
        parse_rfc3339(input.trim()).ok_or_else(|| Error::BadTime {
            input: input.to_string(),
        })
    }

    /// Parse what an operator types after `--since`: an RFC 3339 time, a date, or an age
    /// (`90s`, `30m`, `24h`, `7d`, `2w`) counted back from `now`.
    pub fn parse_since(input: &str, now: Timestamp) -> Result<Self> {
        let s = input.trim();
        if let Some(age) = parse_age(s) {
            let micros = i64::try_from(age.as_micros()).unwrap_or(i64::MAX);
            return Ok(Timestamp(now.0.saturating_sub(micros)));
        }
        Self::parse_rfc3339(s)
    }
}

fn parse_age(s: &str) -> Option<Duration> {
    parse_duration(s).ok()
}

/// The one duration syntax of airlock's configuration and flags: humantime's (`90s`, `15m`,
/// `72h`, `7d`, `1w`, `1h 30m`), or a bare number of seconds. The error says what was given
/// and what would do.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| format!("{text:?} is too many seconds"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration like 90s, 15m, 72h, 7d or 1h 30m ({e})"))
}

fn digits(s: &str, from: usize, len: usize) -> Option<i64> {
    let part = s.get(from..from + len)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    let y = digits(s, 0, 4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let mo = digits(s, 5, 2)?;
    let d = digits(s, 8, 2)?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    if s.len() == 10 {
        return Some(Timestamp(days * 86_400 * 1_000_000));
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    let h = digits(s, 11, 2)?;
    let mi = digits(s, 14, 2)?;
    let se = digits(s, 17, 2)?;
    if h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 6)];
        micros = frac.parse::<i64>().ok()? * 10i64.pow(6 - u32::try_from(frac.len()).ok()?);
    }
    let offset_secs = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b.get(i + 3) == Some(&b':') => {
            let oh = digits(s, i + 1, 2)?;
            let om = digits(s, i + 4, 2)?;
            let off = oh * 3600 + om * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_secs;
    Some(Timestamp(secs * 1_000_000 + micros))
}

// Howard Hinnant's civil calendar algorithms (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_parses_offsets() {
        let t = Timestamp::parse_rfc3339("2026-11-29T18:44:17.123456Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-29T18:44:17.123456Z");
        let with_offset = Timestamp::parse_rfc3339("2026-11-29T20:44:17.123456+02:00").unwrap();
        assert_eq!(t, with_offset);
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000000Z");
        let date = Timestamp::parse_rfc3339("2024-02-29").unwrap();
        assert_eq!(date.to_rfc3339(), "2024-02-29T00:00:00.000000Z");
        assert!(Timestamp::parse_rfc3339("2026-13-01").is_err());
        assert!(Timestamp::parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn since_accepts_ages() {
        let now = Timestamp::parse_rfc3339("2026-11-29T12:00:00Z").unwrap();
        let t = Timestamp::parse_since("2h", now).unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-29T10:00:00.000000Z");
        let t = Timestamp::parse_since("7d", now).unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-22T12:00:00.000000Z");
    }
}
