//! The curation web page: `a2rag serve --http ADDR` (or `server.http`). One page app compiled
//! into the binary (review queue, audit log, entity view, ask, status) over a small JSON API
//! whose handlers each call one [`Engine`] operation, plus `GET /metrics` for a Prometheus
//! scraper. It shares the daemon's engine, so its reads and writes take the same KB locks as
//! the JSON-RPC listeners.
//!
//! Access, whatever the address: every API call and `/metrics` needs a token
//! ([`crate::access`]), as an `Authorization: Bearer` header (scripts, scrapers) or
//! through the sign-in form, which opens a session carrying that token's name and scope: an
//! HttpOnly, SameSite=Strict cookie (Secure over TLS). The page offers only what the scope
//! allows, and the engine refuses the rest whatever the page sends. With
//! `server.tls_cert` set the page is served over HTTPS only. A
//! state-changing request in a session is a POST carrying the session's CSRF token in
//! `X-CSRF-Token`, so another site's page can neither read nor act through a signed-in
//! browser. The page renders every string from the KB as text (DOM `textContent`), never as
//! markup: chunk text is untrusted input.

mod api;
mod auth;
mod extract;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::access::tls::ServerTls;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{Door, Outcome};
use auth::Sessions;

/// What every handler shares.
struct Web {
    engine: Arc<Engine>,
    sessions: Sessions,
    /// Served over TLS: session cookies are `Secure`.
    tls: bool,
}

type Shared = State<Arc<Web>>;

/// The web server, bound and not yet serving, so the caller can print its real address.
pub struct WebServer {
    listener: TcpListener,
    web: Arc<Web>,
    token_file: Option<std::path::PathBuf>,
    tls: Option<Arc<ServerTls>>,
}

impl WebServer {
    /// Binds `addr` (`HOST:PORT`; port 0 picks a free one), to serve over TLS with `tls`.
    pub async fn bind(engine: Arc<Engine>, addr: &str, tls: Option<Arc<ServerTls>>) -> Result<WebServer> {
        let token_file = engine.access.enable_legacy(&engine.settings)?.and_then(|t| t.file);
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            Error::Invalid(format!("cannot serve the web page on `{addr}`: {e} (give HOST:PORT, e.g. 127.0.0.1:7412)"))
        })?;
        let web = Arc::new(Web { engine, sessions: Sessions::default(), tls: tls.is_some() });
        Ok(WebServer { listener, web, token_file, tls })
    }

    /// Whether the page is served over TLS (`https://`).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub fn address(&self) -> Result<SocketAddr> {
        self.listener.local_addr().map_err(|e| Error::io("web listener", e))
    }

    /// The file holding the generated token to sign in with, when none is configured.
    pub fn token_file(&self) -> Option<&std::path::Path> {
        self.token_file.as_deref()
    }

    /// Serves until `stop` resolves, then finishes the requests in flight.
    pub async fn run(self, stop: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let app = router(self.web);
        let Some(tls) = self.tls else {
            return axum::serve(self.listener, app)
                .with_graceful_shutdown(stop)
                .await
                .map_err(|e| Error::io("web server", e));
        };
        let listener = self.listener.into_std().map_err(|e| Error::io("web listener", e))?;
        let handle = axum_server::Handle::new();
        let stopping = handle.clone();
        tokio::spawn(async move {
            stop.await;
            stopping.graceful_shutdown(Some(std::time::Duration::from_secs(10)));
        });
        axum_server::tls_rustls::from_tcp_rustls(listener, tls.rustls())
            .map_err(|e| Error::io("web listener", e))?
            .handle(handle)
            .serve(app.into_make_service())
            .await
            .map_err(|e| Error::io("web server", e))
    }
}

fn router(web: Arc<Web>) -> Router {
    let api = Router::new()
        .route("/api/session", get(api::session))
        .route("/api/status", get(api::status))
        .route("/api/proposals", get(api::proposals))
        .route("/api/proposals/{id}/{action}", post(api::decide))
        .route("/api/audit", get(api::audit))
        .route("/api/audit.jsonl", get(api::audit_jsonl))
        .route("/api/entities", get(api::entities))
        .route("/api/entity", get(api::entity))
        .route("/api/ask", post(api::ask))
        .route("/api/logout", post(auth::logout))
        .route("/metrics", get(api::metrics))
        .route_layer(middleware::from_fn_with_state(web.clone(), auth::require));
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", include_str!("assets/index.html")) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", include_str!("assets/app.js")) }))
        .route("/style.css", get(|| async { asset("text/css; charset=utf-8", include_str!("assets/style.css")) }))
        .route("/login", post(auth::login))
        .merge(api)
        .layer(middleware::from_fn_with_state(web.clone(), count))
        .with_state(web)
}

/// A compiled-in asset. The policy forbids inline scripts and every origin but ours, so even
/// markup that slipped into the page could not run.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Counts each request by its route (never the raw path, which a client chooses) and outcome,
/// and as in flight while it runs.
async fn count(State(web): Shared, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string());
    let _in_flight = web.engine.metrics.in_flight();
    let response = next.run(request).await;
    let outcome = if response.status().is_client_error() || response.status().is_server_error() {
        Outcome::Error
    } else {
        Outcome::Ok
    };
    web.engine.metrics.request(Door::Http, route.as_deref().unwrap_or("unmatched"), outcome);
    response
}

/// A failed API call: a status and a message for the person at the page.
struct ApiError(StatusCode, String);

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let status = match e {
            Error::Invalid(_) | Error::UnknownKb { .. } => StatusCode::BAD_REQUEST,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(serde_json::json!({"error": self.1}))).into_response()
    }
}
