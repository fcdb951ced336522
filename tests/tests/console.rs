//! The web console's server side: sign-in exchanges an API key for an
//! `HttpOnly`, `SameSite=Strict` session cookie and a CSRF token; the cookie
//! authenticates the tenant API (never the admin API), every request that
//! changes something needs the token, and the session ends on sign-out, on
//! expiry, or when its key is revoked. The built console is served at
//! `/console/` with a strict content security policy.

use hearth_tests::*;
use reqwest::header::{COOKIE, SET_COOKIE};
use serde_json::{Value, json};

/// A signed-in browser: the cookie it holds and the CSRF token the page
/// keeps in memory.
struct Browser {
    cookie: String,
    csrf: String,
    session: Value,
}

async fn sign_in(app: &TestApp, api_key: &str) -> Result<Browser, (u16, Value)> {
    let r = app
        .http
        .post(app.url("/v1/session"))
        .json(&json!({ "api_key": api_key }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let set_cookie = r
        .headers()
        .get(SET_COOKIE)
        .map(|v| v.to_str().unwrap().to_owned());
    let body: Value = r.json().await.unwrap_or(Value::Null);
    if status != 201 {
        assert!(set_cookie.is_none(), "a refused sign-in sets no cookie");
        return Err((status, body));
    }
    let set_cookie = set_cookie.expect("sign-in sets the session cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "plain HTTP: {set_cookie}");
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    assert!(cookie.starts_with("hearth_session="), "{cookie}");
    assert!(!cookie.contains(api_key), "the cookie is not the key");
    Ok(Browser {
        cookie,
        csrf: body["csrf_token"].as_str().unwrap().to_owned(),
        session: body,
    })
}

/// A request as the browser sends it: the cookie, and the CSRF header when
/// given.
async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut req = app
        .http
        .request(method, app.url(path))
        .header(COOKIE, cookie);
    if let Some(token) = csrf {
        req = req.header("X-CSRF-Token", token);
    }
    if let Some(body) = body {
        req = req.json(body);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn code(body: &Value) -> Option<&str> {
    body["code"].as_str()
}

#[tokio::test]
async fn a_session_cookie_acts_for_its_tenant_and_changes_nothing_without_its_csrf_token() {
    use reqwest::Method;
    let app = spawn_app().await;
    let acme = app.create_tenant("acme").await;
    let other = app.create_tenant("other").await;

    let browser = sign_in(&app, &acme.key).await.unwrap();
    assert_eq!(browser.session["tenant_id"], acme.tenant_id.as_str());
    assert_eq!(browser.session["tenant_name"], "acme");
    assert_eq!(browser.csrf.len(), 64);

    // Reading needs only the cookie; a reload gets the same CSRF token back.
    let (status, session) = call(
        &app,
        Method::GET,
        "/v1/session",
        &browser.cookie,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["csrf_token"], browser.csrf.as_str());
    let (status, jobs) = call(&app, Method::GET, "/v1/jobs", &browser.cookie, None, None).await;
    assert_eq!(status, 200, "{jobs}");

    // Changing something without the token, or with another's, is refused
    // and changes nothing.
    let job = python_job("console", "print('hi')");
    let other_browser = sign_in(&app, &other.key).await.unwrap();
    for token in [
        None,
        Some(""),
        Some("0".repeat(64).as_str()),
        Some(other_browser.csrf.as_str()),
    ] {
        let (status, err) = call(
            &app,
            Method::POST,
            "/v1/jobs",
            &browser.cookie,
            token,
            Some(&job),
        )
        .await;
        assert_eq!(
            (status, code(&err)),
            (403, Some("csrf")),
            "{token:?}: {err}"
        );
    }
    let (status, err) = call(
        &app,
        Method::POST,
        "/v1/keys",
        &browser.cookie,
        None,
        Some(&json!({})),
    )
    .await;
    assert_eq!((status, code(&err)), (403, Some("csrf")), "{err}");
    let (_, jobs) = app.get(&acme.key, "/v1/jobs").await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");
    let (_, keys) = app.get(&acme.key, "/v1/keys").await;
    assert_eq!(keys.as_array().unwrap().len(), 1, "{keys}");

    // With it, the job runs for the session's tenant.
    let (status, created) = call(
        &app,
        Method::POST,
        "/v1/jobs?wait=60",
        &browser.cookie,
        Some(&browser.csrf),
        Some(&job),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["state"], "succeeded", "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, _) = app.get(&acme.key, &format!("/v1/jobs/{id}")).await;
    assert_eq!(status, 200);
    let (status, _) = app.get(&other.key, &format!("/v1/jobs/{id}")).await;
    assert_eq!(status, 404, "another tenant does not see it");
    let (status, _) = call(
        &app,
        Method::GET,
        &format!("/v1/jobs/{id}"),
        &other_browser.cookie,
        None,
        None,
    )
    .await;
    assert_eq!(status, 404, "nor does another tenant's session");

    // A bearer token wins over the cookie: the request acts for the key.
    let r = app
        .http
        .get(app.url(&format!("/v1/jobs/{id}")))
        .header(COOKIE, &browser.cookie)
        .bearer_auth(&other.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);

    // The cookie never opens the admin API.
    let (status, err) = call(
        &app,
        Method::GET,
        "/v1/admin/tenants",
        &browser.cookie,
        None,
        None,
    )
    .await;
    assert_eq!((status, code(&err)), (401, Some("unauthorized")), "{err}");

    // Tampered cookies are refused.
    let (id_part, secret) = browser.cookie.split_once('.').unwrap();
    let flipped: String = secret
        .chars()
        .map(|c| if c == 'a' { 'b' } else { 'a' })
        .collect();
    for cookie in [
        format!("{id_part}.{flipped}"),
        format!(
            "{}.{secret}",
            other_browser.cookie.split_once('.').unwrap().0
        ),
        "hearth_session=garbage".to_owned(),
        "hearth_session=".to_owned(),
    ] {
        let (status, err) = call(&app, Method::GET, "/v1/jobs", &cookie, None, None).await;
        assert_eq!(
            (status, code(&err)),
            (401, Some("unauthorized")),
            "{cookie}: {err}"
        );
    }

    // Sign-out needs the token, ends the session and clears the cookie.
    let (status, err) = call(
        &app,
        Method::DELETE,
        "/v1/session",
        &browser.cookie,
        None,
        None,
    )
    .await;
    assert_eq!((status, code(&err)), (403, Some("csrf")), "{err}");
    let r = app
        .http
        .delete(app.url("/v1/session"))
        .header(COOKIE, &browser.cookie)
        .header("X-CSRF-Token", &browser.csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let cleared = r.headers()[SET_COOKIE].to_str().unwrap();
    assert!(
        cleared.starts_with("hearth_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    for path in ["/v1/session", "/v1/jobs"] {
        let (status, err) = call(&app, Method::GET, path, &browser.cookie, None, None).await;
        assert_eq!(
            (status, code(&err)),
            (401, Some("unauthorized")),
            "{path}: {err}"
        );
    }
    // The other tenant's session is untouched.
    let (status, _) = call(
        &app,
        Method::GET,
        "/v1/jobs",
        &other_browser.cookie,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn sign_in_takes_only_a_live_key_and_the_session_dies_with_it() {
    use reqwest::Method;
    let app = spawn_app().await;
    let acme = app.create_tenant("acme").await;

    // Refusals: 401 for keys that do not authenticate, 4xx for bodies that
    // are not a sign-in; none sets a cookie (checked in `sign_in`).
    for key in [
        "",
        "hk_nope",
        "hk_000000000000_deadbeef",
        "Bearer x",
        &format!("{}x", acme.key),
    ] {
        let (status, err) = sign_in(&app, key).await.err().unwrap();
        assert_eq!(
            (status, code(&err)),
            (401, Some("unauthorized")),
            "{key:?}: {err}"
        );
    }
    for body in [
        json!({}),
        json!({"api_key": 7}),
        json!({"api_key": acme.key, "extra": 1}),
        json!([acme.key]),
    ] {
        let r = app
            .http
            .post(app.url("/v1/session"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        assert!(r.headers().get(SET_COOKIE).is_none());
        assert!(matches!(status, 400 | 422), "{body}: {status}");
    }

    // A session opened with a key ends when the key is revoked, even by
    // another key of the tenant.
    let (_, minted) = app
        .post(&acme.key, "/v1/keys", &json!({"name": "laptop"}))
        .await;
    let laptop = minted["api_key"].as_str().unwrap();
    let browser = sign_in(&app, laptop).await.unwrap();
    assert_eq!(browser.session["api_key_id"], minted["api_key_id"]);
    let (status, _) = call(&app, Method::GET, "/v1/jobs", &browser.cookie, None, None).await;
    assert_eq!(status, 200);
    let r = app
        .http
        .delete(app.url(&format!(
            "/v1/keys/{}",
            minted["api_key_id"].as_str().unwrap()
        )))
        .bearer_auth(&acme.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (status, err) = call(&app, Method::GET, "/v1/jobs", &browser.cookie, None, None).await;
    assert_eq!((status, code(&err)), (401, Some("unauthorized")), "{err}");
    let (status, _) = sign_in(&app, laptop).await.err().unwrap();
    assert_eq!(status, 401, "a revoked key opens no session");

    // A key that expires soon bounds its session.
    let soon = time::OffsetDateTime::now_utc() + time::Duration::seconds(90);
    let (_, minted) = app
        .post(
            &acme.key,
            "/v1/keys",
            &json!({"name": "brief", "expires_at": soon.format(&time::format_description::well_known::Rfc3339).unwrap()}),
        )
        .await;
    let browser = sign_in(&app, minted["api_key"].as_str().unwrap())
        .await
        .unwrap();
    let ends = time::OffsetDateTime::parse(
        browser.session["expires_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert!(ends <= soon, "{ends} > {soon}");
}

#[tokio::test]
async fn the_console_is_served_with_a_strict_policy_and_routes_in_the_browser() {
    let dir = state_dir();
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><title>Hearth</title>",
    )
    .unwrap();
    std::fs::write(dir.join("assets/app-1234.js"), "console.log(1)").unwrap();
    let mut config = config();
    config.console_dir = Some(dir.to_path_buf());
    let app = spawn_app_with(config).await;

    let get = async |path: &str| {
        let r = app.http.get(app.url(path)).send().await.unwrap();
        let headers = r.headers().clone();
        (r.status().as_u16(), headers, r.text().await.unwrap())
    };
    for path in [
        "/console/",
        "/console",
        "/console/jobs/0190f1e2",
        "/console/keys?x=1",
    ] {
        let (status, headers, body) = get(path).await;
        assert_eq!(status, 200, "{path}");
        assert!(body.contains("<title>Hearth</title>"), "{path}: {body}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["cache-control"], "no-cache", "{path}");
    }
    let (status, headers, body) = get("/console/assets/app-1234.js").await;
    assert_eq!((status, body.as_str()), (200, "console.log(1)"));
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    let (status, _, _) = get("/console/assets/missing.js").await;
    assert_eq!(status, 404, "a missing asset is not the page");
    let (status, _, _) = get("/console/../Cargo.toml").await;
    assert_ne!(status, 500);
    // The API around it is unchanged.
    let (status, _, _) = get("/healthz").await;
    assert_eq!(status, 200);
    drop(app);

    // A console directory without a built console stops the start.
    let empty = state_dir();
    let mut config = hearth_tests::config();
    config.console_dir = Some(empty.to_path_buf());
    let runtime = std::sync::Arc::new(hearth::app::local_runtime(&config).unwrap());
    let err = hearth::start((*config).clone(), runtime)
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("web/build.sh"), "{err}");
    std::fs::remove_dir_all(dir).ok();
    std::fs::remove_dir_all(empty).ok();
}
