//! Cron expressions of schedules: five fields in UTC (minute, hour, day of month, month, day of
//! week), each `*`, a number, a range `a-b`, a list `a,b-c`, any of them stepped with `/n`
//! (`a/n` runs from `a` to the field's end). Day of month and day of week are OR-ed when both
//! are restricted, as in Vixie cron: a field that starts with `*` (`*/2` too) leaves the other
//! to decide. Day of week 0 or 7 is Sunday. No names (`MON`, `JAN`), no `@daily`, no seconds.
//!
//! Parsed here rather than by a crate: the maintained ones take six or seven fields with seconds
//! and a wider syntax the contract does not have, and AND the two day fields (`cron`), or bring
//! a date library and options to turn that off (`croner`); this subset is ~200 lines with its
//! tests and adds almost nothing to a wasm that is over its size budget.

use crate::error::{Error, Result};

/// Milliseconds of a minute and of a day.
const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;
/// How far [`Cron::next_after`] looks: nine years hold a 29 February whatever the start (2100
/// is not a leap year, so one may be eight years away).
const HORIZON_YEARS: i64 = 9;

/// How the two day fields combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Days {
    /// One of them starts with `*`: a day must match both (the `*` one matches as written).
    Both,
    /// Both are restricted: a day matching either runs.
    Either,
}

/// A parsed expression: one bit per allowed value of each field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    rule: Days,
}

/// Parses one field's text into its bits over `min..=max` (`what` names it in errors).
fn field(text: &str, min: u32, max: u32, what: &str) -> Result<u64> {
    let bad = |why: &str| Error::invalid(format!("cron: {what} field {text:?}: {why}"));
    let number = |s: &str| -> Result<u32> {
        if s.is_empty() || s.len() > 2 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("expected a number, `*`, a range `a-b`, a list or a step `/n`"));
        }
        let n: u32 = s.parse().map_err(|_| bad("not a number"))?;
        if n < min || n > max {
            return Err(bad(&format!("{n} is outside {min}-{max}")));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        let step = match step {
            None => 1,
            Some(s) => match s.parse::<u32>() {
                Ok(n) if n >= 1 && n <= max && s.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(bad(&format!("a step must be a number from 1 to {max}"))),
            },
        };
        let (lo, hi) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None if step > 1 || item.contains('/') => (number(r)?, max),
                None => {
                    let n = number(r)?;
                    (n, n)
                }
            },
        };
        if lo > hi {
            return Err(bad(&format!("the range {lo}-{hi} runs backwards")));
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

impl Cron {
    /// Parses `text`: five fields separated by spaces. A bad field, or an expression that never
    /// runs (`0 0 30 2 *`), is `invalid_request` naming the problem.
    pub fn parse(text: &str) -> Result<Cron> {
        let f: Vec<&str> = text.split_whitespace().collect();
        if f.len() != 5 {
            return Err(Error::invalid(format!(
                "cron: {text:?} must have five fields (minute hour day-of-month month day-of-week), UTC"
            )));
        }
        let mut weekdays = field(f[4], 0, 7, "day-of-week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & !(1 << 7);
        }
        let rule = if f[2].starts_with('*') || f[4].starts_with('*') { Days::Both } else { Days::Either };
        let cron = Cron {
            minutes: field(f[0], 0, 59, "minute")?,
            hours: field(f[1], 0, 23, "hour")?,
            days: field(f[2], 1, 31, "day-of-month")?,
            months: field(f[3], 1, 12, "month")?,
            weekdays,
            rule,
        };
        if cron.next_after(0).is_none() {
            return Err(Error::invalid(format!("cron: {text:?} never runs (no such day)")));
        }
        Ok(cron)
    }

    /// Whether the expression runs on day `d` of month `m` (1-based) of a day whose weekday is
    /// `wd` (0 = Sunday).
    fn runs_on(&self, d: u32, wd: u32) -> bool {
        let (dom, dow) = (self.days & (1 << d) != 0, self.weekdays & (1 << wd) != 0);
        match self.rule {
            Days::Both => dom && dow,
            Days::Either => dom || dow,
        }
    }

    /// The first minute strictly after `after_ms` (ms since the epoch) the expression runs at,
    /// in ms; `None` if it runs on no day within nine years (never).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let start = after_ms.div_euclid(MINUTE_MS) * MINUTE_MS + MINUTE_MS;
        let (mut y, mut m, mut d) = civil(start.div_euclid(DAY_MS));
        let minute_of_day = start.rem_euclid(DAY_MS) / MINUTE_MS;
        let (mut h, mut mi) = ((minute_of_day / 60) as u32, (minute_of_day % 60) as u32);
        let last_year = y + HORIZON_YEARS;
        while y <= last_year {
            if self.months & (1 << m) == 0 || d > month_days(y, m) {
                (d, h, mi) = (1, 0, 0);
                m += 1;
                if m > 12 {
                    (m, y) = (1, y + 1);
                }
                continue;
            }
            let day = days_from_civil(y, m, d);
            if !self.runs_on(d, (day + 4).rem_euclid(7) as u32) {
                (d, h, mi) = (d + 1, 0, 0);
                continue;
            }
            if self.hours & (1 << h) == 0 {
                (h, mi) = (h + 1, 0);
            } else if self.minutes & (1 << mi) == 0 {
                mi += 1;
                if mi > 59 {
                    (h, mi) = (h + 1, 0);
                }
            } else {
                return Some(day * DAY_MS + (h as i64 * 60 + mi as i64) * MINUTE_MS);
            }
            if h > 23 {
                (d, h, mi) = (d + 1, 0, 0);
            }
        }
        None
    }
}

fn leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn month_days(y: i64, m: u32) -> u32 {
    match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + if m <= 2 { 1 } else { 0 }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{iso_millis, parse_iso};

    /// The next run after `from` (ISO) of `expr`, as ISO.
    fn next(expr: &str, from: &str) -> String {
        let at = parse_iso(from).expect("a time");
        iso_millis(Cron::parse(expr).expect("an expression").next_after(at).expect("a next time"))
    }

    /// The next `n` runs after `from`.
    fn runs(expr: &str, from: &str, n: usize) -> Vec<String> {
        let c = Cron::parse(expr).expect("an expression");
        let mut at = parse_iso(from).expect("a time");
        (0..n)
            .map(|_| {
                at = c.next_after(at).expect("a next time");
                iso_millis(at)
            })
            .collect()
    }

    #[test]
    fn dates_round_trip_over_centuries() {
        for day in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    }

    #[test]
    fn every_minute_is_strictly_after_now() {
        assert_eq!(next("* * * * *", "2026-11-22T11:00:00.000Z"), "2026-11-22T11:01:00.000Z");
        assert_eq!(next("* * * * *", "2026-11-22T11:00:59.999Z"), "2026-11-22T11:01:00.000Z");
    }

    #[test]
    fn steps_lists_and_ranges() {
        assert_eq!(
            runs("*/15 * * * *", "2026-11-22T11:07:00.000Z", 4),
            [
                "2026-11-22T11:15:00.000Z",
                "2026-11-22T11:30:00.000Z",
                "2026-11-22T11:45:00.000Z",
                "2026-11-22T12:00:00.000Z"
            ]
        );
        assert_eq!(
            runs("5,10-12 9 * * *", "2026-11-22T09:06:00.000Z", 5),
            [
                "2026-11-22T09:10:00.000Z",
                "2026-11-22T09:11:00.000Z",
                "2026-11-22T09:12:00.000Z",
                "2026-11-23T09:05:00.000Z",
                "2026-11-23T09:10:00.000Z"
            ]
        );
        assert_eq!(
            runs("0 8-18/5 * * *", "2026-11-22T09:00:00.000Z", 3),
            ["2026-11-22T13:00:00.000Z", "2026-11-22T18:00:00.000Z", "2026-11-23T08:00:00.000Z"]
        );
        assert_eq!(next("50/5 * * * *", "2026-11-22T09:56:00.000Z"), "2026-11-22T10:50:00.000Z");
    }

    #[test]
    fn month_ends_and_year_ends() {
        assert_eq!(next("0 0 31 * *", "2026-11-01T00:00:00.000Z"), "2026-12-31T00:00:00.000Z");
        assert_eq!(next("0 0 1 * *", "2026-12-31T23:59:00.000Z"), "2027-01-01T00:00:00.000Z");
        assert_eq!(next("59 23 31 12 *", "2026-12-31T23:59:00.000Z"), "2027-12-31T23:59:00.000Z");
        assert_eq!(
            runs("0 12 30 * *", "2027-01-31T00:00:00.000Z", 2),
            ["2027-03-30T12:00:00.000Z", "2027-04-30T12:00:00.000Z"]
        );
    }

    #[test]
    fn leap_days() {
        assert_eq!(next("0 0 29 2 *", "2026-03-01T00:00:00.000Z"), "2028-02-29T00:00:00.000Z");
        // 2100 is no leap year: the next 29 February after 2096 is in 2104.
        assert_eq!(next("0 0 29 2 *", "2096-03-01T00:00:00.000Z"), "2104-02-29T00:00:00.000Z");
    }

    #[test]
    fn day_of_month_or_day_of_week_when_both_are_restricted() {
        // Vixie: the 13th, or any Friday. 2026-11-13 is a Friday; 2026-11-20 a Friday.
        assert_eq!(
            runs("0 0 13 * 5", "2026-11-01T00:00:00.000Z", 3),
            ["2026-11-06T00:00:00.000Z", "2026-11-13T00:00:00.000Z", "2026-11-20T00:00:00.000Z"]
        );
        assert_eq!(
            next("0 0 1 * 1", "2026-11-22T00:00:00.000Z"),
            "2026-11-23T00:00:00.000Z",
            "a Monday before the 1st"
        );
        // One of them `*`: the other alone decides (here, Sundays only; 0 and 7 alike).
        assert_eq!(next("0 0 * * 0", "2026-11-23T00:00:00.000Z"), "2026-11-29T00:00:00.000Z");
        assert_eq!(next("0 0 * * 7", "2026-11-23T00:00:00.000Z"), "2026-11-29T00:00:00.000Z");
        // A day-of-month starting with `*` counts as `*`: odd days that are Mondays.
        assert_eq!(
            runs("0 0 */2 * 1", "2026-11-22T00:00:00.000Z", 2),
            ["2026-11-23T00:00:00.000Z", "2026-12-07T00:00:00.000Z"]
        );
    }

    #[test]
    fn bad_expressions_are_refused_with_the_reason() {
        for (expr, why) in [
            ("* * * *", "five fields"),
            ("* * * * * *", "five fields"),
            ("60 * * * *", "outside 0-59"),
            ("* 24 * * *", "outside 0-23"),
            ("* * 0 * *", "outside 1-31"),
            ("* * * 13 *", "outside 1-12"),
            ("* * * * 8", "outside 0-7"),
            ("5-1 * * * *", "backwards"),
            ("*/0 * * * *", "a step"),
            ("a * * * *", "expected a number"),
            ("1,,2 * * * *", "expected a number"),
            ("-1 * * * *", "expected a number"),
            ("* * * JAN *", "expected a number"),
            ("0 0 30 2 *", "never runs"),
            ("0 0 31 4,6 *", "never runs"),
        ] {
            let e = Cron::parse(expr).expect_err(expr);
            assert!(e.message.contains(why), "{expr}: {}", e.message);
        }
    }
}
