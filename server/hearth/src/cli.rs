//! The `hearth` command line: `serve`, `migrate`, `tenant`, `openapi`, `analyze`,
//! `simulate`, `control calibrate`.

use clap::{Parser, Subcommand};
use uuid::Uuid;

use crate::config::{Config, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "hearth",
    version,
    about = "Execution service for AI agents and RL trainers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Args)]
pub struct DbArgs {
    /// Postgres connection URL.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/hearth"
    )]
    pub database_url: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service: HTTP API, scheduler and the local runtime.
    Serve(Box<Config>),
    /// Create the database if needed and apply migrations, then exit.
    Migrate(DbArgs),
    /// Manage tenants and their API keys directly in the database.
    Tenant {
        #[command(flatten)]
        db: DbArgs,
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Print the OpenAPI document (as committed in `openapi/openapi.json`).
    Openapi,
    /// Ready-cohort shares of an event log: F (fixed windows), P* (exact
    /// offline optimum), U (local upper bound) and the gap closure.
    Analyze(AnalyzeArgs),
    /// Replay a closed-loop job trace through pool policies on a virtual clock.
    Simulate(SimulateArgs),
    /// Tools of the ready-cohort control endpoint.
    Control {
        #[command(subcommand)]
        command: ControlCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ControlCommand {
    /// Measure the cost of a batch per route on the active executor against
    /// the CPU path for batch sizes 8..1024 and choose K_r: the smallest size
    /// from which every larger tested size wins by at least 15 %.
    Calibrate(CalibrateArgs),
}

#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// The policy (JSON, as registered with `POST /v1/control/policies`).
    #[arg(long)]
    pub policy: std::path::PathBuf,
    /// Repetitions per size (the median counts).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Seed of the random states and inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object per route.
    #[arg(long)]
    pub json: bool,
    /// Store the chosen K_r for this tenant (by name); the service uses it
    /// when it next loads the policy.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Postgres connection URL (with `--tenant`).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/hearth"
    )]
    pub database_url: String,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimulateArgs {
    /// CSV trace `caller,seq,think_s,duration_s,profile[,gpus]`, each caller's
    /// rows together and in `seq` order.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// `fresh`, `always-on[:N]`, `keepalive:<seconds>` or `firepool`.
    #[arg(long, default_value = "firepool")]
    pub policy: String,
    /// Run every policy and a sweep of fixed keep-alives, print one table
    /// and firepool's frontier targets, and write an SVG chart (start
    /// latency CDF, GPUs held over time, and the frontier: GPU-hours against
    /// p90 start for the fixed keep-alives, always-on and firepool).
    #[arg(long)]
    pub compare: bool,
    /// Where `--compare` writes its chart.
    #[arg(long, default_value = "simulate.svg")]
    pub svg: std::path::PathBuf,
    /// Seconds for a new pod to become ready.
    #[arg(long, default_value_t = 30.0)]
    pub cold_start_s: f64,
    /// Seconds to bind a job to a promoted standby pod.
    #[arg(long, default_value_t = 1.0)]
    pub promote_s: f64,
    /// Seconds to hand a job to a warm pod.
    #[arg(long, default_value_t = 0.1)]
    pub warm_s: f64,
    /// GPUs per pool (default: enough that capacity never binds).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Pod limit per pool (default: none).
    #[arg(long)]
    pub max_pods: Option<u32>,
    /// Handovers firepool expects as each pool opens (default: the pool's
    /// callers, as always-on opens with a pod for each; 0 opens with the
    /// standby floor alone).
    #[arg(long)]
    pub standby_initial: Option<u32>,
    /// firepool's start-latency objective in every pool: `p90:warm` (the
    /// default), `p99:warm`, `p90:standby` (a promotion at worst), ...
    #[arg(long, default_value = "p90:warm")]
    pub objective: hearth_core::StartObjective,
    /// Print one JSON object per policy, one per line.
    #[arg(long)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,
}

#[derive(Debug, Subcommand)]
pub enum SimulateCommand {
    /// Write a synthetic trace to standard output.
    Gen {
        /// `agent` (many callers, short jobs, heavy-tailed think pauses),
        /// `rl` (steps of rollouts and verifiers, then a training pause),
        /// or a member (drawn from the seed) of the frontier benchmark's
        /// families: `agent-heavy` (heavier-tailed pauses, longer tools) or
        /// `rl-mixed` (workers alternating a whole-GPU and a quarter-GPU
        /// profile, 8-24-job steps, 45-120 s pauses) or `rl-jitter` (4-12-job
        /// steps, 15-70 s pauses off by up to 30 % from step to step).
        #[arg(long)]
        kind: hearth_pool::sim::TraceKind,
        /// Callers (default: 100 agent, 32 rl; drawn from the seed for
        /// agent-heavy, rl-mixed and rl-jitter).
        #[arg(long)]
        callers: Option<u32>,
        /// Jobs in all, shared among the callers.
        #[arg(long)]
        jobs: Option<u64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AnalyzeArgs {
    /// CSV with header `release_ns,route` and an optional `deadline_ns` column
    /// (absent: deadline = release + δ). `-` reads standard input.
    #[arg(long)]
    pub events: Option<std::path::PathBuf>,
    /// Smallest batch, K, for every route without an override.
    #[arg(long, default_value_t = 256)]
    pub k: u32,
    /// Launch deadline δ after release, in milliseconds (also the fixed window).
    #[arg(long, default_value_t = 50.0)]
    pub deadline_ms: f64,
    /// Per-route K: `ROUTE=K` (repeatable).
    #[arg(long = "k-route", value_name = "ROUTE=K")]
    pub k_route: Vec<String>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Option<AnalyzeCommand>,
}

#[derive(Debug, Subcommand)]
pub enum AnalyzeCommand {
    /// Build a stationary Poisson replay of recorded sessions, as an event log
    /// (`release_ns,route`) on standard output.
    Replay {
        /// CSV `session,offset_ns,route`: each session's ready offsets and routes.
        #[arg(long)]
        sessions: std::path::PathBuf,
        /// Mean number of sessions in progress.
        #[arg(long)]
        active: f64,
        /// Length of the replay.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant and print its first API key (shown once).
    Create {
        name: String,
        /// Print `{"tenant_id": ..., "api_key": ...}`.
        #[arg(long)]
        json: bool,
    },
    /// List tenants.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Delete a tenant with everything it owns.
    Delete { name: String },
    /// Mint another API key for a tenant.
    CreateKey {
        tenant: String,
        #[arg(long, default_value = "default")]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Revoke an API key by id.
    RevokeKey { tenant: String, api_key_id: Uuid },
}

/// Sets up logging to stderr (stdout stays for command output).
/// Logs on stderr, without trace export; a subscriber already installed
/// (a test's) is kept.
pub fn init_tracing(format: LogFormat) {
    let off = crate::telemetry::Settings::default();
    // Without export, installing cannot fail in a way that matters.
    let _ = crate::telemetry::init(format, &off);
}

async fn tenant_by_name(
    db: &sqlx::PgPool,
    name: &str,
) -> anyhow::Result<hearth_store::tenant::TenantRow> {
    hearth_store::tenant::find_by_name(db, name)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no tenant named `{name}`"))
}

fn api_error(e: crate::error::ApiError) -> anyhow::Error {
    anyhow::anyhow!("{}: {e}", e.code())
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Openapi => {
            println!("{}", crate::http::openapi_json());
        }
        Command::Analyze(args) => analyze(args)?,
        Command::Simulate(args) => simulate(args)?,
        Command::Control {
            command: ControlCommand::Calibrate(args),
        } => calibrate(args).await?,
        Command::Migrate(db) => {
            init_tracing(LogFormat::Text);
            hearth_store::connect(&db.database_url, true, 2).await?;
            eprintln!("database migrated");
        }
        Command::Serve(config) => {
            let telemetry = crate::telemetry::init(config.log_format, &config.telemetry)?;
            let grace = seconds("--shutdown-grace-s", config.shutdown_grace_s)?;
            let runtime = crate::app::runtime(&config).await?;
            let console = config.console_dir.is_some();
            let running = crate::app::start(*config, runtime.clone()).await?;
            let addr = running.addr;
            eprintln!("Hearth listening on http://{addr}  (API docs: http://{addr}/docs)");
            if console {
                eprintln!("Web console: http://{addr}/console/ (sign in with an API key)");
            }
            eprintln!(
                "Get an API key: `hearth tenant create <name> --json`, or POST /v1/admin/tenants with the admin token."
            );
            let mut running = running;
            let mut signals = Signals::new()?;
            let lost_lease = tokio::select! {
                () = signals.next() => false,
                _ = &mut running.scheduler => true,
            };
            if lost_lease {
                tracing::info!("shutting down");
            } else {
                drain(&mut running, grace, &mut signals).await;
            }
            if let Err(e) = running.shutdown().await {
                tracing::error!(error = %e, "control sessions not written at shutdown");
            }
            // Jobs still running are re-queued by the next start; pods that
            // die with the service go now, pods that outlive it stay for the
            // next leader to adopt.
            if let Err(e) = hearth_runtime::Runtime::shutdown(&*runtime).await {
                tracing::warn!(error = %e, "runtime shutdown");
            }
            if let Err(e) = telemetry.shutdown().await {
                tracing::warn!(error = %e, "spans not exported at shutdown");
            }
            if lost_lease {
                anyhow::bail!("the scheduler lost its lease (see the log); restart the service");
            }
        }
        Command::Tenant { db, command } => {
            let pool = hearth_store::connect(&db.database_url, true, 2).await?;
            match command {
                TenantCommand::Create { name, json } => {
                    let t = crate::http::admin::create_tenant(&pool, &name)
                        .await
                        .map_err(api_error)?;
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"tenant_id": t.tenant_id, "api_key": t.api_key})
                        );
                    } else {
                        println!(
                            "tenant {} ({})\nAPI key (shown once): {}",
                            t.name, t.tenant_id, t.api_key
                        );
                    }
                }
                TenantCommand::List { json } => {
                    let rows = hearth_store::tenant::list(&pool).await?;
                    for t in rows {
                        if json {
                            println!(
                                "{}",
                                serde_json::json!({"tenant_id": t.tenant_id, "name": t.name})
                            );
                        } else {
                            println!("{}\t{}", t.tenant_id, t.name);
                        }
                    }
                }
                TenantCommand::Delete { name } => {
                    let t = tenant_by_name(&pool, &name).await?;
                    hearth_store::tenant::delete(&pool, t.tenant_id).await?;
                    eprintln!("deleted tenant {name}");
                }
                TenantCommand::CreateKey { tenant, name, json } => {
                    let t = tenant_by_name(&pool, &tenant).await?;
                    let k = crate::http::admin::create_key(&pool, t.tenant_id, Some(&name), None)
                        .await
                        .map_err(api_error)?;
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"api_key_id": k.api_key_id, "api_key": k.api_key})
                        );
                    } else {
                        println!("API key {} (shown once): {}", k.api_key_id, k.api_key);
                    }
                }
                TenantCommand::RevokeKey { tenant, api_key_id } => {
                    let t = tenant_by_name(&pool, &tenant).await?;
                    hearth_store::tenant::revoke_key(&pool, t.tenant_id, api_key_id)
                        .await?
                        .ok_or_else(|| {
                            anyhow::anyhow!("tenant `{tenant}` has no key {api_key_id}")
                        })?;
                    eprintln!("revoked {api_key_id}");
                }
            }
        }
    }
    Ok(())
}

fn open(path: &std::path::Path) -> anyhow::Result<Box<dyn std::io::BufRead>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

fn seconds(flag: &str, s: f64) -> anyhow::Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(s)
        .map_err(|_| anyhow::anyhow!("{flag} must be a non-negative number of seconds"))
}

fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    use hearth_pool::sim;
    use std::io::Write;
    if let Some(SimulateCommand::Gen {
        kind,
        callers,
        jobs,
        seed,
    }) = args.command
    {
        let out = std::io::BufWriter::new(std::io::stdout().lock());
        // A family member's caller count comes from its seed, as in
        // `cargo bench -p hearth-pool --bench frontier`.
        let callers = callers.unwrap_or_else(|| sim::family_callers(kind, seed));
        let jobs = jobs.unwrap_or_else(|| sim::family_jobs(kind, callers));
        // A reader that has seen enough (`| head`) ends the trace, as it
        // would any Unix filter's output: no error.
        return match sim::generate(kind, callers, jobs, seed, out) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            r => Ok(r?),
        };
    }
    let trace = args.trace.ok_or_else(|| {
        anyhow::anyhow!("--trace FILE is required (or use `hearth simulate gen`)")
    })?;
    let params = sim::SimParams {
        cold_start: seconds("--cold-start-s", args.cold_start_s)?,
        promote: seconds("--promote-s", args.promote_s)?,
        warm: seconds("--warm-s", args.warm_s)?,
        gpus: args.gpus,
        max_pods: args.max_pods,
        standby_initial: args.standby_initial,
        ..sim::SimParams::default()
    }
    .with_objective(args.objective);
    let mut frontier = Vec::new();
    let mut floor = None;
    let mut by_profile = None;
    let summaries = if args.compare {
        let mut kinds = hearth_pool::policy::Kind::comparison_set();
        for k in sim::frontier_set() {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        let cmp = sim::compare(&trace, &kinds, &params)?;
        std::fs::write(&args.svg, &cmp.svg)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", args.svg.display()))?;
        eprintln!("chart written to {}", args.svg.display());
        frontier = sim::frontier_targets(&cmp.summaries);
        floor = Some(cmp.floor_note());
        by_profile = Some(cmp.profile_table(&sim::FRONTIER_PAIR));
        cmp.summaries
    } else {
        let kind: hearth_pool::policy::Kind = args.policy.parse()?;
        vec![sim::simulate(&trace, kind, &params)?]
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        for s in &summaries {
            writeln!(out, "{}", serde_json::to_string(s)?)?;
        }
    } else {
        write!(out, "{}", sim::Summary::table(&summaries))?;
        if let Some(floor) = &floor {
            writeln!(out, "{floor}")?;
        }
        if let Some(table) = &by_profile {
            write!(out, "{table}")?;
        }
        for t in &frontier {
            writeln!(
                out,
                "  [{}] {:<40} {:>8} got {:.3}",
                if t.met { "met" } else { "MISSED" },
                t.what,
                t.goal,
                t.got
            )?;
        }
    }
    Ok(())
}

fn analyze(args: AnalyzeArgs) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(AnalyzeCommand::Replay {
        sessions,
        active,
        seconds,
        seed,
    }) = args.command
    {
        anyhow::ensure!(
            active > 0.0 && seconds > 0.0,
            "--active and --seconds must be positive"
        );
        let sessions = hearth_cohort::read_sessions(open(&sessions)?)?;
        let out = std::io::BufWriter::new(std::io::stdout().lock());
        let stats = hearth_cohort::replay(
            &sessions,
            &hearth_cohort::ReplayParams::new(active, seconds, seed),
            out,
        )?;
        eprintln!(
            "{} events from {} session arrivals ({:.3}/s)",
            stats.events, stats.arrivals, stats.rate_per_s
        );
        return Ok(());
    }
    let path = args.events.ok_or_else(|| {
        anyhow::anyhow!("--events FILE is required (or use `hearth analyze replay`)")
    })?;
    anyhow::ensure!(
        args.deadline_ms.is_finite() && args.deadline_ms >= 0.0,
        "--deadline-ms must be a non-negative number"
    );
    let delta_ns = (args.deadline_ms * 1e6).round() as i64;
    let mut params = hearth_cohort::Params::new(args.k, delta_ns);
    for spec in &args.k_route {
        params = params.with_override(spec)?;
    }
    let events = hearth_cohort::read_csv(open(&path)?, delta_ns)?;
    let report = hearth_cohort::analyze(&events, &params)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        let text = report.text();
        write!(out, "{text}")?;
        if !text.ends_with('\n') {
            writeln!(out)?;
        }
    }
    Ok(())
}

async fn calibrate(args: CalibrateArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let text = std::fs::read_to_string(&args.policy)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", args.policy.display()))?;
    let program = hearth_control::Program::from_json(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.policy.display()))?;
    anyhow::ensure!(args.reps >= 1, "--reps must be at least 1");
    let mut executor = crate::control::executor();
    eprintln!("calibrating on {}", executor.status());
    let calibrations =
        hearth_control::calibrate::calibrate(&mut *executor, &program, args.reps, args.seed)?;
    let mut out = std::io::stdout().lock();
    for (route, cal) in program.routes().iter().zip(&calibrations) {
        if args.json {
            let line = serde_json::json!({
                "policy": program.name(),
                "version": program.version(),
                "name": route.name(),
                "route_id": cal.route,
                "executor": cal.executor,
                "k": cal.k,
                "timings": cal.timings,
            });
            writeln!(out, "{line}")?;
            continue;
        }
        writeln!(
            out,
            "route {} ({}) on {}",
            route.name(),
            cal.route,
            cal.executor
        )?;
        writeln!(
            out,
            "  {:>6}  {:>12}  {:>12}  {:>7}",
            "size", "batch ns", "cpu ns", "win %"
        )?;
        for t in &cal.timings {
            let win = if t.cpu_ns > 0.0 {
                (1.0 - t.batch_ns / t.cpu_ns) * 100.0
            } else {
                0.0
            };
            writeln!(
                out,
                "  {:>6}  {:>12.0}  {:>12.0}  {:>7.1}",
                t.size, t.batch_ns, t.cpu_ns, win
            )?;
        }
        match cal.k {
            Some(k) => writeln!(out, "  K_r = {k}")?,
            None => writeln!(
                out,
                "  K_r = none (no suffix of sizes wins by 15 %: CPU path only)"
            )?,
        }
    }
    drop(out);
    if let Some(tenant) = &args.tenant {
        let pool = hearth_store::connect(&args.database_url, true, 2).await?;
        let t = tenant_by_name(&pool, tenant).await?;
        for cal in &calibrations {
            let k = cal.k.map(i32::try_from).transpose()?;
            hearth_store::control::put_route_k(&pool, t.tenant_id, &cal.route, k, &cal.executor)
                .await?;
        }
        eprintln!(
            "stored K_r of {} routes for tenant {tenant}",
            calibrations.len()
        );
    }
    Ok(())
}

/// SIGTERM and Ctrl-C (SIGINT), registered once so that a second signal
/// during the shutdown is heard too.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// How long the answers of waits and event streams ended at the close of the
/// grace period may take to leave.
const CLOSE: std::time::Duration = std::time::Duration::from_secs(2);

/// A graceful shutdown: no new connections, no new jobs; requests in flight
/// (waits, event streams) and the jobs running here get `grace` to finish,
/// and the scheduler hands its lease over as soon as no job runs here. What
/// is left at the end of the grace period (or at a second signal) ends
/// cleanly: waits answer with the job as it stands, event streams close, and
/// jobs still running stop without a word to the store, so the next leader
/// re-queues them. No store write is cut in half: each is one transaction.
async fn drain(running: &mut crate::Running, grace: std::time::Duration, signals: &mut Signals) {
    tracing::info!(
        grace_s = grace.as_secs_f64(),
        "shutting down: no new connections or jobs; requests and jobs in flight may finish"
    );
    running.stop_accepting();
    let state = running.state.clone();
    state.scheduler.drain();
    let server = &mut running.server;
    let settled = async {
        state.scheduler.drained().await;
        let _ = (&mut *server).await;
    };
    let ended = tokio::select! {
        () = settled => true,
        () = tokio::time::sleep(grace) => false,
        () = signals.next() => false,
    };
    if !ended {
        let watched = state.hub.watched();
        let halted = state.scheduler.halt();
        tracing::warn!(
            watched_jobs = watched,
            halted_jobs = halted,
            "grace period over: ending waits and event streams, stopping jobs still running"
        );
        state.hub.close();
        if !server.is_finished() && tokio::time::timeout(CLOSE, &mut *server).await.is_err() {
            tracing::warn!("connections still open after the grace period; closing them");
        }
    }
    tracing::info!("shut down");
}
