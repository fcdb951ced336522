//! Taking over what an earlier leader left: its pods (through the runtime's
//! adoption) and the jobs still running on them. Idle pods enter their pools
//! as standby ([`Event::PodsAdopted`]), so the pools count them and promote
//! them like pods they started. A job the store says runs on pods whose
//! agents still run it is re-attached to (the agents replay its stream from
//! the start, see [`hearth_core::agent::Request::Attach`]) and its end is
//! recorded as if this leader had run it. Its pods enter their pool with
//! the idle ones, active for the job's caller, so the pools and budgets
//! count them from the takeover on; when the job ends they follow the
//! caller's keep-alive like any job's. Only a pool with no room for them
//! leaves them outside: they then join it as standby, wiped, once the job
//! ends.

use hearth_core::State as JobState;
use hearth_core::agent::Stream;
use hearth_runtime::{Claim, client};
use hearth_store::job_event::Body;

use super::run::{Assigned, Begin, Handover, Placement, Resume, Why};
use super::*;

/// Jobs adopted running, by id, to re-attach to.
pub(super) type Busy = HashMap<Uuid, Held>;

/// A running job whose pods were all kept, to take over.
pub(super) struct Running {
    row: JobRow,
    queued: Queued,
    /// Its pods, by rank.
    pods: Vec<Pod>,
}

/// A running job taken over with its pods, known to its pool (or left
/// outside it), not yet re-attached to.
pub(super) struct Held {
    row: JobRow,
    queued: Queued,
    /// Its pods, by rank.
    pods: Vec<Pod>,
    placement: Placement,
    cancel: Arc<Notify>,
}

impl Scheduler {
    /// Adopts the install's pods: the jobs the store says hold pods are the
    /// claims. Idle pods and the pods of running jobs join the pools; the
    /// running jobs are returned, to re-attach to.
    pub(super) async fn take_over_pods(&self) -> Busy {
        let rows = loop {
            match hearth_store::job::unfinished(&self.inner.db).await {
                // Recovery reports the rows it cannot read.
                Ok(read) => break read.rows,
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
        let mut kept: HashMap<Uuid, Vec<Pod>> = HashMap::new();
        for a in adoption.busy {
            match a.holding.job_id.as_deref().map(Uuid::parse_str) {
                Some(Ok(job)) => kept.entry(job).or_default().push(a.pod),
                _ => self.stop_outside(&a.pod.pod_id).await,
            }
        }
        // A job is taken over when every rank's pod was kept; otherwise the
        // pods kept are stopped, and recovery re-queues the job.
        let mut running = Vec::new();
        for row in rows {
            let Some(kept) = kept.remove(&row.job_id) else {
                continue;
            };
            let ranks: Option<Vec<Pod>> = row
                .pods
                .iter()
                .map(|id| kept.iter().find(|p| p.pod_id == *id).cloned())
                .collect();
            match (ranks, Queued::from_row(&row)) {
                (Some(pods), Ok(queued)) => running.push(Running { row, queued, pods }),
                _ => {
                    for pod in &kept {
                        self.stop_outside(&pod.pod_id).await;
                    }
                }
            }
        }
        for pod in kept.into_values().flatten() {
            self.stop_outside(&pod.pod_id).await;
        }
        self.adopt(running, idle).await
    }

    /// Idle, wiped pods join their profiles' pools as standby, as many as
    /// each pool has room for (its policy may release some at once); the
    /// others are stopped.
    pub(super) async fn adopt_idle(&self, pods: Vec<(String, Pod)>) {
        let _none = self.adopt(Vec::new(), pods).await;
    }

    /// Adopted pods join their pools, one event per pool
    /// ([`Event::PodsAdopted`]) so that each counts them all before it
    /// decides what more it needs: the `running` jobs become this leader's,
    /// their pods active for them (or, where the pool has no room, outside
    /// it until they end), and the `idle` pods stand by, as many as the
    /// pool has room for; the other idle pods are stopped. Returns the
    /// running jobs, to re-attach to.
    async fn adopt(&self, running: Vec<Running>, idle: Vec<(String, Pod)>) -> Busy {
        let mut by_profile: BTreeMap<String, (Vec<Running>, Vec<Pod>)> = BTreeMap::new();
        for r in running {
            by_profile
                .entry(r.row.profile.clone())
                .or_default()
                .0
                .push(r);
        }
        for (profile, pod) in idle {
            by_profile.entry(profile).or_default().1.push(pod);
        }
        let mut actions = Vec::new();
        let mut unwanted = Vec::new();
        let mut held = Vec::new();
        {
            let mut st = self.state();
            for (profile, (jobs, pods)) in by_profile {
                let known = st.pools.contains_key(&profile);
                let mut requests = Vec::new();
                for r in &jobs {
                    let id = JobId(st.next_job);
                    st.next_job += 1;
                    let caller = st.caller_id(r.row.tenant_id, &r.queued.spec.caller);
                    let tenant = st.tenant_id(r.row.tenant_id);
                    st.job_ids.insert(id, r.row.job_id);
                    st.jobs.insert(
                        r.row.job_id,
                        Job {
                            queued: r.queued.clone(),
                            id,
                            assigned: Vec::new(),
                            covered_at: None,
                            cancel: Arc::new(Notify::new()),
                            running: true,
                            // Outside the pool until it takes the pods.
                            adopted: true,
                        },
                    );
                    st.adopting_jobs
                        .insert(id, r.pods.iter().cloned().collect());
                    requests.push(Request {
                        job: id,
                        caller,
                        tenant,
                        shares: None,
                        pods: r.pods.len() as u32,
                        priority: r.queued.spec.priority,
                    });
                }
                if known {
                    st.adopting = pods.into();
                    let idle = u32::try_from(st.adopting.len()).unwrap_or(u32::MAX);
                    let event = Event::PodsAdopted {
                        running: requests,
                        idle,
                    };
                    if let Err(e) = self.feed(&mut st, &profile, event, &mut actions) {
                        tracing::warn!(%profile, error = %e, "the pool refused adopted pods");
                    }
                    unwanted.extend(st.adopting.drain(..));
                } else {
                    unwanted.extend(pods);
                }
                st.adopting_jobs.clear();
                for r in jobs {
                    let job_id = r.row.job_id;
                    let Some(j) = st.jobs.get_mut(&job_id) else {
                        continue;
                    };
                    let (cancel, caller) = (j.cancel.clone(), j.queued.spec.caller.clone());
                    let pooled = j.assigned.len() == r.pods.len();
                    j.adopted = !pooled;
                    let assigned: Vec<PodId> = j.assigned.iter().map(|(pod, ..)| *pod).collect();
                    if pooled {
                        let caller = st.caller_id(r.row.tenant_id, &caller);
                        self.loop_moved(&mut st, caller, &profile, true, &mut actions);
                    } else {
                        tracing::warn!(%job_id, %profile, "the pool took none of a running job's pods (no room, or its profile is gone); they stay outside it until the job ends");
                    }
                    held.push((r, assigned, cancel));
                }
            }
        }
        self.perform(actions);
        for pod in unwanted {
            self.stop_outside(&pod.pod_id).await;
        }
        held.into_iter()
            .map(|(r, assigned, cancel)| {
                let placement = Placement {
                    profile: r.row.profile.clone(),
                    pods: r
                        .pods
                        .iter()
                        .enumerate()
                        .map(|(rank, p)| Assigned {
                            // Outside the pool: no pool pod by this id.
                            pod: assigned.get(rank).copied().unwrap_or(PodId(u64::MAX)),
                            runtime_id: p.pod_id.clone(),
                            address: Some(p.clone()),
                            wipe: false,
                            devices: Vec::new(),
                            why: Why::default(),
                        })
                        .collect(),
                    source: r.row.source.unwrap_or(Source::Cold),
                    acquire_ms: r.row.acquire_ms.unwrap_or(0.0),
                };
                let held = Held {
                    row: r.row,
                    queued: r.queued,
                    pods: r.pods,
                    placement,
                    cancel,
                };
                (held.queued.job_id, held)
            })
            .collect()
    }

    /// Stops a pod no pool holds.
    async fn stop_outside(&self, runtime_id: &str) {
        if let Err(e) = self.inner.runtime.stop_pod(runtime_id).await {
            tracing::warn!(pod_id = %runtime_id, error = %e, "stopping an adopted pod failed");
        }
    }

    /// Re-attaches to a job taken over by [`Scheduler::hold`] and follows
    /// it to its end.
    pub(super) fn resume(&self, held: Held) {
        let Held {
            row,
            queued,
            pods,
            placement,
            cancel,
        } = held;
        let handover = Handover {
            attempt: row.attempts,
            queued_ms: row.queued_ms.unwrap_or(0.0),
            acquire_ms: row.acquire_ms.unwrap_or(0.0),
        };
        let running = row.state == JobState::Running;
        let started_at = row
            .started_at
            .filter(|_| running)
            .map(std::time::SystemTime::from);
        let (tenant_id, job_id) = (row.tenant_id, row.job_id);
        let this = self.clone();
        let spawned = self.spawn_job_task(async move {
            let resume = Resume {
                running,
                started_at,
                shown: this.shown_lines(tenant_id, job_id).await,
            };
            let begin = Begin::Attach(resume);
            let outside = this.state().jobs.get(&job_id).is_some_and(|j| j.adopted);
            let ending = this
                .exchange(&queued, &placement, &pods, begin, handover, &cancel)
                .await;
            if this.ended(queued, &placement, ending).await && outside {
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
        if spawned {
            tracing::info!(%job_id, "re-attached to a job an earlier leader ran");
        } else {
            self.finished(job_id);
        }
    }

    /// Lets go of a job taken over that recovery no longer finds unfinished
    /// (another replica ended it meanwhile): its pods go.
    pub(super) async fn let_go(&self, held: Held) {
        self.drop_pods(&held.placement, "its job ended under another leader")
            .await;
        self.finished(held.queued.job_id);
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
