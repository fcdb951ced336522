//! Running one job on the pods the policy assigned it: acquire (wipe pods the
//! policy reset), bind and run through each pod's agent, stream output to the
//! hub, record the end in the store, and report the end to the pool.
//!
//! Jobs run at least once: a job whose pods are lost is re-queued while it
//! has attempts left, so its processes get the attempt number
//! (`HEARTH_ATTEMPT`, from 1) to make themselves idempotent.
//!
//! Each phase of a job's attempt is written as a span of the trace the job
//! was accepted in (`job.queue`, `job.acquire`, `job.run` with `job.bind`
//! inside it, `job.finish`; see [`crate::telemetry`]), and the job's
//! processes get the run span's context as `TRACEPARENT`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hearth_core::agent::{self, Frame, Outcome, Rank, Stream};
use hearth_core::job::Code;
use hearth_core::{ErrorCode, Source, State};
use hearth_pool::PodId;
use hearth_runtime::{Pod, client};
use hearth_store::job::{Assign, Finish, Start};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanContext;
use time::OffsetDateTime;
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::{Phase, Queued, Scheduler, writes};
use crate::telemetry::JobSpan;

/// One pod a job was assigned, in rank order.
#[derive(Debug, Clone)]
pub(super) struct Assigned {
    pub(super) pod: PodId,
    pub(super) runtime_id: String,
    /// Its address; every assigned pod is up.
    pub(super) address: Option<Pod>,
    /// The policy reset it for this job: wipe it first.
    pub(super) wipe: bool,
    /// Real GPU devices of its placement (none with accounting-only GPUs).
    pub(super) devices: Vec<u32>,
    /// Why the policy gave it.
    pub(super) why: Why,
}

/// Why the policy gave a job a pod, as the job's acquire span shows it: the
/// reason's code and its text (with the job's own caller named).
#[derive(Debug, Clone, Default)]
pub(super) struct Why {
    pub(super) code: String,
    pub(super) message: String,
}

impl Why {
    /// From a decision's reason as recorded (`code`, `message`).
    pub(super) fn of(reason: &serde_json::Value) -> Why {
        let text = |key: &str| reason[key].as_str().unwrap_or_default().to_owned();
        Why {
            code: text("code"),
            message: text("message"),
        }
    }
}

/// What a job was given.
#[derive(Debug, Clone)]
pub(super) struct Placement {
    pub(super) profile: String,
    pub(super) pods: Vec<Assigned>,
    pub(super) source: Source,
    /// How long the job waited for its pods once the policy acted for it.
    pub(super) acquire_ms: f64,
}

/// How long a job runs before its start is written on its own. A shorter
/// job's start is written with its end: one statement fewer on the path of
/// the short jobs that make up most of the load. The row says `assigned`
/// meanwhile; the job's events say `running` at once.
const START_LINGER: Duration = Duration::from_millis(20);

/// Grace the agent gets past a job's timeout before the scheduler gives up on it.
const AGENT_GRACE: Duration = Duration::from_secs(15);
/// Lines of each rank's stdout (and, apart, stderr) a job's event stream
/// carries at most; its logs keep the rest within their byte limit. Every
/// line is a stored event, however short: without a bound, a job printing
/// empty lines would write a million events per MiB of output, and every
/// tenant's events would wait behind them.
const MAX_LINE_EVENTS: usize = 10_000;

/// How a job's time on its pods ended.
pub(super) enum Ending {
    /// The job was cancelled or taken elsewhere before it was assigned here.
    NotAssigned,
    /// The job reached a final state; `pods_ok` says whether its pods may stay warm.
    Done { finish: Box<Finish>, pods_ok: bool },
    /// A pod failed to start or vanished mid-job.
    Lost(String),
}

/// The end of a job whose pods were lost for good.
pub(super) fn lost(cancelled: bool, message: &str) -> Finish {
    if cancelled {
        Finish::failed(State::Cancelled, ErrorCode::Cancelled, "cancelled")
    } else {
        Finish::failed(State::Failed, ErrorCode::PodLost, message)
    }
}

pub(super) fn failed(code: ErrorCode, message: String) -> Finish {
    Finish::failed(State::Failed, code, message)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A stream's output: a head kept on the job row and a longer, bounded copy.
#[derive(Default)]
struct Log {
    head: String,
    full: String,
    head_cut: bool,
    full_cut: bool,
}

/// Postgres `text` cannot hold NUL; a job printing one must not be able to
/// keep its own end from being stored.
fn storable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}").into()
    } else {
        text.into()
    }
}

impl Log {
    /// Keeps `line` within the limits; returns whether the full copy kept it
    /// (what the job's event stream may show too).
    fn push(&mut self, line: &str, head_max: usize, full_max: usize) -> bool {
        let line = &*storable(line);
        for (buf, max, cut) in [
            (&mut self.head, head_max, &mut self.head_cut),
            (&mut self.full, full_max, &mut self.full_cut),
        ] {
            if *cut {
                continue;
            }
            if buf.len() + line.len() + 1 > max {
                // What fits of the line that overflows: a first line longer
                // than the head still shows its start.
                buf.push_str(&line[..line.floor_char_boundary(max.saturating_sub(buf.len()))]);
                *cut = true;
            } else {
                buf.push_str(line);
                buf.push('\n');
            }
        }
        !self.full_cut
    }
}

/// How a job's exchange with its pods begins.
pub(super) enum Begin {
    /// Bind and run it, with these files.
    Run(BTreeMap<String, String>),
    /// Re-attach to the run an earlier leader started (see [`Resume`]).
    Attach(Resume),
}

/// What a new leader knows of a run it re-attaches to: the agent replays
/// the run from its start, so the job's logs are rebuilt whole; what the
/// job's event stream already holds is not announced again.
#[derive(Debug, Default)]
pub(super) struct Resume {
    /// The job's start was recorded already.
    pub(super) running: bool,
    /// When it started, as recorded: its time runs from then.
    pub(super) started_at: Option<SystemTime>,
    /// Output lines of this attempt already among the job's events, per
    /// rank and stream.
    pub(super) shown: std::collections::HashMap<(u32, Stream), usize>,
}

/// How a job came to its pods, for running it.
pub(super) struct Handover {
    /// This run's attempt, from 1.
    pub(super) attempt: i32,
    pub(super) queued_ms: f64,
    pub(super) acquire_ms: f64,
}

/// Frames of every rank, as they come.
type RankFrame = (u32, Result<Frame, hearth_runtime::Error>);

impl Scheduler {
    pub(super) async fn run_job(self, job: Queued, placement: Placement) {
        let job_id = job.job_id;
        let cancel = self.cancel_signal(job_id);
        let ending = self.execute(&job, &placement, &cancel).await;
        let _kept = self.ended(job, &placement, ending).await;
    }

    /// Records how a job's time on its pods ended, and gives its pods back
    /// to its pool; true when they may serve again (not dropped).
    pub(super) async fn ended(&self, job: Queued, placement: &Placement, ending: Ending) -> bool {
        let job_id = job.job_id;
        match ending {
            Ending::NotAssigned => {
                self.finished(job_id);
                // Cancelled elsewhere: tell watchers the final state.
                if let Ok(Some(row)) =
                    hearth_store::job::get(&self.inner.db, job.tenant_id, job_id).await
                    && row.state.is_terminal()
                {
                    self.inner
                        .metrics
                        .job_finished(&placement.profile, row.state);
                    self.inner.hub.done(row);
                }
                true
            }
            Ending::Done { finish, pods_ok } => {
                if !pods_ok {
                    self.drop_pods(placement, "a rank was lost while the job was cancelled")
                        .await;
                }
                // The pods are warm again before anyone learns the job ended,
                // so the caller's next job finds them.
                self.finished(job_id);
                self.record_end(&job, *finish).await;
                pods_ok
            }
            Ending::Lost(reason) => {
                tracing::warn!(%job_id, %reason, "pod lost");
                self.drop_pods(placement, &reason).await;
                let max = self.inner.settings.max_attempts as i32;
                match hearth_store::job::requeue(&self.inner.relaxed, self.epoch(), job_id, max)
                    .await
                {
                    Ok(true) => {
                        self.inner
                            .hub
                            .state(self.epoch(), job_id, job.tenant_id, State::Queued);
                        self.finished(job_id);
                        self.resubmit(Queued {
                            queued_at: SystemTime::now(),
                            ..job
                        });
                        return false;
                    }
                    Ok(false) => {}
                    Err(e) => tracing::error!(%job_id, error = %e, "re-queueing failed"),
                }
                self.finished(job_id);
                let cancelled = matches!(
                    hearth_store::job::get(&self.inner.db, job.tenant_id, job_id).await,
                    Ok(Some(row)) if row.cancel_requested
                );
                self.record_end(&job, lost(cancelled, &reason)).await;
                false
            }
        }
    }

    /// Stops a job's pods that can no longer be trusted, and reports them gone
    /// once they are.
    pub(super) async fn drop_pods(&self, placement: &Placement, why: &str) {
        {
            let mut st = self.state();
            if let Some(pp) = st.pools.get_mut(&placement.profile) {
                for a in &placement.pods {
                    if let Some(slot) = pp.slots.get_mut(&a.pod) {
                        slot.phase = Phase::Draining;
                    }
                }
            }
        }
        let stops = placement.pods.iter().map(|a| async move {
            if let Err(e) = self.inner.runtime.stop_pod(&a.runtime_id).await {
                tracing::warn!(pod_id = %a.runtime_id, error = %e, "stopping pod failed");
            }
        });
        futures::future::join_all(stops).await;
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            for a in &placement.pods {
                self.pod_gone(
                    &mut st,
                    &placement.profile,
                    a.pod,
                    serde_json::json!({"code": "lost", "message": why}),
                    &mut actions,
                );
            }
        }
        self.perform(actions);
    }

    pub(super) async fn record_end(&self, job: &Queued, finish: Finish) {
        let started = SystemTime::now();
        // Whoever sees the end finds every event of the job stored.
        self.inner.hub.flush(job.job_id).await;
        let db = &self.inner.db;
        let mut finish = Arc::new(finish);
        let mut attempt = 0;
        let row = loop {
            attempt += 1;
            match super::writes::store_end(&self.inner.ends, db, self.epoch(), job.job_id, &finish)
                .await
            {
                Ok(Some(row)) => break Some(row),
                // Already final (cancelled while queued): report what is stored.
                Ok(None) => {
                    break hearth_store::job::get(db, job.tenant_id, job.job_id)
                        .await
                        .ok()
                        .flatten();
                }
                Err(e) if attempt < 4 => {
                    tracing::warn!(job_id = %job.job_id, error = %e, attempt, "recording the end of a job failed; retrying");
                    if attempt == 2 {
                        // Whatever the job produced may be what the database
                        // refuses: keep the verdict, drop the payload.
                        finish = Arc::new(Finish {
                            exit_code: finish.exit_code,
                            run_ms: finish.run_ms,
                            ..Finish::failed(
                                State::Failed,
                                ErrorCode::ResultUnstorable,
                                "the job's result could not be stored",
                            )
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                Err(e) => {
                    // The job stays unfinished in the store; the next leader
                    // re-queues or fails it. Nothing accepted is lost.
                    tracing::error!(job_id = %job.job_id, error = %e, "recording the end of a job failed");
                    break None;
                }
            }
        };
        // As stored: a job cancelled meanwhile ended as the store has it.
        let (state, code) = match &row {
            Some(r) => (r.state, r.error_code),
            None => (finish.state, finish.error_code),
        };
        let mut span = self.job_span(job, "job.finish", None, started, None, |a| {
            a.push(KeyValue::new("hearth.job.state", state.as_str()));
            if let Some(code) = code {
                a.push(KeyValue::new("hearth.job.error_code", code.as_str()));
            }
        });
        if let Some(row) = row {
            tracing::info!(job_id = %job.job_id, state = %row.state, "job finished");
            self.inner.metrics.job_finished(&row.profile, row.state);
            self.inner.hub.done(row);
        } else {
            span.fail("the end of the job could not be recorded");
        }
    }

    /// Starts span `name` of `job`'s life at `start`, a child of `parent`
    /// (by default the trace context the job was accepted in), with the
    /// job's attributes and those `more` adds. Nothing when spans are not
    /// exported or the job has no trace.
    fn job_span(
        &self,
        job: &Queued,
        name: &'static str,
        parent: Option<&SpanContext>,
        start: SystemTime,
        attempt: Option<i32>,
        more: impl FnOnce(&mut Vec<KeyValue>),
    ) -> JobSpan {
        let parent = parent.or_else(|| job.trace.as_ref().map(|t| t.span_context()));
        self.inner.settings.tracer.start(name, parent, start, || {
            let mut a = vec![
                KeyValue::new("hearth.job.id", job.job_id.to_string()),
                KeyValue::new("hearth.tenant.id", job.tenant_id.to_string()),
            ];
            if let Some(n) = attempt {
                a.push(KeyValue::new("hearth.job.attempt", i64::from(n)));
            }
            more(&mut a);
            a
        })
    }

    async fn execute(&self, job: &Queued, placement: &Placement, cancel: &Notify) -> Ending {
        let db = &self.inner.db;
        let spec = &job.spec;
        let waited_ms =
            ((OffsetDateTime::now_utc() - job.accepted_at).as_seconds_f64() * 1000.0).max(0.0);
        let queued_ms = (waited_ms - placement.acquire_ms).max(0.0);
        let pod_ids: Vec<String> = placement
            .pods
            .iter()
            .map(|a| a.runtime_id.clone())
            .collect();
        let assignment = writes::Assignment {
            epoch: self.epoch(),
            assign: Assign {
                job_id: job.job_id,
                source: placement.source,
                pods: pod_ids,
                queued_ms,
            },
        };
        let attempt = match self.inner.assignments.write(assignment).await {
            Ok(Some(attempt)) => attempt,
            Ok(None) => return Ending::NotAssigned,
            Err(e) => return Ending::Lost(format!("recording the assignment failed: {e}")),
        };
        // The policy first acted for the job `acquire_ms` ago: it waited in
        // the queue until then, and for its pods since.
        let now = SystemTime::now();
        let covered_at = now
            .checked_sub(Duration::from_secs_f64(placement.acquire_ms / 1000.0))
            .unwrap_or(now);
        let queued_at = job.queued_at.min(covered_at);
        self.job_span(job, "job.queue", None, queued_at, Some(attempt), |_| {})
            .end_at(covered_at);
        let mut acquire_span =
            self.job_span(job, "job.acquire", None, covered_at, Some(attempt), |a| {
                a.push(KeyValue::new(
                    "hearth.pod.source",
                    placement.source.as_str(),
                ));
                if let Some(first) = placement.pods.first() {
                    a.push(KeyValue::new("hearth.pod.id", first.runtime_id.clone()));
                    a.push(KeyValue::new("hearth.pod.reason", first.why.code.clone()));
                    a.push(KeyValue::new(
                        "hearth.pod.reason_message",
                        first.why.message.clone(),
                    ));
                }
                if placement.pods.len() > 1 {
                    let ids: Vec<opentelemetry::StringValue> = placement
                        .pods
                        .iter()
                        .map(|p| p.runtime_id.clone().into())
                        .collect();
                    a.push(KeyValue::new(
                        "hearth.pod.ids",
                        opentelemetry::Value::Array(ids.into()),
                    ));
                }
                a.push(KeyValue::new(
                    "hearth.pod.wiped",
                    placement.pods.iter().any(|p| p.wipe),
                ));
            });
        self.inner
            .hub
            .state(self.epoch(), job.job_id, job.tenant_id, State::Assigned);

        let files = match &spec.code {
            Code::Files(files) => files.clone(),
            Code::Bundle(digest) => {
                match hearth_store::bundle::files(db, job.tenant_id, digest).await {
                    Ok(Some(v)) => match serde_json::from_value::<BTreeMap<String, String>>(v) {
                        Ok(files) => files,
                        Err(e) => {
                            return Ending::Done {
                                finish: Box::new(failed(
                                    ErrorCode::UnknownBundle,
                                    format!("bundle unreadable: {e}"),
                                )),
                                pods_ok: true,
                            };
                        }
                    },
                    Ok(None) => {
                        return Ending::Done {
                            finish: Box::new(failed(
                                ErrorCode::UnknownBundle,
                                format!("bundle {digest} not found"),
                            )),
                            pods_ok: true,
                        };
                    }
                    Err(e) => return Ending::Lost(format!("loading the bundle failed: {e}")),
                }
            }
        };

        let acquire_start = Instant::now();
        let pods = tokio::select! {
            pods = self.acquire(placement) => match pods {
                Ok(pods) => pods,
                Err(reason) => {
                    acquire_span.fail(reason.clone());
                    return Ending::Lost(reason);
                }
            },
            () = cancel.notified() => {
                acquire_span.set("hearth.job.cancelled", true);
                return Ending::Done { finish: Box::new(cancelled(None, None)), pods_ok: true };
            }
        };
        acquire_span.end_at(SystemTime::now());
        let acquire_ms = placement.acquire_ms + ms(acquire_start.elapsed());
        let handover = Handover {
            attempt,
            queued_ms,
            acquire_ms,
        };
        self.exchange(job, placement, &pods, Begin::Run(files), handover, cancel)
            .await
    }

    /// The placement's pods in rank order, once the pods the policy reset
    /// are wiped (all together).
    async fn acquire(&self, placement: &Placement) -> Result<Vec<Pod>, String> {
        let epoch = self.epoch() as u64;
        let ready = placement.pods.iter().map(|a| async move {
            let pod = a
                .address
                .clone()
                .ok_or_else(|| format!("pod {} has no address", a.runtime_id))?;
            if a.wipe {
                client::wipe(&pod.address, pod.token.as_deref(), epoch)
                    .await
                    .map_err(|e| format!("pod {}: wipe failed: {e}", a.runtime_id))?;
            }
            Ok::<_, String>(pod)
        });
        futures::future::join_all(ready).await.into_iter().collect()
    }

    pub(super) async fn exchange(
        &self,
        job: &Queued,
        placement: &Placement,
        pods: &[Pod],
        begin: Begin,
        handover: Handover,
        cancel: &Notify,
    ) -> Ending {
        let Handover {
            attempt,
            queued_ms,
            acquire_ms,
        } = handover;
        let spec = &job.spec;
        let settings = &self.inner.settings;
        let world = pods.len() as u32;
        let (files, mut resume) = match begin {
            Begin::Run(files) => (Some(files), None),
            Begin::Attach(resume) => (None, Some(resume)),
        };
        let topology = topology(spec.topology.is_some() && files.is_some(), pods);
        let (frames_tx, mut frames) = mpsc::channel::<RankFrame>(256);
        let (cancel_tx, cancel_rx) = watch::channel(false);
        // The agent binds (files, dependencies) and then runs the command:
        // `job.run` spans both, `job.bind` the first part. The processes
        // continue the run span (or, without export here, the stored trace).
        let sent_at = SystemTime::now();
        let mut run_span = self.job_span(job, "job.run", None, sent_at, Some(attempt), |a| {
            a.push(KeyValue::new("hearth.job.world_size", i64::from(world)));
        });
        let run_cx = run_span.context();
        let mut bind_span = Some(self.job_span(
            job,
            "job.bind",
            run_cx.as_ref(),
            sent_at,
            Some(attempt),
            |_| {},
        ));
        let traceparent = run_cx.as_ref().map(crate::telemetry::header).or_else(|| {
            job.trace
                .as_ref()
                .map(crate::telemetry::TraceParent::header)
        });
        for (rank, pod) in pods.iter().enumerate() {
            let mut env = spec.env.clone();
            // Hearth's, over any value of the job's own environment.
            env.insert("HEARTH_ATTEMPT".to_owned(), attempt.to_string());
            if let Some(tp) = &traceparent {
                env.insert("TRACEPARENT".to_owned(), tp.clone());
            }
            // The pod's devices as its placement has them now (a promoted
            // standby pod may have grown onto more GPUs than it started with).
            if let Some(a) = placement.pods.get(rank)
                && !a.devices.is_empty()
            {
                let devices: Vec<String> = a.devices.iter().map(u32::to_string).collect();
                env.insert("CUDA_VISIBLE_DEVICES".to_owned(), devices.join(","));
            }
            let Some(files) = &files else {
                tokio::spawn(relay(
                    rank as u32,
                    pod.clone(),
                    self.epoch(),
                    Open::Attach(job.job_id.to_string()),
                    frames_tx.clone(),
                    cancel_rx.clone(),
                ));
                continue;
            };
            let run = agent::Run {
                job_id: job.job_id.to_string(),
                // Tenant and caller: whose binding the pod holds after it.
                caller: Some(format!("{}/{}", job.tenant_id, spec.caller)),
                files: files.clone(),
                command: spec.command.clone(),
                deps: spec.deps.clone(),
                input: spec.input.clone(),
                env,
                timeout_ms: u64::from(spec.timeout_s) * 1000,
                topology: topology.as_ref().map(|t| t[rank].clone()),
                max_log_bytes: settings.max_log_bytes,
                detach_grace_ms: u64::try_from(settings.reattach_grace.as_millis())
                    .unwrap_or(u64::MAX),
            };
            tokio::spawn(relay(
                rank as u32,
                pod.clone(),
                self.epoch(),
                Open::Run(Box::new(run)),
                frames_tx.clone(),
                cancel_rx.clone(),
            ));
        }
        drop(frames_tx);

        // A run re-attached to has used part of its time already (its agent
        // counts from its own start).
        let timeout = Duration::from_secs(spec.timeout_s.into());
        let started_at = resume.as_ref().and_then(|r| r.started_at);
        let left = time_left(timeout, started_at, SystemTime::now());
        let deadline = tokio::time::Instant::now() + left + AGENT_GRACE;
        let head_max = settings.job_output_bytes;
        let full_max = settings.max_log_bytes as usize;
        let (mut out, mut err) = (Log::default(), Log::default());
        // Lines kept per rank and stream, to bound the event stream.
        let mut kept_lines: HashMap<(u32, Stream), usize> = HashMap::new();
        let (mut truncated_out, mut truncated_err) = (false, false);
        let mut bound = 0u32;
        let mut bind_ms = 0f64;
        let mut exits: Vec<Option<Frame>> = vec![None; pods.len()];
        let mut agent_error: Option<(ErrorCode, String, String)> = None;
        let mut was_cancelled = false;
        // The start's write, once every rank is bound: when it started, and
        // what skips the write if the job ends first.
        let mut recording_start: Option<(
            Instant,
            oneshot::Sender<()>,
            tokio::task::JoinHandle<()>,
        )> = None;
        let mut lost_reason: Option<String> = None;
        let stop_all = |why: &str, tx: &watch::Sender<bool>| {
            tracing::debug!(job_id = %job.job_id, why, "stopping all ranks");
            let _ = tx.send(true);
        };

        loop {
            tokio::select! {
                next = frames.recv() => {
                    let Some((rank, frame)) = next else { break };
                    let frame = match frame {
                        Ok(f) => f,
                        Err(e) => {
                            lost_reason.get_or_insert_with(|| format!("rank {rank}: {e}"));
                            stop_all("a rank was lost", &cancel_tx);
                            continue;
                        }
                    };
                    match frame {
                        Frame::Bound { bind_ms: b, .. } => {
                            bound += 1;
                            bind_ms = bind_ms.max(b);
                            if bound == world {
                                if let Some(mut span) = bind_span.take() {
                                    span.set("hearth.job.bind_ms", bind_ms);
                                    span.end_at(SystemTime::now());
                                }
                                if resume.as_ref().is_some_and(|r| r.running) {
                                    // Recorded by the leader that started it.
                                    continue;
                                }
                                let start_s = (queued_ms + acquire_ms + bind_ms) / 1000.0;
                                // The exemplar leads from a slow bucket to a trace that was kept.
                                let trace = job.trace.as_ref().filter(|t| t.is_sampled()).map(|t| t.trace_id());
                                self.inner.metrics.job_started(&placement.profile, placement.source, start_s, trace);
                                // The job's events say it runs before its
                                // first line (its end waits for its events).
                                let alone = self.state().jobs.len() <= 1;
                                self.inner.hub.running(self.epoch(), job.job_id, job.tenant_id, alone);
                                // Off the frame loop: the job's lines and end
                                // need not wait for the row; the end waits
                                // for it below, so states stay in order. A
                                // job that ends within START_LINGER has its
                                // start written with its end instead.
                                let (this, job_id) = (self.clone(), job.job_id);
                                let (skip, skipped) = oneshot::channel::<()>();
                                recording_start = Some((Instant::now(), skip, tokio::spawn(async move {
                                    tokio::select! {
                                        _ = skipped => return,
                                        () = tokio::time::sleep(START_LINGER) => {}
                                    }
                                    let start = writes::Started { epoch: this.epoch(), start: Start { job_id, acquire_ms, bind_ms } };
                                    if let Err(e) = this.inner.starts.write(start).await {
                                        tracing::error!(%job_id, error = %e, "recording the start failed");
                                    }
                                })));
                            }
                        }
                        Frame::Line { stream, line } => {
                            let shown = if world > 1 && rank > 0 { format!("[rank {rank}] {line}") } else { line.clone() };
                            let kept = match stream {
                                Stream::Stdout => out.push(&shown, head_max, full_max),
                                Stream::Stderr => err.push(&shown, head_max, full_max),
                            };
                            // The event stream shows what the logs keep,
                            // once: lines an earlier leader stored are not
                            // announced again.
                            let shown = resume
                                .as_mut()
                                .and_then(|r| r.shown.get_mut(&(rank, stream)))
                                .filter(|n| **n > 0)
                                .map(|n| *n -= 1)
                                .is_some();
                            let counted = kept_lines.entry((rank, stream)).or_default();
                            *counted += usize::from(kept);
                            if kept && !shown && *counted <= MAX_LINE_EVENTS {
                                let line = storable(&line).into_owned();
                                self.inner.hub.line(self.epoch(), job.job_id, job.tenant_id, stream, rank, line);
                            }
                        }
                        Frame::Truncated { stream: Stream::Stdout } => truncated_out = true,
                        Frame::Truncated { stream: Stream::Stderr } => truncated_err = true,
                        Frame::Error { code, message, log } => {
                            tracing::debug!(job_id = %job.job_id, rank, %code, %message, "the agent refused the job");
                            if let Some(span) = &mut bind_span {
                                span.fail(code.as_str());
                            }
                            agent_error.get_or_insert((code, message, log));
                            stop_all("a rank failed to bind", &cancel_tx);
                        }
                        f @ Frame::Exit { .. } => {
                            let failed_rank = !matches!(f, Frame::Exit { outcome: Outcome::Exited, exit_code: Some(0), .. });
                            exits[rank as usize] = Some(f);
                            if failed_rank && world > 1 {
                                stop_all("a rank failed", &cancel_tx);
                            }
                        }
                        Frame::Pong { .. } | Frame::Wiped | Frame::Status { .. } => {}
                    }
                }
                () = cancel.notified(), if !was_cancelled => {
                    was_cancelled = true;
                    stop_all("cancelled", &cancel_tx);
                }
                () = tokio::time::sleep_until(deadline) => {
                    lost_reason.get_or_insert_with(|| "the agent did not end the job within its timeout".to_owned());
                    break;
                }
            }
        }

        let started_ms_ago = match recording_start {
            Some((at, skip, task)) => {
                let _ = skip.send(());
                let _ = task.await;
                Some(ms(at.elapsed()))
            }
            None => None,
        };
        if let Some(reason) = lost_reason {
            if was_cancelled {
                run_span.set("hearth.job.state", State::Cancelled.as_str());
                return Ending::Done {
                    finish: Box::new(Finish {
                        started_ms_ago,
                        ..cancelled(Some(acquire_ms), Some(bind_ms))
                    }),
                    pods_ok: false,
                };
            }
            run_span.fail(reason.clone());
            return Ending::Lost(reason);
        }

        let full_logs =
            (out.head_cut || err.head_cut).then(|| (out.full.clone(), err.full.clone()));
        // What the job printed, whichever way it ended.
        let ran = move |state: State| Finish {
            stdout_truncated: truncated_out || out.head_cut,
            stderr_truncated: truncated_err || err.head_cut,
            stdout: out.head,
            stderr: err.head,
            full_logs,
            acquire_ms: Some(acquire_ms),
            bind_ms: Some(bind_ms),
            started_ms_ago,
            ..Finish::new(state)
        };
        if let Some((code, message, log)) = agent_error {
            let mut finish = ran(State::Failed);
            if !log.is_empty() {
                finish.stderr.push_str(&storable(&log));
            }
            finish.error_code = Some(code);
            finish.error_message = Some(storable(&message).into_owned());
            run_span.set("hearth.job.state", State::Failed.as_str());
            run_span.fail(code.as_str());
            return Ending::Done {
                finish: Box::new(finish),
                pods_ok: true,
            };
        }

        let mut finish = ran(State::Succeeded);
        let mut run_ms = 0f64;
        let mut state = State::Succeeded;
        for exit in exits.iter().flatten() {
            if let Frame::Exit {
                outcome,
                exit_code,
                run_ms: r,
                ..
            } = exit
            {
                run_ms = run_ms.max(*r);
                let rank_state = match outcome {
                    Outcome::TimedOut => State::TimedOut,
                    Outcome::Cancelled => State::Cancelled,
                    Outcome::Exited if *exit_code == Some(0) => State::Succeeded,
                    Outcome::Exited => State::Failed,
                };
                // The most telling end wins: timeout, then failure, then cancel.
                state = match (state, rank_state) {
                    (State::TimedOut, _) | (_, State::TimedOut) => State::TimedOut,
                    (State::Failed, _) | (_, State::Failed) if !was_cancelled => State::Failed,
                    (_, State::Cancelled) | (State::Cancelled, _) => State::Cancelled,
                    (s, _) => s,
                };
                if finish.exit_code.is_none()
                    || exit_code.is_some_and(|c| c != 0) && finish.exit_code == Some(0)
                {
                    finish.exit_code = *exit_code;
                }
            }
        }
        if was_cancelled {
            state = State::Cancelled;
        }
        finish.run_ms = Some(run_ms);
        if let Some(Frame::Exit {
            output,
            output_error,
            ..
        }) = &exits[0]
        {
            let refused = output
                .as_ref()
                .and_then(hearth_core::validate::json_refused);
            let output_error = output_error.clone().or_else(|| refused.clone());
            if refused.is_none() {
                finish.output.clone_from(output);
            }
            if let (State::Succeeded, Some(e)) = (state, output_error) {
                state = State::Failed;
                finish.error_code = Some(ErrorCode::InvalidOutput);
                finish.error_message = Some(format!("${}: {e}", agent::OUTPUT_ENV));
            }
        }
        match state {
            State::TimedOut => {
                finish.error_code = Some(ErrorCode::TimedOut);
                finish.error_message = Some(format!(
                    "the job ran past its timeout of {} s",
                    spec.timeout_s
                ));
            }
            State::Cancelled => {
                finish.error_code = Some(ErrorCode::Cancelled);
                finish.error_message = Some("cancelled while running".to_owned());
            }
            State::Failed if finish.error_code.is_none() => {
                finish.error_code = Some(ErrorCode::NonzeroExit);
                finish.error_message = Some(exit_message(finish.exit_code));
            }
            _ => {}
        }
        finish.state = state;
        run_span.set("hearth.job.state", state.as_str());
        if let Some(code) = finish.exit_code {
            run_span.set("hearth.job.exit_code", i64::from(code));
        }
        if matches!(state, State::Failed | State::TimedOut) {
            run_span.fail(finish.error_code.map_or("", ErrorCode::as_str));
        }
        run_span.end_at(SystemTime::now());
        Ending::Done {
            finish: Box::new(finish),
            pods_ok: true,
        }
    }
}

fn cancelled(acquire_ms: Option<f64>, bind_ms: Option<f64>) -> Finish {
    Finish {
        acquire_ms,
        bind_ms,
        ..Finish::failed(
            State::Cancelled,
            ErrorCode::Cancelled,
            "cancelled while running",
        )
    }
}

/// Topology of a gang: each rank gets a port on its pod's peer host, rank 0's
/// is the master. Ports are taken free on this host, which is where local
/// pods' peers live; Kubernetes pods have their own network namespace, where
/// any port is free.
fn topology(gang: bool, pods: &[Pod]) -> Option<Vec<Rank>> {
    if !gang {
        return None;
    }
    let ports: Vec<u16> = pods
        .iter()
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_or(29500, |a| a.port())
        })
        .collect();
    let peers: Vec<String> = pods
        .iter()
        .zip(&ports)
        .map(|(p, port)| format!("{}:{port}", p.peer_host))
        .collect();
    Some(
        (0..pods.len())
            .map(|rank| Rank {
                rank: rank as u32,
                world_size: pods.len() as u32,
                peers: peers.clone(),
                master_addr: pods[0].peer_host.clone(),
                master_port: ports[0],
            })
            .collect(),
    )
}

/// What is left of a job's `timeout` at `now`: all of it until it started,
/// none once it is spent (a clock that went back leaves all of it).
fn time_left(timeout: Duration, started_at: Option<SystemTime>, now: SystemTime) -> Duration {
    let used = started_at
        .and_then(|t| now.duration_since(t).ok())
        .unwrap_or_default();
    timeout.saturating_sub(used)
}

/// How a rank's exchange opens: a new run, or an attach to job's run.
enum Open {
    Run(Box<agent::Run>),
    Attach(String),
}

/// Runs one rank: opens the exchange, forwards its frames, and passes a cancel
/// on. Ends after the final frame.
async fn relay(
    rank: u32,
    pod: Pod,
    epoch: i64,
    open: Open,
    frames: mpsc::Sender<RankFrame>,
    mut cancel: watch::Receiver<bool>,
) {
    let (address, token) = (&pod.address, pod.token.as_deref());
    let opened = match open {
        Open::Run(run) => client::run(address, token, epoch as u64, *run).await,
        Open::Attach(job_id) => client::attach(address, token, epoch as u64, &job_id).await,
    };
    let mut exchange = match opened {
        Ok(x) => x,
        Err(e) => {
            let _ = frames.send((rank, Err(e))).await;
            return;
        }
    };
    let mut cancel_sent = false;
    loop {
        tokio::select! {
            frame = exchange.next() => {
                let last = frame.as_ref().map_or(true, Frame::is_final);
                if frames.send((rank, frame)).await.is_err() || last {
                    return;
                }
            }
            changed = cancel.changed(), if !cancel_sent => {
                if changed.is_ok() && *cancel.borrow() {
                    cancel_sent = true;
                    if let Err(e) = exchange.cancel().await {
                        let _ = frames.send((rank, Err(e))).await;
                        return;
                    }
                } else if changed.is_err() {
                    cancel_sent = true;
                }
            }
        }
    }
}

/// Why a command that failed by itself ended, as a shell reports it (codes
/// above 128 are deaths by signal 128 + N).
fn exit_message(code: Option<i32>) -> String {
    match code {
        Some(137) => "the command was killed (SIGKILL, exit code 137): the pod's memory limit, \
                      or a kill inside the sandbox"
            .to_owned(),
        Some(c) if c > 128 && c < 128 + 65 => {
            format!(
                "the command was killed by signal {} (exit code {c})",
                c - 128
            )
        }
        Some(c) => format!("the command exited with code {c}"),
        None => "the command ended without an exit code".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{exit_message, time_left};

    #[test]
    fn a_resumed_job_has_what_is_left_of_its_time() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let minute = Duration::from_secs(60);
        assert_eq!(time_left(minute, None, t0), minute);
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(time_left(minute, Some(t0), at(45)), Duration::from_secs(15));
        assert_eq!(time_left(minute, Some(t0), at(90)), Duration::ZERO);
        assert_eq!(
            time_left(minute, Some(at(5)), t0),
            minute,
            "clock went back"
        );
    }

    #[test]
    fn exit_messages_read_like_a_shells() {
        assert_eq!(exit_message(Some(3)), "the command exited with code 3");
        assert!(exit_message(Some(137)).contains("memory limit"));
        assert_eq!(
            exit_message(Some(143)),
            "the command was killed by signal 15 (exit code 143)"
        );
        assert_eq!(exit_message(Some(255)), "the command exited with code 255");
    }
}
