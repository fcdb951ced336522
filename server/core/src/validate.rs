//! Validation of job submissions: every field is checked against explicit
//! limits before anything is stored, so bad input changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::job::{Code, Deps, Kind, Spec, Topology};
use crate::profile::Profile;

/// Environment variables the service sets itself; a job may not override them.
pub const RESERVED_ENV: &[&str] = &[
    "HEARTH_INPUT",
    "HEARTH_OUTPUT",
    "HEARTH_JOB_ID",
    "HEARTH_PEERS",
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "VIRTUAL_ENV",
    // The attempt number (at-least-once runs) and the W3C trace context of
    // the job's run span.
    "HEARTH_ATTEMPT",
    "TRACEPARENT",
];

/// A job submission as it arrives on the wire (`POST /v1/jobs`). Only `kind`,
/// `profile`, `caller` and `command` are required; only a rollout has a
/// `topology`. The bounds are the service's default limits.
// Its schema's constraint across fields: `crate::openapi::amend`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateJob {
    pub kind: Kind,
    /// A profile of this service (`GET /v1/profiles`).
    #[cfg_attr(feature = "openapi", schema(min_length = 1, example = "cpu-small"))]
    pub profile: String,
    /// Who submits (an agent, a trainer's worker): its jobs reuse its warm
    /// pods. 1..=128 characters of `[A-Za-z0-9._:@/-]`, starting alphanumeric.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$",
            max_length = 128,
            example = "agent-7"
        )
    )]
    pub caller: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::command))]
    pub command: Vec<String>,
    #[serde(default)]
    pub code: Option<Code>,
    #[serde(default)]
    pub deps: Option<Deps>,
    /// Any JSON value, given to the job on stdin and in `$HEARTH_INPUT`: at
    /// most 1 MiB, its strings and keys without NUL.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::input))]
    pub input: Option<serde_json::Value>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::env))]
    pub env: Option<BTreeMap<String, String>>,
    /// Seconds the job may run (default 60).
    #[serde(default, deserialize_with = "crate::whole::option")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3600))]
    pub timeout_s: Option<u32>,
    /// Higher runs first among queued jobs (default 0).
    #[serde(default, deserialize_with = "crate::whole::option")]
    #[cfg_attr(feature = "openapi", schema(minimum = -1000, maximum = 1000))]
    pub priority: Option<i32>,
    #[serde(default)]
    pub topology: Option<Topology>,
}

/// Size and count limits for submissions. The defaults suit a small service;
/// every one is configurable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub max_caller_len: usize,
    pub max_command_args: usize,
    /// Longest command argument, in characters (as JSON Schema's
    /// `maxLength` counts).
    pub max_arg_len: usize,
    pub max_files: usize,
    /// Longest code file path, in characters.
    pub max_path_len: usize,
    pub max_code_bytes: usize,
    pub max_pip_packages: usize,
    pub max_env_vars: usize,
    pub max_env_bytes: usize,
    pub max_input_bytes: usize,
    pub default_timeout_s: u32,
    pub max_timeout_s: u32,
    pub max_gang: u32,
    pub max_priority: i32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_caller_len: 128,
            max_command_args: 64,
            max_arg_len: 4096,
            max_files: 256,
            max_path_len: 255,
            max_code_bytes: 4 << 20,
            max_pip_packages: 64,
            max_env_vars: 128,
            max_env_bytes: 64 << 10,
            max_input_bytes: 1 << 20,
            default_timeout_s: 60,
            max_timeout_s: 3600,
            max_gang: 16,
            max_priority: 1000,
        }
    }
}

/// One reason a submission was refused.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// JSON path of the offending field, e.g. `env.PATH` or `command[0]`.
    pub field: String,
    pub message: String,
}

/// Why a submission was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("unknown profile `{0}`")]
    UnknownProfile(String),
    #[error("{} invalid field(s): {}", .0.len(), .0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; "))]
    Fields(Vec<FieldError>),
}

struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    fn check(&mut self, ok: bool, field: impl Into<String>, message: impl Into<String>) {
        if !ok {
            self.push(field, message);
        }
    }
}

/// Whether `name` is a valid identifier for callers, profiles, tenants and
/// keys: 1..=max characters of `[A-Za-z0-9._:@/-]`, starting alphanumeric.
pub fn is_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:@/-".contains(c))
}

/// Whether `digest` is a bundle reference: `sha256:` and 64 lower-case hex digits.
pub fn is_bundle_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Checks a code file's relative path: no absolute paths, no `..`, no empty
/// or hidden-control components.
pub fn check_path(path: &str, max_len: usize) -> Result<(), &'static str> {
    if path.is_empty() || path.chars().count() > max_len {
        return Err("path must be 1..=255 characters");
    }
    if path.starts_with('/') {
        return Err("path must be relative");
    }
    if path.contains('\0') || path.contains('\\') {
        return Err("path may not contain NUL or backslash");
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err("path components may not be empty, `.` or `..`");
        }
        if part.len() > NAME_MAX {
            return Err("path components must be at most 255 bytes (UTF-8)");
        }
    }
    Ok(())
}

/// The longest file name a file system takes, in bytes.
const NAME_MAX: usize = 255;

/// The paths of `files` that another of its paths needs as a directory:
/// `a` beside `a/b` (a path cannot be both a file and a directory).
pub fn files_in_the_way(files: &BTreeMap<String, String>) -> BTreeSet<&str> {
    files
        .keys()
        .flat_map(|path| path.match_indices('/').map(|(i, _)| &path[..i]))
        .filter(|dir| files.contains_key(*dir))
        .collect()
}

/// The message for a path [`files_in_the_way`] finds.
pub const FILE_IN_THE_WAY: &str = "is a file and also a directory of other files";

/// A pip requirement: a package name with optional extras and version
/// specifiers. Anything that pip could read as an option is refused.
pub fn is_pip_requirement(req: &str) -> bool {
    !req.is_empty()
        && req.len() <= 200
        && req.starts_with(|c: char| c.is_ascii_alphanumeric())
        && req
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-[],=<>!~ ".contains(c))
}

/// Whether a JSON value holds a NUL character in any string or key. Postgres
/// cannot store one in `jsonb`, so such input is refused up front.
pub fn has_nul(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// How deep a job's input and output may nest (arrays and objects within
/// one another). Each travels inside a few levels of the service's own
/// messages, which a JSON reader takes to 128 levels in all.
pub const MAX_JSON_DEPTH: usize = 64;

/// The depth of `value`: 0 for a scalar, 1 for an array or object of
/// scalars, and so on.
pub fn json_depth(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    let mut deepest = 0;
    // Each value with the number of arrays and objects around it.
    let mut stack = vec![(value, 0)];
    while let Some((v, around)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(around + 1);
                stack.extend(items.iter().map(|i| (i, around + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(around + 1);
                stack.extend(map.values().map(|i| (i, around + 1)));
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
    deepest
}

/// Why a job's input or output cannot be taken as it is, if it cannot.
pub fn json_refused(value: &serde_json::Value) -> Option<String> {
    if has_nul(value) {
        return Some("strings may not contain NUL (\\u0000)".to_owned());
    }
    let depth = json_depth(value);
    (depth > MAX_JSON_DEPTH)
        .then(|| format!("nests {depth} levels deep, more than the {MAX_JSON_DEPTH} allowed"))
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Validates a submission against the limits and the known profiles, and
/// fills in defaults.
pub fn job<'p>(
    req: CreateJob,
    limits: &Limits,
    profile: impl FnOnce(&str) -> Option<&'p Profile>,
) -> Result<Spec, Invalid> {
    let Some(prof) = profile(&req.profile) else {
        return Err(Invalid::UnknownProfile(req.profile));
    };
    let mut e = Errors(Vec::new());

    e.check(
        is_name(&req.caller, limits.max_caller_len),
        "caller",
        format!(
            "must be 1..={} characters of [A-Za-z0-9._:@/-], starting alphanumeric",
            limits.max_caller_len
        ),
    );

    if req.command.is_empty() || req.command.len() > limits.max_command_args {
        e.push(
            "command",
            format!("must have 1..={} arguments", limits.max_command_args),
        );
    }
    for (i, arg) in req.command.iter().enumerate() {
        if arg.chars().count() > limits.max_arg_len || arg.contains('\0') {
            e.push(
                format!("command[{i}]"),
                format!(
                    "must be at most {} characters, without NUL",
                    limits.max_arg_len
                ),
            );
        }
    }
    if req.command.first().is_some_and(|c| c.is_empty()) {
        e.push("command[0]", "must not be empty");
    }

    let code = req.code.unwrap_or_default();
    match &code {
        Code::Files(files) => {
            if files.len() > limits.max_files {
                e.push("code.files", format!("at most {} files", limits.max_files));
            }
            let mut total = 0usize;
            for (path, content) in files {
                total += path.len() + content.len();
                if let Err(msg) = check_path(path, limits.max_path_len) {
                    e.push(format!("code.files.{path}"), msg);
                }
                if content.contains('\0') {
                    e.push(format!("code.files.{path}"), "content may not contain NUL");
                }
            }
            for path in files_in_the_way(files) {
                e.push(format!("code.files.{path}"), FILE_IN_THE_WAY);
            }
            if total > limits.max_code_bytes {
                e.push(
                    "code.files",
                    format!("at most {} bytes in all", limits.max_code_bytes),
                );
            }
        }
        Code::Bundle(digest) => e.check(
            is_bundle_digest(digest),
            "code.bundle",
            "must be `sha256:` followed by 64 lower-case hex digits",
        ),
    }

    let deps = req.deps.unwrap_or_default();
    if deps.pip.len() > limits.max_pip_packages {
        e.push(
            "deps.pip",
            format!("at most {} packages", limits.max_pip_packages),
        );
    }
    for (i, r) in deps.pip.iter().enumerate() {
        e.check(
            is_pip_requirement(r),
            format!("deps.pip[{i}]"),
            "must be a requirement like `name`, `name==1.0` or `name[extra]>=2`",
        );
    }

    let env = req.env.unwrap_or_default();
    if env.len() > limits.max_env_vars {
        e.push("env", format!("at most {} variables", limits.max_env_vars));
    }
    let mut env_bytes = 0usize;
    for (name, value) in &env {
        env_bytes += name.len() + value.len();
        if !is_env_name(name) {
            e.push(
                format!("env.{name}"),
                "name must match [A-Za-z_][A-Za-z0-9_]*",
            );
        } else if RESERVED_ENV.contains(&name.as_str()) {
            e.push(
                format!("env.{name}"),
                "is set by Hearth and may not be overridden",
            );
        }
        if value.contains('\0') {
            e.push(format!("env.{name}"), "value may not contain NUL");
        }
    }
    if env_bytes > limits.max_env_bytes {
        e.push(
            "env",
            format!("at most {} bytes in all", limits.max_env_bytes),
        );
    }

    let input = req.input.unwrap_or(serde_json::Value::Null);
    let input_len = serde_json::to_vec(&input).map_or(usize::MAX, |v| v.len());
    if input_len > limits.max_input_bytes {
        e.push("input", format!("at most {} bytes", limits.max_input_bytes));
    }
    if let Some(why) = json_refused(&input) {
        e.push("input", why);
    }

    let timeout_s = req.timeout_s.unwrap_or(limits.default_timeout_s);
    if timeout_s == 0 || timeout_s > limits.max_timeout_s {
        e.push("timeout_s", format!("must be 1..={}", limits.max_timeout_s));
    }

    let priority = req.priority.unwrap_or(0);
    if priority.unsigned_abs() > limits.max_priority.unsigned_abs() {
        e.push(
            "priority",
            format!("must be -{0}..={0}", limits.max_priority),
        );
    }

    if let Some(t) = req.topology {
        if req.kind != Kind::Rollout {
            e.push("topology", "only rollouts have a topology");
        }
        let max = limits.max_gang.min(prof.max_pods);
        if t.pods == 0 || t.pods > max {
            e.push(
                "topology.pods",
                format!("must be 1..={max} for this profile"),
            );
        }
    }

    if !e.0.is_empty() {
        return Err(Invalid::Fields(e.0));
    }
    Ok(Spec {
        kind: req.kind,
        profile: req.profile,
        caller: req.caller,
        code,
        command: req.command,
        deps,
        input,
        env,
        timeout_s,
        priority,
        topology: req.topology,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> CreateJob {
        serde_json::from_value(serde_json::json!({
            "kind": "tool_call", "profile": "cpu-small", "caller": "agent-7",
            "command": ["python3", "main.py"]
        }))
        .unwrap()
    }

    fn run(r: CreateJob) -> Result<Spec, Invalid> {
        let profiles = Profile::defaults();
        job(r, &Limits::default(), |n| {
            profiles.iter().find(|p| p.name == n)
        })
    }

    fn fields(r: CreateJob) -> Vec<String> {
        match run(r) {
            Err(Invalid::Fields(f)) => f.into_iter().map(|f| f.field).collect(),
            other => panic!("expected field errors, got {other:?}"),
        }
    }

    #[test]
    fn minimal_submission_gets_defaults() {
        let spec = run(req()).unwrap();
        assert_eq!(spec.timeout_s, 60);
        assert_eq!(spec.pods(), 1);
        assert_eq!(spec.input, serde_json::Value::Null);
    }

    #[test]
    fn unknown_profile_is_its_own_error() {
        let mut r = req();
        r.profile = "gpu-huge".into();
        assert_eq!(run(r), Err(Invalid::UnknownProfile("gpu-huge".into())));
    }

    #[test]
    fn every_bad_field_is_reported() {
        let mut r = req();
        r.caller = "../etc".into();
        r.command = vec![];
        r.timeout_s = Some(0);
        r.code = Some(Code::Files(BTreeMap::from([("../x".into(), "".into())])));
        r.deps = Some(Deps {
            pip: vec!["--index-url=http://evil".into()],
        });
        r.env = Some(BTreeMap::from([
            ("RANK".into(), "1".into()),
            ("1BAD".into(), "x".into()),
        ]));
        r.topology = Some(Topology { pods: 2 });
        assert_eq!(
            fields(r),
            [
                "caller",
                "command",
                "code.files.../x",
                "deps.pip[0]",
                "env.1BAD",
                "env.RANK",
                "timeout_s",
                "topology"
            ]
        );
    }

    #[test]
    fn the_attempt_and_the_trace_context_are_hearths() {
        let mut r = req();
        r.env = Some(BTreeMap::from([
            ("HEARTH_ATTEMPT".into(), "1".into()),
            (
                "TRACEPARENT".into(),
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            ),
            ("TRACESTATE_OF_MINE".into(), "x".into()),
        ]));
        assert_eq!(fields(r), ["env.HEARTH_ATTEMPT", "env.TRACEPARENT"]);
    }

    #[test]
    fn rollout_gang_is_bounded() {
        let mut r = req();
        r.kind = Kind::Rollout;
        r.topology = Some(Topology { pods: 2 });
        assert_eq!(run(r.clone()).unwrap().pods(), 2);
        r.topology = Some(Topology { pods: 1000 });
        assert_eq!(fields(r), ["topology.pods"]);
    }

    #[test]
    fn bundle_digest_shape() {
        assert!(is_bundle_digest(&format!("sha256:{}", "a".repeat(64))));
        assert!(!is_bundle_digest(&format!("sha256:{}", "A".repeat(64))));
        assert!(!is_bundle_digest("sha256:abc"));
    }

    #[test]
    fn nul_anywhere_in_input_is_refused() {
        let mut r = req();
        r.input = Some(serde_json::json!({"a": [1, {"b": "x\0"}]}));
        assert_eq!(fields(r.clone()), ["input"]);
        r.input = Some(serde_json::json!({"k\0": 1}));
        assert_eq!(fields(r), ["input"]);
    }

    #[test]
    fn paths() {
        assert!(check_path("a/b.py", 255).is_ok());
        for bad in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a\\b"] {
            assert!(check_path(bad, 255).is_err(), "{bad}");
        }
        // A name of 255 bytes is a file name; one of 64 four-byte
        // characters (256 bytes) is not, though it is short in characters.
        assert!(check_path(&format!("d/{}", "a".repeat(255)), 300).is_ok());
        assert!(check_path(&format!("d/{}", "\u{1F600}".repeat(64)), 300).is_err());
    }

    #[test]
    fn depth_counts_nesting() {
        use serde_json::json;
        for (v, d) in [
            (json!(1), 0),
            (json!([]), 1),
            (json!({}), 1),
            (json!([1, [2, {"a": [[]]}]]), 5),
            (json!({"a": 1, "b": {"c": [null]}}), 3),
        ] {
            assert_eq!(json_depth(&v), d, "{v}");
        }
        let deep = |n: usize| -> serde_json::Value {
            serde_json::from_str(&format!("{}{}", "[".repeat(n), "]".repeat(n))).unwrap()
        };
        assert_eq!(json_refused(&deep(MAX_JSON_DEPTH)), None);
        assert!(json_refused(&deep(MAX_JSON_DEPTH + 1)).is_some());
        assert!(json_refused(&json!({"a": "x\u{0}"})).is_some());
    }

    #[test]
    fn a_file_cannot_be_a_directory_too() {
        let files: BTreeMap<String, String> = ["a", "a-b", "a/b", "a/b/c", "ab/c", "x/y"]
            .into_iter()
            .map(|p| (p.to_owned(), String::new()))
            .collect();
        assert_eq!(
            files_in_the_way(&files).into_iter().collect::<Vec<_>>(),
            ["a", "a/b"]
        );
    }
}
