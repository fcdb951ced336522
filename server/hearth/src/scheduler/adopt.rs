//! Taking over what an earlier leader left: its pods (through the runtime's
//! adoption) and the jobs still running on them. Idle pods enter their pools
//! as standby ([`Event::PodsAdopted`]), so the pools count them and promote
//! them like pods they started. A job the store says runs on pods whose
//! agents still run it is re-attached to (the agents replay its stream from
//! the start, see [`hearth_core::agent::Request::Attach`]) and its end is
//! recorded as if this leader had run it; its pods then join their pool as
//! standby, wiped. Until then they stay outside the pools.

use hearth_core::State as JobState;
use hearth_core::agent::Stream;
use hearth_runtime::{Claim, client};
use hearth_store::job_event::Body;

use super::run::{Assigned, Begin, Handover, Placement, Resume, Why};
use super::*;

/// Pods adopted busy, by the job they run.
pub(super) type Busy = HashMap<Uuid, Vec<Pod>>;

impl Scheduler {
    /// Adopts the install's pods: the jobs the store says hold pods are the
    /// claims. Idle pods join the pools; busy ones are returned by job.
    pub(super) async fn take_over_pods(&self) -> Busy {
        let rows = loop {
            match hearth_store::job::unfinished(&self.inner.db).await {
                Ok(rows) => break rows,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the jobs that hold pods failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        let claims: Vec<Claim> = rows
            .iter()
            .filter(|r| r.state != JobState::Queued)
            .flat_map(|r| {
                r.pods.iter().map(|pod| Claim {
                    job_id: r.job_id.to_string(),
                    pod_id: pod.clone(),
                })
            })
            .collect();
        let profiles = self.inner.profiles.values().cloned().collect();
        let adoption = match self.inner.runtime.adopt(profiles, claims).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "could not take over the pods an earlier run left");
                return Busy::new();
            }
        };
        if adoption.removed > 0 || !adoption.standby.is_empty() || !adoption.busy.is_empty() {
            tracing::info!(
                standby = adoption.standby.len(),
                busy = adoption.busy.len(),
                removed = adoption.removed,
                "took over the pods an earlier run left"
            );
        }
        let idle = adoption
            .standby
            .into_iter()
            .map(|a| (a.profile, a.pod))
            .collect();
        self.adopt_idle(idle).await;
        let mut busy = Busy::new();
        for a in adoption.busy {
            match a.holding.job_id.as_deref().map(Uuid::parse_str) {
                Some(Ok(job)) => busy.entry(job).or_default().push(a.pod),
                _ => self.stop_outside(&a.pod.pod_id).await,
            }
        }
        busy
    }

    /// Idle, wiped pods join their profiles' pools as standby, as many as
    /// each pool has room for (its policy may release some at once); the
    /// others are stopped.
    pub(super) async fn adopt_idle(&self, pods: Vec<(String, Pod)>) {
        let mut by_profile: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for (profile, pod) in pods {
            by_profile.entry(profile).or_default().push(pod);
        }
        let mut actions = Vec::new();
        let mut unwanted = Vec::new();
        {
            let mut st = self.state();
            for (profile, pods) in by_profile {
                if !st.pools.contains_key(&profile) {
                    unwanted.extend(pods);
                    continue;
                }
                let n = u32::try_from(pods.len()).unwrap_or(u32::MAX);
                st.adopting = pods.into();
                let event = Event::PodsAdopted { pods: n };
                if let Err(e) = self.feed(&mut st, &profile, event, &mut actions) {
                    tracing::warn!(%profile, error = %e, "the pool refused adopted pods");
                }
                unwanted.extend(st.adopting.drain(..));
            }
        }
        self.perform(actions);
        for pod in unwanted {
            self.stop_outside(&pod.pod_id).await;
        }
    }

    /// Stops a pod no pool holds.
    async fn stop_outside(&self, runtime_id: &str) {
        if let Err(e) = self.inner.runtime.stop_pod(runtime_id).await {
            tracing::warn!(pod_id = %runtime_id, error = %e, "stopping an adopted pod failed");
        }
    }

    /// Re-attaches to `row`'s run on the `busy` pods that run it, if every
    /// rank's pod was kept; true when it did. Otherwise the pods kept are
    /// stopped, and the caller re-queues the job.
    pub(super) async fn resume(&self, row: &JobRow, busy: &mut Busy) -> bool {
        let Some(kept) = busy.remove(&row.job_id) else {
            return false;
        };
        let ranks: Option<Vec<Pod>> = row
            .pods
            .iter()
            .map(|id| kept.iter().find(|p| p.pod_id == *id).cloned())
            .collect();
        let (Some(pods), Ok(queued)) = (ranks, Queued::from_row(row)) else {
            for pod in &kept {
                self.stop_outside(&pod.pod_id).await;
            }
            return false;
        };
        let cancel = Arc::new(Notify::new());
        {
            let mut st = self.state();
            let id = JobId(st.next_job);
            st.next_job += 1;
            st.job_ids.insert(id, row.job_id);
            st.jobs.insert(
                row.job_id,
                Job {
                    queued: queued.clone(),
                    id,
                    assigned: Vec::new(),
                    covered_at: None,
                    cancel: cancel.clone(),
                    running: true,
                    adopted: true,
                },
            );
        }
        let placement = Placement {
            profile: row.profile.clone(),
            pods: pods
                .iter()
                .map(|p| Assigned {
                    // No pool holds it: nothing to find by this id.
                    pod: PodId(u64::MAX),
                    runtime_id: p.pod_id.clone(),
                    address: Some(p.clone()),
                    wipe: false,
                    devices: Vec::new(),
                    why: Why::default(),
                })
                .collect(),
            source: row.source.unwrap_or(Source::Cold),
            acquire_ms: row.acquire_ms.unwrap_or(0.0),
        };
        let handover = Handover {
            attempt: row.attempts,
            queued_ms: row.queued_ms.unwrap_or(0.0),
            acquire_ms: row.acquire_ms.unwrap_or(0.0),
        };
        let running = row.state == JobState::Running;
        let (tenant_id, job_id) = (row.tenant_id, row.job_id);
        let this = self.clone();
        let spawned = self.spawn_job_task(async move {
            let resume = Resume {
                running,
                shown: this.shown_lines(tenant_id, job_id).await,
            };
            let begin = Begin::Attach(resume);
            let ending = this
                .exchange(&queued, &placement, &pods, begin, handover, &cancel)
                .await;
            if this.ended(queued, &placement, ending).await {
                // Its pods serve again, wiped, as standby of their pool.
                let epoch = this.epoch() as u64;
                let mut idle = Vec::new();
                for pod in pods {
                    match client::wipe(&pod.address, pod.token.as_deref(), epoch).await {
                        Ok(()) => idle.push((placement.profile.clone(), pod)),
                        Err(_) => this.stop_outside(&pod.pod_id).await,
                    }
                }
                this.adopt_idle(idle).await;
            }
        });
        if !spawned {
            self.finished(job_id);
            return false;
        }
        tracing::info!(%job_id, "re-attached to a job an earlier leader ran");
        true
    }

    /// Output lines of the job's current attempt already among its events,
    /// per rank and stream.
    async fn shown_lines(&self, tenant_id: Uuid, job_id: Uuid) -> HashMap<(u32, Stream), usize> {
        let mut shown = HashMap::new();
        let mut after = 0;
        loop {
            let rows = match hearth_store::job_event::after(
                &self.inner.db,
                tenant_id,
                job_id,
                after,
                1000,
            )
            .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!(%job_id, error = %e, "reading the job's events failed; its lines may show twice");
                    return shown;
                }
            };
            let Some(last) = rows.last() else {
                return shown;
            };
            after = last.seq;
            for row in rows {
                match row.body {
                    // A new attempt: what an earlier one printed is not this run's.
                    Body::State(JobState::Assigned) => shown.clear(),
                    Body::Output { stream, rank, .. } => {
                        let rank = u32::try_from(rank).unwrap_or_default();
                        *shown.entry((rank, stream)).or_default() += 1;
                    }
                    Body::State(_) => {}
                }
            }
        }
    }
}
