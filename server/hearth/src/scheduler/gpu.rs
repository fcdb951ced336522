//! The GPU inventory of the pools: how many GPUs there are, how they are
//! split between the GPU profiles, and which physical GPUs a placement gets.

use super::*;

/// The GPU inventory of the pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpus {
    pub count: u32,
    /// Real devices (each pod gets its own through `CUDA_VISIBLE_DEVICES`),
    /// or accounting-only GPUs that exist only in the books.
    pub real: bool,
}

impl Gpus {
    /// `configured` accounting-only GPUs, else the machine's NVIDIA GPUs.
    pub fn detect(configured: Option<u32>) -> Gpus {
        if let Some(count) = configured {
            return Gpus { count, real: false };
        }
        let count = count_real_gpus();
        Gpus {
            count,
            real: count > 0,
        }
    }

    /// `real` or `accounting-only`, as the API labels the inventory.
    pub fn label(self) -> &'static str {
        if self.real { "real" } else { "accounting-only" }
    }
}

fn count_real_gpus() -> u32 {
    if let Ok(dir) = std::fs::read_dir("/proc/driver/nvidia/gpus") {
        let n = dir.flatten().count() as u32;
        if n > 0 {
            return n;
        }
    }
    match std::process::Command::new("nvidia-smi").arg("-L").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .count() as u32,
        _ => 0,
    }
}

/// How the pools are built (see the `pool_*`, `standby_*`, `keep_alive_*`
/// and `gpus` flags).
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub kind: Kind,
    pub standby_min: u32,
    pub standby_max: u32,
    pub standby_initial: u32,
    pub keep_alive_min: Duration,
    pub keep_alive_max: Duration,
    pub budget_floor_gpus: Option<f64>,
    pub budget_ceiling_gpus: Option<f64>,
    pub gpus: Gpus,
}

impl PoolSettings {
    /// Splits the GPU inventory among the GPU profiles, so that pools never
    /// count the same GPU twice: each gets a disjoint range of devices, as
    /// even as the count allows (profiles in name order; the first ones take
    /// the remainder). Returns `(first device, count)` per GPU profile.
    pub fn partition<'a>(
        &self,
        profiles: impl IntoIterator<Item = &'a Profile>,
    ) -> BTreeMap<String, (u32, u32)> {
        let mut names: Vec<&str> = profiles
            .into_iter()
            .filter(|p| p.gpus > 0)
            .map(|p| p.name.as_str())
            .collect();
        names.sort_unstable();
        let n = names.len() as u32;
        let mut first = 0;
        let mut out = BTreeMap::new();
        for (i, name) in names.into_iter().enumerate() {
            let count = self.gpus.count / n + u32::from((i as u32) < self.gpus.count % n);
            out.insert(name.to_owned(), (first, count));
            first += count;
        }
        out
    }

    /// The policy configuration of `profile`'s pool, holding `gpus` GPUs of
    /// the inventory (zero for CPU profiles, which no budget limits).
    pub fn config_for(&self, profile: &Profile, gpus: u32) -> anyhow::Result<hearth_pool::Config> {
        let mut c = hearth_pool::Config::for_profile(profile, gpus);
        c.standby.min = self.standby_min;
        c.standby.max = self.standby_max;
        c.standby.initial = self.standby_initial;
        c.keep_alive.min = self.keep_alive_min;
        c.keep_alive.max = self.keep_alive_max;
        if self.keep_alive_min <= self.keep_alive_max {
            c.keep_alive.default = c
                .keep_alive
                .default
                .clamp(self.keep_alive_min, self.keep_alive_max);
        }
        let shares = |what: &str, gpus: f64| {
            Shares::from_gpus(gpus, c.shares_per_gpu).ok_or_else(|| {
                anyhow::anyhow!(
                    "{what} {gpus} is not a whole number of GPU shares (1/{})",
                    c.shares_per_gpu
                )
            })
        };
        if let Some(f) = self.budget_floor_gpus {
            c.budget.pool.floor = shares("pool budget floor", f)?;
        }
        if let Some(f) = self.budget_ceiling_gpus {
            c.budget.pool.ceiling = shares("pool budget ceiling", f)?;
        }
        c.validate()
            .map_err(|e| anyhow::anyhow!("profile `{}`: {e}", profile.name))?;
        Ok(c)
    }
}

/// The physical GPUs of a placement, in order: the pool numbers its GPUs
/// from zero, its part of the inventory starts at `first`.
pub(super) fn devices(placement: &PoolPlacement, first: u32) -> Vec<u32> {
    let mut out: Vec<u32> = placement.0.iter().map(|s| first + s.gpu).collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_settings_clamp_the_default_keep_alive_and_check_budgets() {
        let settings = PoolSettings {
            kind: Kind::Firepool,
            standby_min: 1,
            standby_max: 2,
            standby_initial: 3,
            keep_alive_min: Duration::from_millis(100),
            keep_alive_max: Duration::from_secs(1),
            budget_floor_gpus: Some(0.5),
            budget_ceiling_gpus: None,
            gpus: Gpus {
                count: 2,
                real: false,
            },
        };
        let mut gpu = Profile::cpu("gpu-one");
        gpu.gpus = 1;
        let c = settings.config_for(&gpu, 2).unwrap();
        assert_eq!(c.keep_alive.default, Duration::from_secs(1));
        assert_eq!(c.standby.initial, 3);
        assert_eq!(c.gpus, 2);
        assert_eq!(c.budget.pool.floor, Shares(4));
        assert_eq!(
            settings.config_for(&Profile::cpu("cpu"), 0).unwrap().gpus,
            0
        );
        let odd = PoolSettings {
            budget_floor_gpus: Some(0.3),
            ..settings
        };
        assert!(odd.config_for(&gpu, 2).is_err());
    }

    #[test]
    fn gpu_profiles_get_disjoint_parts_of_the_inventory() {
        let settings = |count| PoolSettings {
            kind: Kind::Firepool,
            standby_min: 0,
            standby_max: 0,
            standby_initial: 0,
            keep_alive_min: Duration::from_secs(1),
            keep_alive_max: Duration::from_secs(10),
            budget_floor_gpus: None,
            budget_ceiling_gpus: None,
            gpus: Gpus { count, real: true },
        };
        let gpu = |name: &str| Profile {
            gpus: 1,
            ..Profile::cpu(name)
        };
        let profiles = [
            gpu("b-gpu"),
            Profile::cpu("cpu"),
            gpu("a-gpu"),
            gpu("c-gpu"),
        ];
        let parts = settings(8).partition(&profiles);
        assert_eq!(
            parts.into_iter().collect::<Vec<_>>(),
            [
                ("a-gpu".to_owned(), (0, 3)),
                ("b-gpu".to_owned(), (3, 3)),
                ("c-gpu".to_owned(), (6, 2))
            ]
        );
        let parts = settings(2).partition(&profiles);
        assert_eq!(
            parts.values().map(|p| p.1).sum::<u32>(),
            2,
            "never more than the inventory"
        );
        let placement = PoolPlacement(vec![
            hearth_pool::policy::Slice { gpu: 0, shares: 8 },
            hearth_pool::policy::Slice { gpu: 1, shares: 8 },
        ]);
        assert_eq!(devices(&placement, 3), [3, 4]);
    }
}
