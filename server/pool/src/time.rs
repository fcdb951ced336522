//! The policy's notion of time: a monotone millisecond counter the driver owns.

use std::fmt;
use std::ops::Add;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since an epoch the driver chooses (the
/// scheduler's start, or the start of a simulated trace).
///
/// The policy never reads a clock; every event carries one of these, and they
/// must not go backwards.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms)
    }

    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// `d` before this, saturating at the epoch.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(millis(d)))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates at the end of time rather than wrapping.
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(millis(d)))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}

/// Whole milliseconds of `d`, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
