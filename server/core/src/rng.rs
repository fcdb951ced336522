//! SplitMix64 (Steele, Lea, Flood 2014): the one seeded generator of the
//! workspace, for synthetic traces, replays and randomised tests, so every
//! figure is reproducible from a seed on every platform without `rand`. Not
//! for anything that needs unpredictability.

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 output function: a strong 64-bit mixer.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stream determined by `seed` and a list of coordinates, so generators can
/// draw the value for (worker, step, job) directly, in any order.
pub fn stream(seed: u64, coords: &[u64]) -> SplitMix64 {
    let mut h = mix(seed ^ GOLDEN);
    for &c in coords {
        h = mix(h ^ c.wrapping_mul(GOLDEN));
    }
    SplitMix64::new(h)
}

/// A sequential SplitMix64 stream: 64-bit state, full period, passes
/// BigCrush.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in `0..n` (multiply-shift; bias below 2^-32 for n < 2^32).
    ///
    /// # Panics
    /// If `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (hi - lo).mul_add(self.unit(), lo)
    }

    /// Exponential with the given rate (mean `1/rate`).
    pub fn exp(&mut self, rate: f64) -> f64 {
        // ln(1 - u) with u in [0, 1) is finite.
        -(-self.unit()).ln_1p() / rate
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with the given median and shape (sigma of the log).
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_values() {
        // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn uniform_draws_stay_in_range() {
        let mut r = SplitMix64::new(7);
        for _ in 0..10_000 {
            let x = r.unit();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(5) < 5);
        }
    }

    #[test]
    fn exp_mean_is_close() {
        let mut r = SplitMix64::new(7);
        let n = 200_000;
        let mean = (0..n).map(|_| r.exp(2.0)).sum::<f64>() / f64::from(n);
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }

    #[test]
    fn streams_are_fixed_by_seed_and_coordinates() {
        assert_eq!(stream(1, &[2, 3]).next_u64(), stream(1, &[2, 3]).next_u64());
        assert_ne!(stream(1, &[2, 3]).next_u64(), stream(1, &[3, 2]).next_u64());
        assert_ne!(stream(1, &[2]).next_u64(), stream(2, &[2]).next_u64());
    }
}
