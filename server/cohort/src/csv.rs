//! Streaming CSV for event logs (`release_ns,route[,deadline_ns]`) and the
//! small record splitter shared with the sessions format. One line is held in
//! memory at a time. Fields may be double-quoted (`""` escapes a quote) but may
//! not span lines; unquoted fields are trimmed; blank lines are skipped.

use std::io::{BufRead, Write};

use crate::{Error, Events, ParseError};

/// A line-at-a-time CSV record reader with reusable buffers.
pub(crate) struct Records<R> {
    reader: R,
    raw: Vec<u8>,
    text: String,
    spans: Vec<(usize, usize)>,
    line: u64,
}

impl<R: BufRead> Records<R> {
    pub(crate) fn new(reader: R) -> Self {
        Self {
            reader,
            raw: Vec::new(),
            text: String::new(),
            spans: Vec::new(),
            line: 0,
        }
    }

    /// Reads the next non-blank line and splits it; `false` at end of input.
    pub(crate) fn next_record(&mut self) -> Result<bool, Error> {
        loop {
            self.raw.clear();
            if self.reader.read_until(b'\n', &mut self.raw)? == 0 {
                return Ok(false);
            }
            self.line += 1;
            let mut bytes = self.raw.as_slice();
            if self.line == 1 {
                bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            }
            let bytes = bytes.trim_ascii();
            if bytes.is_empty() {
                continue;
            }
            let line = std::str::from_utf8(bytes)
                .map_err(|_| Error::parse(self.line, ParseError::NotUtf8))?;
            split(line, &mut self.text, &mut self.spans)
                .map_err(|reason| Error::parse(self.line, reason))?;
            return Ok(true);
        }
    }

    /// Number of fields of the current record.
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Field `i` of the current record.
    pub(crate) fn field(&self, i: usize) -> &str {
        let (start, end) = self.spans[i];
        &self.text[start..end]
    }

    pub(crate) fn error(&self, reason: ParseError) -> Error {
        Error::parse(self.line, reason)
    }
}

/// Splits one line into fields, unescaping quoted ones into `out`.
fn split(line: &str, out: &mut String, spans: &mut Vec<(usize, usize)>) -> Result<(), ParseError> {
    out.clear();
    spans.clear();
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        let start = out.len();
        if let Some(mut quoted) = trimmed.strip_prefix('"') {
            loop {
                let Some(q) = quoted.find('"') else {
                    return Err(ParseError::Unterminated);
                };
                out.push_str(&quoted[..q]);
                quoted = &quoted[q + 1..];
                if let Some(after) = quoted.strip_prefix('"') {
                    out.push('"');
                    quoted = after;
                } else {
                    break;
                }
            }
            spans.push((start, out.len()));
            let after = quoted.trim_start();
            match after.strip_prefix(',') {
                Some(next) => rest = next,
                None if after.is_empty() => return Ok(()),
                // Text after a closing quote: keep it verbatim rather than guess.
                None => return Err(ParseError::Unterminated),
            }
        } else {
            let (field, next) = match trimmed.find(',') {
                Some(c) => (&trimmed[..c], Some(&trimmed[c + 1..])),
                None => (trimmed, None),
            };
            out.push_str(field.trim_end());
            spans.push((start, out.len()));
            match next {
                Some(next) => rest = next,
                None => return Ok(()),
            }
        }
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
    let mut records = Records::new(reader);
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

/// Writes `name` as a CSV field, quoting only when it must.
pub(crate) fn write_field(out: &mut impl Write, name: &str) -> std::io::Result<()> {
    if name.contains([',', '"', '\n', '\r']) || name.trim() != name {
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
        let mut out = String::new();
        let mut spans = Vec::new();
        split(line, &mut out, &mut spans)?;
        Ok(spans.iter().map(|&(a, b)| out[a..b].to_owned()).collect())
    }

    #[test]
    fn splits_plain_and_quoted_fields() {
        assert_eq!(fields("1, a ,2").unwrap(), ["1", "a", "2"]);
        assert_eq!(
            fields("1,\"x,\"\"y\"\"\",2").unwrap(),
            ["1", "x,\"y\"", "2"]
        );
        assert_eq!(fields("1,").unwrap(), ["1", ""]);
        assert_eq!(fields("\"a\"").unwrap(), ["a"]);
        assert_eq!(fields("\"a").unwrap_err(), ParseError::Unterminated);
        assert_eq!(fields("\"a\"b,1").unwrap_err(), ParseError::Unterminated);
    }

    #[test]
    fn write_field_round_trips() {
        for name in ["plain", "a,b", "q\"uote", " pad"] {
            let mut buf = Vec::new();
            write_field(&mut buf, name).unwrap();
            let line = String::from_utf8(buf).unwrap();
            assert_eq!(fields(&line).unwrap(), [name]);
        }
    }
}
