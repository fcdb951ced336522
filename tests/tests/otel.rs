//! OpenTelemetry end to end: real OTLP receivers on loopback (OTLP/HTTP with
//! axum, OTLP/gRPC with tonic), decoding what the service exports with the
//! OpenTelemetry proto definitions, and the span tree of a job submitted
//! with a W3C `traceparent`; the start-latency exemplar in `/metrics`.
//!
//! The in-process services of this test binary export through one process
//! subscriber ([`exporting`]); the replica test runs `hearth serve` binaries
//! configured by the `OTEL_*` environment of their own processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use hearth::telemetry::{Protocol, Settings, Telemetry};
use hearth_tests::*;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::{Value, json};
use uuid::Uuid;

/// A span as a receiver got it.
#[derive(Debug, Clone)]
struct Received {
    /// `service.name` of its resource.
    service: String,
    /// `http` or `grpc`.
    via: &'static str,
    trace: String,
    id: String,
    /// Empty for a root span.
    parent: String,
    name: String,
    start: u64,
    end: u64,
    attrs: HashMap<String, String>,
    /// 2 is `STATUS_CODE_ERROR`.
    status: i32,
}

impl Received {
    fn attr(&self, key: &str) -> &str {
        self.attrs.get(key).map_or("", String::as_str)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(a)) => a
            .values
            .iter()
            .map(|v| text(Some(v)))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    }
}

fn attributes(kvs: &[KeyValue]) -> HashMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
        .collect()
}

/// What the receivers got, decoded.
#[derive(Debug, Clone, Default)]
struct Collector(Arc<Mutex<Vec<Received>>>);

impl Collector {
    fn add(&self, req: ExportTraceServiceRequest, via: &'static str) {
        let mut spans = self.0.lock().unwrap();
        for rs in req.resource_spans {
            let resource = attributes(rs.resource.as_ref().map_or(&[][..], |r| &r.attributes));
            let service = resource.get("service.name").cloned().unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    spans.push(Received {
                        service: service.clone(),
                        via,
                        trace: hex(&s.trace_id),
                        id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        name: s.name.clone(),
                        start: s.start_time_unix_nano,
                        end: s.end_time_unix_nano,
                        attrs: attributes(&s.attributes),
                        status: s.status.as_ref().map_or(0, |st| st.code),
                    });
                }
            }
        }
    }

    fn spans(&self) -> Vec<Received> {
        self.0.lock().unwrap().clone()
    }

    /// OTLP/HTTP: `POST /v1/traces` with a protobuf body.
    async fn serve_http(self, listener: tokio::net::TcpListener) {
        async fn traces(State(c): State<Collector>, body: Bytes) -> axum::response::Response {
            match ExportTraceServiceRequest::decode(body) {
                Ok(req) => {
                    c.add(req, "http");
                    (
                        [(header::CONTENT_TYPE, "application/x-protobuf")],
                        ExportTraceServiceResponse::default().encode_to_vec(),
                    )
                        .into_response()
                }
                Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
            }
        }
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(traces))
            .with_state(self);
        axum::serve(listener, app).await.unwrap();
    }

    /// OTLP/gRPC: `TraceService/Export`.
    async fn serve_grpc(self, listener: tokio::net::TcpListener) {
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(self))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.add(request.into_inner(), "grpc");
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// This process's export: every in-process service of this binary sends its
/// spans over OTLP/HTTP to a receiver on a thread of its own (tests come and
/// go with their runtimes; the receiver and the exporter stay).
struct Exporting {
    collector: Collector,
    telemetry: Telemetry,
}

fn exporting() -> &'static Exporting {
    static EXPORTING: OnceLock<Exporting> = OnceLock::new();
    EXPORTING.get_or_init(|| {
        let collector = Collector::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let serving = collector.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                serving.serve_http(listener).await;
            });
        });
        let addr = rx.recv().unwrap();
        let settings = Settings {
            service_name: "hearth-otel-test".to_owned(),
            ..Settings::exporting_to(&format!("http://{addr}"), Protocol::HttpProtobuf)
        };
        let telemetry = hearth::telemetry::init(hearth::config::LogFormat::Text, &settings)
            .expect("the exporting subscriber installs (first in this process)");
        assert!(telemetry.is_exporting());
        Exporting {
            collector,
            telemetry,
        }
    })
}

impl Exporting {
    /// Flushes the exporter until the spans received satisfy `done`.
    async fn until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        eventually(what, async || {
            self.telemetry.flush().await.expect("spans export");
            let spans = self.collector.spans();
            done(&spans).then_some(spans)
        })
        .await
    }
}

/// A fresh `traceparent`: (trace id, parent span id, header value).
fn traceparent() -> (String, String, String) {
    let trace = Uuid::new_v4().simple().to_string();
    let parent = Uuid::new_v4().simple().to_string()[..16].to_owned();
    let header = format!("00-{trace}-{parent}-01");
    (trace, parent, header)
}

/// Prints the job's `TRACEPARENT` on stdout.
fn env_job(caller: &str) -> Value {
    json!({
        "kind": "tool_call",
        "profile": "cpu-small",
        "caller": caller,
        "command": ["sh", "-c", "printf '%s' \"$TRACEPARENT\""],
        "timeout_s": 60,
    })
}

/// The one span named `name` among `spans` of job `job_id`.
fn one<'a>(spans: &'a [Received], name: &str, job_id: &str) -> &'a Received {
    let found: Vec<&Received> = spans
        .iter()
        .filter(|s| s.name == name && s.attr("hearth.job.id") == job_id)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {name} span of job {job_id}: {found:#?}"
    );
    found[0]
}

fn job_spans_done(spans: &[Received], job_id: &str) -> bool {
    [
        "job.accept",
        "job.queue",
        "job.acquire",
        "job.bind",
        "job.run",
        "job.finish",
    ]
    .iter()
    .all(|name| {
        spans
            .iter()
            .any(|s| s.name == *name && s.attr("hearth.job.id") == job_id)
    })
}

#[tokio::test]
async fn a_jobs_spans_continue_the_callers_trace() {
    let otel = exporting();
    let app = spawn_app().await;
    let tenant = app.create_tenant("traced").await;
    let (trace, caller_span, tp) = traceparent();
    let r = app
        .http
        .post(app.url("/v1/jobs?wait=60"))
        .bearer_auth(&tenant.key)
        .header("traceparent", &tp)
        .json(&env_job("agent-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let job: Value = r.json().await.unwrap();
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["source"], "cold");
    let job_id = job["id"].as_str().unwrap();
    let pod = job["pods"][0].as_str().unwrap();

    let spans = otel
        .until("the job's spans", |s| job_spans_done(s, job_id))
        .await;
    let of_trace: Vec<Received> = spans.iter().filter(|s| s.trace == trace).cloned().collect();

    // The request continues the caller's span; the job hangs from its accept span.
    let request = of_trace
        .iter()
        .find(|s| s.name == "POST /v1/jobs")
        .unwrap_or_else(|| panic!("no request span in {of_trace:#?}"));
    assert_eq!(request.parent, caller_span);
    assert_eq!(request.service, "hearth-otel-test");
    assert_eq!(request.attr("http.route"), "/v1/jobs");
    assert_eq!(request.attr("http.response.status_code"), "200");
    assert_eq!(request.attr("tenant"), tenant.tenant_id);
    let accept = one(&of_trace, "job.accept", job_id);
    assert_eq!(accept.parent, request.id);
    assert_eq!(accept.attr("hearth.tenant.id"), tenant.tenant_id);
    assert_eq!(accept.attr("hearth.job.caller"), "agent-1");
    assert_eq!(accept.attr("hearth.job.profile"), "cpu-small");
    assert_eq!(accept.attr("hearth.job.kind"), "tool_call");
    assert!(
        of_trace
            .iter()
            .any(|s| s.name == "insert" && s.parent == accept.id),
        "the store's insert runs inside the accept span"
    );
    let (queue, acquire, bind, run, finish) = (
        one(&of_trace, "job.queue", job_id),
        one(&of_trace, "job.acquire", job_id),
        one(&of_trace, "job.bind", job_id),
        one(&of_trace, "job.run", job_id),
        one(&of_trace, "job.finish", job_id),
    );
    for s in [queue, acquire, run, finish] {
        assert_eq!(s.parent, accept.id, "{} hangs from the accept span", s.name);
    }
    assert_eq!(bind.parent, run.id, "the agent binds within the run");
    for s in [queue, acquire, bind, run, finish] {
        assert_eq!(s.attr("hearth.tenant.id"), tenant.tenant_id, "{}", s.name);
        assert!(s.start <= s.end, "{}", s.name);
    }
    for s in [queue, acquire, bind, run] {
        assert_eq!(s.attr("hearth.job.attempt"), "1", "{}", s.name);
    }
    // The phases follow each other.
    assert_eq!(queue.end, acquire.start);
    assert!(acquire.end <= run.start);
    assert!(run.start <= bind.start && bind.end <= run.end);
    assert!(run.end <= finish.start);
    assert_eq!(acquire.attr("hearth.pod.source"), "cold");
    assert_eq!(acquire.attr("hearth.pod.id"), pod);
    assert_eq!(acquire.attr("hearth.pod.reason"), "pod_started");
    assert!(!acquire.attr("hearth.pod.reason_message").is_empty());
    assert_eq!(run.attr("hearth.job.state"), "succeeded");
    assert_eq!(run.attr("hearth.job.exit_code"), "0");
    assert_eq!(finish.attr("hearth.job.state"), "succeeded");
    assert_ne!(run.status, 2);
    // The job's processes continue the run span.
    assert_eq!(job["stdout"], format!("00-{trace}-{}-01\n", run.id));

    // The caller's next job: warm, in a new trace of its own (no traceparent).
    let (status, next) = app
        .submit(&tenant.key, &env_job("agent-1"), Some(60.0))
        .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["source"], "warm");
    let next_id = next["id"].as_str().unwrap();
    let spans = otel
        .until("the next job's spans", |s| job_spans_done(s, next_id))
        .await;
    let accept = one(&spans, "job.accept", next_id);
    assert_ne!(accept.trace, trace);
    let request = spans.iter().find(|s| s.id == accept.parent).unwrap();
    assert_eq!(
        request.parent, "",
        "a request without traceparent starts a trace"
    );
    let acquire = one(&spans, "job.acquire", next_id);
    assert_eq!(acquire.trace, accept.trace);
    assert_eq!(acquire.attr("hearth.pod.source"), "warm");
    assert_eq!(acquire.attr("hearth.pod.reason"), "warm_affinity");
    assert_eq!(acquire.attr("hearth.pod.id"), pod);
    let run = one(&spans, "job.run", next_id);
    assert_eq!(
        next["stdout"],
        format!("00-{}-{}-01\n", accept.trace, run.id)
    );
}

#[tokio::test]
async fn a_failed_job_marks_its_spans_failed() {
    let otel = exporting();
    let app = spawn_app().await;
    let tenant = app.create_tenant("failing").await;
    let (trace, _, tp) = traceparent();
    let r = app
        .http
        .post(app.url("/v1/jobs?wait=60"))
        .bearer_auth(&tenant.key)
        .header("traceparent", &tp)
        .json(&json!({
            "kind": "tool_call", "profile": "cpu-small", "caller": "c",
            "command": ["sh", "-c", "exit 3"], "timeout_s": 60,
        }))
        .send()
        .await
        .unwrap();
    let job: Value = r.json().await.unwrap();
    assert_eq!(job["state"], "failed", "{job}");
    let job_id = job["id"].as_str().unwrap();
    let spans = otel
        .until("the failed job's spans", |s| job_spans_done(s, job_id))
        .await;
    let run = one(&spans, "job.run", job_id);
    assert_eq!(run.trace, trace);
    assert_eq!(run.attr("hearth.job.exit_code"), "3");
    assert_eq!(run.status, 2, "error status");
    let finish = one(&spans, "job.finish", job_id);
    assert_eq!(finish.attr("hearth.job.state"), "failed");
    assert_eq!(finish.attr("hearth.job.error_code"), "nonzero_exit");
}

#[tokio::test]
async fn the_start_latency_exemplar_leads_to_the_trace() {
    let _ = exporting();
    let app = spawn_app().await;
    let tenant = app.create_tenant("exemplary").await;
    let (trace, _, tp) = traceparent();
    let r = app
        .http
        .post(app.url("/v1/jobs?wait=60"))
        .bearer_auth(&tenant.key)
        .header("traceparent", &tp)
        .json(&python_job("agent-1", "print('hi')"))
        .send()
        .await
        .unwrap();
    let job: Value = r.json().await.unwrap();
    assert_eq!(job["state"], "succeeded", "{job}");

    // What Prometheus asks for: OpenMetrics, with exemplars.
    let r = app
        .http
        .get(app.url("/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let exemplar = format!("# {{trace_id=\"{trace}\"}}");
    let bucket = text
        .lines()
        .find(|l| l.starts_with("hearth_job_start_seconds_bucket{") && l.contains(&exemplar))
        .unwrap_or_else(|| panic!("no bucket with the job's trace in\n{text}"));
    assert!(bucket.contains("source=\"cold\""), "{bucket}");
    // `... 1 # {trace_id="..."} <seconds> <timestamp>`: the value is the job's start latency.
    let after = bucket.split(&exemplar).nth(1).unwrap();
    let seconds: f64 = after.split_whitespace().next().unwrap().parse().unwrap();
    let timing = &job["timing"];
    let start_ms = timing["queued_ms"].as_f64().unwrap()
        + timing["acquire_ms"].as_f64().unwrap()
        + timing["bind_ms"].as_f64().unwrap();
    assert!(
        seconds.mul_add(1000.0, -start_ms).abs() < 1.0,
        "{seconds} s vs {start_ms} ms"
    );

    // Anyone else: the classic text, which has no exemplars.
    let r = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    assert!(
        !text.contains("trace_id") && !text.contains("# EOF"),
        "{text}"
    );
    assert!(
        text.contains("hearth_jobs_started_total{profile=\"cpu-small\",source=\"cold\"} 1\n"),
        "{text}"
    );
}

/// `hearth serve` on `db`, its OpenTelemetry configured by `env` alone.
async fn replica(db: &str, env: &[(&str, String)]) -> Served {
    let mut settings = vec![
        ("HEARTH_STANDBY_MIN", "0"),
        ("HEARTH_STANDBY_MAX", "0"),
        // Logs quiet: spans are exported whatever RUST_LOG says.
        ("RUST_LOG", "warn"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    settings.extend(env.iter().map(|(k, v)| (*k, v.as_str())));
    Served::start_fresh(db, &settings).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_accepted_by_a_follower_continues_its_trace_on_the_leader() {
    let _ = exporting();
    let db = fresh_database_url();
    let collector = Collector::default();
    let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (http_addr, grpc_addr) = (
        http_listener.local_addr().unwrap(),
        grpc_listener.local_addr().unwrap(),
    );
    tokio::spawn(collector.clone().serve_http(http_listener));
    tokio::spawn(collector.clone().serve_grpc(grpc_listener));

    // The leader exports over gRPC, the follower over OTLP/HTTP to a traces
    // endpoint of its own.
    let leader = replica(
        &db,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{grpc_addr}")),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
            ("OTEL_SERVICE_NAME", "hearth-leader".to_owned()),
        ],
    )
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    eventually("the first replica to lead", async || {
        let m = http
            .get(format!("{}/metrics", leader.base))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        m.contains("\nhearth_leader 1\n").then_some(())
    })
    .await;
    let follower = replica(
        &db,
        &[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                format!("http://{http_addr}/v1/traces"),
            ),
            ("OTEL_SERVICE_NAME", "hearth-follower".to_owned()),
        ],
    )
    .await;

    let r = http
        .post(format!("{}/v1/admin/tenants", follower.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "relayed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let tenant: Value = r.json().await.unwrap();
    let key = tenant["api_key"].as_str().unwrap();
    let (trace, caller_span, tp) = traceparent();
    let r = http
        .post(format!("{}/v1/jobs?wait=60", follower.base))
        .bearer_auth(key)
        .header("traceparent", &tp)
        .json(&env_job("agent-9"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let job: Value = r.json().await.unwrap();
    assert_eq!(job["state"], "succeeded", "{job}");
    let job_id = job["id"].as_str().unwrap();

    let spans = eventually("both replicas' spans", async || {
        let spans = collector.spans();
        let answered = spans
            .iter()
            .any(|s| s.trace == trace && s.name == "POST /v1/jobs");
        (answered && job_spans_done(&spans, job_id)).then_some(spans)
    })
    .await;
    let request = spans
        .iter()
        .find(|s| s.trace == trace && s.name == "POST /v1/jobs")
        .expect("the follower's request span");
    assert_eq!(request.parent, caller_span);
    let accept = one(&spans, "job.accept", job_id);
    for s in [request, accept] {
        assert_eq!((s.service.as_str(), s.via), ("hearth-follower", "http"));
    }
    assert_eq!(accept.parent, request.id);
    for name in ["job.queue", "job.acquire", "job.run", "job.finish"] {
        let s = one(&spans, name, job_id);
        assert_eq!(
            (s.service.as_str(), s.via),
            ("hearth-leader", "grpc"),
            "{name}"
        );
        assert_eq!(s.trace, trace, "{name}");
        assert_eq!(s.parent, accept.id, "{name}");
    }
    let run = one(&spans, "job.run", job_id);
    assert_eq!(one(&spans, "job.bind", job_id).parent, run.id);
    assert_eq!(job["stdout"], format!("00-{trace}-{}-01\n", run.id));
    drop((follower, leader));
}
