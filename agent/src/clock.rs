//! The local clock for `now` and `create_reminder`, on `jiff`: the system time zone from `TZ`
//! or `/etc/localtime` (Linux, macOS, iOS), with IANA names and DST rules from the system's
//! zoneinfo, and UTC when none can be found. (`time`'s local offset is refused in
//! multi-threaded programs on Linux, and an offset alone cannot say when DST changes.)
//!
//! A reminder's `when` is one of, in the local time zone unless it says otherwise:
//! - RFC 3339 with an offset: `2026-05-04T09:00:00+02:00`, `2026-05-04T07:00:00Z`;
//! - a local date and time: `2026-05-04 09:00` (or with a `T`), or a date alone (09:00);
//! - `in N minutes|hours|days|weeks` (also `min`, `h`, `d`, `w`, and `an hour`, `a day`);
//! - `today 17:30`, `tomorrow`, `tomorrow 9:00`, `tomorrow at 9am`, `tonight` (20:00);
//! - a time alone, `9:00`, `6pm`: its next occurrence.
//!
//! A time that has passed is refused, so a reminder is never set in the past by mistake.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, ZonedDateTime};

/// The hour of day a day without a time means.
const DEFAULT_HOUR: i8 = 9;

/// Now, in the system's time zone.
pub fn local_now() -> ZonedDateTime {
    ZonedDateTime::now()
}

/// The time zone's name: its IANA name when known, else its offset.
pub fn zone_name(at: &ZonedDateTime) -> String {
    match at.time_zone().iana_name() {
        Some(name) => name.to_string(),
        None => format!("UTC{}", at.offset()),
    }
}

/// `Monday 4 May 2026, 09:00 (Europe/Paris)`.
pub fn describe(at: &ZonedDateTime) -> String {
    format!(
        "{}, {} ({})",
        at.strftime("%A %-d %B %Y"),
        at.strftime("%H:%M"),
        zone_name(at)
    )
}

/// When a reminder phrased as `when` is due, seen from `now`.
pub fn parse_when(when: &str, now: &ZonedDateTime) -> Result<ZonedDateTime, String> {
    let text = when.trim().to_lowercase();
    let text = text.trim_end_matches('.');
    let due = parse(text, now)?;
    if due.timestamp() <= now.timestamp() {
        return Err(format!(
            "that time ({}) has already passed; it is now {}",
            describe(&due),
            describe(now)
        ));
    }
    Ok(due)
}

fn parse(text: &str, now: &ZonedDateTime) -> Result<ZonedDateTime, String> {
    let tz = now.time_zone().clone();
    if text.is_empty() {
        return Err("say when, e.g. \"tomorrow 9:00\" or \"in 2 hours\"".into());
    }
    // an instant with an offset (RFC 3339)
    if let Ok(ts) = text.to_uppercase().parse::<Timestamp>() {
        return Ok(ts.to_zoned_datetime(tz));
    }
    // a date alone parses as a date-time at midnight: it means the morning instead
    if !text.contains(':')
        && let Ok(date) = text.parse::<Date>()
    {
        return local(date.to_datetime(hour(DEFAULT_HOUR)), &tz);
    }
    if let Ok(dt) = text.replacen(' ', "T", 1).parse::<DateTime>() {
        return local(dt, &tz);
    }
    if let Some(rest) = text.strip_prefix("in ") {
        return relative(rest, now);
    }
    let (day, rest) = if let Some(rest) = text.strip_prefix("tomorrow") {
        (Some(1), rest)
    } else if let Some(rest) = text.strip_prefix("today") {
        (Some(0), rest)
    } else if text == "tonight" {
        (Some(0), " 20:00")
    } else {
        (None, text)
    };
    let rest = rest.trim();
    let rest = rest.strip_prefix("at ").unwrap_or(rest).trim();
    let date = now.date();
    match day {
        Some(days) => {
            let time = if rest.is_empty() {
                hour(DEFAULT_HOUR)
            } else {
                time_of_day(rest).ok_or_else(|| unknown(text))?
            };
            let date = date
                .checked_add(Span::new().days(days))
                .map_err(|e| e.to_string())?;
            local(date.to_datetime(time), &tz)
        }
        None => {
            let time = time_of_day(rest).ok_or_else(|| unknown(text))?;
            let today = local(date.to_datetime(time), &tz)?;
            if today.timestamp() > now.timestamp() {
                Ok(today)
            } else {
                let tomorrow = date.tomorrow().map_err(|e| e.to_string())?;
                local(tomorrow.to_datetime(time), &tz)
            }
        }
    }
}

fn unknown(text: &str) -> String {
    format!(
        "`{text}` is not a time this understands; use e.g. \"2026-05-04 09:00\", \"tomorrow 9:00\", \"in 2 hours\" or RFC 3339"
    )
}

fn local(dt: DateTime, tz: &TimeZone) -> Result<ZonedDateTime, String> {
    dt.to_zoned_datetime(tz.clone()).map_err(|e| e.to_string())
}

fn hour(h: i8) -> Time {
    Time::new(h, 0, 0, 0).unwrap_or(Time::midnight())
}

/// `in 2 hours`, `in 30 min`, `in a day`.
fn relative(rest: &str, now: &ZonedDateTime) -> Result<ZonedDateTime, String> {
    let mut words = rest.split_whitespace();
    let (count, unit) = match (words.next(), words.next(), words.next()) {
        (Some(n), Some(unit), None) => (n, unit),
        // "in 2h", "in 30min"
        (Some(joined), None, None) => {
            let split = joined
                .find(|c: char| !c.is_ascii_digit())
                .ok_or_else(|| unknown(rest))?;
            joined.split_at(split)
        }
        _ => return Err(unknown(rest)),
    };
    let count: i64 = match count {
        "a" | "an" | "one" => 1,
        n => n.parse().map_err(|_| unknown(rest))?,
    };
    if !(1..=10_000).contains(&count) {
        return Err(format!("`in {rest}` is too far away"));
    }
    let span = match unit.trim_end_matches('s') {
        "minute" | "min" | "m" => Span::new().try_minutes(count),
        "hour" | "h" | "hr" => Span::new().try_hours(count),
        "day" | "d" => Span::new().try_days(count),
        "week" | "w" | "wk" => Span::new().try_weeks(count),
        _ => return Err(unknown(rest)),
    }
    .map_err(|e| e.to_string())?;
    now.checked_add(span).map_err(|e| e.to_string())
}

/// `9`, `9:30`, `09:30`, `21:00`, `9am`, `9:30 pm`, `12am`.
fn time_of_day(text: &str) -> Option<Time> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let (clock, meridiem) = if let Some(c) = compact.strip_suffix("am") {
        (c, Some(false))
    } else if let Some(c) = compact.strip_suffix("pm") {
        (c, Some(true))
    } else {
        (compact.as_str(), None)
    };
    let (h, m) = match clock.split_once(['.', ':']) {
        Some((h, m)) => (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?),
        None => (clock.parse::<i8>().ok()?, 0),
    };
    let h = match meridiem {
        Some(pm) if (1..=12).contains(&h) => h % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None => h,
    };
    Time::new(h, m, 0, 0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> ZonedDateTime {
        // a Monday afternoon in Paris, summer time
        "2026-05-04T14:30:00+02:00[Europe/Paris]".parse().unwrap()
    }

    fn at(when: &str) -> String {
        parse_when(when, &now())
            .unwrap()
            .strftime("%Y-%m-%d %H:%M %:z")
            .to_string()
    }

    #[test]
    fn absolute_times() {
        assert_eq!(at("2026-05-05T07:00:00Z"), "2026-05-05 09:00 +02:00");
        assert_eq!(at("2026-05-04T18:00:00+02:00"), "2026-05-04 18:00 +02:00");
        assert_eq!(at("2026-05-06 08:15"), "2026-05-06 08:15 +02:00");
        assert_eq!(at("2026-05-06t08:15"), "2026-05-06 08:15 +02:00");
        assert_eq!(at("2026-12-24"), "2026-12-24 09:00 +01:00", "winter time");
    }

    #[test]
    fn relative_times() {
        assert_eq!(at("in 2 hours"), "2026-05-04 16:30 +02:00");
        assert_eq!(at("in 90 min"), "2026-05-04 16:00 +02:00");
        assert_eq!(at("In an hour."), "2026-05-04 15:30 +02:00");
        assert_eq!(at("in 3d"), "2026-05-07 14:30 +02:00");
        assert_eq!(at("in 1 week"), "2026-05-11 14:30 +02:00");
        assert_eq!(at("tomorrow"), "2026-05-05 09:00 +02:00");
        assert_eq!(at("tomorrow 9:00"), "2026-05-05 09:00 +02:00");
        assert_eq!(at("Tomorrow at 6pm"), "2026-05-05 18:00 +02:00");
        assert_eq!(at("today 17:30"), "2026-05-04 17:30 +02:00");
        assert_eq!(at("tonight"), "2026-05-04 20:00 +02:00");
        assert_eq!(at("16:00"), "2026-05-04 16:00 +02:00");
        assert_eq!(
            at("9am"),
            "2026-05-05 09:00 +02:00",
            "passed today: tomorrow"
        );
        assert_eq!(at("12am"), "2026-05-05 00:00 +02:00");
    }

    #[test]
    fn past_and_unknown_times_are_refused_with_a_reason() {
        let e = parse_when("today 9:00", &now()).unwrap_err();
        assert!(e.contains("already passed"), "{e}");
        assert!(parse_when("2020-01-01", &now()).is_err());
        for bad in [
            "",
            "soon",
            "in many days",
            "tomorrow at noonish",
            "25:00",
            "13pm",
            "in 0 hours",
        ] {
            assert!(parse_when(bad, &now()).is_err(), "{bad}");
        }
    }

    #[test]
    fn descriptions_name_the_day_and_zone() {
        assert_eq!(describe(&now()), "Monday 4 May 2026, 14:30 (Europe/Paris)");
    }
}
