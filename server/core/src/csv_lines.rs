//! CSV records that know their line, for the trace, event-log and sessions
//! readers: byte records from the `csv` crate, with blank lines skipped and a
//! quoted field that runs past its line refused with the line it opened on.

use std::io::{self, Read};

use csv::{ByteRecord, Reader, ReaderBuilder, Terminator};

/// What a record could not be read for.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("line {0}: unterminated quoted field")]
    Unterminated(u64),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Non-blank CSV records of `R`, each with its 1-based line.
#[derive(Debug)]
pub struct LineRecords<R> {
    reader: Reader<Ended<R>>,
    first_line: u64,
}

impl<R: Read> LineRecords<R> {
    /// Records of `input`, whose first byte is on line `first_line`, read
    /// `capacity` bytes at a time.
    pub fn new(input: R, first_line: u64, capacity: usize) -> Self {
        let reader = ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .terminator(Terminator::Any(b'\n'))
            .buffer_capacity(capacity)
            .from_reader(Ended {
                inner: input,
                ended: false,
            });
        LineRecords { reader, first_line }
    }

    /// Reads the next non-blank record into `record`; its line, or `None` at
    /// the end.
    ///
    /// # Errors
    /// A quoted field runs past its line, or reading failed.
    pub fn next(&mut self, record: &mut ByteRecord) -> Result<Option<u64>, LineError> {
        loop {
            let more = self.reader.read_byte_record(record).map_err(|e| {
                match e.into_kind() {
                    csv::ErrorKind::Io(e) => e,
                    // Flexible byte records fail only on I/O.
                    other => io::Error::other(format!("{other:?}")),
                }
            })?;
            if !more {
                return Ok(None);
            }
            // Every record ends with a `\n` (see `Ended`), so the reader is
            // one line past it, less the lines a quoted field ran over.
            let after = self.first_line + self.reader.position().line() - 1;
            let bytes = record.as_slice();
            if bytes.contains(&b'\n') {
                let spanned = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
                // A quote left open at the end took the final `\n` with it.
                let open = bytes.ends_with(b"\n");
                return Err(LineError::Unterminated(after - spanned - u64::from(!open)));
            }
            if record.len() == 1 && record[0].trim_ascii().is_empty() {
                continue;
            }
            return Ok(Some(after - 1));
        }
    }

    /// Byte offset (within the input) and line where the next record starts.
    pub fn position(&self) -> (u64, u64) {
        let p = self.reader.position();
        (p.byte(), self.first_line + p.line() - 1)
    }
}

/// `inner`, then one `\n`: every record then ends with a terminator (the
/// reader's line count is one past it), and a quote left open at the end
/// takes that `\n` into its field, where [`LineRecords::next`] finds it.
#[derive(Debug)]
struct Ended<R> {
    inner: R,
    ended: bool,
}

impl<R: Read> Read for Ended<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 || buf.is_empty() || self.ended {
            return Ok(n);
        }
        self.ended = true;
        buf[0] = b'\n';
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &str) -> Result<Vec<(u64, Vec<String>)>, LineError> {
        let mut r = LineRecords::new(input.as_bytes(), 1, 16);
        let mut record = ByteRecord::new();
        let mut out = Vec::new();
        while let Some(line) = r.next(&mut record)? {
            let fields = record
                .iter()
                .map(|f| String::from_utf8_lossy(f).into_owned());
            out.push((line, fields.collect()));
        }
        Ok(out)
    }

    #[test]
    fn records_know_their_line_past_blank_lines_and_crlf() {
        let got = lines("a,b\r\n\n  \n\"c,d\",e\nf").unwrap();
        let at: Vec<u64> = got.iter().map(|(l, _)| *l).collect();
        assert_eq!(at, [1, 4, 5]);
        assert_eq!(got[1].1, ["c,d", "e"]);
        assert_eq!(got[2].1, ["f"]);
    }

    #[test]
    fn a_quote_left_open_names_the_line_it_opened_on() {
        for (input, line) in [("a\n\"b\nc\n", 2), ("a\nb,\"c", 2), ("\"x", 1)] {
            match lines(input) {
                Err(LineError::Unterminated(l)) => assert_eq!(l, line, "{input:?}"),
                other => panic!("{input:?}: {other:?}"),
            }
        }
    }
}
