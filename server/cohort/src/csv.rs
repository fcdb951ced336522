//! Streaming CSV for event logs (`release_ns,route[,deadline_ns]`) and the
//! record reader shared with the sessions format, on the `csv` crate. One
//! record is held in memory at a time. A UTF-8 byte order mark is skipped;
//! fields may be double-quoted (`""` escapes a quote; the quote must open the
//! field) but may not span lines; fields are trimmed (quoted ones too); blank
//! lines are skipped.

use std::io::{self, BufRead, Write};

use csv::StringRecord;
use hearth_core::csv_lines::{LineError, LineRecords};

use crate::{Error, Events, ParseError};

/// A record reader that knows each record's 1-based line, with reusable
/// buffers.
pub(crate) struct Records<R> {
    reader: LineRecords<R>,
    record: StringRecord,
    line: u64,
}

impl<R: BufRead> Records<R> {
    pub(crate) fn new(mut reader: R) -> Result<Self, Error> {
        if reader.fill_buf()?.starts_with(b"\xEF\xBB\xBF") {
            reader.consume(3);
        }
        Ok(Self {
            // The input is buffered already.
            reader: LineRecords::new(reader, 1, 8 * 1024),
            record: StringRecord::new(),
            line: 0,
        })
    }

    /// Reads the next non-blank record; `false` at end of input.
    pub(crate) fn next_record(&mut self) -> Result<bool, Error> {
        let mut raw = std::mem::take(&mut self.record).into_byte_record();
        let line = match self.reader.next(&mut raw) {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(false),
            Err(LineError::Unterminated(line)) => {
                self.line = line;
                return Err(self.error(ParseError::Unterminated));
            }
            Err(LineError::Io(e)) => return Err(Error::Io(e)),
        };
        self.line = line;
        match StringRecord::from_byte_record(raw) {
            Ok(record) => {
                self.record = record;
                Ok(true)
            }
            Err(_) => Err(self.error(ParseError::NotUtf8)),
        }
    }

    /// Number of fields of the current record.
    pub(crate) fn len(&self) -> usize {
        self.record.len()
    }

    /// Field `i` of the current record, trimmed.
    pub(crate) fn field(&self, i: usize) -> &str {
        self.record[i].trim()
    }

    pub(crate) fn error(&self, reason: ParseError) -> Error {
        Error::parse(self.line, reason)
    }
}

/// Resolves header names to positions; `required` first, then `optional`.
pub(crate) fn header<R: BufRead>(
    records: &mut Records<R>,
    required: &[&'static str],
    optional: &[&'static str],
    expected: &'static str,
) -> Result<Vec<Option<usize>>, Error> {
    if !records.next_record()? {
        return Err(Error::parse(1, ParseError::MissingHeader));
    }
    let names: Vec<&'static str> = required.iter().chain(optional).copied().collect();
    let mut positions = vec![None; names.len()];
    for i in 0..records.len() {
        let field = records.field(i);
        let Some(slot) = names.iter().position(|n| *n == field) else {
            return Err(records.error(ParseError::UnknownColumn {
                column: field.to_owned(),
                expected,
            }));
        };
        if positions[slot].replace(i).is_some() {
            return Err(records.error(ParseError::DuplicateColumn(field.to_owned())));
        }
    }
    for (slot, name) in required.iter().enumerate() {
        if positions[slot].is_none() {
            return Err(records.error(ParseError::MissingColumn(name)));
        }
    }
    Ok(positions)
}

pub(crate) fn parse_i64<R: BufRead>(
    records: &Records<R>,
    i: usize,
    column: &'static str,
) -> Result<i64, Error> {
    let value = records.field(i);
    value.parse().map_err(|_| {
        records.error(ParseError::NotInteger {
            column,
            value: value.to_owned(),
        })
    })
}

/// Reads an event log from CSV, streaming.
///
/// The header must name `release_ns` and `route`, and may name `deadline_ns`,
/// in any order; other names are rejected (a misspelt `deadline_ns` would
/// otherwise silently fall back to δ). Without a `deadline_ns` column every
/// deadline is `release_ns + delta_ns`.
///
/// # Errors
/// [`Error::Parse`] with the 1-based line number for a missing or malformed
/// header, a wrong field count, a non-integer time, an empty route, a deadline
/// before its release, or an overflowing `release_ns + delta_ns`;
/// [`Error::Invalid`] if `delta_ns < 0`; [`Error::Io`] from the reader.
pub fn read_csv(reader: impl BufRead, delta_ns: i64) -> Result<Events, Error> {
    if delta_ns < 0 {
        return Err(Error::Invalid(format!("delta_ns {delta_ns} is negative")));
    }
    let mut records = Records::new(reader)?;
    let cols = header(
        &mut records,
        &["release_ns", "route"],
        &["deadline_ns"],
        "release_ns, route, deadline_ns",
    )?;
    let width = records.len();
    let (release_col, route_col, deadline_col) = (
        cols[0].unwrap_or_default(),
        cols[1].unwrap_or_default(),
        cols[2],
    );
    let mut events = Events::new();
    while records.next_record()? {
        if records.len() != width {
            return Err(records.error(ParseError::FieldCount {
                expected: width,
                found: records.len(),
            }));
        }
        let release = parse_i64(&records, release_col, "release_ns")?;
        let deadline = match deadline_col {
            Some(i) => parse_i64(&records, i, "deadline_ns")?,
            None => release
                .checked_add(delta_ns)
                .ok_or_else(|| records.error(ParseError::DeadlineOverflow { release }))?,
        };
        if deadline < release {
            return Err(records.error(ParseError::DeadlineBeforeRelease { release, deadline }));
        }
        let route = records.field(route_col);
        if route.is_empty() {
            return Err(records.error(ParseError::Empty("route")));
        }
        let route = events.routes_mut().intern(route);
        events.push_interned(crate::Event {
            release_ns: release,
            deadline_ns: deadline,
            route,
        });
    }
    Ok(events)
}

/// Writes `name` as a CSV field, quoting only when it must. (Kept by hand:
/// the csv crate's writer closes a quote only with its record, so a lone
/// field takes more code through it than this.)
pub(crate) fn write_field(out: &mut impl Write, name: &str) -> io::Result<()> {
    if name.contains([',', '"', '\n', '\r']) {
        out.write_all(b"\"")?;
        out.write_all(name.replace('"', "\"\"").as_bytes())?;
        out.write_all(b"\"")
    } else {
        out.write_all(name.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str) -> Result<Vec<String>, ParseError> {
        let mut records = Records::new(line.as_bytes()).unwrap();
        match records.next_record() {
            Ok(true) => Ok((0..records.len())
                .map(|i| records.field(i).to_owned())
                .collect()),
            Ok(false) => Ok(Vec::new()),
            Err(Error::Parse { reason, .. }) => Err(reason),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn splits_plain_and_quoted_fields() {
        assert_eq!(fields("1, a ,2").unwrap(), ["1", "a", "2"]);
        assert_eq!(
            fields("1,\"x,\"\"y\"\"\" ,2").unwrap(),
            ["1", "x,\"y\"", "2"]
        );
        assert_eq!(fields("1,").unwrap(), ["1", ""]);
        assert_eq!(fields("\"a\"").unwrap(), ["a"]);
        assert_eq!(fields("\"a").unwrap_err(), ParseError::Unterminated);
        assert_eq!(fields("\"a\nb\",1").unwrap_err(), ParseError::Unterminated);
        // The csv crate's reading, not the hand-written splitter's: text after
        // a closing quote joins the field, and a quote opens a field only as
        // its first byte (a space before it makes the field unquoted).
        assert_eq!(fields("\"a\"b,1").unwrap(), ["ab", "1"]);
        assert_eq!(fields("1, \"a,b\"").unwrap(), ["1", "\"a", "b\""]);
    }

    #[test]
    fn lines_count_blank_lines_crlf_and_a_missing_final_newline() {
        let mut records = Records::new("\u{feff}a\r\n\r\n\n  \nb\n\nc".as_bytes()).unwrap();
        let mut seen = Vec::new();
        while records.next_record().unwrap() {
            seen.push((records.line, records.field(0).to_owned()));
        }
        assert_eq!(
            seen,
            [
                (1, "a".to_owned()),
                (5, "b".to_owned()),
                (7, "c".to_owned())
            ]
        );
    }

    #[test]
    fn write_field_round_trips() {
        for name in ["plain", "a,b", "q\"uote"] {
            let mut buf = Vec::new();
            write_field(&mut buf, name).unwrap();
            let line = String::from_utf8(buf).unwrap();
            assert_eq!(fields(&line).unwrap(), [name]);
        }
    }
}
