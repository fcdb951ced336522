//! Leadership: the scheduler lease (a session-level Postgres advisory lock
//! on a dedicated connection) and which replica holds it, and what the
//! leader does with it: take a new epoch, recover the store's jobs, lead
//! (pickup, budgets, lease checks), step down when the lease is lost, and
//! drain at shutdown.
//!
//! The leader names its lease connection after itself (`application_name`,
//! see [`crate::replica`]), so any replica finds the leader from the lock
//! itself (`pg_locks` joined with `pg_stat_activity`): the answer is never
//! older than the lock, and there is no record to go stale when a leader
//! dies.

use std::time::Duration;

use super::*;

/// Which replica leads, as the replica answering sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// This replica leads.
    pub is_self: bool,
    /// The leading replica's id; `None` while none leads (a takeover).
    pub replica_id: Option<String>,
    /// Its host name (possibly cut).
    pub host: Option<String>,
}

impl Scheduler {
    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.inner.settings.replica.id
    }

    /// Whether this replica schedules now.
    pub fn is_leading(&self) -> bool {
        self.state().leading
    }

    /// Which replica leads: this one, or the one holding the lease in the
    /// store.
    pub async fn leader(&self) -> Result<Leader, hearth_store::Error> {
        if self.is_leading() {
            return Ok(Leader {
                is_self: true,
                replica_id: Some(self.inner.settings.replica.id.clone()),
                host: Some(self.inner.settings.replica.host.clone()),
            });
        }
        // A bigint advisory key is split into two 32-bit halves.
        let (high, low) = (LEASE_KEY >> 32, LEASE_KEY & 0xffff_ffff);
        let name = sqlx::query_scalar!(
            r#"select a.application_name as "name!"
               from pg_locks l join pg_stat_activity a on a.pid = l.pid
               where l.locktype = 'advisory' and l.granted
                 and l.database = (select oid from pg_database where datname = current_database())
                 and l.classid = $1::bigint::oid and l.objid = $2::bigint::oid
                 and l.objsubid = 1"#,
            high,
            low
        )
        .fetch_optional(&self.inner.db)
        .await
        .map_err(hearth_store::Error::from)?;
        let named = name.as_deref().and_then(crate::replica::parse_lease_name);
        Ok(Leader {
            is_self: false,
            replica_id: named.as_ref().map(|(id, _)| id.clone()),
            host: named.map(|(_, host)| host).filter(|h| !h.is_empty()),
        })
    }

    /// Holds the scheduler lease: a session-level advisory lock on a
    /// dedicated connection, kept for the life of the process or until a
    /// shutdown drains it. `None` if the service began shutting down first.
    pub(super) async fn acquire_lease(&self) -> Option<sqlx::PgConnection> {
        let mut waiting_logged = false;
        loop {
            if self.state().draining {
                return None;
            }
            let attempt = async {
                let mut conn = self.inner.db.acquire().await?;
                let got: bool =
                    sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "got!""#, LEASE_KEY)
                        .fetch_one(&mut *conn)
                        .await?;
                if !got {
                    return Ok::<_, sqlx::Error>(None);
                }
                // Only a name: failing to set it must not hand a connection
                // that holds the lock back to the pool.
                if let Err(e) = sqlx::query_scalar!(
                    r#"select set_config('application_name', $1, false) as "name!""#,
                    self.inner.settings.replica.lease_name()
                )
                .fetch_one(&mut *conn)
                .await
                {
                    tracing::warn!(error = %e, "naming the lease connection failed; other replicas cannot say who leads");
                }
                Ok(Some(conn))
            };
            match attempt.await {
                Ok(Some(conn)) => {
                    tracing::info!(replica_id = %self.inner.settings.replica.id, "scheduler lease acquired");
                    return Some(conn.detach());
                }
                Ok(None) if !waiting_logged => {
                    tracing::info!("another scheduler leads; waiting for the lease");
                    waiting_logged = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "taking the scheduler lease failed"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

impl Scheduler {
    /// Listens for job changes (every replica), and leads once it holds the
    /// lease: recovers unfinished jobs, then schedules until the process
    /// ends. Returns if the lease is lost.
    pub async fn run(self) {
        let listen = self.listen();
        tokio::pin!(listen);
        loop {
            tokio::select! {
                () = &mut listen => return,
                () = self.lead() => {}
            }
            if self.state().draining {
                // Shutting down: this replica's watchers still hear the jobs
                // other replicas run until the process ends.
                listen.await;
                return;
            }
            // The lease went with its connection (the database restarted, or
            // the connection was cut): another replica may lead now. Step
            // down and compete for the lease again; the next leader, this
            // one or another, re-queues the jobs that ran here.
            self.step_down().await;
        }
    }

    /// Forgets everything this replica held as the leader: its job tasks
    /// end (their writes would be refused by the new epoch anyway), its pods
    /// are stopped, and its pools start empty.
    async fn step_down(&self) {
        let halted = self.halt();
        let pods: Vec<String> = {
            let mut st = self.state();
            let pods = st
                .pools
                .values()
                .flat_map(|pp| pp.by_runtime.keys().cloned())
                .collect();
            match build_pools(&self.inner.profiles, &self.inner.settings) {
                Ok(pools) => {
                    *st = State {
                        pools,
                        draining: st.draining,
                        ..State::default()
                    };
                }
                // Built from the same configuration at start: cannot fail.
                Err(e) => tracing::error!(error = %e, "rebuilding the pools failed"),
            }
            pods
        };
        self.inner.metrics.set_leader(false);
        let stopped =
            futures::future::join_all(pods.iter().map(|pod| self.inner.runtime.stop_pod(pod)))
                .await;
        let failed = stopped.iter().filter(|r| r.is_err()).count();
        tracing::warn!(
            jobs = halted,
            pods = pods.len(),
            failed,
            "stepped down after losing the lease; competing for it again"
        );
    }

    async fn lead(&self) {
        let Some(mut lease) = self.acquire_lease().await else {
            return;
        };
        // A new epoch before anything else: from its commit on, the last
        // leader's agent requests and job writes are refused.
        let epoch = match hearth_store::leadership::take_over(
            &mut lease,
            &self.inner.settings.replica.id,
        )
        .await
        {
            Ok(epoch) => epoch,
            Err(e) => {
                tracing::error!(error = %e, "recording the takeover failed; the scheduler stops");
                return;
            }
        };
        self.inner.leadership.store(epoch, Ordering::SeqCst);
        self.inner.runtime.set_epoch(epoch as u64);
        tracing::info!(epoch, "leadership epoch");
        // Pods an earlier leader left: idle ones join the pools as standby,
        // and the jobs still running on busy ones are re-attached to.
        let mut busy = self.take_over_pods().await;
        self.load_budgets().await;
        let mut pod_events = self.inner.runtime.subscribe();
        self.state().leading = true;
        self.inner.metrics.set_leader(true);
        self.tick_all();
        while let Err(e) = self.recover(&mut busy).await {
            tracing::error!(error = %e, "recovery failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut next_sync = Instant::now() + SYNC;
        let mut next_budgets = Instant::now() + BUDGET_SYNC;
        let mut next_sample = Instant::now();
        let mut last_pickup = Instant::now();
        let mut next_pickup = last_pickup + PICKUP_SCAN;
        let mut pickup_gap = PICKUP_GAP;
        loop {
            let pickup_at = if self.state().pickup_wanted {
                last_pickup + pickup_gap
            } else {
                next_pickup
            };
            let wake_at = self
                .next_wakeup()
                .map_or(next_sync, |w| w.min(next_sync))
                .min(pickup_at)
                .min(next_sample);
            tokio::select! {
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep_until(wake_at) => {}
                event = pod_events.recv() => match event {
                    Ok(PodEvent::Gone { pod_id, reason }) => self.runtime_gone(&pod_id, &reason),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "missed pod events");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        pod_events = self.inner.runtime.subscribe();
                    }
                },
            }
            let (draining, wanted, idle) = {
                let st = self.state();
                let idle = self.inner.job_tasks.load(Ordering::Acquire) == 0;
                (st.draining, st.pickup_wanted, idle)
            };
            if draining && idle {
                // Nothing runs here any more: hand the lease over now, so the
                // next leader runs the queued jobs while this process ends.
                self.state().leading = false;
                self.inner.metrics.set_leader(false);
                if let Err(e) = sqlx::Connection::close(lease).await {
                    tracing::debug!(error = %e, "closing the lease connection");
                }
                tracing::info!("scheduler drained; lease released");
                return;
            }
            let now = Instant::now();
            if now >= next_sample {
                self.sample_gpus();
                next_sample = now + self.inner.settings.history_step;
            }
            if !draining && (now >= next_pickup || wanted && now >= last_pickup + pickup_gap) {
                if let Err(e) = self.pick_up(now >= next_pickup).await {
                    tracing::warn!(error = %e, "picking up queued jobs failed");
                }
                last_pickup = Instant::now();
                pickup_gap = PICKUP_GAP.max(last_pickup.duration_since(now) * 4);
                if now >= next_pickup {
                    next_pickup = last_pickup + PICKUP_SCAN;
                }
            }
            if now >= next_sync {
                let alive =
                    tokio::time::timeout(LEASE_CHECK, sqlx::Connection::ping(&mut lease)).await;
                if !matches!(alive, Ok(Ok(()))) {
                    // The advisory lock went with its connection: another
                    // replica may lead now. Stop rather than schedule twice;
                    // the service exits and the new leader recovers the jobs.
                    tracing::error!("scheduler lease lost; the scheduler stops");
                    self.state().leading = false;
                    self.inner.metrics.set_leader(false);
                    return;
                }
                next_sync = Instant::now() + SYNC;
            }
            if !draining && Instant::now() >= next_budgets {
                // Budgets set through another replica reach this leader.
                self.load_budgets().await;
                next_budgets = Instant::now() + BUDGET_SYNC;
            }
            self.tick_all();
        }
    }

    /// Applies the tenants' stored budgets to the pools.
    async fn load_budgets(&self) {
        let rows = match hearth_store::budget::all(&self.inner.db).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "loading tenant budgets failed");
                return;
            }
        };
        for row in rows {
            if let Err(e) = self.set_tenant_budget(
                row.tenant_id,
                &row.profile,
                row.floor_gpus,
                row.ceiling_gpus,
            ) {
                tracing::warn!(tenant_id = %row.tenant_id, profile = %row.profile, error = %e, "stored tenant budget not applied");
            }
        }
    }

    /// Rebuilds the queue from the store. Jobs still running on the pods
    /// adopted `busy` are re-attached to; the other jobs that held pods when
    /// the last leader stopped lost them: they are re-queued while they have
    /// attempts left, else failed with `pod_lost`.
    async fn recover(&self, busy: &mut adopt::Busy) -> Result<(), hearth_store::Error> {
        let db = &self.inner.db;
        let read = hearth_store::job::unfinished(db).await?;
        self.set_aside(read.unreadable);
        for row in read.rows {
            if let Some(held) = busy.remove(&row.job_id) {
                self.resume(held);
                continue;
            }
            // Jobs accepted since this scheduler took the lead are its own.
            if self.state().jobs.contains_key(&row.job_id) {
                continue;
            }
            if row.state != hearth_core::State::Queued {
                let max = self.inner.settings.max_attempts as i32;
                if hearth_store::job::requeue(db, self.epoch(), row.job_id, max).await? {
                    tracing::info!(job_id = %row.job_id, "re-queued a job whose pod was lost");
                    self.inner.hub.state(
                        self.epoch(),
                        row.job_id,
                        row.tenant_id,
                        hearth_core::State::Queued,
                    );
                } else {
                    let mut conn = db.acquire().await?;
                    let f = run::lost(
                        row.cancel_requested,
                        "the job's pod was lost when the service stopped, and it has no attempts left",
                    );
                    if let Some(done) =
                        hearth_store::job::finish(&mut conn, self.epoch(), row.job_id, &f).await?
                    {
                        self.inner.metrics.job_finished(&done.profile, done.state);
                        self.inner.hub.done(done);
                    }
                    tracing::warn!(job_id = %row.job_id, "failed a job whose pod was lost");
                    continue;
                }
            }
            self.submit(&row);
        }
        for (_, held) in busy.drain() {
            self.let_go(held).await;
        }
        Ok(())
    }

    /// Queues every job the store holds queued that this leader does not:
    /// jobs other replicas accepted, found by id whatever their ids and
    /// commit order. With `cancels`, also stops the jobs whose cancellation
    /// another replica recorded.
    async fn pick_up(&self, cancels: bool) -> Result<(), hearth_store::Error> {
        {
            let mut st = self.state();
            st.pickup_wanted = false;
            st.scanning = Some(HashSet::new());
        }
        let picked = self.scan_queued().await;
        self.state().scanning = None;
        let picked = picked?;
        if picked > 0 {
            tracing::debug!(jobs = picked, "picked up jobs accepted elsewhere");
        }
        if cancels {
            for job_id in hearth_store::job::cancel_requested(&self.inner.db).await? {
                self.cancel(job_id);
            }
        }
        Ok(())
    }

    async fn scan_queued(&self) -> Result<usize, hearth_store::Error> {
        let db = &self.inner.db;
        let queued = hearth_store::job::queued_ids(db).await?;
        let missing: Vec<Uuid> = {
            let st = self.state();
            queued
                .into_iter()
                .filter(|id| !st.jobs.contains_key(id) && !st.unreadable.contains(id))
                .collect()
        };
        if missing.is_empty() {
            return Ok(0);
        }
        let read = hearth_store::job::queued_by_ids(db, &missing).await?;
        self.set_aside(read.unreadable);
        let mut actions = Vec::new();
        let mut picked = 0;
        {
            let mut st = self.state();
            for row in &read.rows {
                let ended = st
                    .scanning
                    .as_ref()
                    .is_some_and(|e| e.contains(&row.job_id));
                if ended || st.jobs.contains_key(&row.job_id) {
                    continue;
                }
                match Queued::from_row(row) {
                    Ok(job) => {
                        picked += 1;
                        self.enqueue(&mut st, job, &mut actions);
                    }
                    Err(e) => st.set_aside(row.job_id, &e),
                }
            }
        }
        self.perform(actions);
        Ok(picked)
    }

    /// Jobs whose rows the store cannot read are left where they are, out
    /// of this leader's scans, each reported once; the others are scheduled
    /// as ever.
    fn set_aside(&self, unreadable: Vec<(Uuid, sqlx::Error)>) {
        let mut st = self.state();
        for (job_id, e) in unreadable {
            st.set_aside(job_id, &e);
        }
    }

    // ---- shutting down ----------------------------------------------------------

    /// Starts a graceful shutdown: no job is taken or started any more, the
    /// running ones go on; once none runs, a leader lets its lease go (see
    /// [`Scheduler::drained`]). A replica that does not lead stops waiting
    /// for the lease.
    pub fn drain(&self) {
        self.state().draining = true;
        self.inner.wake.notify_one();
    }

    /// Resolves once no job runs here (its end recorded) after [`Scheduler::drain`].
    pub async fn drained(&self) {
        loop {
            let ended = self.inner.job_tasks_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.inner.job_tasks.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// Stops the jobs still running here at the end of a shutdown's grace
    /// period, before their pods go: their rows stay as they were last
    /// recorded, and the next leader re-queues them (see
    /// `HEARTH_MAX_ATTEMPTS`). Returns how many were stopped.
    pub fn halt(&self) -> usize {
        let aborts: Vec<_> = self
            .inner
            .aborts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, a)| a)
            .collect();
        for a in &aborts {
            a.abort();
        }
        aborts.len()
    }
}
