//! The pool's GPU inventory, accounted in shares per physical GPU.
//!
//! Shares of one GPU go best-fit (to the most loaded GPU with room), which
//! stacks standby shares and small pods beside busy ones and keeps whole GPUs
//! free for whole-GPU pods. Nothing here can over-commit a GPU: every take is
//! checked against what is free on it.

use std::collections::BTreeSet;

use super::{Placement, Slice};

#[derive(Debug, Clone)]
pub(crate) struct Inventory {
    per_gpu: u32,
    free: Vec<u32>,
    /// GPU indices by their free shares (0..=per_gpu).
    by_free: Vec<BTreeSet<u32>>,
    free_total: u64,
}

impl Inventory {
    pub(crate) fn new(gpus: u32, per_gpu: u32) -> Inventory {
        let mut by_free = vec![BTreeSet::new(); per_gpu as usize + 1];
        by_free[per_gpu as usize] = (0..gpus).collect();
        Inventory {
            per_gpu,
            free: vec![per_gpu; gpus as usize],
            by_free,
            free_total: u64::from(gpus) * u64::from(per_gpu),
        }
    }

    pub(crate) fn free_total(&self) -> u64 {
        self.free_total
    }

    pub(crate) fn free_on(&self, gpu: u32) -> u32 {
        self.free.get(gpu as usize).copied().unwrap_or(0)
    }

    /// Whether a pod of `shares` could ever fit an empty inventory.
    pub(crate) fn can_ever_hold(&self, shares: u32, pods: u32) -> bool {
        let gpus = self.free.len() as u64;
        if shares == 0 {
            return true;
        }
        if shares < self.per_gpu {
            // Shares of one GPU pack per GPU.
            let per = u64::from(self.per_gpu / shares);
            return per * gpus >= u64::from(pods);
        }
        u64::from(shares / self.per_gpu) * u64::from(pods) <= gpus
    }

    fn take(&mut self, gpu: u32, shares: u32) {
        let f = self.free[gpu as usize];
        debug_assert!(f >= shares, "over-commit of GPU {gpu}");
        self.by_free[f as usize].remove(&gpu);
        let f = f - shares;
        self.free[gpu as usize] = f;
        self.by_free[f as usize].insert(gpu);
        self.free_total -= u64::from(shares);
    }

    fn give(&mut self, gpu: u32, shares: u32) {
        let f = self.free[gpu as usize];
        debug_assert!(f + shares <= self.per_gpu, "GPU {gpu} freed twice");
        self.by_free[f as usize].remove(&gpu);
        let f = f + shares;
        self.free[gpu as usize] = f;
        self.by_free[f as usize].insert(gpu);
        self.free_total += u64::from(shares);
    }

    /// Places a pod of `shares` (a share of one GPU, or whole GPUs), on
    /// `prefer` when it fits there. `None` when it does not fit anywhere.
    pub(crate) fn alloc(&mut self, shares: u32, prefer: Option<u32>) -> Option<Placement> {
        if shares == 0 {
            return Some(Placement::default());
        }
        if shares < self.per_gpu {
            let gpu = prefer.filter(|&g| self.free_on(g) >= shares).or_else(|| {
                (shares..=self.per_gpu).find_map(|f| self.by_free[f as usize].first().copied())
            })?;
            self.take(gpu, shares);
            return Some(Placement(vec![Slice { gpu, shares }]));
        }
        debug_assert!(shares.is_multiple_of(self.per_gpu));
        let k = (shares / self.per_gpu) as usize;
        let whole = &self.by_free[self.per_gpu as usize];
        if whole.len() < k {
            return None;
        }
        let mut gpus: Vec<u32> = prefer.filter(|g| whole.contains(g)).into_iter().collect();
        gpus.extend(
            whole
                .iter()
                .copied()
                .filter(|g| Some(*g) != prefer)
                .take(k - gpus.len()),
        );
        let per_gpu = self.per_gpu;
        for &g in &gpus {
            self.take(g, per_gpu);
        }
        Some(Placement(
            gpus.into_iter()
                .map(|gpu| Slice {
                    gpu,
                    shares: per_gpu,
                })
                .collect(),
        ))
    }

    pub(crate) fn release(&mut self, p: &Placement) {
        for s in &p.0 {
            self.give(s.gpu, s.shares);
        }
    }

    /// Takes exactly `p` again. Only valid right after `release(p)` with no
    /// allocation in between, which is how the policy rolls back.
    pub(crate) fn restore(&mut self, p: &Placement) {
        for s in &p.0 {
            self.take(s.gpu, s.shares);
        }
    }

    /// Free shares per GPU (tests check them against the pods' placements).
    #[cfg(test)]
    pub(crate) fn free_per_gpu(&self) -> &[u32] {
        &self.free
    }

    #[cfg(test)]
    pub(crate) fn per_gpu(&self) -> u32 {
        self.per_gpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_go_best_fit_and_whole_gpus_stay_whole() {
        let mut inv = Inventory::new(2, 8);
        let a = inv.alloc(3, None).unwrap();
        let b = inv.alloc(1, None).unwrap();
        // The second share lands beside the first, not on the empty GPU.
        assert_eq!(a.0[0].gpu, b.0[0].gpu);
        let whole = inv.alloc(8, None).unwrap();
        assert_ne!(whole.0[0].gpu, a.0[0].gpu);
        assert!(inv.alloc(8, None).is_none());
        assert_eq!(inv.free_total(), 4);
        inv.release(&whole);
        inv.release(&a);
        inv.release(&b);
        assert_eq!(inv.free_total(), 16);
        assert!(inv.alloc(16, None).is_some());
    }

    #[test]
    fn nothing_fits_that_would_over_commit() {
        let mut inv = Inventory::new(1, 8);
        assert!(inv.alloc(5, None).is_some());
        assert!(inv.alloc(4, None).is_none());
        assert!(inv.alloc(3, None).is_some());
        assert!(inv.alloc(1, None).is_none());
        assert_eq!(inv.free_total(), 0);
    }
}
