//! The crate's one error type. Parse errors carry the 1-based line number of
//! the offending line (the header is line 1) and a matchable reason.

use thiserror::Error;

/// Everything the analyzer and the replay generator can fail with.
#[derive(Debug, Error)]
pub enum Error {
    /// A CSV line could not be read as an event or a session row.
    #[error("line {line}: {reason}")]
    Parse {
        /// 1-based line number; the header is line 1.
        line: u64,
        /// What is wrong with the line.
        reason: ParseError,
    },
    /// The underlying reader or writer failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A parameter or a programmatically built input is out of range.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The exact search for a component with unequal deadlines needed more
    /// steps than [`crate::Params::max_exact_steps`] allows. No approximate
    /// answer is ever substituted for P*.
    #[error(
        "exact P* search on route {route:?} (a component of {events} events with \
         unequal deadlines) exceeded the limit of {limit} steps; raise the limit \
         or analyze with equal deadlines"
    )]
    SearchLimit {
        /// Route name of the component that hit the limit.
        route: String,
        /// Number of events in that component.
        events: usize,
        /// The limit that was exceeded.
        limit: u64,
    },
}

/// Why a CSV line was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The input has no header line.
    #[error("empty input: expected a header line")]
    MissingHeader,
    /// The header lacks a required column.
    #[error("header lacks the required column `{0}`")]
    MissingColumn(&'static str),
    /// The header names a column twice.
    #[error("header names column `{0}` twice")]
    DuplicateColumn(String),
    /// The header names a column this format does not have.
    #[error("header has unknown column `{column}` (expected {expected})")]
    UnknownColumn {
        /// The unknown name.
        column: String,
        /// The accepted names, comma separated.
        expected: &'static str,
    },
    /// A row has a different number of fields than the header.
    #[error("expected {expected} fields as in the header, found {found}")]
    FieldCount {
        /// Fields in the header.
        expected: usize,
        /// Fields on this line.
        found: usize,
    },
    /// A numeric column holds something that is not an `i64`.
    #[error("`{column}` is not an integer: {value:?}")]
    NotInteger {
        /// Column name.
        column: &'static str,
        /// The offending text.
        value: String,
    },
    /// `deadline_ns` is earlier than `release_ns`.
    #[error("deadline_ns {deadline} is before release_ns {release}")]
    DeadlineBeforeRelease {
        /// The row's release.
        release: i64,
        /// The row's deadline.
        deadline: i64,
    },
    /// `release_ns + delta` does not fit in an `i64`.
    #[error("release_ns {release} plus delta overflows i64")]
    DeadlineOverflow {
        /// The row's release.
        release: i64,
    },
    /// A session offset is negative.
    #[error("offset_ns {0} is negative")]
    NegativeOffset(i64),
    /// A text column is empty.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    /// A quoted field is not closed on its line.
    #[error("unterminated quoted field")]
    Unterminated,
    /// The line is not valid UTF-8.
    #[error("line is not valid UTF-8")]
    NotUtf8,
}

impl Error {
    pub(crate) fn parse(line: u64, reason: ParseError) -> Self {
        Self::Parse { line, reason }
    }
}
