//! OpenTelemetry: trace export over OTLP, W3C trace context in and out, and
//! the spans of a job's life.
//!
//! Export is configured by the standard `OTEL_*` variables ([`Settings`],
//! part of `hearth serve`'s [`crate::Config`]) and is off without an
//! endpoint: then no exporter, no OpenTelemetry layer and no job span exist,
//! and all that is left is handing a caller's `traceparent` on to its job.
//!
//! Two kinds of spans reach the exporter through one tracer provider:
//! * `tracing` spans (every request, handler and store call) through the
//!   `tracing-opentelemetry` layer; a request continues the caller's
//!   `traceparent` ([`continue_request`]);
//! * a job's phases, which the scheduler writes with explicit times and
//!   parents as they end ([`Tracer`], [`JobSpan`]): a job runs on whichever
//!   replica leads, possibly long after the request that accepted it, so its
//!   spans hang from the trace context stored with the job ([`TraceParent`]),
//!   not from whatever span is current.
//!
//! The tracer travels with the `tracing` subscriber it belongs to (see
//! [`Tracer::current`]), so there is no process-global OpenTelemetry state.
//! This module does no I/O of its own besides the exporter's.

use std::borrow::Cow;
use std::time::SystemTime;

use axum::http::HeaderMap;
use clap::{Args, ValueEnum};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    SpanContext, Status, TraceContextExt, TraceId, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler as SdkSampler, SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;

use crate::config::LogFormat;

/// `OTEL_EXPORTER_OTLP_PROTOCOL`: how spans are sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Protobuf over HTTP (`POST <endpoint>/v1/traces`).
    #[default]
    #[value(name = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/gRPC (`opentelemetry.proto.collector.trace.v1.TraceService/Export`).
    #[value(name = "grpc")]
    Grpc,
}

/// `OTEL_TRACES_SAMPLER`: which traces are recorded and exported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum SamplerKind {
    #[value(name = "always_on")]
    AlwaysOn,
    #[value(name = "always_off")]
    AlwaysOff,
    /// A share of traces, `OTEL_TRACES_SAMPLER_ARG` (0..=1).
    #[value(name = "traceidratio")]
    TraceIdRatio,
    /// The caller's decision when a request carries one, else always on.
    #[default]
    #[value(name = "parentbased_always_on")]
    ParentBasedAlwaysOn,
    #[value(name = "parentbased_always_off")]
    ParentBasedAlwaysOff,
    #[value(name = "parentbased_traceidratio")]
    ParentBasedTraceIdRatio,
}

/// OpenTelemetry trace export, from the standard `OTEL_*` variables. Off
/// unless an endpoint is set. Tests set the fields directly (no process
/// environment involved).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "OpenTelemetry")]
pub struct Settings {
    /// OTLP endpoint of every signal: traces go to `<endpoint>/v1/traces`
    /// with `http/protobuf` (e.g. `http://127.0.0.1:4318`), to the endpoint
    /// itself with `grpc` (e.g. `http://127.0.0.1:4317`). Unset, with no
    /// traces endpoint either: no trace export.
    #[arg(long = "otlp-endpoint", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub endpoint: Option<String>,

    /// OTLP endpoint of traces, used as given; takes precedence over
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    #[arg(
        long = "otlp-traces-endpoint",
        env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )]
    pub traces_endpoint: Option<String>,

    /// OTLP protocol: `http/protobuf` or `grpc`. Plain `http://` endpoints
    /// only (no TLS).
    #[arg(
        long = "otlp-protocol",
        env = "OTEL_EXPORTER_OTLP_PROTOCOL",
        value_enum,
        default_value = "http/protobuf"
    )]
    pub protocol: Protocol,

    /// `service.name` of the exported spans (`OTEL_RESOURCE_ATTRIBUTES` adds
    /// more resource attributes).
    #[arg(
        long = "otel-service-name",
        env = "OTEL_SERVICE_NAME",
        default_value = "hearth"
    )]
    pub service_name: String,

    /// Trace sampler: `always_on`, `always_off`, `traceidratio`,
    /// `parentbased_always_on`, `parentbased_always_off` or
    /// `parentbased_traceidratio`.
    #[arg(
        long = "otel-traces-sampler",
        env = "OTEL_TRACES_SAMPLER",
        value_enum,
        default_value = "parentbased_always_on"
    )]
    pub sampler: SamplerKind,

    /// The ratio of the `traceidratio` samplers, 0..=1 (default 1).
    #[arg(long = "otel-traces-sampler-arg", env = "OTEL_TRACES_SAMPLER_ARG")]
    pub sampler_arg: Option<f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            endpoint: None,
            traces_endpoint: None,
            protocol: Protocol::HttpProtobuf,
            service_name: "hearth".to_owned(),
            sampler: SamplerKind::ParentBasedAlwaysOn,
            sampler_arg: None,
        }
    }
}

impl Settings {
    /// Export to `endpoint` (the base endpoint, as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// has it) with `protocol`, everything else by default.
    pub fn exporting_to(endpoint: &str, protocol: Protocol) -> Self {
        Settings {
            endpoint: Some(endpoint.to_owned()),
            protocol,
            ..Settings::default()
        }
    }

    /// Where spans are sent; `None`: export is off.
    pub fn traces_url(&self) -> Option<String> {
        fn set(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|s| !s.is_empty())
        }
        if let Some(url) = set(self.traces_endpoint.as_deref()) {
            return Some(url.to_owned());
        }
        let base = set(self.endpoint.as_deref())?;
        Some(match self.protocol {
            Protocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
            Protocol::Grpc => base.to_owned(),
        })
    }

    fn sampler(&self) -> anyhow::Result<SdkSampler> {
        let ratio = || -> anyhow::Result<f64> {
            let r = self.sampler_arg.unwrap_or(1.0);
            anyhow::ensure!(
                (0.0..=1.0).contains(&r),
                "OTEL_TRACES_SAMPLER_ARG must be a ratio between 0 and 1, not {r}"
            );
            Ok(r)
        };
        let parent_based = |root: SdkSampler| SdkSampler::ParentBased(Box::new(root));
        Ok(match self.sampler {
            SamplerKind::AlwaysOn => SdkSampler::AlwaysOn,
            SamplerKind::AlwaysOff => SdkSampler::AlwaysOff,
            SamplerKind::TraceIdRatio => SdkSampler::TraceIdRatioBased(ratio()?),
            SamplerKind::ParentBasedAlwaysOn => parent_based(SdkSampler::AlwaysOn),
            SamplerKind::ParentBasedAlwaysOff => parent_based(SdkSampler::AlwaysOff),
            SamplerKind::ParentBasedTraceIdRatio => {
                parent_based(SdkSampler::TraceIdRatioBased(ratio()?))
            }
        })
    }
}

/// A tracer provider exporting as `settings` say, or `None` when export is
/// off. With `grpc`, call it inside a Tokio runtime (the channel's worker
/// runs there) and keep that runtime alive while spans are exported.
///
/// # Errors
/// The endpoint or the sampler's argument is invalid.
pub fn tracer_provider(settings: &Settings) -> anyhow::Result<Option<SdkTracerProvider>> {
    use opentelemetry_otlp::{SpanExporter, WithExportConfig};
    let Some(url) = settings.traces_url() else {
        return Ok(None);
    };
    let exporter = match settings.protocol {
        Protocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(url.clone())
            .build()?,
        Protocol::Grpc => SpanExporter::builder()
            .with_tonic()
            .with_protocol(opentelemetry_otlp::Protocol::Grpc)
            .with_endpoint(url.clone())
            .build()?,
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(settings.sampler()?)
        .with_resource(
            Resource::builder()
                .with_service_name(settings.service_name.clone())
                .build(),
        )
        .build();
    Ok(Some(provider))
}

/// The process's telemetry: the tracer provider while spans are exported.
/// Flush it before the process ends ([`Telemetry::shutdown`]).
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn is_exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports every span ended so far.
    ///
    /// # Errors
    /// The exporter failed or timed out.
    pub async fn flush(&self) -> anyhow::Result<()> {
        self.blocking(|p| p.force_flush()).await
    }

    /// Exports what is left and stops the exporter; spans ended after this
    /// are dropped.
    ///
    /// # Errors
    /// The exporter failed or timed out.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        self.blocking(|p| p.shutdown()).await
    }

    /// Runs `f` on the provider off the async workers: the batch processor
    /// blocks until its worker thread answers, and a gRPC export needs the
    /// runtime's threads meanwhile.
    async fn blocking(
        &self,
        f: fn(&SdkTracerProvider) -> opentelemetry_sdk::error::OTelSdkResult,
    ) -> anyhow::Result<()> {
        let Some(provider) = self.provider.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || f(&provider))
            .await?
            .map_err(|e| anyhow::anyhow!("trace export: {e}"))
    }
}

/// Installs the process's `tracing` subscriber: logs on stderr (`RUST_LOG`,
/// default `info`) and, when `settings` enable export, spans at `info` and
/// above to the OTLP endpoint. Without export, an already installed
/// subscriber is kept (tests install one per process).
///
/// # Errors
/// The exporter could not be built, or export was asked for while another
/// subscriber is installed already.
pub fn init(format: LogFormat, settings: &Settings) -> anyhow::Result<Telemetry> {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::filter::{LevelFilter, Targets, filter_fn};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let provider = tracer_provider(settings)?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs.boxed(),
        LogFormat::Json => logs.json().boxed(),
    }
    .with_filter(filter);
    let export = provider.as_ref().map(|p| {
        let tracer = p.tracer("hearth");
        // The exporter's own HTTP and gRPC stacks never feed spans back.
        let spans = Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("h2", LevelFilter::OFF)
            .with_target("hyper", LevelFilter::OFF)
            .with_target("hyper_util", LevelFilter::OFF)
            .with_target("tonic", LevelFilter::OFF)
            .with_target("tower", LevelFilter::OFF)
            .with_target("reqwest", LevelFilter::OFF)
            .with_target("opentelemetry", LevelFilter::OFF)
            .with_target("opentelemetry_sdk", LevelFilter::OFF)
            .with_target("opentelemetry_otlp", LevelFilter::OFF);
        tracing_opentelemetry::layer()
            .with_tracer(tracer.clone())
            .with_filter(spans)
            // Sees nothing; only carries the tracer (see `Tracer::current`).
            .and_then(TracerLayer(tracer).with_filter(filter_fn(|_| false)))
    });
    let installed = tracing_subscriber::registry()
        .with(logs)
        .with(export)
        .try_init();
    match installed {
        Ok(()) => {
            if let Some(url) = settings.traces_url() {
                tracing::info!(%url, protocol = ?settings.protocol, "exporting traces");
            }
        }
        Err(e) if provider.is_some() => {
            anyhow::bail!("trace export needs its own tracing subscriber: {e}")
        }
        // Logging is set up already (a test process): keep it.
        Err(_) => {}
    }
    Ok(Telemetry { provider })
}

/// Carries the tracer of the export layer, so that code that writes spans
/// with explicit parents and times ([`Tracer`]) uses the same provider as
/// the `tracing` spans, found through the subscriber in effect.
#[derive(Debug, Clone)]
struct TracerLayer(SdkTracer);

impl<S: tracing::Subscriber> Layer<S> for TracerLayer {}

/// The tracer of spans written with explicit parents and times: a job's
/// phases. Off, and free, when the subscriber exports nothing.
#[derive(Debug, Clone, Default)]
pub struct Tracer(Option<SdkTracer>);

impl Tracer {
    /// The tracer of the `tracing` subscriber in effect here (the global one
    /// in a spawned task); off when it exports nothing.
    pub fn current() -> Tracer {
        tracing::dispatcher::get_default(|d| {
            Tracer(d.downcast_ref::<TracerLayer>().map(|l| l.0.clone()))
        })
    }

    /// Whether spans are recorded at all.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Starts span `name` at `start` as a child of `parent`. Nothing (and no
    /// attribute is built) when tracing is off or there is no valid parent:
    /// a job's spans only ever continue its stored trace.
    pub fn start(
        &self,
        name: &'static str,
        parent: Option<&SpanContext>,
        start: SystemTime,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> JobSpan {
        let (Some(tracer), Some(parent)) = (&self.0, parent.filter(|p| p.is_valid())) else {
            return JobSpan(None);
        };
        let cx = Context::new().with_remote_span_context(parent.clone());
        let span = tracer
            .span_builder(name)
            .with_start_time(start)
            .with_attributes(attributes())
            .start_with_context(tracer, &cx);
        JobSpan(Some(span))
    }
}

/// A span of a job's life. Ends when dropped unless [`JobSpan::end_at`]
/// ended it before.
#[derive(Debug)]
pub struct JobSpan(Option<opentelemetry_sdk::trace::Span>);

impl JobSpan {
    /// Its context, for children and for the job's processes; `None` when
    /// nothing is recorded.
    pub fn context(&self) -> Option<SpanContext> {
        use opentelemetry::trace::Span as _;
        self.0
            .as_ref()
            .map(|s| s.span_context().clone())
            .filter(SpanContext::is_valid)
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        use opentelemetry::trace::Span as _;
        if let Some(s) = &mut self.0 {
            s.set_attribute(KeyValue::new(key, value));
        }
    }

    /// Marks the span failed with `description`.
    pub fn fail(&mut self, description: impl Into<Cow<'static, str>>) {
        use opentelemetry::trace::Span as _;
        if let Some(s) = &mut self.0 {
            s.set_status(Status::error(description));
        }
    }

    /// Ends the span at `end`.
    pub fn end_at(mut self, end: SystemTime) {
        use opentelemetry::trace::Span as _;
        if let Some(s) = &mut self.0 {
            s.end_with_timestamp(end);
        }
    }
}

/// A W3C trace context (`traceparent`), as stored with a job and given to
/// its processes.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParent(SpanContext);

impl TraceParent {
    /// The context of a `traceparent` value of version 00 (as W3C Trace
    /// Context level 1 has it: lowercase hex, non-zero ids); `None` unless
    /// valid.
    pub fn parse(value: &str) -> Option<TraceParent> {
        fn hex(s: &str, len: usize) -> Option<&str> {
            (s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                .then_some(s)
        }
        let mut parts = value.split('-');
        let (Some("00"), Some(trace), Some(span), Some(flags), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let trace = TraceId::from_hex(hex(trace, 32)?).ok()?;
        let span = opentelemetry::trace::SpanId::from_hex(hex(span, 16)?).ok()?;
        let flags = u8::from_str_radix(hex(flags, 2)?, 16).ok()?;
        let sc = SpanContext::new(
            trace,
            span,
            opentelemetry::trace::TraceFlags::new(flags),
            true,
            opentelemetry::trace::TraceState::default(),
        );
        sc.is_valid().then_some(TraceParent(sc))
    }

    pub fn span_context(&self) -> &SpanContext {
        &self.0
    }

    pub fn trace_id(&self) -> TraceId {
        self.0.trace_id()
    }

    /// Whether the caller records this trace.
    pub fn is_sampled(&self) -> bool {
        self.0.is_sampled()
    }

    /// The `traceparent` value (version 00).
    pub fn header(&self) -> String {
        header(&self.0)
    }
}

/// The `traceparent` value (version 00) of `sc`.
pub fn header(sc: &SpanContext) -> String {
    format!(
        "00-{:032x}-{:016x}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
}

/// Makes a request's span continue the caller's trace (its `traceparent`
/// header). Does nothing without the header or without export.
pub fn continue_request(span: &tracing::Span, headers: &HeaderMap) {
    if !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    if cx.span().span_context().is_valid() {
        // Without the export layer there is no parent to set.
        let _ = span.set_parent(cx);
    }
}

/// The trace context to store with a job accepted within `accept`: that
/// span's when it is recorded, else (export off here) the caller's own
/// `traceparent`, passed on unchanged; `None` without either.
pub fn job_trace(accept: &tracing::Span, headers: &HeaderMap) -> Option<TraceParent> {
    let recorded = accept.context().span().span_context().clone();
    if recorded.is_valid() {
        return Some(TraceParent(recorded));
    }
    {
        headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(TraceParent::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_invalid_values() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(v).unwrap();
        assert_eq!(tp.header(), v);
        assert!(tp.is_sampled());
        assert_eq!(
            format!("{:032x}", tp.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(!TraceParent::parse(unsampled).unwrap().is_sampled());
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn endpoints_follow_the_otlp_rules() {
        let mut s = Settings::default();
        assert_eq!(s.traces_url(), None, "off by default");
        s.endpoint = Some(String::new());
        assert_eq!(s.traces_url(), None, "an empty endpoint is unset");
        s.endpoint = Some("http://collector:4318/".to_owned());
        assert_eq!(
            s.traces_url().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        s.protocol = Protocol::Grpc;
        assert_eq!(s.traces_url().as_deref(), Some("http://collector:4318/"));
        s.traces_endpoint = Some("http://other:1234/custom".to_owned());
        assert_eq!(s.traces_url().as_deref(), Some("http://other:1234/custom"));
    }

    #[test]
    fn samplers_follow_the_otel_names() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            s: Settings,
        }
        let s = Wrap::parse_from([
            "x",
            "--otel-traces-sampler",
            "parentbased_traceidratio",
            "--otel-traces-sampler-arg",
            "0.25",
            "--otlp-protocol",
            "grpc",
        ])
        .s;
        assert_eq!(s.sampler, SamplerKind::ParentBasedTraceIdRatio);
        assert_eq!(s.protocol, Protocol::Grpc);
        assert!(s.sampler().is_ok());
        let bad = Settings {
            sampler: SamplerKind::TraceIdRatio,
            sampler_arg: Some(2.0),
            ..Settings::default()
        };
        assert!(bad.sampler().is_err());
        assert!(
            Wrap::try_parse_from(["x", "--otlp-protocol", "http/json"]).is_err(),
            "only http/protobuf and grpc"
        );
    }

    #[test]
    fn off_means_no_tracer_and_no_span() {
        let tracer = Tracer::default();
        assert!(!tracer.is_on());
        let parent =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let span = tracer.start(
            "job.queue",
            Some(parent.span_context()),
            SystemTime::now(),
            || unreachable!("no attribute is built when off"),
        );
        assert!(span.context().is_none());
    }
}
