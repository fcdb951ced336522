//! The HTTP contract: authentication, tenancy, validation, idempotency,
//! listing and the admin API.

use hearth_tests::*;
use serde_json::{Value, json};
use sqlx::Connection;

fn jwt(claims: &Value, secret: &str) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).expect("key");
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), claims, &key).expect("encode")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

#[tokio::test]
async fn credentials_are_checked() {
    let app = spawn_app().await;
    let t = app.create_tenant("acme").await;

    // No credentials, a wrong key, a malformed key.
    let r = app.http.get(app.url("/v1/jobs")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "unauthorized");
    let wrong = format!("{}x", &t.key[..t.key.len() - 1]);
    assert_eq!(app.get(&wrong, "/v1/jobs").await.0, 401);
    assert_eq!(app.get("hk_nope", "/v1/jobs").await.0, 401);
    assert_eq!(app.get(&t.key, "/v1/jobs").await.0, 200);

    // A second key works; revoking it makes it 401 at once.
    let (s, k) = app
        .post(
            ADMIN_TOKEN,
            &format!("/v1/admin/tenants/{}/keys", t.tenant_id),
            &json!({"name": "ci"}),
        )
        .await;
    assert_eq!(s, 201);
    let key2 = k["api_key"].as_str().unwrap().to_owned();
    assert_eq!(app.get(&key2, "/v1/jobs").await.0, 200);
    let r = app
        .http
        .delete(app.url(&format!(
            "/v1/admin/tenants/{}/keys/{}",
            t.tenant_id,
            k["api_key_id"].as_str().unwrap()
        )))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (s, body) = app.get(&key2, "/v1/jobs").await;
    assert_eq!(s, 401);
    assert_eq!(body["message"], "API key revoked");
    assert_eq!(app.get(&t.key, "/v1/jobs").await.0, 200);

    // Keys are listed without secrets.
    let (s, keys) = app
        .get(
            ADMIN_TOKEN,
            &format!("/v1/admin/tenants/{}/keys", t.tenant_id),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(keys.as_array().unwrap().len(), 2);
    assert!(!keys.to_string().contains(&key2[15..]));

    // The admin API refuses tenant keys.
    assert_eq!(app.get(&t.key, "/v1/admin/tenants").await.0, 401);
}

#[tokio::test]
async fn jwts_from_the_configured_issuer() {
    let app = spawn_app().await;
    let t = app.create_tenant("jwt-co").await;
    let good =
        json!({"tenant": t.tenant_id, "iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "exp": now() + 600});
    assert_eq!(app.get(&jwt(&good, JWT_SECRET), "/v1/jobs").await.0, 200);

    let expired =
        json!({"tenant": t.tenant_id, "iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "exp": now() - 600});
    assert_eq!(app.get(&jwt(&expired, JWT_SECRET), "/v1/jobs").await.0, 401);
    let not_yet = json!({"tenant": t.tenant_id, "iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "exp": now() + 600, "nbf": now() + 300});
    assert_eq!(app.get(&jwt(&not_yet, JWT_SECRET), "/v1/jobs").await.0, 401);
    assert_eq!(
        app.get(&jwt(&good, "another-secret-entirely"), "/v1/jobs")
            .await
            .0,
        401,
        "forged"
    );
    let wrong_iss = json!({"tenant": t.tenant_id, "iss": "https://evil", "aud": JWT_AUDIENCE, "exp": now() + 600});
    assert_eq!(
        app.get(&jwt(&wrong_iss, JWT_SECRET), "/v1/jobs").await.0,
        401
    );
    let wrong_aud =
        json!({"tenant": t.tenant_id, "iss": JWT_ISSUER, "aud": "other", "exp": now() + 600});
    assert_eq!(
        app.get(&jwt(&wrong_aud, JWT_SECRET), "/v1/jobs").await.0,
        401
    );
    let unknown_tenant = json!({"tenant": uuid::Uuid::new_v4(), "iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "exp": now() + 600});
    assert_eq!(
        app.get(&jwt(&unknown_tenant, JWT_SECRET), "/v1/jobs")
            .await
            .0,
        401
    );
    // Tampered payload with the original signature.
    let token = jwt(&good, JWT_SECRET);
    let parts: Vec<&str> = token.split('.').collect();
    let forged = format!("{}.{}x.{}", parts[0], parts[1], parts[2]);
    assert_eq!(app.get(&forged, "/v1/jobs").await.0, 401);
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_changes_nothing() {
    let app = spawn_app().await;
    let t = app.create_tenant("strict").await;
    let post_raw = |body: &'static str, content_type: &'static str| {
        app.http
            .post(app.url("/v1/jobs"))
            .bearer_auth(&t.key)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let code = |r: reqwest::Response| async move {
        let s = r.status().as_u16();
        let v: Value = r.json().await.expect("JSON error body");
        (s, v["code"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(
        code(post_raw("{not json", "application/json").await.unwrap()).await,
        (400, "invalid_request".into())
    );
    assert_eq!(
        code(post_raw("{}", "text/plain").await.unwrap()).await,
        (415, "unsupported_media_type".into())
    );
    assert_eq!(
        code(
            post_raw(r#"{"kind":"tool_call"}"#, "application/json")
                .await
                .unwrap()
        )
        .await,
        (422, "validation_failed".into())
    );
    assert_eq!(
        code(
            post_raw(
                r#"{"kind":"nope","profile":"cpu-small","caller":"a","command":["x"]}"#,
                "application/json"
            )
            .await
            .unwrap()
        )
        .await,
        (422, "validation_failed".into())
    );

    let mut job = python_job("a", "print(1)");
    job["profile"] = json!("gpu-huge");
    let (s, v) = app.submit(&t.key, &job, None).await;
    assert_eq!((s, v["code"].as_str().unwrap()), (422, "unknown_profile"));

    let mut job = python_job("bad caller!", "print(1)");
    job["timeout_s"] = json!(0);
    job["env"] = json!({"RANK": "3"});
    job["deps"] = json!({"pip": ["--index-url=http://x"]});
    let (s, v) = app.submit(&t.key, &job, None).await;
    assert_eq!(s, 422);
    assert_eq!(v["code"], "validation_failed");
    let fields: Vec<&str> = v["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["caller", "deps.pip[0]", "env.RANK", "timeout_s"]);

    let mut job = python_job("a", "print(1)");
    job["code"] = json!({"bundle": format!("sha256:{}", "0".repeat(64))});
    assert_eq!(
        app.submit(&t.key, &job, None).await.1["code"],
        "unknown_bundle"
    );

    let big = "x".repeat(9 << 20);
    let r = app
        .http
        .post(app.url("/v1/jobs"))
        .bearer_auth(&t.key)
        .json(&python_job("a", &big))
        .send()
        .await
        .unwrap();
    assert_eq!(code(r).await, (413, "payload_too_large".into()));

    let (s, v) = app.get(&t.key, "/v1/jobs/not-a-uuid").await;
    assert_eq!((s, v["code"].as_str().unwrap()), (400, "invalid_request"));
    let (s, v) = app.get(&t.key, "/v1/jobs?state=bogus").await;
    assert_eq!((s, v["code"].as_str().unwrap()), (400, "invalid_request"));
    let (s, v) = app
        .get(
            &t.key,
            &format!("/v1/jobs/{}?wait=-1", uuid::Uuid::new_v4()),
        )
        .await;
    assert_eq!((s, v["code"].as_str().unwrap()), (400, "invalid_request"));

    // None of it created a job.
    let (_, list) = app.get(&t.key, "/v1/jobs").await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn tenants_are_isolated_and_jobs_listed() {
    let app = spawn_app().await;
    let a = app.create_tenant("tenant-a").await;
    let b = app.create_tenant("tenant-b").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let mut job = python_job(&format!("c{i}"), "print('hi')");
        if i == 2 {
            job["kind"] = json!("verifier");
        }
        let (s, v) = app.submit(&a.key, &job, Some(60.0)).await;
        assert_eq!(s, 200, "{v}");
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    // Another tenant sees nothing of A's.
    let (s, v) = app.get(&b.key, &format!("/v1/jobs/{}", ids[0])).await;
    assert_eq!((s, v["code"].as_str().unwrap()), (404, "not_found"));
    assert_eq!(
        app.post(&b.key, &format!("/v1/jobs/{}/cancel", ids[0]), &json!({}))
            .await
            .0,
        404
    );
    assert_eq!(
        app.get(&b.key, &format!("/v1/jobs/{}/logs", ids[0]))
            .await
            .0,
        404
    );
    let r = app
        .http
        .get(app.url(&format!("/v1/jobs/{}/events", ids[0])))
        .bearer_auth(&b.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        app.get(&b.key, "/v1/jobs").await.1["jobs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );

    // Keyset pagination, newest first, and filters.
    let (_, p1) = app.get(&a.key, "/v1/jobs?limit=2").await;
    let page1: Vec<&str> = p1["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(page1, [ids[2].as_str(), ids[1].as_str()]);
    let cursor = p1["next_cursor"].as_str().unwrap();
    let (_, p2) = app
        .get(&a.key, &format!("/v1/jobs?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(p2["jobs"][0]["id"], ids[0].as_str());
    assert!(p2["next_cursor"].is_null());
    let (_, v) = app.get(&a.key, "/v1/jobs?kind=verifier").await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    let (_, v) = app.get(&a.key, "/v1/jobs?caller=c1&state=succeeded").await;
    assert_eq!(v["jobs"][0]["id"], ids[1].as_str());

    // Admin: list, rename (conflict on a taken name), delete.
    let (s, list) = app.get(ADMIN_TOKEN, "/v1/admin/tenants").await;
    assert_eq!(s, 200);
    assert_eq!(list.as_array().unwrap().len(), 2);
    let rename = |name: &'static str| {
        app.http
            .patch(app.url(&format!("/v1/admin/tenants/{}", a.tenant_id)))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({ "name": name }))
            .send()
    };
    assert_eq!(rename("tenant-b").await.unwrap().status(), 409);
    assert_eq!(rename("tenant-a2").await.unwrap().status(), 200);
    let r = app
        .http
        .delete(app.url(&format!("/v1/admin/tenants/{}", b.tenant_id)))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(app.get(&b.key, "/v1/jobs").await.0, 401);
    assert_eq!(
        app.post(
            ADMIN_TOKEN,
            "/v1/admin/tenants",
            &json!({"name": "tenant-a2"})
        )
        .await
        .0,
        409
    );
}

#[tokio::test]
async fn idempotency_key_returns_the_same_job() {
    let app = spawn_app().await;
    let t = app.create_tenant("idem").await;
    let send = |body: Value, key: &'static str| {
        app.http
            .post(app.url("/v1/jobs?wait=60"))
            .bearer_auth(&t.key)
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let job = python_job("idem", "print('once')");
    let r1 = send(job.clone(), "k-1").await.unwrap();
    assert_eq!(r1.status(), 200);
    let v1: Value = r1.json().await.unwrap();
    let r2 = send(job.clone(), "k-1").await.unwrap();
    let v2: Value = r2.json().await.unwrap();
    assert_eq!(v1["id"], v2["id"]);
    // The same job with its defaults spelled out, as the service has it.
    let id = v1["id"].as_str().unwrap();
    let (_, accepted) = app.get(&t.key, &format!("/v1/jobs/{id}/request")).await;
    assert!(
        job.get("priority").is_none() && accepted["priority"] == 0,
        "defaults spelled out: {accepted}"
    );
    let r = send(accepted.clone(), "k-1").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["id"], v1["id"]);
    let mut spelled = job.clone();
    spelled["priority"] = json!(0);
    spelled["env"] = json!({});
    let r = send(spelled, "k-1").await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["id"], v1["id"]);
    let r3 = send(python_job("idem", "print('other')"), "k-1")
        .await
        .unwrap();
    assert_eq!(r3.status(), 409);
    assert_eq!(
        r3.json::<Value>().await.unwrap()["code"],
        "idempotency_conflict"
    );
    let (_, list) = app.get(&t.key, "/v1/jobs").await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn profiles_health_and_openapi() {
    let app = spawn_app().await;
    let t = app.create_tenant("looker").await;
    let (s, v) = app.get(&t.key, "/v1/profiles").await;
    assert_eq!(s, 200);
    assert_eq!(v["runtime"], "local");
    let names: Vec<&str> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu-net", "cpu-small"]);
    // Each pool's start-latency objective, the default where none is set.
    assert_eq!(
        v["profiles"][0]["start_objective"],
        json!({"percentile": 0.9, "class": "warm"})
    );
    assert!(
        v["mechanisms"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "namespaces")
    );
    let (s, v) = app.get("", "/healthz").await;
    assert_eq!((s, v["status"].as_str().unwrap()), (200, "ok"));
    let (s, doc) = app.get("", "/openapi.json").await;
    assert_eq!(s, 200);
    assert!(doc["paths"]["/v1/jobs"]["post"]["operationId"] == "create_job");
    let r = app.http.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

/// A tiny deterministic generator for mangled requests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn value(&mut self, depth: u32) -> Value {
        match self.next() % if depth > 3 { 6 } else { 8 } {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64),
            3 => json!(-1e308 * (self.next() % 3) as f64),
            4 => json!("\u{0}\u{202e}../../etc/passwd ✓"),
            5 => json!("x".repeat((self.next() % 5000) as usize)),
            6 => Value::Array(
                (0..self.next() % 4)
                    .map(|_| self.value(depth + 1))
                    .collect(),
            ),
            _ => {
                let mut m = serde_json::Map::new();
                for _ in 0..self.next() % 4 {
                    m.insert(format!("k{}", self.next() % 10), self.value(depth + 1));
                }
                Value::Object(m)
            }
        }
    }
}

#[tokio::test]
async fn no_mangled_request_yields_a_server_error() {
    let app = spawn_app().await;
    let t = app.create_tenant("fuzz").await;
    let mut rng = Rng(7);
    let fields = [
        "kind",
        "profile",
        "caller",
        "command",
        "code",
        "deps",
        "input",
        "env",
        "timeout_s",
        "priority",
        "topology",
    ];
    for i in 0..300 {
        let mut job = python_job("f", "print(1)");
        job["timeout_s"] = json!(5);
        let field = fields[(rng.next() % fields.len() as u64) as usize];
        job[field] = rng.value(0);
        if i % 3 == 0 {
            let other = fields[(rng.next() % fields.len() as u64) as usize];
            job[other] = rng.value(0);
        }
        let (s, v) = app.submit(&t.key, &job, None).await;
        assert!(s < 500, "{job} -> {s} {v}");
        if s >= 400 {
            assert!(v["code"].is_string(), "{v}");
        }
    }
    // The service still works afterwards.
    let (s, v) = app
        .submit(&t.key, &python_job("f", "print('alive')"), Some(60.0))
        .await;
    assert_eq!((s, v["stdout"].as_str()), (200, Some("alive\n")));
}

fn openssl(args: &[&str]) {
    let ok = std::process::Command::new("openssl")
        .args(args)
        .status()
        .expect("openssl")
        .success();
    assert!(ok, "openssl {args:?}");
}

#[tokio::test]
async fn jwts_signed_with_an_issuer_public_key() {
    for (alg, keygen) in [
        (
            jsonwebtoken::Algorithm::ES256,
            ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        ),
        (
            jsonwebtoken::Algorithm::RS256,
            ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        ),
    ] {
        let dir = state_dir();
        let (key, other, public) = (
            dir.join("key.pem"),
            dir.join("other.pem"),
            dir.join("pub.pem"),
        );
        for k in [&key, &other] {
            let mut args = vec!["genpkey"];
            args.extend(keygen);
            args.extend(["-out", k.to_str().unwrap()]);
            openssl(&args);
        }
        openssl(&[
            "pkey",
            "-in",
            key.to_str().unwrap(),
            "-pubout",
            "-out",
            public.to_str().unwrap(),
        ]);
        let mut config = config();
        config.jwt_secret = None;
        config.jwt_algorithm = if alg == jsonwebtoken::Algorithm::ES256 {
            hearth::config::JwtAlgorithm::Es256
        } else {
            hearth::config::JwtAlgorithm::Rs256
        };
        config.jwt_public_key = Some(public.clone());
        let app = spawn_app_with(config).await;
        let t = app.create_tenant("pk").await;
        let claims = json!({"tenant": t.tenant_id, "iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "exp": now() + 600});
        let sign = |pem: &std::path::Path| {
            let pem = std::fs::read(pem).unwrap();
            let key = match alg {
                jsonwebtoken::Algorithm::ES256 => jsonwebtoken::EncodingKey::from_ec_pem(&pem),
                _ => jsonwebtoken::EncodingKey::from_rsa_pem(&pem),
            }
            .unwrap();
            jsonwebtoken::encode(&jsonwebtoken::Header::new(alg), &claims, &key).unwrap()
        };
        assert_eq!(app.get(&sign(&key), "/v1/jobs").await.0, 200, "{alg:?}");
        assert_eq!(
            app.get(&sign(&other), "/v1/jobs").await.0,
            401,
            "{alg:?} signed by another key"
        );
        // Algorithm confusion: an HS256 token keyed with the public key.
        let public_pem = std::fs::read_to_string(&public).unwrap();
        assert_eq!(
            app.get(&jwt(&claims, &public_pem), "/v1/jobs").await.0,
            401,
            "{alg:?} alg confusion"
        );
    }
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_json_errors() {
    let app = spawn_app().await;
    let (_, doc) = app.get("", "/openapi.json").await;
    let error_body = json!({"$ref": "#/components/schemas/ErrorBody"});

    let r = app.http.get(app.url("/v1/nope")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.expect("a JSON body");
    assert_eq!(body["code"], "not_found", "{body}");
    assert_eq!(
        schema_errors(&doc, &error_body, &body),
        Vec::<String>::new()
    );

    // `/v1/profiles` takes GET only; no credentials needed to learn that.
    let r = app
        .http
        .delete(app.url("/v1/profiles"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let allow = r.headers()["allow"].to_str().unwrap().to_owned();
    assert!(allow.contains("GET"), "Allow: {allow}");
    let body: Value = r.json().await.expect("a JSON body");
    assert_eq!(body["code"], "method_not_allowed", "{body}");
    assert_eq!(
        schema_errors(&doc, &error_body, &body),
        Vec::<String>::new()
    );

    let r = app.http.put(app.url("/v1/jobs")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    let allow = r.headers()["allow"].to_str().unwrap().to_owned();
    assert!(
        allow.contains("GET") && allow.contains("POST"),
        "Allow: {allow}"
    );
    let body: Value = r.json().await.expect("a JSON body");
    assert_eq!(body["code"], "method_not_allowed", "{body}");
}

/// The schema of `method path`'s `status` response as `content_type`.
fn documented<'a>(
    doc: &'a Value,
    method: &str,
    path: &str,
    status: &str,
    content_type: &str,
) -> &'a Value {
    let schema =
        &doc["paths"][path][method]["responses"][status]["content"][content_type]["schema"];
    assert!(
        !schema.is_null(),
        "no {content_type} schema for {method} {path} {status}"
    );
    schema
}

#[tokio::test]
async fn profiles_and_event_streams_match_the_served_document() {
    let app = spawn_app().await;
    let t = app.create_tenant("conformist").await;
    let (s, doc) = app.get("", "/openapi.json").await;
    assert_eq!(s, 200);

    let (s, profiles) = app.get(&t.key, "/v1/profiles").await;
    assert_eq!(s, 200);
    assert!(profiles["profiles"][0]["pods"].is_object(), "{profiles}");
    let schema = documented(&doc, "get", "/v1/profiles", "200", "application/json");
    assert_eq!(
        schema_errors(&doc, schema, &profiles),
        Vec::<String>::new(),
        "{profiles}"
    );
    let (s, body) = app.get("", "/v1/profiles").await;
    assert_eq!(s, 401);
    let schema = documented(&doc, "get", "/v1/profiles", "401", "application/json");
    assert_eq!(schema_errors(&doc, schema, &body), Vec::<String>::new());

    // The event stream is documented as what it is: server-sent events (the
    // stream's text, or one event of it as a client parses it), not JSON.
    let events = &doc["paths"]["/v1/jobs/{id}/events"]["get"]["responses"]["200"];
    let types: Vec<&String> = events["content"].as_object().unwrap().keys().collect();
    assert_eq!(types, ["text/event-stream"]);
    let stream = &events["content"]["text/event-stream"]["schema"];
    assert_eq!(stream["oneOf"][0]["type"], "string");
    assert_eq!(
        stream["oneOf"][1]["$ref"],
        "#/components/schemas/ServerSentEvent"
    );
    let description = events["description"].as_str().unwrap();
    for name in ["`state`", "`output`", "`done`", "`Last-Event-ID`"] {
        assert!(
            description.contains(name),
            "{name} undocumented: {description}"
        );
    }
    // Resuming: the header, the query parameter for clients that cannot set
    // one, and the answer when there is nothing left to resume.
    let params: Vec<(&str, &str)> = doc["paths"]["/v1/jobs/{id}/events"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["in"].as_str().unwrap()))
        .collect();
    assert!(params.contains(&("Last-Event-ID", "header")), "{params:?}");
    assert!(params.contains(&("after", "query")), "{params:?}");
    assert!(
        doc["paths"]["/v1/jobs/{id}/events"]["get"]["responses"]["204"].is_object(),
        "204 undocumented"
    );
    let (_, job) = app
        .submit(&t.key, &python_job("c", "print('hi')"), Some(60.0))
        .await;
    let r = app
        .http
        .get(app.url(&format!("/v1/jobs/{}/events", job["id"].as_str().unwrap())))
        .bearer_auth(&t.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let text = r.text().await.unwrap();
    assert!(text.contains("event: done"), "{text}");
    let missing = format!("/v1/jobs/{}/events", uuid::Uuid::new_v4());
    let (s, body) = app.get(&t.key, &missing).await;
    assert_eq!(s, 404);
    let schema = documented(
        &doc,
        "get",
        "/v1/jobs/{id}/events",
        "404",
        "application/json",
    );
    assert_eq!(schema_errors(&doc, schema, &body), Vec::<String>::new());
}

#[test]
fn the_schema_check_catches_what_a_schema_forbids_or_omits() {
    let doc = json!({"components": {"schemas": {
        "Closed": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}},
                   "additionalProperties": false},
        "Open": {"type": "object", "properties": {"a": {"type": "integer"}}},
    }}});
    let closed = json!({"$ref": "#/components/schemas/Closed"});
    let open = json!({"$ref": "#/components/schemas/Open"});
    let extended =
        json!({"allOf": [closed, {"type": "object", "properties": {"b": {"type": "integer"}}}]});
    assert!(schema_errors(&doc, &closed, &json!({"a": "x"})).is_empty());
    assert_eq!(schema_errors(&doc, &closed, &json!({})).len(), 1);
    assert_eq!(schema_errors(&doc, &open, &json!({"a": "x"})).len(), 1);
    assert_eq!(
        schema_errors(&doc, &open, &json!({"a": 1, "c": 2})).len(),
        1
    );
    // The flaw `/v1/profiles` had: an `allOf` of a closed schema.
    assert_eq!(
        schema_errors(&doc, &extended, &json!({"a": "x", "b": 1})).len(),
        1
    );
}

#[tokio::test]
async fn a_request_that_gets_no_database_connection_fails_fast_with_503() {
    let mut config = config();
    config.db_max_connections = 7;
    config.db_relaxed_connections = 1;
    config.db_acquire_timeout_s = 1.0;
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("starved").await;
    assert_eq!(app.get(&t.key, "/v1/jobs").await.0, 200);

    // Every free connection of the main pool taken, as by a burst of slow
    // requests: the last acquire fails after the acquire timeout.
    let db = &app.running.state.db;
    let mut held = Vec::new();
    let starved = loop {
        match db.acquire().await {
            Ok(conn) => held.push(conn),
            Err(e) => break e,
        }
    };
    assert!(matches!(starved, sqlx::Error::PoolTimedOut), "{starved}");
    assert!(!held.is_empty());
    // The service's connections, all pools and the lease together, stay
    // within the configured total.
    let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", server_url()))
        .await
        .unwrap();
    let open: i64 = sqlx::query_scalar("select count(*) from pg_stat_activity where datname = $1")
        .bind(app.database().name())
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!((1..=7).contains(&open), "{open} connections");

    // Answered after the acquire timeout (1 s), not sqlx's default 30 s.
    let r = app
        .http
        .get(app.url("/v1/jobs"))
        .bearer_auth(&t.key)
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await
        .expect("an answer well before 30 s");
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "unavailable", "{body}");
    assert_eq!(body["message"], "service temporarily unavailable");

    drop(held);
    assert_eq!(app.get(&t.key, "/v1/jobs").await.0, 200);
}

async fn database_exists(name: &str) -> bool {
    let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", server_url()))
        .await
        .unwrap();
    sqlx::query_scalar("select exists(select 1 from pg_database where datname = $1)")
        .bind(name)
        .fetch_one(&mut admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_test_drops_its_database_even_when_it_panics() {
    let c = config();
    let name = c.database().name().to_owned();
    let copy = c.clone();
    let app = spawn_app_with(c).await;
    app.create_tenant("brief").await;
    assert!(database_exists(&name).await);
    drop(app);
    // A restart on the same configuration still finds its data.
    assert!(database_exists(&name).await);
    drop(copy);
    assert!(!database_exists(&name).await, "{name} left behind");

    let c = config();
    let name = c.database().name().to_owned();
    let failed = tokio::spawn(async move {
        let app = spawn_app_with(c).await;
        app.create_tenant("doomed").await;
        panic!("a failing test (on purpose)");
    })
    .await;
    assert!(failed.unwrap_err().is_panic());
    assert!(!database_exists(&name).await, "{name} left behind");
}

/// A job's input and output nest at most 64 levels: deeper input is
/// refused with 422, deeper output fails the job with `invalid_output`, once
/// (before, output 127 levels deep broke the agent's message that carries
/// it: the job failed as `pod_lost` after running twice).
#[tokio::test]
async fn input_and_output_nest_at_most_64_levels() {
    let app = spawn_app().await;
    let t = app.create_tenant("deep").await;
    let nested = |n: usize| -> Value {
        serde_json::from_str(&format!("{}{}", "[".repeat(n), "]".repeat(n))).unwrap()
    };
    let echo = "import json, os\njson.dump(json.load(open(os.environ['HEARTH_INPUT'])), open(os.environ['HEARTH_OUTPUT'], 'w'))\n";
    let mut job = python_job("deep", echo);
    job["input"] = nested(65);
    let (s, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["details"][0]["field"], "input", "{v}");

    job["input"] = nested(64);
    let (s, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    assert_eq!(v["output"], nested(64));

    for depth in [65, 127] {
        let code = format!(
            "import os\nopen(os.environ['HEARTH_OUTPUT'], 'w').write('[' * {depth} + ']' * {depth})\n"
        );
        let (s, v) = app
            .submit(&t.key, &python_job("deep", &code), Some(60.0))
            .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["state"], "failed", "{v}");
        assert_eq!(v["error"]["code"], "invalid_output", "{v}");
        assert_eq!(v["attempts"], 1, "{v}");
    }
}

/// Numbers at the ends of what a JSON double holds, in a job's input and in
/// its output, are read back as they were written. Postgres gives back a
/// jsonb number such as 1.7976931348623157e308 as its 309 digits; before
/// `serde_json`'s exact parsing, such a job was stored and could not be read
/// again: its submission answered 500, its tenant's list failed, and the
/// scheduler's scans of queued jobs failed for every tenant.
#[tokio::test]
async fn extreme_numbers_are_read_back_as_they_were_written() {
    let app = spawn_app().await;
    let t = app.create_tenant("extremes").await;
    let input = json!([
        f64::MAX,
        -f64::MAX,
        1.797_693_134_862_315_5e308,
        1e308,
        5e-324,
        -0.0
    ]);
    let job = json!({"kind": "tool_call", "profile": "cpu-small", "caller": "x",
                     "command": ["cat"], "input": input, "timeout_s": 30});
    let (status, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["state"], "succeeded", "{v}");
    let echoed: Value = serde_json::from_str(v["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(echoed, input, "the job read its input as it was sent");

    let code = "import json, os, sys\n\
                json.dump({'max': sys.float_info.max, 'min': -sys.float_info.max}, open(os.environ['HEARTH_OUTPUT'], 'w'))\n";
    let (status, out) = app.submit(&t.key, &python_job("x", code), Some(60.0)).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["output"],
        json!({"max": f64::MAX, "min": -f64::MAX}),
        "{out}"
    );

    for id in [&v["id"], &out["id"]] {
        let id = id.as_str().unwrap();
        let (status, got) = app.get(&t.key, &format!("/v1/jobs/{id}")).await;
        assert_eq!(status, 200, "{got}");
        let (status, request) = app.get(&t.key, &format!("/v1/jobs/{id}/request")).await;
        assert_eq!(status, 200, "{request}");
    }
    let (status, list) = app.get(&t.key, "/v1/jobs").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["jobs"].as_array().unwrap().len(), 2);
}

/// Times whose offset takes them past year 9999 in UTC are refused as bad
/// input (they made the database driver panic: 500), and so is a second
/// `Idempotency-Key` header (the first was used, silently).
#[tokio::test]
async fn times_beyond_range_and_repeated_headers_are_refused() {
    let app = spawn_app().await;
    let t = app.create_tenant("edges").await;
    for query in [
        "created_before=9999-12-31T23:59:59-23:59",
        "created_after=9999-12-31T23:59:59-00:01",
    ] {
        let (status, err) = app.get(&t.key, &format!("/v1/jobs?{query}")).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("invalid_request")),
            "{query}: {err}"
        );
    }
    // The last time in range, and one far ahead in another offset, still serve.
    for query in [
        "created_before=9999-12-31T23:59:59Z",
        "created_before=9999-12-31T23:59:59%2B05:00",
    ] {
        let (status, list) = app.get(&t.key, &format!("/v1/jobs?{query}")).await;
        assert_eq!(status, 200, "{query}: {list}");
    }
    let (status, err) = app
        .post(
            &t.key,
            "/v1/keys",
            &json!({"expires_at": "9999-12-31T23:59:59-23:59"}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (422, Some("validation_failed")),
        "{err}"
    );
    assert!(err.to_string().contains("out of range"), "{err}");
    let (status, key) = app
        .post(
            &t.key,
            "/v1/keys",
            &json!({"expires_at": "9999-12-31T23:59:59+05:00"}),
        )
        .await;
    assert_eq!(status, 201, "{key}");
    assert_eq!(key["expires_at"], "9999-12-31T18:59:59Z", "kept in UTC");

    let r = app
        .http
        .post(app.url("/v1/jobs"))
        .bearer_auth(&t.key)
        .header("idempotency-key", "first")
        .header("idempotency-key", "second")
        .json(&python_job("h", "print(1)"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert!(err["message"].as_str().unwrap().contains("once"), "{err}");
    let (_, list) = app.get(&t.key, "/v1/jobs").await;
    assert_eq!(
        list["jobs"].as_array().unwrap().len(),
        0,
        "nothing was accepted"
    );
}

/// An error quotes at most a kilobyte of what it refuses: a path, a value
/// and a field name as long as the request allows come back cut.
#[tokio::test]
async fn errors_quote_at_most_a_kilobyte_of_the_input() {
    let app = spawn_app().await;
    let t = app.create_tenant("long").await;
    let long = "z".repeat(5000);
    let (status, err) = app.get(&t.key, &format!("/v1/jobs/{long}")).await;
    assert_eq!(status, 400, "{err}");
    let (status, err2) = app.get(&t.key, &format!("/v1/{long}")).await;
    assert_eq!(status, 404, "{err2}");
    let mut job = python_job("l", "print(1)");
    job["kind"] = json!(long);
    job["env"] = json!({ long.clone(): "x" });
    let (status, err3) = app.submit(&t.key, &job, None).await;
    assert!((400..500).contains(&status), "{status}");
    for e in [&err, &err2, &err3] {
        assert!(e.to_string().len() < 4096, "{e}");
        assert!(e["message"].as_str().unwrap().len() <= 1024 + 3, "{e}");
        assert!(e.to_string().contains("zzzz"), "it still quotes: {e}");
    }
}

/// A body in a content coding is refused, not read as if it were plain
/// JSON (whether or not it would parse so), and nothing is accepted.
#[tokio::test]
async fn a_body_in_a_content_coding_is_refused() {
    let app = spawn_app().await;
    let t = app.create_tenant("coded").await;
    for coding in ["gzip", "br", "identity, gzip"] {
        let r = app
            .http
            .post(app.url("/v1/jobs"))
            .bearer_auth(&t.key)
            .header("content-encoding", coding)
            .json(&python_job("c", "print(1)"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{coding}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["code"], "unsupported_media_type", "{err}");
    }
    let (_, list) = app.get(&t.key, "/v1/jobs").await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 0);
    // Identity is no coding.
    let r = app
        .http
        .post(app.url("/v1/jobs"))
        .bearer_auth(&t.key)
        .header("content-encoding", "Identity")
        .json(&python_job("c", "print(1)"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
}
