//! What the API shows of the pools: pod counts, the tenant's view of a
//! pool, gauges for /metrics, and tenant budgets. Reads the scheduler's
//! state; changes nothing but budgets.

use super::*;

/// Pods of one profile by state, for the profiles API.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct PodCounts {
    pub starting: u32,
    /// Started and unbound, ready for any caller's job.
    pub standby: u32,
    pub active: u32,
    pub warm: u32,
    pub stopping: u32,
}

/// A pool as one tenant may see it.
#[derive(Debug, Clone)]
pub struct PoolView {
    pub profile: String,
    pub gpus: Gpus,
    pub snapshot: Snapshot,
    /// The viewer's number in the policy, if it has one.
    pub tenant: Option<TenantId>,
    pub tenant_bounds: Bounds,
    /// Names of the viewer's own callers.
    pub callers: HashMap<CallerId, String>,
}

/// How far back the leader keeps the GPUs each pool held.
const HISTORY: Duration = Duration::from_secs(3600);
/// The most GPUs a tenant budget may name (the API's schema says so too).
const MAX_BUDGET_GPUS: f64 = 536_870_911.0;

/// The GPUs a pool held at one moment, by what held them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuSample {
    pub at: time::OffsetDateTime,
    pub active: f64,
    pub warm: f64,
    pub standby: f64,
    pub draining: f64,
}

/// A tenant budget the pools refuse.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("unknown profile `{0}`")]
    UnknownProfile(String),
    #[error("{0}")]
    Invalid(String),
}

impl Scheduler {
    /// Pod counts per profile.
    pub fn pod_counts(&self) -> BTreeMap<String, PodCounts> {
        let st = self.state();
        st.pools
            .iter()
            .map(|(name, pp)| {
                let c = pp.pool.snapshot().pods;
                (
                    name.clone(),
                    PodCounts {
                        starting: c.starting,
                        standby: c.standby,
                        active: c.active + c.reserved,
                        warm: c.warm,
                        stopping: c.draining,
                    },
                )
            })
            .collect()
    }

    /// Jobs waiting for pods.
    pub fn queue_depth(&self) -> usize {
        let st = self.state();
        st.jobs.values().filter(|j| !j.running).count()
    }

    /// The pool of `profile` as `tenant` may see it.
    pub fn pool_view(&self, profile: &str, tenant: Uuid) -> Option<PoolView> {
        let st = self.state();
        let pp = st.pools.get(profile)?;
        let tenant_id = st.tenants.get(&tenant).copied();
        let config = pp.pool.config();
        Some(PoolView {
            profile: profile.to_owned(),
            gpus: Gpus {
                count: config.gpus,
                real: self.inner.settings.pools.gpus.real,
            },
            snapshot: pp.pool.snapshot(),
            tenant: tenant_id,
            tenant_bounds: tenant_id.map_or(config.budget.tenant, |t| config.tenant_bounds(t)),
            callers: st
                .caller_names
                .iter()
                .filter(|(_, (t, _))| *t == tenant)
                .map(|(&id, (_, name))| (id, name.clone()))
                .collect(),
        })
    }

    /// Records what every pool holds now (the leader, every
    /// `Settings::history_step`), forgetting samples older than an hour.
    pub(super) fn sample_gpus(&self) {
        let at = time::OffsetDateTime::now_utc();
        let keep = (HISTORY.as_secs_f64() / self.inner.settings.history_step.as_secs_f64()).ceil()
            as usize;
        let mut st = self.state();
        let samples: Vec<(String, GpuSample)> = st
            .pools
            .iter()
            .map(|(name, pp)| {
                let g = pp.pool.snapshot().gpus;
                let sample = GpuSample {
                    at,
                    active: g.active,
                    warm: g.warm,
                    standby: g.standby,
                    draining: g.draining,
                };
                (name.clone(), sample)
            })
            .collect();
        for (name, sample) in samples {
            let history = st.gpu_history.entry(name).or_default();
            while history.len() >= keep.max(1) {
                history.pop_front();
            }
            history.push_back(sample);
        }
    }

    /// The GPUs `profile`'s pool held over the last hour, oldest first (empty
    /// on a replica that does not lead, and from a new leader's start);
    /// `None` for a profile without a pool.
    pub fn gpu_history(&self, profile: &str) -> Option<Vec<GpuSample>> {
        let st = self.state();
        st.pools.get(profile)?;
        Some(
            st.gpu_history
                .get(profile)
                .map(|h| h.iter().copied().collect())
                .unwrap_or_default(),
        )
    }

    /// The profiles with pools.
    pub fn pool_names(&self) -> Vec<String> {
        self.state().pools.keys().cloned().collect()
    }

    /// Gauges of every pool, for `/metrics`; none on a replica that does not
    /// lead, whose pools hold nothing (the leader's figures are the truth).
    pub fn pool_gauges(&self) -> Vec<PoolGauges> {
        let now = self.now();
        let st = self.state();
        if !st.leading {
            return Vec::new();
        }
        st.pools
            .iter()
            .map(|(name, pp)| {
                let snap = pp.pool.snapshot();
                let c = snap.pods;
                let g = pp.gpu_seconds(now);
                PoolGauges {
                    profile: name.clone(),
                    pods: vec![
                        ("starting", c.starting),
                        ("standby", c.standby),
                        ("warm", c.warm),
                        ("reserved", c.reserved),
                        ("active", c.active),
                        ("draining", c.draining),
                    ],
                    gpu_seconds: vec![
                        ("active", g[0]),
                        ("warm", g[1]),
                        ("standby", g[2]),
                        ("draining", g[3]),
                    ],
                    budget_gpus: snap.budget.map(|b| b.gpus),
                    queue_depth: snap.queued_jobs,
                }
            })
            .collect()
    }

    /// Checks a tenant budget against `profile`'s pool: in shares, and in
    /// GPUs as they are stored (whole shares: a value within rounding of one
    /// is taken as that one).
    pub fn budget_bounds(
        &self,
        profile: &str,
        floor_gpus: f64,
        ceiling_gpus: f64,
    ) -> Result<(Bounds, [f64; 2]), BudgetError> {
        let st = self.state();
        let pp = st
            .pools
            .get(profile)
            .ok_or_else(|| BudgetError::UnknownProfile(profile.to_owned()))?;
        let per = pp.pool.config().shares_per_gpu;
        let shares = |what: &str, gpus: f64| {
            Shares::from_gpus(gpus, per)
                .filter(|s| s.gpus(per) <= MAX_BUDGET_GPUS)
                .ok_or_else(|| {
                    BudgetError::Invalid(format!(
                        "{what} must be a multiple of 1/{per} GPU from 0 to {MAX_BUDGET_GPUS}"
                    ))
                })
        };
        let bounds = Bounds {
            floor: shares("floor_gpus", floor_gpus)?,
            ceiling: shares("ceiling_gpus", ceiling_gpus)?,
        };
        if bounds.floor > bounds.ceiling {
            return Err(BudgetError::Invalid(
                "floor_gpus exceeds ceiling_gpus".to_owned(),
            ));
        }
        Ok((bounds, [bounds.floor.gpus(per), bounds.ceiling.gpus(per)]))
    }

    /// Applies a tenant's budget to the live pool of `profile`.
    pub fn set_tenant_budget(
        &self,
        tenant: Uuid,
        profile: &str,
        floor_gpus: f64,
        ceiling_gpus: f64,
    ) -> Result<(), BudgetError> {
        let (bounds, _) = self.budget_bounds(profile, floor_gpus, ceiling_gpus)?;
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            let id = st.tenant_id(tenant);
            let leading = st.leading;
            let Some(pp) = st.pools.get_mut(profile) else {
                return Err(BudgetError::UnknownProfile(profile.to_owned()));
            };
            if pp.pool.config().budget.tenants.get(&id) == Some(&bounds) {
                return Ok(());
            }
            pp.pool
                .set_tenant_bounds(id, Some(bounds))
                .map_err(|e| BudgetError::Invalid(e.to_string()))?;
            if leading && let Err(e) = self.feed(&mut st, profile, Event::Tick, &mut actions) {
                tracing::error!(%profile, error = %e, "pool tick failed");
            }
        }
        self.perform(actions);
        Ok(())
    }
}
