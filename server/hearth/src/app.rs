//! The service: shared state, the HTTP router and `serve`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hearth_core::Profile;
use hearth_core::validate::Limits;
use hearth_runtime::Runtime;
use hearth_runtime::local::{LocalConfig, LocalRuntime};
use sqlx::PgPool;
use tokio::net::TcpListener;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::control::Control;
use crate::http::jobs::Accepts;
use crate::hub::Hub;
use crate::metrics::Metrics;
use crate::replica::Replica;
use crate::scheduler::{Gpus, Scheduler, Settings};

/// Everything a handler needs; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

#[derive(Debug)]
pub struct Shared {
    pub config: Config,
    pub db: PgPool,
    pub profiles: Arc<BTreeMap<String, Profile>>,
    pub limits: Limits,
    pub auth: Authenticator,
    pub runtime: Arc<dyn Runtime>,
    pub hub: Arc<Hub>,
    pub scheduler: Scheduler,
    pub metrics: Arc<Metrics>,
    /// The group commit of accepted jobs.
    pub(crate) accepts: Accepts,
    /// The same on the relaxed pool, for jobs whose submitter waits for
    /// their end (see [`crate::http::jobs`]).
    pub(crate) waited_accepts: Accepts,
    /// The pools' GPU inventory.
    pub gpus: Gpus,
    /// The control endpoint's engine.
    pub control: Arc<Control>,
}

impl Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The local runtime as configured.
pub fn local_runtime(config: &Config) -> anyhow::Result<LocalRuntime> {
    let agent_bin = match &config.agent_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("hearth-agent"),
    };
    anyhow::ensure!(
        agent_bin.is_file(),
        "agent binary {} not found: build it (`cargo build --bins`) or set HEARTH_AGENT_BIN",
        agent_bin.display()
    );
    Ok(LocalRuntime::new(LocalConfig {
        state_dir: config.state_dir.clone(),
        agent_bin,
        wheelhouse: config.wheelhouse.clone(),
        python: config.python.clone(),
        start_timeout: Duration::from_secs(config.pod_start_timeout_s),
        job_user: config.job_user.0,
    })?)
}

/// The runtime `config` selects (`--runtime`).
pub async fn runtime(config: &Config) -> anyhow::Result<Arc<dyn Runtime>> {
    match config.runtime {
        crate::config::RuntimeKind::Local => Ok(Arc::new(local_runtime(config)?)),
        crate::config::RuntimeKind::Kubernetes => Ok(Arc::new(kube_runtime(config).await?)),
    }
}

/// The Kubernetes runtime as configured: in-cluster configuration or
/// `KUBECONFIG`.
pub async fn kube_runtime(config: &Config) -> anyhow::Result<hearth_kube::KubeRuntime> {
    use secrecy::ExposeSecret;
    let secret = config.install_secret.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "--runtime kubernetes needs HEARTH_INSTALL_SECRET (pod tokens derive from it)"
        )
    })?;
    anyhow::ensure!(
        secret.expose_secret().len() >= 16,
        "HEARTH_INSTALL_SECRET must be at least 16 bytes"
    );
    let client = hearth_kube::kube::Client::try_default()
        .await
        .map_err(|e| anyhow::anyhow!("kubernetes client (in-cluster or KUBECONFIG): {e}"))?;
    let namespace = config
        .kube_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let mut cfg = hearth_kube::KubeConfig::new(
        &namespace,
        &config.kube_install,
        hearth_kube::InstallSecret::new(secret.expose_secret().as_bytes()),
    );
    cfg.template.agent_port = config.kube_agent_port;
    if let Some(path) = &config.kube_profiles {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        cfg.template.settings =
            serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    // The runtime's own deadline comes first, so a slow start fails with
    // the pod's reason rather than the scheduler's timeout.
    cfg.start_timeout = Duration::from_secs(config.pod_start_timeout_s.saturating_sub(1).max(1));
    cfg.unschedulable_timeout = Duration::from_secs(config.kube_unschedulable_timeout_s);
    Ok(hearth_kube::KubeRuntime::new(client, cfg)?)
}

/// A running service.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    pub state: AppState,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
    pub scheduler: tokio::task::JoinHandle<()>,
    /// The control endpoint's periodic session snapshots.
    pub snapshots: tokio::task::JoinHandle<()>,
    /// Cleared to stop accepting connections (see [`Running::stop_accepting`]).
    accepting: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// Stops accepting connections and closes idle ones; requests in flight
    /// go on, and [`Running::server`] ends once the last one is answered.
    pub fn stop_accepting(&self) {
        self.accepting.send_replace(false);
    }

    /// Stops serving and scheduling (the process's pods stay until the runtime
    /// is dropped or the next start removes them). Control sessions changed
    /// since the last periodic snapshot are not written: see [`Running::shutdown`].
    pub fn abort(&self) {
        self.server.abort();
        self.scheduler.abort();
        self.snapshots.abort();
    }

    /// Stops like [`Running::abort`], then runs the control events still
    /// queued and writes every changed control session to the store.
    ///
    /// # Errors
    /// The final snapshot could not be written.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        self.abort();
        let n = self.state.control.shutdown(&self.state.db).await?;
        tracing::info!(sessions = n, "control sessions written");
        Ok(())
    }
}

/// Connects, migrates, starts the scheduler and serves HTTP on the configured
/// address (port 0 picks a free one).
pub async fn start(config: Config, runtime: Arc<dyn Runtime>) -> anyhow::Result<Running> {
    if let Some(dir) = &config.console_dir {
        crate::console::check(dir)?;
    }
    let profiles: BTreeMap<String, Profile> = config
        .load_profiles()?
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
    let profiles = Arc::new(profiles);
    let pools = config.db_pools()?;
    let replica = Replica::new();
    tracing::info!(replica_id = %replica.id, "replica id");
    // Every connection carries the replica's name, so the other replicas
    // see this one in the store (see `crate::replica`).
    let options = config
        .database_url
        .parse::<sqlx::postgres::PgConnectOptions>()?
        .application_name(&replica.pool_name());
    let db = hearth_store::connect_with(options.clone(), true, pools.main).await?;
    for m in runtime.mechanisms().iter().filter(|m| !m.available) {
        tracing::warn!(mechanism = %m.name, detail = %m.detail, "isolation mechanism unavailable");
    }
    let relaxed = hearth_store::connect_relaxed_with(options.clone(), pools.relaxed).await?;
    let writers = hearth_store::connect_writers_with(options, pools.writers).await?;
    let hub = Arc::new(Hub::default());
    let gpus = Gpus::detect(config.gpus);
    tracing::info!(gpus = gpus.count, kind = gpus.label(), "GPU inventory");
    let metrics = Arc::new(Metrics::default());
    let waited_accepts = Accepts::start(relaxed.clone(), metrics.clone());
    let scheduler = Scheduler::new(
        crate::scheduler::Pools {
            main: db.clone(),
            relaxed,
            writers: writers.clone(),
        },
        runtime.clone(),
        profiles.clone(),
        hub.clone(),
        Settings {
            max_attempts: config.max_attempts,
            max_log_bytes: config.max_log_bytes,
            job_output_bytes: config.job_output_bytes,
            pod_start_timeout: Duration::from_secs(config.pod_start_timeout_s),
            reattach_grace: Duration::from_secs(config.reattach_grace_s),
            pools: config.pool_settings(gpus)?,
            history_step: config.pool_history_step()?,
            tracer: crate::telemetry::Tracer::current(),
            replica,
        },
        metrics.clone(),
    )?;
    let (control_settings, default_k) = config.control_settings()?;
    let control = Arc::new(Control::start(
        control_settings,
        default_k,
        crate::control::executor(),
    )?);
    let restored = control.restore(&db).await?;
    if restored > 0 {
        tracing::info!(policies = restored, "control sessions restored");
    }
    let snapshot_every = Duration::from_secs_f64(config.control_snapshot_s);
    let accepts = Accepts::start(writers, metrics.clone());
    let state = AppState(Arc::new(Shared {
        auth: Authenticator::new(&config)?,
        limits: config.limits(),
        db,
        profiles,
        runtime,
        hub,
        scheduler: scheduler.clone(),
        accepts,
        waited_accepts,
        metrics,
        gpus,
        control: control.clone(),
        config,
    }));
    let listener = TcpListener::bind(state.config.listen).await?;
    let addr = listener.local_addr()?;
    let app = router(state.clone());
    let scheduler = tokio::spawn(scheduler.run());
    let snapshots = tokio::spawn(control.snapshot_every(state.db.clone(), snapshot_every));
    let (accepting, mut accepting_rx) = tokio::sync::watch::channel(true);
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = accepting_rx.wait_for(|a| !*a).await;
            })
            .await
    });
    tracing::info!(%addr, "listening");
    Ok(Running {
        addr,
        state,
        server,
        scheduler,
        snapshots,
        accepting,
    })
}

/// The HTTP application with its middleware.
pub fn router(state: AppState) -> Router {
    use tower_http::catch_panic::CatchPanicLayer;
    use tower_http::trace::TraceLayer;

    let max_body = state.config.max_body_bytes;
    let (api, openapi) = crate::http::api().split_for_parts();
    let console = match &state.config.console_dir {
        Some(dir) => crate::console::router(dir),
        None => Router::new(),
    };
    api.merge(utoipa_swagger_ui::SwaggerUi::new("/docs").url("/openapi.json", openapi))
        .merge(console)
        // After every route: the 405 fallback is set on the routes present.
        .fallback(crate::error::not_found)
        .method_not_allowed_fallback(crate::error::method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(
            // A layer of the router runs after routing: the span knows the
            // route its request matched.
            TraceLayer::new_for_http()
                .make_span_with(|req: &axum::http::Request<_>| {
                    let route = req
                        .extensions()
                        .get::<axum::extract::MatchedPath>()
                        .map(axum::extract::MatchedPath::as_str);
                    let name = match route {
                        Some(r) => format!("{} {r}", req.method()),
                        None => req.method().to_string(),
                    };
                    let span = tracing::info_span!(
                        "request",
                        method = %req.method(),
                        path = %req.uri().path(),
                        tenant = tracing::field::Empty,
                        "otel.name" = name.as_str(),
                        "otel.kind" = "server",
                        "http.route" = route,
                        "http.response.status_code" = tracing::field::Empty,
                        "otel.status_code" = tracing::field::Empty,
                    );
                    crate::telemetry::continue_request(&span, req.headers());
                    span
                })
                .on_response(
                    |res: &axum::http::Response<_>, latency: Duration, span: &tracing::Span| {
                        use tower_http::trace::OnResponse;
                        span.record("http.response.status_code", res.status().as_u16());
                        if res.status().is_server_error() {
                            span.record("otel.status_code", "error");
                        }
                        tower_http::trace::DefaultOnResponse::default()
                            .on_response(res, latency, span);
                    },
                ),
        )
        .layer(CatchPanicLayer::custom(crate::error::panic_response))
        .with_state(state)
}
