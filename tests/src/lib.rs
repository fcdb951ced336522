//! Test support: start the real service on port 0 against real Postgres (a
//! fresh database per test, dropped when the test ends, passed or panicked)
//! and the real local runtime, and talk HTTP to it.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

pub const ADMIN_TOKEN: &str = "test-admin-token";
pub const JWT_SECRET: &str = "test-jwt-secret-with-enough-entropy";
pub const JWT_ISSUER: &str = "https://issuer.test";
pub const JWT_AUDIENCE: &str = "hearth";

/// Postgres server URL (without a database) for tests.
pub fn server_url() -> String {
    std::env::var("HEARTH_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// A fresh database URL (the service creates it on start). The database is
/// dropped when the returned guard is.
pub fn fresh_database_url() -> TestDb {
    let name = format!("hearth_test_{}", Uuid::new_v4().simple());
    TestDb {
        url: format!("{}/{name}", server_url()),
        name,
    }
}

/// The URL of a test's own database, which it owns: dropping this drops the
/// database (`WITH (FORCE)`, so connections still open do not stop it),
/// whether the test passed or is unwinding from a panic. Derefs to the URL.
#[derive(Debug)]
pub struct TestDb {
    url: String,
    name: String,
}

impl TestDb {
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Deref for TestDb {
    type Target = str;
    fn deref(&self) -> &str {
        &self.url
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // On a thread of its own with its own runtime: this may run inside a
        // test's runtime, which must not block on another, or while a panic
        // unwinds. Never panics itself (a panic while unwinding aborts).
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || drop_database(&name)).join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not drop test database {}: {e}", self.name),
            Err(_) => eprintln!("dropping test database {} panicked", self.name),
        }
    }
}

fn drop_database(name: &str) -> Result<(), sqlx::Error> {
    use sqlx::Connection;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", server_url())).await?;
        // Identifiers cannot be bound as parameters; quote it as Postgres does.
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "drop database if exists {quoted} with (force)"
        )))
        .execute(&mut admin)
        .await?;
        admin.close().await
    })
}

/// A test's service configuration and the database it owns: a clone shares
/// the database, which is dropped with the last clone (and the last
/// [`TestApp`] started from one). Derefs to [`hearth::Config`]; leave its
/// `database_url` as it is.
#[derive(Debug, Clone)]
pub struct TestConfig {
    config: hearth::Config,
    db: Arc<TestDb>,
    /// The state directory, removed with the last clone (and the last
    /// [`TestApp`] started from one).
    state: Arc<StateDir>,
}

impl TestConfig {
    /// The database this configuration's services use.
    pub fn database(&self) -> &TestDb {
        &self.db
    }
}

impl Deref for TestConfig {
    type Target = hearth::Config;
    fn deref(&self) -> &hearth::Config {
        &self.config
    }
}

impl DerefMut for TestConfig {
    fn deref_mut(&mut self) -> &mut hearth::Config {
        &mut self.config
    }
}

/// The directory holding the workspace's built binaries (`hearth`, `hearth-agent`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> -> target/<profile>
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf()
}

/// The agent binary: `$HEARTH_AGENT_BIN` or the workspace's build.
pub fn agent_bin() -> PathBuf {
    hearth_runtime::test_agent_bin()
}

/// A free TCP port on loopback (free when asked; a test binds it soon after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A `hearth serve` process of the workspace's build, as an operator runs
/// it: its own port and state directory, settings from the environment.
/// Killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Served {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// A state directory of its own, if [`Served::start_fresh`] made one:
    /// removed after the process is killed.
    _state: Option<StateDir>,
}

impl Served {
    /// Starts `hearth serve` on the database `db` with pods under `state`
    /// (and the test admin token), `env` added to or overriding its
    /// settings, and waits until `/healthz` answers 200. Panics if it exits
    /// or has not answered within 30 s.
    pub async fn start(db: &str, state: &Path, env: &[(&str, &str)]) -> Served {
        let port = free_port();
        let mut cmd = std::process::Command::new(bin_dir().join("hearth"));
        cmd.arg("serve")
            .env("DATABASE_URL", db)
            .env("HEARTH_LISTEN", format!("127.0.0.1:{port}"))
            .env("HEARTH_STATE_DIR", state)
            .env("HEARTH_AGENT_BIN", agent_bin())
            .env("HEARTH_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut served = Served {
            child: cmd
                .spawn()
                .expect("hearth binary (cargo build --workspace --bins)"),
            base: format!("http://127.0.0.1:{port}"),
            _state: None,
        };
        let http = reqwest::Client::new();
        for _ in 0..600 {
            let health = http.get(served.url("/healthz")).send().await;
            if health.is_ok_and(|r| r.status() == 200) {
                return served;
            }
            if let Some(status) = served.exited() {
                panic!("hearth exited at start: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("hearth did not come up within 30 s");
    }

    /// [`Served::start`] with a fresh state directory of its own.
    pub async fn start_fresh(db: &str, env: &[(&str, &str)]) -> Served {
        let state = state_dir();
        let mut served = Served::start(db, &state, env).await;
        served._state = Some(state);
        served
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`, and reaps the process.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// How the process ended, if it has.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits at most `limit` for the process to exit by itself.
    pub async fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory for a test (a service's state, files it reads),
/// removed with everything in it when dropped. Derefs to its path.
#[derive(Debug)]
pub struct StateDir(PathBuf);

impl Deref for StateDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for StateDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh state directory for a test's pods (see [`StateDir`]).
pub fn state_dir() -> StateDir {
    let dir = std::env::temp_dir().join(format!("hearth-test-{}", Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("state dir");
    StateDir(dir)
}

/// A test configuration: fresh database and state dir, admin token and an
/// HS256 JWT issuer. No standby pods, so a new caller's first job is cold
/// unless a test asks for standby (`standby_min`/`standby_max`).
pub fn config() -> TestConfig {
    let db = fresh_database_url();
    let state = state_dir();
    let mut c = hearth::Config::for_tests(db.url(), state.to_path_buf());
    c.admin_token = Some(ADMIN_TOKEN.into());
    c.jwt_secret = Some(JWT_SECRET.into());
    c.jwt_issuer = Some(JWT_ISSUER.to_owned());
    c.jwt_audience = Some(JWT_AUDIENCE.to_owned());
    c.agent_bin = Some(agent_bin());
    c.db_max_connections = 8;
    c.standby_min = 0;
    c.standby_max = 0;
    TestConfig {
        config: c,
        db: Arc::new(db),
        state: Arc::new(state),
    }
}

/// Polls `f` every 50 ms until it returns something, for at most 30 s.
pub async fn eventually<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running service and a client for it.
#[derive(Debug)]
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub running: hearth::Running,
    pub runtime: Arc<hearth_runtime::local::LocalRuntime>,
    /// Last, so that they go after the service.
    db: Arc<TestDb>,
    _state: Arc<StateDir>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.running.abort();
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(config()).await
}

pub async fn spawn_app_with(config: TestConfig) -> TestApp {
    hearth::cli::init_tracing(hearth::config::LogFormat::Text);
    let TestConfig { config, db, state } = config;
    let runtime = Arc::new(hearth::app::local_runtime(&config).expect("local runtime"));
    let running = hearth::start(config, runtime.clone())
        .await
        .expect("service starts");
    TestApp {
        base: format!("http://{}", running.addr),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client"),
        running,
        runtime,
        db,
        _state: state,
    }
}

/// A tenant and its API key.
#[derive(Debug, Clone)]
pub struct TestTenant {
    pub tenant_id: String,
    pub key: String,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The service's database.
    pub fn database(&self) -> &TestDb {
        &self.db
    }

    pub async fn create_tenant(&self, name: &str) -> TestTenant {
        let r = self
            .http
            .post(self.url("/v1/admin/tenants"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({ "name": name }))
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 201, "create tenant");
        let v: Value = r.json().await.expect("json");
        TestTenant {
            tenant_id: v["tenant_id"].as_str().expect("tenant_id").to_owned(),
            key: v["api_key"].as_str().expect("api_key").to_owned(),
        }
    }

    /// Sends `req` with the bearer `key`; returns the status and the JSON
    /// body (null when there is none).
    async fn call(&self, req: reqwest::RequestBuilder, key: &str) -> (u16, Value) {
        let r = req.bearer_auth(key).send().await.expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `POST /v1/jobs?wait=...`; returns (status, body).
    pub async fn submit(&self, key: &str, job: &Value, wait_s: Option<f64>) -> (u16, Value) {
        let mut url = self.url("/v1/jobs");
        if let Some(w) = wait_s {
            url.push_str(&format!("?wait={w}"));
        }
        let (status, body) = self.call(self.http.post(url).json(job), key).await;
        assert!(
            !body.is_null(),
            "POST /v1/jobs answered {status} without a JSON body"
        );
        (status, body)
    }

    pub async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        self.call(self.http.get(self.url(path)), key).await
    }

    pub async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        self.call(self.http.post(self.url(path)).json(body), key)
            .await
    }

    pub async fn put(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        self.call(self.http.put(self.url(path)).json(body), key)
            .await
    }

    pub async fn delete(&self, key: &str, path: &str) -> (u16, Value) {
        self.call(self.http.delete(self.url(path)), key).await
    }

    /// `GET` without credentials, as text.
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let r = self.http.get(self.url(path)).send().await.expect("request");
        let status = r.status().as_u16();
        (status, r.text().await.expect("text body"))
    }

    /// Polls a job until it is final.
    pub async fn wait_final(&self, key: &str, id: &str) -> Value {
        let (status, job) = self.get(key, &format!("/v1/jobs/{id}?wait=60")).await;
        assert_eq!(status, 200, "job {id} did not finish: {job}");
        job
    }
}

/// A Python tool call job.
pub fn python_job(caller: &str, code: &str) -> Value {
    json!({
        "kind": "tool_call",
        "profile": "cpu-small",
        "caller": caller,
        "code": {"files": {"main.py": code}},
        "command": ["python3", "main.py"],
        "timeout_s": 60,
    })
}

/// Whether any process's command line contains `marker`.
pub fn process_with_marker(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(marker))
            .unwrap_or(false)
    })
}

/// Runs a benchmark's body on a multi-threaded runtime (benches have no
/// `#[tokio::main]`).
pub fn block_on<F: std::future::Future>(body: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(body)
}

/// A fresh wheelhouse holding a one-module wheel `hearthbenchpkg-1.0`, built
/// by hand (a wheel is a zip).
pub fn wheelhouse() -> StateDir {
    let dir = state_dir();
    build_wheel(&dir);
    dir
}

fn build_wheel(dir: &std::path::Path) {
    let script = r#"
import base64, hashlib, sys, zipfile
out = sys.argv[1] + "/hearthbenchpkg-1.0-py3-none-any.whl"
files = {
    "hearthbenchpkg/__init__.py": "VALUE = 42\n",
    "hearthbenchpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hearthbenchpkg\nVersion: 1.0\n",
    "hearthbenchpkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hearth-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(out, "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("hearthbenchpkg-1.0.dist-info/RECORD,,")
    z.writestr("hearthbenchpkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let ok = std::process::Command::new("python3")
        .args(["-c", script, &dir.display().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "building the bench wheel failed");
}

/// The `p` quantile (0..=1) of sorted samples, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Where `value` departs from `schema`, a schema of the OpenAPI document
/// `doc`: wrong types, missing required properties and properties the schema
/// does not declare (an object that declares properties is taken as closed,
/// so that what is sent and what is documented cannot drift apart). Handles
/// the subset the service's document uses: `$ref`, `allOf`, `oneOf`/`anyOf`,
/// `type` (one or a list), `enum`, `properties`, `required`,
/// `additionalProperties` and `items`. Empty when the value conforms.
pub fn schema_errors(doc: &Value, schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check_schema(doc, schema, value, "$", true, &mut errors);
    errors
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("a local $ref");
            let target = doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling $ref {r}"));
            resolve(doc, target)
        }
        None => schema,
    }
}

/// The property names `schema` declares, through `allOf`.
fn declared(doc: &Value, schema: &Value, names: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    if let Some(props) = schema["properties"].as_object() {
        names.extend(props.keys().cloned());
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        declared(doc, part, names);
    }
}

fn type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("unknown schema type {other}"),
    }
}

/// `closed`: flag undeclared properties (off for the parts of an `allOf`,
/// which each declare only some of them; the whole checks them).
fn check_schema(
    doc: &Value,
    schema: &Value,
    value: &Value,
    at: &str,
    closed: bool,
    errors: &mut Vec<String>,
) {
    let schema = resolve(doc, schema);
    for part in schema["allOf"].as_array().into_iter().flatten() {
        check_schema(doc, part, value, at, false, errors);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(parts) = schema[key].as_array() {
            let fits = parts
                .iter()
                .any(|p| schema_errors(doc, p, value).is_empty());
            if !fits {
                errors.push(format!("{at}: matches none of {key}: {value}"));
            }
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| type_matches(t, value)) {
        errors.push(format!("{at}: expected {types:?}, got {value}"));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {allowed:?}"));
    }
    if let Some(object) = value.as_object() {
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().expect("required names are strings");
            if !object.contains_key(name) {
                errors.push(format!("{at}: required property `{name}` missing"));
            }
        }
        let props = schema["properties"].as_object();
        let mut names = Vec::new();
        declared(doc, schema, &mut names);
        for (name, v) in object {
            let here = format!("{at}.{name}");
            if let Some(p) = props.and_then(|p| p.get(name)) {
                check_schema(doc, p, v, &here, true, errors);
                continue;
            }
            match &schema["additionalProperties"] {
                Value::Bool(false) => {
                    errors.push(format!("{here}: the schema forbids this property"));
                }
                Value::Object(_) => {
                    check_schema(doc, &schema["additionalProperties"], v, &here, true, errors)
                }
                Value::Bool(true) => {}
                _ if closed && !names.is_empty() && !names.contains(name) => {
                    errors.push(format!("{here}: sent but not documented"));
                }
                _ => {}
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            check_schema(doc, items, v, &format!("{at}[{i}]"), true, errors);
        }
    }
}
