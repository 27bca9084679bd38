//! A small, dependency-free `strftime` over UTC Unix seconds for the `strftime_now` template
//! global (HF passes `datetime.now().strftime`). Invariant: total for any format string; an
//! unknown `%x` directive is copied through verbatim, as glibc does.

use std::fmt::Write as _;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u32, // 1..=12
    day: u32,   // 1..=31
    hour: u32,
    minute: u32,
    second: u32,
    weekday: u32, // 0 = Sunday
    yday: u32,    // 1..=366
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn civil(unix_secs: i64) -> Civil {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400) as u32;
    let (year, month, day) = civil_from_days(days);
    let cumulative = [0u32, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap_day = u32::from(month > 2 && is_leap(year));
    Civil {
        year,
        month,
        day,
        hour: secs / 3600,
        minute: secs / 60 % 60,
        second: secs % 60,
        weekday: (days + 4).rem_euclid(7) as u32,
        yday: cumulative[month as usize - 1] + day + leap_day,
    }
}

/// Formats `unix_secs` (UTC) with C/Python `strftime` directives.
pub(crate) fn strftime(format: &str, unix_secs: i64) -> String {
    let t = civil(unix_secs);
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(d) = chars.next() else {
            out.push('%');
            break;
        };
        let month_name = MONTHS[t.month as usize - 1];
        let weekday_name = WEEKDAYS[t.weekday as usize];
        let hour12 = if t.hour.is_multiple_of(12) {
            12
        } else {
            t.hour % 12
        };
        // Writing to a String cannot fail.
        let _ = match d {
            'Y' => write!(out, "{}", t.year),
            'C' => write!(out, "{:02}", t.year.div_euclid(100)),
            'y' => write!(out, "{:02}", t.year.rem_euclid(100)),
            'm' => write!(out, "{:02}", t.month),
            'd' => write!(out, "{:02}", t.day),
            'e' => write!(out, "{:2}", t.day),
            'H' => write!(out, "{:02}", t.hour),
            'I' => write!(out, "{hour12:02}"),
            'M' => write!(out, "{:02}", t.minute),
            'S' => write!(out, "{:02}", t.second),
            'p' => out.write_str(if t.hour < 12 { "AM" } else { "PM" }),
            'B' => out.write_str(month_name),
            'b' | 'h' => out.write_str(&month_name[..3]),
            'A' => out.write_str(weekday_name),
            'a' => out.write_str(&weekday_name[..3]),
            'j' => write!(out, "{:03}", t.yday),
            'u' => write!(out, "{}", if t.weekday == 0 { 7 } else { t.weekday }),
            'w' => write!(out, "{}", t.weekday),
            'F' => write!(out, "{}-{:02}-{:02}", t.year, t.month, t.day),
            'T' => write!(out, "{:02}:{:02}:{:02}", t.hour, t.minute, t.second),
            'R' => write!(out, "{:02}:{:02}", t.hour, t.minute),
            'D' => write!(
                out,
                "{:02}/{:02}/{:02}",
                t.month,
                t.day,
                t.year.rem_euclid(100)
            ),
            's' => write!(out, "{unix_secs}"),
            'z' => out.write_str("+0000"),
            'Z' => out.write_str("UTC"),
            'n' => out.write_str("\n"),
            't' => out.write_str("\t"),
            '%' => out.write_str("%"),
            other => write!(out, "%{other}"),
        };
    }
    out
}

/// Seconds since the Unix epoch now (0 if the clock is before 1970).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::strftime;

    #[test]
    fn epoch_is_thursday_first_of_january_1970() {
        assert_eq!(
            strftime("%A %d %B %Y %H:%M:%S %j", 0),
            "Thursday 01 January 1970 00:00:00 001"
        );
    }

    #[test]
    fn llama_3_date_format() {
        // 2024-07-26T12:34:56Z
        assert_eq!(strftime("%d %b %Y", 1_721_997_296), "26 Jul 2024");
        assert_eq!(
            strftime("%F %T %a %p %I", 1_721_997_296),
            "2024-07-26 12:34:56 Fri PM 12"
        );
    }

    #[test]
    fn leap_day_and_day_of_year() {
        // 2024-02-29T00:00:00Z and 2024-12-31T23:59:59Z
        assert_eq!(
            strftime("%Y-%m-%d %j %w", 1_709_164_800),
            "2024-02-29 060 4"
        );
        assert_eq!(strftime("%j %u", 1_735_689_599), "366 2");
    }

    #[test]
    fn before_epoch_and_unknown_directives() {
        // 1969-12-31T23:59:59Z
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", -1), "1969-12-31 23:59:59");
        assert_eq!(strftime("100%% %Q %", 0), "100% %Q %");
    }
}
