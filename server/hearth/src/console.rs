//! The web console (`web/`, built into `HEARTH_CONSOLE_DIR`), served at
//! `/console/` from the API's own origin: its requests need no CORS, and
//! its session cookie is `SameSite=Strict`.

use std::path::Path;

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderValue, Request};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use tower_http::services::{ServeDir, ServeFile};

use crate::app::AppState;

/// Scripts and styles only from the console's own files; requests only to
/// this origin; never framed.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Checks that `dir` holds a built console.
///
/// # Errors
/// `dir` has no `index.html`.
pub fn check(dir: &Path) -> anyhow::Result<()> {
    let index = dir.join("index.html");
    anyhow::ensure!(
        index.is_file(),
        "{} not found: build the console (`bash web/build.sh`) or unset HEARTH_CONSOLE_DIR",
        index.display()
    );
    Ok(())
}

/// The console's routes: its built assets (404 when missing), its other
/// files, and `index.html` for every other path under `/console/` (the
/// console routes in the browser).
pub fn router(dir: &Path) -> Router<AppState> {
    let pages = ServeDir::new(dir).fallback(ServeFile::new(dir.join("index.html")));
    Router::new()
        .nest_service("/console/assets", ServeDir::new(dir.join("assets")))
        .nest_service("/console", pages)
        .layer(from_fn(harden))
}

async fn harden(req: Request<axum::body::Body>, next: Next) -> Response {
    // Vite names each built asset by its content's hash: it never changes.
    let immutable = req.uri().path().starts_with("/console/assets/");
    let mut res = next.run(req).await;
    let headers = res.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    res
}
