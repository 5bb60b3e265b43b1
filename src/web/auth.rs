//! Sign-in, sessions and CSRF for the web page (see the module above for the model).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{ApiError, Shared};
use crate::access::{constant_time_eq, random_hex};

const COOKIE: &str = "a2rag_session";
const CSRF_HEADER: &str = "x-csrf-token";
/// Sessions kept; signing in beyond this ends the oldest.
const MAX_SESSIONS: usize = 256;

/// Open sessions: id -> CSRF token. In memory: a restart signs everyone out.
#[derive(Default)]
pub(super) struct Sessions(Mutex<SessionTable>);

#[derive(Default)]
struct SessionTable {
    csrf: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Sessions {
    fn open(&self) -> (String, String) {
        let (id, csrf) = (random_hex(), random_hex());
        let mut table = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while table.order.len() >= MAX_SESSIONS {
            if let Some(oldest) = table.order.pop_front() {
                table.csrf.remove(&oldest);
            }
        }
        table.csrf.insert(id.clone(), csrf.clone());
        table.order.push_back(id.clone());
        (id, csrf)
    }

    fn csrf(&self, id: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).csrf.get(id).cloned()
    }

    fn close(&self, id: &str) {
        let mut table = self.0.lock().unwrap_or_else(|e| e.into_inner());
        table.csrf.remove(id);
        table.order.retain(|s| s != id);
    }
}

/// How a request proved it may use the API.
#[derive(Clone)]
pub(super) enum Authed {
    /// The token itself, in the `Authorization` header: no browser sends that on its own.
    Bearer,
    Session {
        csrf: String,
    },
}

fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The credentials of an `Authorization: Bearer …` header; the scheme's case does not matter
/// (RFC 7235).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start())
}

/// Lets through requests with the token or a session; a session's POST must also carry its
/// CSRF token.
pub(super) async fn require(State(web): Shared, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let authed = if bearer(headers).is_some_and(|t| constant_time_eq(t.as_bytes(), web.token.as_bytes())) {
        Authed::Bearer
    } else if let Some(csrf) = session_id(headers).and_then(|id| web.sessions.csrf(id)) {
        if request.method() != Method::GET {
            let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
            if !constant_time_eq(sent.as_bytes(), csrf.as_bytes()) {
                return ApiError(StatusCode::FORBIDDEN, "missing or wrong CSRF token: reload the page".into())
                    .into_response();
            }
        }
        Authed::Session { csrf }
    } else {
        return ApiError(
            StatusCode::UNAUTHORIZED,
            "sign in with the daemon's token (server.bearer_token, or the rpc-token file in its data directory)".into(),
        )
        .into_response();
    };
    request.extensions_mut().insert(authed);
    next.run(request).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    token: String,
}

/// Opens a session for the right token; the page keeps the CSRF token it gets back.
pub(super) async fn login(State(web): Shared, super::extract::Json(login): super::extract::Json<Login>) -> Response {
    if !constant_time_eq(login.token.trim().as_bytes(), web.token.as_bytes()) {
        return ApiError(StatusCode::UNAUTHORIZED, "wrong token".into()).into_response();
    }
    let (id, csrf) = web.sessions.open();
    let cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/");
    ([(header::SET_COOKIE, cookie)], axum::Json(serde_json::json!({"csrf": csrf}))).into_response()
}

pub(super) async fn logout(State(web): Shared, headers: HeaderMap) -> Response {
    if let Some(id) = session_id(&headers) {
        web.sessions.close(id);
    }
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], axum::Json(serde_json::json!({"signed_out": true}))).into_response()
}

/// The session's CSRF token, for the page after a reload (`None` for bearer callers).
pub(super) fn csrf_of(authed: &Authed) -> Option<&str> {
    match authed {
        Authed::Bearer => None,
        Authed::Session { csrf } => Some(csrf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others_and_old_sessions_end() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "theme=dark; a2rag_session=abc123; x=1".parse().unwrap());
        assert_eq!(session_id(&headers), Some("abc123"));
        headers.insert(header::COOKIE, "a2rag_sessionx=nope".parse().unwrap());
        assert_eq!(session_id(&headers), None);

        let sessions = Sessions::default();
        let (first, csrf) = sessions.open();
        assert_eq!(sessions.csrf(&first), Some(csrf));
        for _ in 0..MAX_SESSIONS {
            sessions.open();
        }
        assert_eq!(sessions.csrf(&first), None, "the oldest session ended");
        let (id, _) = sessions.open();
        sessions.close(&id);
        assert_eq!(sessions.csrf(&id), None);
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer(&headers).map(str::to_string)
        };
        assert_eq!(with("Bearer s3cret").as_deref(), Some("s3cret"));
        assert_eq!(with("bearer s3cret").as_deref(), Some("s3cret"));
        assert_eq!(with("BEARER  s3cret").as_deref(), Some("s3cret"));
        assert_eq!(with("Basic s3cret"), None);
        assert_eq!(with("Bearers3cret"), None);
    }
}
