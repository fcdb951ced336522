//! Streaming reader of closed-loop traces.
//!
//! Format: CSV with a header, `caller,seq,think_s,duration_s,profile[,gpus]`,
//! read with the `csv` crate: fields are trimmed and may be double-quoted but
//! not span lines; blank lines and a UTF-8 byte order mark are skipped. A
//! caller's rows must be contiguous and in `seq` order (0, 1, 2, ...);
//! callers may come in any order. `gpus` may be empty or absent, for the
//! profile's. A caller's thinks and run times add up to at most
//! [`MAX_CALLER_SPAN_S`].
//!
//! In a closed loop a caller's next job exists only once its previous job has
//! finished, so callers advance independently and no single pass over the
//! file can follow them. One indexing pass validates every row and records
//! where each caller's rows lie (O(callers) memory); the simulation then keeps
//! one cursor per caller that reads that caller's rows lazily by offset,
//! through its own CSV reader with a 1 KiB buffer. Memory follows callers,
//! never the trace's length.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};

use csv::ByteRecord;
use hearth_core::csv_lines::LineRecords;

use super::Error;
use crate::policy::Shares;

/// Where one caller's rows lie.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    start: u64,
    end: u64,
    /// 1-based line number of its first row, for messages.
    first_line: u64,
    pub(crate) rows: u64,
}

/// One pool per profile in the trace.
#[derive(Debug, Clone)]
pub(crate) struct PoolInfo {
    /// Its profile.
    pub(crate) name: Box<str>,
    /// Distinct callers with a job in it.
    pub(crate) callers: u32,
    pub(crate) jobs: u64,
    pub(crate) max_shares: Shares,
}

#[derive(Debug, Clone)]
pub(crate) struct Index {
    pub(crate) callers: Vec<Span>,
    pub(crate) pools: Vec<PoolInfo>,
    pub(crate) jobs: u64,
    has_gpus: bool,
    pool_of: HashMap<Box<str>, usize>,
    profiles: BTreeMap<String, f64>,
    shares_per_gpu: u32,
}

/// A row, resolved.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    pub(crate) think_ms: u64,
    pub(crate) duration_ms: u64,
    pub(crate) pool: usize,
    pub(crate) shares: Shares,
}

struct Fields<'a> {
    caller: &'a str,
    seq: u64,
    think_s: f64,
    duration_s: f64,
    profile: &'a str,
    gpus: Option<f64>,
}

const HEADER: [&str; 5] = ["caller", "seq", "think_s", "duration_s", "profile"];

/// The longest one caller's loop may run, its think and run times added up,
/// in seconds: about three years. A pool that holds idle pods is reviewed
/// every simulated second, so a run takes time in proportion to the span it
/// simulates (firepool about 0.4 us a simulated second here: a think of ten
/// million seconds took 3.9 s), and a trace spanning centuries, which the
/// fields alone allow, would run for days.
pub(crate) const MAX_CALLER_SPAN_S: f64 = 1e8;

fn parse(record: &ByteRecord, has_gpus: bool) -> Result<Fields<'_>, String> {
    let field = |i: usize, name: &str| match record.get(i) {
        Some(bytes) => std::str::from_utf8(bytes)
            .map(str::trim)
            .map_err(|_| "not UTF-8".to_owned()),
        None => Err(format!("missing column {name}")),
    };
    let caller = field(0, "caller")?;
    let seq = field(1, "seq")?;
    let think = field(2, "think_s")?;
    let duration = field(3, "duration_s")?;
    let profile = field(4, "profile")?;
    let gpus = if has_gpus { field(5, "gpus")? } else { "" };
    if record.len() > HEADER.len() + usize::from(has_gpus) {
        return Err("too many columns".to_owned());
    }
    if caller.is_empty() || profile.is_empty() {
        return Err("caller and profile must not be empty".to_owned());
    }
    let secs = |name: &str, v: &str| match v.parse::<f64>() {
        Ok(x) if (0.0..1e12).contains(&x) => Ok(x),
        _ => Err(format!(
            "{name} must be a non-negative number of seconds, not {v:?}"
        )),
    };
    Ok(Fields {
        caller,
        seq: seq
            .parse()
            .map_err(|_| format!("seq must be a non-negative integer, not {seq:?}"))?,
        think_s: secs("think_s", think)?,
        duration_s: secs("duration_s", duration)?,
        profile,
        gpus: if gpus.is_empty() {
            None
        } else {
            Some(match gpus.parse::<f64>() {
                Ok(g) if g.is_finite() && g >= 0.0 => g,
                _ => return Err(format!("gpus must be a non-negative number, not {gpus:?}")),
            })
        },
    })
}

fn ms(secs: f64) -> u64 {
    (secs * 1000.0).round() as u64
}

/// The trace's records, each with its line.
type Records<'a> = LineRecords<Range<'a>>;

impl Index {
    /// Reads the whole trace once: validates it and indexes callers and pools.
    pub(crate) fn build(
        file: &File,
        profiles: &BTreeMap<String, f64>,
        shares_per_gpu: u32,
    ) -> Result<Index, Error> {
        let len = file.metadata()?.len();
        let mut bom = [0; 3];
        let skip = match read_at(file, &mut bom, 0)? {
            3 if bom == *b"\xEF\xBB\xBF" => 3,
            _ => 0,
        };
        let mut records = Records::new(
            Range {
                file,
                pos: skip,
                end: len,
            },
            1,
            1 << 16,
        );
        let mut record = ByteRecord::new();
        records.next(&mut record)?;
        let cols: Vec<&str> = record
            .iter()
            .map(|f| std::str::from_utf8(f).unwrap_or("").trim())
            .collect();
        let has_gpus = match cols.as_slice() {
            [a, b, c, d, e] if [*a, *b, *c, *d, *e] == HEADER => false,
            [a, b, c, d, e, "gpus"] if [*a, *b, *c, *d, *e] == HEADER => true,
            _ => {
                return Err(Error::Trace {
                    line: 1,
                    message: format!(
                        "header must be caller,seq,think_s,duration_s,profile[,gpus], not {:?}",
                        cols.join(",")
                    ),
                });
            }
        };
        let mut index = Index {
            callers: Vec::new(),
            pools: Vec::new(),
            jobs: 0,
            has_gpus,
            pool_of: HashMap::new(),
            profiles: profiles.clone(),
            shares_per_gpu,
        };
        let mut seen: HashSet<Box<str>> = HashSet::new();
        let mut current: Option<Box<str>> = None;
        let mut caller_pools: Vec<usize> = Vec::new();
        let mut caller_s = 0.0;
        loop {
            let (start, start_line) = records.position();
            let Some(line_no) = records.next(&mut record)? else {
                break;
            };
            let end = (skip + records.position().0).min(len);
            let err = |message: String| Error::Trace {
                line: line_no,
                message,
            };
            let f = parse(&record, has_gpus).map_err(err)?;
            if current.as_deref() != Some(f.caller) {
                if !seen.insert(f.caller.into()) {
                    return Err(err(format!(
                        "caller {:?} appears again after other callers: rows must be grouped by caller",
                        f.caller
                    )));
                }
                current = Some(f.caller.into());
                caller_pools.clear();
                caller_s = 0.0;
                index.callers.push(Span {
                    start: skip + start,
                    end,
                    first_line: start_line,
                    rows: 0,
                });
            }
            let span = index
                .callers
                .last_mut()
                .ok_or_else(|| err("no caller".to_owned()))?;
            if f.seq != span.rows {
                return Err(err(format!(
                    "caller {:?} has seq {} where {} was expected: seq runs 0, 1, 2, ... in order",
                    f.caller, f.seq, span.rows
                )));
            }
            caller_s += f.think_s + f.duration_s;
            if caller_s > MAX_CALLER_SPAN_S {
                return Err(err(format!(
                    "caller {:?} thinks and runs for {caller_s:.3e} s up to here: a caller's loop may span at most {MAX_CALLER_SPAN_S:.0e} s (about three years)",
                    f.caller
                )));
            }
            span.rows += 1;
            span.end = end;
            index.jobs += 1;
            let (pool, shares) = index.resolve(&f).map_err(err)?;
            let info = &mut index.pools[pool];
            info.jobs += 1;
            info.max_shares = info.max_shares.max(shares);
            if !caller_pools.contains(&pool) {
                caller_pools.push(pool);
                info.callers += 1;
            }
        }
        Ok(index)
    }

    /// The pool and pod size of a row; registers new profiles.
    fn resolve(&mut self, f: &Fields<'_>) -> Result<(usize, Shares), String> {
        let gpus = match f.gpus {
            Some(g) => g,
            None => *self.profiles.get(f.profile).ok_or_else(|| {
                format!(
                    "profile {:?} is unknown and the row gives no gpus",
                    f.profile
                )
            })?,
        };
        let shares = Shares::from_gpus(gpus, self.shares_per_gpu)
            .filter(|s| s.is_pod_size(self.shares_per_gpu))
            .ok_or_else(|| {
                format!(
                    "{gpus} GPUs is neither whole GPUs nor a multiple of 1/{} of one GPU",
                    self.shares_per_gpu
                )
            })?;
        let pool = match self.pool_of.get(f.profile) {
            Some(&p) => p,
            None => {
                let p = self.pools.len();
                self.pool_of.insert(f.profile.into(), p);
                self.pools.push(PoolInfo {
                    name: f.profile.into(),
                    callers: 0,
                    jobs: 0,
                    max_shares: Shares(0),
                });
                p
            }
        };
        Ok((pool, shares))
    }

    fn row(&self, record: &ByteRecord, line_no: u64) -> Result<Row, Error> {
        let err = |message: String| Error::Trace {
            line: line_no,
            message,
        };
        let f = parse(record, self.has_gpus).map_err(err)?;
        let pool = *self
            .pool_of
            .get(f.profile)
            .ok_or_else(|| err("the trace changed while it was read".to_owned()))?;
        let gpus = f
            .gpus
            .or_else(|| self.profiles.get(f.profile).copied())
            .unwrap_or(0.0);
        let shares = Shares::from_gpus(gpus, self.shares_per_gpu)
            .ok_or_else(|| err("the trace changed while it was read".to_owned()))?;
        Ok(Row {
            think_ms: ms(f.think_s),
            duration_ms: ms(f.duration_s),
            pool,
            shares,
        })
    }
}

/// Reads one caller's rows lazily, a small buffer at a time.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    records: Records<'a>,
    record: ByteRecord,
}

/// Bytes buffered per caller: a few dozen rows, so a thousand callers cost
/// a few megabytes and refills stay rare.
const CHUNK: usize = 1024;

impl<'a> Cursor<'a> {
    pub(crate) fn new(file: &'a File, span: &Span) -> Cursor<'a> {
        let bytes = Range {
            file,
            pos: span.start,
            end: span.end,
        };
        Cursor {
            records: Records::new(bytes, span.first_line, CHUNK),
            record: ByteRecord::new(),
        }
    }

    /// The caller's next row, or `None` after its last.
    pub(crate) fn next(&mut self, index: &Index) -> Result<Option<Row>, Error> {
        match self.records.next(&mut self.record)? {
            Some(line) => index.row(&self.record, line).map(Some),
            None => Ok(None),
        }
    }
}

/// The bytes `pos..end` of a file, read by offset.
#[derive(Debug)]
struct Range<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for Range<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (buf.len() as u64).min(self.end.saturating_sub(self.pos)) as usize;
        let n = read_at(self.file, &mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, pos)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(pos))?;
    f.read(buf)
}
