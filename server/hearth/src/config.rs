//! Configuration of `hearth serve`: flags, each with an environment variable.
//! Parsed and validated once in `main`; tests build it with [`Config::parse_from`]
//! or [`Config::for_tests`].

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hearth_core::Profile;
use hearth_core::validate::Limits;
use hearth_store::PoolSize;
use secrecy::SecretString;

/// Connections held outside the pools: the scheduler lease's, which it
/// detaches from the main pool (a detached connection no longer counts
/// against the pool's maximum) and keeps for the life of the process.
const LEASE_CONNECTIONS: u32 = 1;

/// The durable writers' pool (`hearth_store::connect_writers_with`): the
/// writer of accepted jobs and that of job ends each keep one while busy.
const WRITER_CONNECTIONS: u32 = 2;

/// The fewest connections of the main pool: the scheduler's listener for job
/// changes keeps one of them for good, requests share the rest.
const MIN_MAIN_CONNECTIONS: u32 = 3;

/// The sizes of the service's pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbPools {
    /// Requests, single final states, the scheduler's listener.
    pub main: PoolSize,
    /// Intermediate transitions, job events, accepts of waited jobs.
    pub relaxed: PoolSize,
    /// The durable writers: accepted jobs and job ends, together.
    pub writers: PoolSize,
}

/// Algorithm of the JWT issuer's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JwtAlgorithm {
    /// HMAC-SHA256 with a shared secret (`--jwt-secret`).
    Hs256,
    /// RSA-SHA256 with the issuer's public key (`--jwt-public-key`, PEM).
    Rs256,
    /// ECDSA P-256 with the issuer's public key (`--jwt-public-key`, PEM).
    Es256,
}

/// Which runtime starts pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeKind {
    Local,
    Kubernetes,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Postgres connection URL. Its database is created if missing and migrated on start.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/hearth"
    )]
    pub database_url: String,

    /// Address the HTTP API listens on.
    #[arg(long, env = "HEARTH_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Bearer token of the admin API (`/v1/admin/...`). Without it the admin API is off.
    #[arg(long, env = "HEARTH_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<SecretString>,

    /// JSON file with the hardware profiles (a list of profile objects). Default:
    /// `cpu-small` (1 CPU, 1 GiB, no network) and `cpu-net` (2 CPUs, 4 GiB, network).
    #[arg(long, env = "HEARTH_PROFILES")]
    pub profiles: Option<PathBuf>,

    /// Where pods run: `local` (sandboxed processes on this machine, the
    /// default) or `kubernetes` (pods through the Kubernetes API, with
    /// in-cluster configuration or `KUBECONFIG`).
    #[arg(long, env = "HEARTH_RUNTIME", value_enum, default_value = "local")]
    pub runtime: RuntimeKind,

    /// Kubernetes: namespace of the pods. Default: the client's (the service
    /// account's in a cluster, the context's with `KUBECONFIG`).
    #[arg(long, env = "HEARTH_KUBE_NAMESPACE")]
    pub kube_namespace: Option<String>,

    /// Kubernetes: the install's name, labelled on every pod it creates; a
    /// new leader adopts the pods of its install only.
    #[arg(long, env = "HEARTH_KUBE_INSTALL", default_value = "hearth")]
    pub kube_install: String,

    /// Kubernetes: the secret pod tokens are derived from (HMAC of the pod
    /// id). Every replica of an install needs the same one.
    #[arg(long, env = "HEARTH_INSTALL_SECRET", hide_env_values = true)]
    pub install_secret: Option<SecretString>,

    /// Kubernetes: JSON file mapping profile names to their Kubernetes
    /// settings (`tolerations`, `priority_class`, `gpu`: `{"kind": "whole"}`,
    /// `{"kind": "resource", "name": ..., "quantity": ...}`,
    /// `{"kind": "hami", "memory_mib": ..., "cores_percent": ...}` or
    /// `{"kind": "dra", "claim_template": ...}`).
    #[arg(long, env = "HEARTH_KUBE_PROFILES")]
    pub kube_profiles: Option<PathBuf>,

    /// Kubernetes: the TCP port agents listen on inside their pods.
    #[arg(long, env = "HEARTH_KUBE_AGENT_PORT", default_value_t = 7070)]
    pub kube_agent_port: u16,

    /// Kubernetes: seconds a pod may stay unschedulable before its start fails.
    #[arg(
        long,
        env = "HEARTH_KUBE_UNSCHEDULABLE_TIMEOUT_S",
        default_value_t = 120
    )]
    pub kube_unschedulable_timeout_s: u64,

    /// Where the local runtime keeps its pods.
    #[arg(long, env = "HEARTH_STATE_DIR", default_value = "/var/tmp/hearth")]
    pub state_dir: PathBuf,

    /// The agent binary started in every local pod. Default: `hearth-agent` next to `hearth`.
    #[arg(long, env = "HEARTH_AGENT_BIN")]
    pub agent_bin: Option<PathBuf>,

    /// Directory of wheels that `deps.pip` installs may use offline.
    #[arg(long, env = "HEARTH_WHEELHOUSE")]
    pub wheelhouse: Option<PathBuf>,

    /// The unprivileged `UID:GID` jobs run as when the service runs as root
    /// (local runtime with bubblewrap), or `root` to keep jobs root without
    /// capabilities (not advised: root owns the host's secrets).
    #[arg(long, env = "HEARTH_JOB_USER", default_value = "65534:65534")]
    pub job_user: JobUser,

    /// Python interpreter used for dependency environments.
    #[arg(long, env = "HEARTH_PYTHON", default_value = "python3")]
    pub python: String,

    /// JWT: algorithm of the configured issuer's key. Without a key, JWTs are refused.
    #[arg(
        long,
        env = "HEARTH_JWT_ALGORITHM",
        value_enum,
        default_value = "hs256"
    )]
    pub jwt_algorithm: JwtAlgorithm,

    /// JWT: shared secret for HS256.
    #[arg(long, env = "HEARTH_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<SecretString>,

    /// JWT: PEM file with the issuer's public key for RS256 or ES256.
    #[arg(long, env = "HEARTH_JWT_PUBLIC_KEY")]
    pub jwt_public_key: Option<PathBuf>,

    /// JWT: required `iss` claim.
    #[arg(long, env = "HEARTH_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// JWT: required `aud` claim.
    #[arg(long, env = "HEARTH_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,

    /// JWT: claim holding the tenant id.
    #[arg(long, env = "HEARTH_JWT_TENANT_CLAIM", default_value = "tenant")]
    pub jwt_tenant_claim: String,

    /// How many times a job may be given pods. A job whose pod is lost (crash,
    /// restart) is re-queued while it has attempts left, else failed with `pod_lost`.
    #[arg(long, env = "HEARTH_MAX_ATTEMPTS", default_value_t = 2)]
    pub max_attempts: u32,

    /// Largest request body in bytes.
    #[arg(long, env = "HEARTH_MAX_BODY_BYTES", default_value_t = 8 << 20)]
    pub max_body_bytes: usize,

    /// Output bytes per stream (stdout, stderr) kept of a job; the rest is cut
    /// and the truncation marked.
    #[arg(long, env = "HEARTH_MAX_LOG_BYTES", default_value_t = 1 << 20)]
    pub max_log_bytes: u64,

    /// Output bytes per stream kept on the job object itself (full logs at `/logs`).
    #[arg(long, env = "HEARTH_JOB_OUTPUT_BYTES", default_value_t = 64 << 10)]
    pub job_output_bytes: usize,

    /// Longest `wait` a submission may ask for, in seconds.
    #[arg(long, env = "HEARTH_MAX_WAIT_S", default_value_t = 300)]
    pub max_wait_s: u64,

    /// Seconds `hearth serve` gives, on SIGTERM or Ctrl-C, to the requests in
    /// flight (waits, event streams) and the jobs running here before it
    /// ends them: it stops accepting at once, and exits as soon as they are
    /// done. Jobs still running then are re-queued by the next leader.
    #[arg(long, env = "HEARTH_SHUTDOWN_GRACE_S", default_value_t = 10.0)]
    pub shutdown_grace_s: f64,

    /// Longest job timeout a submission may ask for, in seconds.
    #[arg(long, env = "HEARTH_MAX_TIMEOUT_S", default_value_t = 3600)]
    pub max_timeout_s: u32,

    /// Seconds a web console session lasts from sign-in (`POST /v1/session`);
    /// at most a week. It ends sooner on sign-out or when the API key it
    /// was opened with is revoked or expires.
    #[arg(long, env = "HEARTH_SESSION_TTL_S", default_value_t = 3600,
          value_parser = clap::value_parser!(u32).range(60..=604_800))]
    pub session_ttl_s: u32,

    /// Marks the console's session cookie `Secure` (sent over HTTPS only).
    /// Set it wherever the console is reached over HTTPS; it is also set
    /// on a request that arrives with `X-Forwarded-Proto: https`.
    #[arg(long, env = "HEARTH_SECURE_COOKIES", default_value_t = false)]
    pub secure_cookies: bool,

    /// Directory of the built web console (`web/build.sh` writes `web/dist`),
    /// served at `/console/`. Unset: no console is served.
    #[arg(long, env = "HEARTH_CONSOLE_DIR")]
    pub console_dir: Option<PathBuf>,

    /// Seconds a pod may take to start before the start counts as failed.
    #[arg(long, env = "HEARTH_POD_START_TIMEOUT_S", default_value_t = 30)]
    pub pod_start_timeout_s: u64,

    /// Seconds an agent keeps running a job after the leader's connection
    /// drops, waiting for a new leader to re-attach to it (a broker restart
    /// or takeover with pods that outlive it, as on Kubernetes); a job no
    /// leader re-attaches to within it is cancelled (and re-queued by the
    /// next leader). 0 cancels at once.
    #[arg(long, env = "HEARTH_REATTACH_GRACE_S", default_value_t = 60)]
    pub reattach_grace_s: u64,

    /// Most Postgres connections this instance holds, all pools together:
    /// the main pool, the relaxed pool (`--db-relaxed-connections`), the
    /// durable writers' two (accepted jobs and job ends, together) and the
    /// scheduler lease's own connection. Replicas times this must stay under
    /// the server's `max_connections` (100 by default) less what other
    /// clients need.
    #[arg(long, env = "HEARTH_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,

    /// Of `--db-max-connections`, the pool that writes intermediate job
    /// transitions (`assigned`, `running`) and job events without waiting
    /// for the disk. The rest, less the durable writers' two and the lease's
    /// one, is the main pool: requests, final states stored alone and the
    /// scheduler's listener for job changes.
    #[arg(long, env = "HEARTH_DB_RELAXED_CONNECTIONS", default_value_t = 2)]
    pub db_relaxed_connections: u32,

    /// Seconds a request (or the scheduler) waits for a database connection
    /// before giving up; a request then answers `503 unavailable`.
    #[arg(long, env = "HEARTH_DB_ACQUIRE_TIMEOUT_S", default_value_t = 5.0)]
    pub db_acquire_timeout_s: f64,

    /// Log format.
    #[arg(long, env = "HEARTH_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Pool policy of every profile: `fresh` (a new pod per job),
    /// `always-on[:N]` (a fixed pool), `keepalive:<s>` (warm reuse with a fixed
    /// keep-alive) or `firepool` (warm reuse, standby, budgets and keep-alive
    /// matched to each caller's pauses).
    #[arg(long, env = "HEARTH_POOL_POLICY", default_value = "firepool")]
    pub pool_policy: hearth_pool::Kind,

    /// Seconds between the samples of the GPUs each pool holds, which the
    /// leader keeps for an hour (`GET /v1/pools/{profile}/history`, the
    /// console's chart): 0.1 to 600.
    #[arg(long, env = "HEARTH_POOL_HISTORY_STEP_S", default_value_t = 10.0)]
    pub pool_history_step_s: f64,

    /// Fewest standby pods (started, unbound) each pool keeps (firepool).
    #[arg(long, env = "HEARTH_STANDBY_MIN", default_value_t = 2)]
    pub standby_min: u32,

    /// Most standby pods each pool keeps (firepool); the target between min and
    /// max follows recent bursts of jobs that found no warm pod.
    #[arg(long, env = "HEARTH_STANDBY_MAX", default_value_t = 64)]
    pub standby_max: u32,

    /// Jobs each pool expects to find no warm pod as it opens, such as a
    /// trainer's workers that start together (firepool): a burst of that
    /// size counts toward the standby target (within min and max) until
    /// the standby horizon forgets it.
    #[arg(long, env = "HEARTH_STANDBY_INITIAL", default_value_t = 0)]
    pub standby_initial: u32,

    /// Shortest keep-alive of a caller's warm pod, in seconds (firepool).
    #[arg(long, env = "HEARTH_KEEP_ALIVE_MIN_S", default_value_t = 1.0)]
    pub keep_alive_min_s: f64,

    /// Longest keep-alive of a caller's warm pod, in seconds (firepool). A
    /// profile's `keep_alive_s`, the keep-alive of callers with too little
    /// history, is clamped to these bounds.
    #[arg(long, env = "HEARTH_KEEP_ALIVE_MAX_S", default_value_t = 600.0)]
    pub keep_alive_max_s: f64,

    /// Floor of each GPU pool's budget on GPUs held by warm plus standby pods.
    #[arg(long, env = "HEARTH_POOL_BUDGET_FLOOR_GPUS")]
    pub pool_budget_floor_gpus: Option<f64>,

    /// Ceiling of each GPU pool's budget on GPUs held by warm plus standby pods.
    #[arg(long, env = "HEARTH_POOL_BUDGET_CEILING_GPUS")]
    pub pool_budget_ceiling_gpus: Option<f64>,

    /// Accounting-only GPUs: the pools count this many GPUs without any
    /// device behind them (development and tests; the API labels them
    /// `accounting-only`). Unset: the machine's real GPUs (NVIDIA driver),
    /// whose devices each pod gets through `CUDA_VISIBLE_DEVICES`, else none.
    #[arg(long, env = "HEARTH_GPUS")]
    pub gpus: Option<u32>,

    /// Control endpoint: launch deadline of an event without `deadline_ms`,
    /// in milliseconds (also δ, the window of F in the live accounting).
    #[arg(long, env = "HEARTH_CONTROL_DEADLINE_MS", default_value_t = 50.0)]
    pub control_deadline_ms: f64,

    /// Control endpoint: longest `deadline_ms` an event may ask for.
    #[arg(
        long,
        env = "HEARTH_CONTROL_MAX_DEADLINE_MS",
        default_value_t = 60_000.0
    )]
    pub control_max_deadline_ms: f64,

    /// Control endpoint: K_r of routes without a calibration (`hearth control
    /// calibrate --tenant`); 0 runs uncalibrated routes on the CPU path only.
    /// Unset: chosen from the active executor (CPU: none, since batching buys
    /// nothing there; GPU: 256), until a calibration measures it.
    #[arg(long, env = "HEARTH_CONTROL_K")]
    pub control_k: Option<u32>,

    /// Control endpoint: most events per batch (B).
    #[arg(long, env = "HEARTH_CONTROL_MAX_BATCH", default_value_t = 1024)]
    pub control_max_batch: usize,

    /// Control endpoint: lead time before a deadline at which the compactor
    /// launches (or falls back), in microseconds; covers launch latency.
    #[arg(long, env = "HEARTH_CONTROL_LAUNCH_COST_US", default_value_t = 1000)]
    pub control_launch_cost_us: u64,

    /// Control endpoint: launch as soon as K_r events are queued instead of
    /// as late as the earliest deadline allows.
    #[arg(long, env = "HEARTH_CONTROL_EAGER")]
    pub control_eager: bool,

    /// Control endpoint: recompute every non-CPU batch on the CPU and compare
    /// (marks `exact`; a mismatch is answered with the CPU outcome).
    #[arg(long, env = "HEARTH_CONTROL_VERIFY", default_value_t = true, action = clap::ArgAction::Set)]
    pub control_verify: bool,

    /// Control endpoint: seconds between snapshots of changed sessions to
    /// Postgres (they are also written at shutdown).
    #[arg(long, env = "HEARTH_CONTROL_SNAPSHOT_S", default_value_t = 5.0)]
    pub control_snapshot_s: f64,

    /// Control endpoint: most events in one `POST /v1/control/events`.
    #[arg(long, env = "HEARTH_CONTROL_MAX_EVENTS", default_value_t = 10_000)]
    pub control_max_events: usize,

    /// Control endpoint: event records kept per tenant for `/v1/control/stats`.
    #[arg(long, env = "HEARTH_CONTROL_RECORDS", default_value_t = 1_000_000)]
    pub control_records: usize,

    /// Control endpoint: sessions each tenant may hold over all its
    /// policies; events or creations past it answer 409 `limit_reached`.
    #[arg(long, env = "HEARTH_CONTROL_MAX_SESSIONS", default_value_t = 100_000)]
    pub control_max_sessions: usize,

    /// Control endpoint: the cap on the exact P* search of one
    /// `/v1/control/stats`, in steps (about 0.1–0.2 s at the default); past
    /// it the answer gives bounds (`exact: false`).
    #[arg(long, env = "HEARTH_CONTROL_MAX_EXACT_STEPS", default_value_t = hearth_control::accounting::DEFAULT_MAX_EXACT_STEPS)]
    pub control_max_exact_steps: u64,

    /// OpenTelemetry trace export (the standard `OTEL_*` variables); off
    /// without an endpoint. Last: its help heading holds for what follows.
    #[command(flatten)]
    pub telemetry: crate::telemetry::Settings,
}

impl Config {
    /// A configuration with every default, for tests and tools.
    pub fn for_tests(database_url: &str, state_dir: PathBuf) -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            config: Config,
        }
        let mut config = Wrap::parse_from(["hearth"]).config;
        config.database_url = database_url.to_owned();
        config.state_dir = state_dir;
        config.listen = "127.0.0.1:0".parse().expect("valid address");
        config
    }

    /// The pool settings this configuration implies; `gpus` is the inventory
    /// found by [`crate::scheduler::Gpus::detect`].
    pub fn pool_settings(
        &self,
        gpus: crate::scheduler::Gpus,
    ) -> anyhow::Result<crate::scheduler::PoolSettings> {
        let secs = |name: &str, s: f64| {
            anyhow::ensure!(
                s.is_finite() && s >= 0.0,
                "{name} must be a non-negative number of seconds"
            );
            Ok(std::time::Duration::from_secs_f64(s))
        };
        let gpus_ok = |name: &str, g: Option<f64>| {
            anyhow::ensure!(
                g.is_none_or(|g| g.is_finite() && g >= 0.0),
                "{name} must be a non-negative number of GPUs"
            );
            Ok(g)
        };
        Ok(crate::scheduler::PoolSettings {
            kind: self.pool_policy,
            standby_min: self.standby_min,
            standby_max: self.standby_max,
            standby_initial: self.standby_initial,
            keep_alive_min: secs("--keep-alive-min-s", self.keep_alive_min_s)?,
            keep_alive_max: secs("--keep-alive-max-s", self.keep_alive_max_s)?,
            budget_floor_gpus: gpus_ok("--pool-budget-floor-gpus", self.pool_budget_floor_gpus)?,
            budget_ceiling_gpus: gpus_ok(
                "--pool-budget-ceiling-gpus",
                self.pool_budget_ceiling_gpus,
            )?,
            gpus,
        })
    }

    /// The sizes of the service's pools, which together with the scheduler
    /// lease's connection hold at most `--db-max-connections`.
    pub fn db_pools(&self) -> anyhow::Result<DbPools> {
        anyhow::ensure!(
            self.db_acquire_timeout_s.is_finite() && self.db_acquire_timeout_s > 0.0,
            "--db-acquire-timeout-s must be a positive number of seconds"
        );
        anyhow::ensure!(
            self.db_relaxed_connections >= 1,
            "--db-relaxed-connections must be at least 1"
        );
        let reserved = WRITER_CONNECTIONS + LEASE_CONNECTIONS;
        let main = self
            .db_max_connections
            .checked_sub(self.db_relaxed_connections.saturating_add(reserved))
            .filter(|&n| n >= MIN_MAIN_CONNECTIONS);
        let Some(main) = main else {
            anyhow::bail!(
                "--db-max-connections ({}) must be at least --db-relaxed-connections ({}) + {}: \
                 {MIN_MAIN_CONNECTIONS} for the main pool, {WRITER_CONNECTIONS} for the durable \
                 writers and {LEASE_CONNECTIONS} for the scheduler lease",
                self.db_max_connections,
                self.db_relaxed_connections,
                MIN_MAIN_CONNECTIONS + reserved,
            );
        };
        let acquire_timeout = std::time::Duration::from_secs_f64(self.db_acquire_timeout_s);
        let size = |max_connections| PoolSize {
            max_connections,
            acquire_timeout,
        };
        Ok(DbPools {
            main: size(main),
            relaxed: size(self.db_relaxed_connections),
            writers: size(WRITER_CONNECTIONS),
        })
    }

    /// The control engine's settings and the configured default K_r
    /// (`None`: from the executor, `Some(0)`: CPU path only).
    pub fn control_settings(&self) -> anyhow::Result<(crate::control::Settings, Option<u32>)> {
        let ms_ok = |name: &str, ms: f64| {
            anyhow::ensure!(
                ms.is_finite() && ms > 0.0,
                "{name} must be a positive number of milliseconds"
            );
            Ok(())
        };
        ms_ok("--control-deadline-ms", self.control_deadline_ms)?;
        ms_ok("--control-max-deadline-ms", self.control_max_deadline_ms)?;
        anyhow::ensure!(
            self.control_deadline_ms <= self.control_max_deadline_ms,
            "--control-deadline-ms must not exceed --control-max-deadline-ms"
        );
        anyhow::ensure!(
            self.control_snapshot_s.is_finite() && self.control_snapshot_s > 0.0,
            "--control-snapshot-s must be a positive number of seconds"
        );
        anyhow::ensure!(
            self.control_max_batch >= 1,
            "--control-max-batch must be at least 1"
        );
        anyhow::ensure!(
            self.control_max_events >= 1,
            "--control-max-events must be at least 1"
        );
        let settings = crate::control::Settings {
            driver: hearth_control::DriverConfig {
                compactor: hearth_control::compactor::Config {
                    max_batch: self.control_max_batch,
                    launch_cost_ns: self.control_launch_cost_us.saturating_mul(1000),
                    eager: self.control_eager,
                },
                verify: self.control_verify,
            },
            records: self.control_records,
            max_exact_steps: self.control_max_exact_steps,
            max_sessions: self.control_max_sessions,
        };
        Ok((settings, self.control_k))
    }

    /// The pool history's step (see `--pool-history-step-s`).
    ///
    /// # Errors
    /// The step is not between 0.1 and 600 seconds.
    pub fn pool_history_step(&self) -> anyhow::Result<std::time::Duration> {
        let s = self.pool_history_step_s;
        anyhow::ensure!(
            (0.1..=600.0).contains(&s),
            "--pool-history-step-s must be between 0.1 and 600 seconds, not {s}"
        );
        Ok(std::time::Duration::from_secs_f64(s))
    }

    /// The submission limits this configuration implies.
    pub fn limits(&self) -> Limits {
        Limits {
            max_timeout_s: self.max_timeout_s,
            ..Limits::default()
        }
    }

    /// Loads the profiles: the file if configured, else the defaults.
    pub fn load_profiles(&self) -> anyhow::Result<Vec<Profile>> {
        let profiles: Vec<Profile> = match &self.profiles {
            None => Profile::defaults(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                serde_json::from_str(&text)
                    .map_err(|e| anyhow::anyhow!("parsing {}: {e}", path.display()))?
            }
        };
        let mut seen = std::collections::HashSet::new();
        for p in &profiles {
            anyhow::ensure!(
                hearth_core::validate::is_name(&p.name, 64),
                "profile name `{}` is not a valid name",
                p.name
            );
            anyhow::ensure!(
                seen.insert(&p.name),
                "profile `{}` is defined twice",
                p.name
            );
            anyhow::ensure!(
                p.max_pods > 0,
                "profile `{}`: max_pods must be positive",
                p.name
            );
            anyhow::ensure!(
                p.start_objective.is_valid(),
                "profile `{}`: start_objective.percentile must be above 0 and below 1 (0.9 for p90)",
                p.name
            );
        }
        anyhow::ensure!(!profiles.is_empty(), "no profiles configured");
        Ok(profiles)
    }
}

/// `HEARTH_JOB_USER`: a non-root `UID:GID`, or `root` for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobUser(pub Option<(u32, u32)>);

impl std::str::FromStr for JobUser {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "root" {
            return Ok(JobUser(None));
        }
        let parsed = s
            .split_once(':')
            .and_then(|(u, g)| Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?)));
        match parsed {
            Some((uid, gid)) if uid != 0 && gid != 0 => Ok(JobUser(Some((uid, gid)))),
            _ => Err(format!("`{s}`: want UID:GID (both non-zero) or `root`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profiles_start_objective_is_read_and_checked() {
        let path =
            std::env::temp_dir().join(format!("hearth-profiles-{}.json", std::process::id()));
        let mut c = Config::for_tests("postgres://localhost/x", PathBuf::from("/tmp"));
        c.profiles = Some(path.clone());
        let load = |objective: &str| {
            std::fs::write(
                &path,
                format!(r#"[{{"name": "gpu-a", "gpus": 1, "start_objective": {objective}}}]"#),
            )
            .unwrap();
            c.load_profiles()
        };
        let p = load(r#"{"percentile": 0.99, "class": "standby"}"#).unwrap();
        assert_eq!(
            p[0].start_objective,
            hearth_core::StartObjective {
                percentile: 0.99,
                class: hearth_core::StartClass::Standby
            }
        );
        // Its pool aims at it.
        let pool = hearth_pool::Config::for_profile(&p[0], 1)
            .objective
            .unwrap();
        assert_eq!(
            (pool.percentile, pool.class),
            (0.99, hearth_core::StartClass::Standby)
        );
        for bad in ["1.0", "0", "-0.1"] {
            let e = load(&format!(r#"{{"percentile": {bad}}}"#)).unwrap_err();
            assert!(
                e.to_string().contains("start_objective.percentile"),
                "{bad}: {e}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_pools_and_the_lease_stay_within_the_connection_total() {
        let mut c = Config::for_tests("postgres://localhost/x", PathBuf::from("/tmp"));
        assert_eq!(c.db_max_connections, 10);
        let pools = c.db_pools().unwrap();
        let sizes = |p: DbPools| {
            (
                p.main.max_connections,
                p.relaxed.max_connections,
                p.writers.max_connections,
            )
        };
        let (main, relaxed, writers) = sizes(pools);
        assert_eq!((main, relaxed, writers), (5, 2, 2));
        assert_eq!(main + relaxed + writers + 1, c.db_max_connections);
        assert_eq!(
            pools.main.acquire_timeout,
            std::time::Duration::from_secs(5)
        );
        assert_eq!(
            pools.writers.acquire_timeout,
            std::time::Duration::from_secs(5)
        );

        c.db_max_connections = 7;
        c.db_relaxed_connections = 1;
        assert_eq!(sizes(c.db_pools().unwrap()), (3, 1, 2));
        c.db_max_connections = 6;
        assert!(c.db_pools().is_err(), "no room for the main pool");
        c.db_max_connections = 10;
        c.db_relaxed_connections = u32::MAX;
        assert!(c.db_pools().is_err());
        c.db_relaxed_connections = 0;
        assert!(c.db_pools().is_err());
        c.db_relaxed_connections = 2;
        c.db_acquire_timeout_s = 0.0;
        assert!(c.db_pools().is_err());
    }

    #[test]
    fn the_runtime_is_local_unless_kubernetes_is_asked_for() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            config: Config,
        }
        let c = Config::for_tests("postgres://localhost/x", PathBuf::from("/tmp"));
        assert_eq!(c.runtime, RuntimeKind::Local);
        let k = Wrap::try_parse_from([
            "hearth",
            "--runtime",
            "kubernetes",
            "--kube-install",
            "prod",
        ])
        .unwrap()
        .config;
        assert_eq!(k.runtime, RuntimeKind::Kubernetes);
        assert_eq!((k.kube_install.as_str(), k.kube_agent_port), ("prod", 7070));
        assert!(Wrap::try_parse_from(["hearth", "--runtime", "docker"]).is_err());
    }

    #[tokio::test]
    async fn kubernetes_needs_an_install_secret() {
        let mut c = Config::for_tests("postgres://localhost/x", PathBuf::from("/tmp"));
        c.runtime = RuntimeKind::Kubernetes;
        let err = crate::app::runtime(&c).await.unwrap_err().to_string();
        assert!(err.contains("HEARTH_INSTALL_SECRET"), "{err}");
        c.install_secret = Some("short".into());
        let err = crate::app::runtime(&c).await.unwrap_err().to_string();
        assert!(err.contains("16 bytes"), "{err}");
    }
}
