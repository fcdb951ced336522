//! SplitMix64: a tiny, fast, seedable generator for synthetic traces and
//! randomised tests. Not for anything that needs unpredictability.

/// Sequential SplitMix64 stream.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 output function: a strong 64-bit mixer.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stream determined by `seed` and a list of coordinates, so generators can
/// draw the value for (worker, step, job) directly, in any order.
pub(crate) fn stream(seed: u64, coords: &[u64]) -> SplitMix64 {
    let mut h = mix(seed ^ GOLDEN);
    for &c in coords {
        h = mix(h ^ c.wrapping_mul(GOLDEN));
    }
    SplitMix64::new(h)
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n). `n` must be positive.
    #[cfg(test)]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift: bias is below 2^-64 * n, irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (hi - lo).mul_add(self.next_f64(), lo)
    }

    /// Standard normal (Box-Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with the given median and shape (sigma of the log).
    pub(crate) fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
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
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(5) < 5);
        }
    }
}
