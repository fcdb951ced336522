//! Test support: start the real service on port 0 against real Postgres (a
//! fresh database per test) and the real local runtime, and talk HTTP to it.

use std::path::PathBuf;
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

/// A fresh database URL (the service creates it on start).
pub fn fresh_database_url() -> String {
    format!("{}/hearth_test_{}", server_url(), Uuid::new_v4().simple())
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
    let path = std::env::var_os("HEARTH_AGENT_BIN")
        .map_or_else(|| bin_dir().join("hearth-agent"), PathBuf::from);
    assert!(
        path.is_file(),
        "{} missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A fresh state directory for a test's pods.
pub fn state_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-test-{}", Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("state dir");
    dir
}

/// A test configuration: fresh database and state dir, admin token and an
/// HS256 JWT issuer. No standby pods, so a new caller's first job is cold
/// unless a test asks for standby (`standby_min`/`standby_max`).
pub fn config() -> hearth::Config {
    let mut c = hearth::Config::for_tests(&fresh_database_url(), state_dir());
    c.admin_token = Some(ADMIN_TOKEN.into());
    c.jwt_secret = Some(JWT_SECRET.into());
    c.jwt_issuer = Some(JWT_ISSUER.to_owned());
    c.jwt_audience = Some(JWT_AUDIENCE.to_owned());
    c.agent_bin = Some(agent_bin());
    c.db_connections = 8;
    c.standby_min = 0;
    c.standby_max = 0;
    c
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
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.running.abort();
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(config()).await
}

pub async fn spawn_app_with(config: hearth::Config) -> TestApp {
    hearth::cli::init_tracing(hearth::config::LogFormat::Text);
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
pub fn wheelhouse() -> PathBuf {
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
