//! Carrying out the pool policy's decisions: starting, promoting, binding,
//! releasing and stopping pods, and what the runtime reports back about
//! them (started, failed, gone).

use super::*;

impl Scheduler {
    pub(super) fn apply(
        &self,
        st: &mut State,
        profile: &str,
        d: Decision,
        actions: &mut Vec<Action>,
    ) {
        let real_gpus = self.inner.settings.pools.gpus.real;
        match d {
            Decision::StartPod {
                pod,
                purpose,
                placement,
                reason,
            } => {
                let job = match purpose {
                    Purpose::ForJob(j) => st.job_tenant(j),
                    Purpose::Standby => None,
                };
                if let Some((uuid, _)) = job
                    && let Some(j) = st.jobs.get_mut(&uuid)
                {
                    j.covered_at.get_or_insert_with(Instant::now);
                }
                let tenant = job.map(|(_, t)| t);
                let runtime_id = format!("pod-{}", Uuid::now_v7().simple());
                let mut why = st.reason_json(&reason, tenant);
                why["purpose"] = json!(if job.is_some() { "job" } else { "standby" });
                why["placement"] = json!(placement);
                self.record(
                    tenant,
                    Some(&runtime_id),
                    profile,
                    "start",
                    job.map(|(j, _)| j),
                    why,
                );
                let Some(pp) = st.pools.get_mut(profile) else {
                    return;
                };
                let mut labels = BTreeMap::from([
                    ("profile".to_owned(), profile.to_owned()),
                    ("pool_pod".to_owned(), pod.0.to_string()),
                ]);
                if let Some(t) = tenant {
                    labels.insert("tenant".to_owned(), t.to_string());
                }
                let spec = PodSpec {
                    pod_id: runtime_id.clone(),
                    profile: pp.profile.clone(),
                    gpu_devices: if real_gpus {
                        devices(&placement, pp.gpu_first)
                    } else {
                        Vec::new()
                    },
                    labels,
                };
                pp.by_runtime.insert(runtime_id.clone(), pod);
                pp.slots.insert(
                    pod,
                    Slot {
                        runtime_id,
                        pod: None,
                        placement,
                        phase: Phase::Starting,
                        tenant: None,
                        wipe: false,
                    },
                );
                actions.push(Action::Start {
                    profile: profile.to_owned(),
                    pod,
                    spec,
                });
            }
            Decision::Promote {
                pod,
                job,
                placement,
                reason,
            } => {
                let Some((uuid, tenant)) = st.job_tenant(job) else {
                    return;
                };
                if let Some(j) = st.jobs.get_mut(&uuid) {
                    j.covered_at.get_or_insert_with(Instant::now);
                }
                let mut why = st.reason_json(&reason, Some(tenant));
                why["placement"] = json!(placement);
                let Some(slot) = st.bind_slot(profile, pod, tenant, uuid) else {
                    return;
                };
                slot.placement = placement;
                let runtime_id = slot.runtime_id.clone();
                self.record(
                    Some(tenant),
                    Some(&runtime_id),
                    profile,
                    "promote",
                    Some(uuid),
                    why,
                );
            }
            Decision::Assign {
                job,
                pod,
                source,
                reason,
            } => {
                let Some((uuid, tenant)) = st.job_tenant(job) else {
                    return;
                };
                let mut why = st.reason_json(&reason, Some(tenant));
                why["source"] = json!(source.as_str());
                let because = run::Why::of(&why);
                let Some(slot) = st.bind_slot(profile, pod, tenant, uuid) else {
                    return;
                };
                let runtime_id = slot.runtime_id.clone();
                self.record(
                    Some(tenant),
                    Some(&runtime_id),
                    profile,
                    "assign",
                    Some(uuid),
                    why,
                );
                let Some(j) = st.jobs.get_mut(&uuid) else {
                    return;
                };
                j.covered_at.get_or_insert_with(Instant::now);
                j.assigned.push((pod, source, because));
                if j.assigned.len() as u32 >= j.queued.spec.pods() && !j.running {
                    j.running = true;
                    let acquire_ms = j.covered_at.map_or(0.0, |t| ms(t.elapsed()));
                    let assigned = j.assigned.clone();
                    let queued = j.queued.clone();
                    let Some(pp) = st.pools.get_mut(profile) else {
                        return;
                    };
                    let pods = assigned
                        .iter()
                        .map(|(pod, _, because)| {
                            let slot = pp.slots.get_mut(pod);
                            let wipe = slot.as_ref().is_some_and(|s| s.wipe);
                            if let Some(s) = slot {
                                s.wipe = false;
                            }
                            let slot = pp.slots.get(pod);
                            run::Assigned {
                                pod: *pod,
                                runtime_id: slot.map(|s| s.runtime_id.clone()).unwrap_or_default(),
                                address: slot.and_then(|s| s.pod.clone()),
                                wipe,
                                devices: match slot {
                                    Some(s) if real_gpus => devices(&s.placement, pp.gpu_first),
                                    _ => Vec::new(),
                                },
                                why: because.clone(),
                            }
                        })
                        .collect();
                    // The job is as cold as its coldest pod.
                    let source = assigned
                        .iter()
                        .map(|(_, s, _)| *s)
                        .max_by_key(|s| match s {
                            Source::Warm => 0,
                            Source::Standby => 1,
                            Source::Cold => 2,
                        })
                        .unwrap_or(Source::Cold);
                    actions.push(Action::Run {
                        job: queued,
                        placement: run::Placement {
                            profile: profile.to_owned(),
                            pods,
                            source,
                            acquire_ms,
                        },
                    });
                }
            }
            Decision::Prewarm {
                pod,
                tenant,
                placement,
                reason,
                ..
            } => {
                // A standby pod promoted ahead of its caller's next burst: it
                // holds the full placement from now and serves that caller's
                // next job as its warm pod (the binding travels with the job).
                // Recorded as a promotion without a job; its reason says why.
                let tenant = st.tenant_uuids.get(&tenant).copied();
                let mut why = st.reason_json(&reason, tenant);
                why["placement"] = json!(placement);
                let Some(slot) = st
                    .pools
                    .get_mut(profile)
                    .and_then(|pp| pp.slots.get_mut(&pod))
                else {
                    return;
                };
                slot.tenant = tenant;
                slot.placement = placement;
                let runtime_id = slot.runtime_id.clone();
                self.record(tenant, Some(&runtime_id), profile, "promote", None, why);
            }
            Decision::Adopted {
                pod,
                placement,
                job,
            } => {
                let next = match job {
                    Some(j) => st.adopting_jobs.get_mut(&j).and_then(VecDeque::pop_front),
                    None => st.adopting.pop_front(),
                };
                let Some(adopted) = next else {
                    return;
                };
                let running = job.and_then(|j| st.job_tenant(j));
                let why = match running {
                    Some(_) => json!({
                        "code": "adopted",
                        "message": "a pod an earlier leader started, running a job this leader re-attached to, taken over as active",
                        "placement": placement,
                    }),
                    None => json!({
                        "code": "adopted",
                        "message": "a pod an earlier leader started, idle and wiped, taken over as standby",
                        "placement": placement,
                    }),
                };
                let (tenant, job_id) = (running.map(|(_, t)| t), running.map(|(j, _)| j));
                let kind = if running.is_some() { "assign" } else { "ready" };
                self.record(tenant, Some(&adopted.pod_id), profile, kind, job_id, why);
                if let Some((uuid, _)) = running
                    && let Some(j) = st.jobs.get_mut(&uuid)
                {
                    j.assigned.push((pod, Source::Cold, run::Why::default()));
                }
                let Some(pp) = st.pools.get_mut(profile) else {
                    return;
                };
                pp.by_runtime.insert(adopted.pod_id.clone(), pod);
                pp.slots.insert(
                    pod,
                    Slot {
                        runtime_id: adopted.pod_id.clone(),
                        pod: Some(adopted),
                        placement,
                        phase: running.map_or(Phase::Ready, |(j, _)| Phase::Busy(j)),
                        tenant,
                        wipe: false,
                    },
                );
            }
            Decision::Reset {
                pod,
                placement,
                reason,
            } => {
                if let Some(slot) = self.record_pod(st, profile, pod, "reset", &reason) {
                    slot.tenant = None;
                    slot.wipe = true;
                    slot.phase = Phase::Ready;
                    slot.placement = placement;
                }
            }
            Decision::Release { pod, reason } => {
                let Some(slot) = self.record_pod(st, profile, pod, "release", &reason) else {
                    return;
                };
                let starting = slot.phase == Phase::Starting;
                slot.phase = Phase::Draining;
                // A pod still starting is stopped when its start ends.
                if !starting {
                    actions.push(Action::Stop {
                        profile: profile.to_owned(),
                        pod,
                        runtime_id: slot.runtime_id.clone(),
                    });
                }
            }
            Decision::Budget {
                budget,
                gpus,
                inputs,
            } => {
                tracing::debug!(%profile, budget_gpus = gpus, ?inputs, "pool budget changed");
                self.record(
                    None,
                    None,
                    profile,
                    "budget",
                    None,
                    json!({"code": "budget", "budget_shares": budget.0, "budget_gpus": gpus, "inputs": inputs}),
                );
            }
        }
    }

    /// Carries out what needs I/O, each in its own task. While the service
    /// shuts down, no job starts and no pod is started for one: the jobs stay
    /// queued in the store for the next leader.
    pub(super) fn perform(&self, actions: Vec<Action>) {
        for action in actions {
            let this = self.clone();
            match action {
                Action::Start { .. } if self.state().draining => {}
                Action::Start { profile, pod, spec } => {
                    tokio::spawn(async move { this.start_pod(profile, pod, spec).await });
                }
                Action::Run { job, placement } => {
                    let job_id = job.job_id;
                    if !self.spawn_job_task(async move { this.run_job(job, placement).await }) {
                        // Its pods go back to the pool; the job stays queued.
                        self.finished(job_id);
                    }
                }
                Action::Stop {
                    profile,
                    pod,
                    runtime_id,
                } => {
                    tokio::spawn(async move { this.stop_pod(profile, pod, runtime_id).await });
                }
                Action::Fail { job, finish } => {
                    // Draining: the next leader fails it.
                    self.spawn_job_task(async move { this.record_end(&job, finish).await });
                }
            }
        }
    }

    pub(super) async fn start_pod(self, profile: String, pod: PodId, spec: PodSpec) {
        let runtime_id = spec.pod_id.clone();
        let began = Instant::now();
        let timeout = self.inner.settings.pod_start_timeout;
        let started = match tokio::time::timeout(timeout, self.inner.runtime.start_pod(spec)).await
        {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(e)) => Err((e.to_string(), e.is_transient())),
            Err(_) => Err((format!("pod start took longer than {timeout:?}"), false)),
        };
        let mut actions = Vec::new();
        match started {
            Ok(p) => {
                let orphan = {
                    let mut st = self.state();
                    if let Some(pp) = st.pools.get_mut(&profile) {
                        pp.failed_starts = 0;
                    }
                    // A pool rebuilt meanwhile (a step-down) may number
                    // another pod alike: only its own slot takes it.
                    !st.owns(&profile, pod, &runtime_id)
                        || self.pod_started(&mut st, &profile, pod, p, &mut actions)
                };
                if orphan {
                    let _ = self.inner.runtime.stop_pod(&runtime_id).await;
                }
            }
            Err((message, transient)) => {
                tracing::warn!(%runtime_id, error = %message, transient, "pod failed to start");
                // Whatever the start left behind goes.
                if let Err(e) = self.inner.runtime.stop_pod(&runtime_id).await {
                    tracing::debug!(%runtime_id, error = %e, "cleaning up a failed start");
                }
                tokio::time::sleep_until(began + START_RETRY_GAP).await;
                let mut st = self.state();
                if !st.owns(&profile, pod, &runtime_id) {
                    return;
                }
                self.pod_gone(
                    &mut st,
                    &profile,
                    pod,
                    json!({"code": "start_failed", "message": message}),
                    &mut actions,
                );
                if !transient {
                    self.start_failed(&mut st, &profile, &message, &mut actions);
                }
            }
        }
        self.perform(actions);
    }

    /// A pod of `profile` failed to start, for a reason of its own (not
    /// because what makes pods was unavailable: such starts are retried,
    /// and the jobs wait): once [`FAILED_STARTS_TO_GIVE_UP`] starts have
    /// failed in a row, the jobs waiting for its pods fail with the last
    /// reason, and so does each one that waits when the next start fails,
    /// until one succeeds.
    fn start_failed(
        &self,
        st: &mut State,
        profile: &str,
        message: &str,
        actions: &mut Vec<Action>,
    ) {
        let Some(pp) = st.pools.get_mut(profile) else {
            return;
        };
        pp.failed_starts += 1;
        let failed = pp.failed_starts;
        if failed < FAILED_STARTS_TO_GIVE_UP {
            return;
        }
        let waiting: Vec<(Uuid, Queued)> = st
            .jobs
            .iter()
            .filter(|(_, j)| !j.running && j.queued.spec.profile == profile)
            .map(|(id, j)| (*id, j.queued.clone()))
            .collect();
        for (job_id, queued) in waiting {
            tracing::warn!(%job_id, profile, failed, "failing a job whose profile's pods do not start");
            self.finished_locked(st, job_id, actions);
            actions.push(Action::Fail {
                job: queued,
                finish: run::failed(
                    ErrorCode::PodStartFailed,
                    format!(
                        "{failed} starts of a `{profile}` pod failed in a row; the last: {message}"
                    ),
                ),
            });
        }
    }

    /// A started pod is up. True when nothing knows it any more (stop it).
    pub(super) fn pod_started(
        &self,
        st: &mut State,
        profile: &str,
        pod: PodId,
        p: Pod,
        actions: &mut Vec<Action>,
    ) -> bool {
        let Some(slot) = st
            .pools
            .get_mut(profile)
            .and_then(|pp| pp.slots.get_mut(&pod))
        else {
            return true;
        };
        let runtime_id = slot.runtime_id.clone();
        slot.pod = Some(p);
        if slot.phase != Phase::Starting {
            // Released while it started.
            actions.push(Action::Stop {
                profile: profile.to_owned(),
                pod,
                runtime_id,
            });
            return false;
        }
        slot.phase = Phase::Ready;
        self.record(
            None,
            Some(&runtime_id),
            profile,
            "ready",
            None,
            json!({"code": "ready", "message": "the pod's agent answered"}),
        );
        if let Err(e) = self.feed(st, profile, Event::PodReady { pod }, actions) {
            tracing::error!(%runtime_id, error = %e, "pool refused a ready pod");
        }
        false
    }

    pub(super) async fn stop_pod(self, profile: String, pod: PodId, runtime_id: String) {
        if let Err(e) = self.inner.runtime.stop_pod(&runtime_id).await {
            tracing::warn!(%runtime_id, error = %e, "stopping pod failed");
        }
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            self.pod_gone(
                &mut st,
                &profile,
                pod,
                json!({"code": "stopped", "message": "the pod was stopped"}),
                &mut actions,
            );
        }
        self.perform(actions);
    }

    /// Drops a pod from the books and tells its pool.
    pub(super) fn pod_gone(
        &self,
        st: &mut State,
        profile: &str,
        pod: PodId,
        why: Value,
        actions: &mut Vec<Action>,
    ) {
        let Some(pp) = st.pools.get_mut(profile) else {
            return;
        };
        let Some(slot) = pp.slots.remove(&pod) else {
            return;
        };
        pp.by_runtime.remove(&slot.runtime_id);
        self.record(None, Some(&slot.runtime_id), profile, "gone", None, why);
        if let Err(e) = self.feed(st, profile, Event::PodGone { pod }, actions) {
            tracing::debug!(pod_id = %slot.runtime_id, error = %e, "pool did not know the pod");
        }
    }

    /// A pod vanished without being asked to (its agent died).
    pub(super) fn runtime_gone(&self, runtime_id: &str, reason: &str) {
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            let Some((profile, pod)) = st.pools.iter().find_map(|(name, pp)| {
                pp.by_runtime
                    .get(runtime_id)
                    .map(|&pod| (name.clone(), pod))
            }) else {
                return;
            };
            self.inner.metrics.pod_lost(&profile, reason);
            let phase = st.pools[&profile].slots.get(&pod).map(|s| s.phase);
            let lost = match phase {
                Some(Phase::Ready) => true,
                // A running job notices on its own connections and ends lost.
                Some(Phase::Busy(job)) => !st.jobs.get(&job).is_some_and(|j| j.running),
                Some(Phase::Starting | Phase::Draining) | None => false,
            };
            if lost {
                tracing::info!(pod_id = %runtime_id, %reason, "pod gone");
                self.pod_gone(
                    &mut st,
                    &profile,
                    pod,
                    json!({"code": "lost", "message": reason}),
                    &mut actions,
                );
            }
        }
        self.perform(actions);
    }
}
