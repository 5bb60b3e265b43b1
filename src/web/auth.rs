//! Sign-in, sessions and CSRF for the web page (see the module above for the model).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{ApiError, Shared};
use crate::access::{Caller, constant_time_eq, random_hex};

const COOKIE: &str = "a2rag_session";
const CSRF_HEADER: &str = "x-csrf-token";
/// Sessions kept; signing in beyond this ends the oldest.
const MAX_SESSIONS: usize = 256;

/// Open sessions: id -> the session's CSRF token and who signed in. In memory: a restart
/// signs everyone out. The caller's token is checked again at every request (by the
/// engine), so revoking it ends its sessions too.
#[derive(Default)]
pub(super) struct Sessions(Mutex<SessionTable>);

#[derive(Default)]
struct SessionTable {
    open: HashMap<String, Session>,
    order: VecDeque<String>,
}

#[derive(Clone)]
struct Session {
    csrf: String,
    caller: Caller,
}

impl Sessions {
    fn open(&self, caller: Caller) -> (String, String) {
        let (id, csrf) = (random_hex(), random_hex());
        let mut table = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while table.order.len() >= MAX_SESSIONS {
            if let Some(oldest) = table.order.pop_front() {
                table.open.remove(&oldest);
            }
        }
        table.open.insert(id.clone(), Session { csrf: csrf.clone(), caller });
        table.order.push_back(id.clone());
        (id, csrf)
    }

    fn get(&self, id: &str) -> Option<Session> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).open.get(id).cloned()
    }

    fn close(&self, id: &str) {
        let mut table = self.0.lock().unwrap_or_else(|e| e.into_inner());
        table.open.remove(id);
        table.order.retain(|s| s != id);
    }
}

/// Who a request acts for, and how it proved it.
#[derive(Clone)]
pub(super) struct Authed {
    pub(super) caller: Caller,
    /// The session's CSRF token; `None` for a request that sent the token itself in the
    /// `Authorization` header (no browser sends that on its own).
    pub(super) csrf: Option<String>,
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
    let authed = if let Some(token) = bearer(headers) {
        match web.engine.authenticate(token) {
            Ok(caller) => Authed { caller, csrf: None },
            Err(e) => return ApiError::from(e).into_response(),
        }
    } else if let Some(session) = session_id(headers).and_then(|id| web.sessions.get(id)) {
        if request.method() != Method::GET {
            let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
            if !constant_time_eq(sent.as_bytes(), session.csrf.as_bytes()) {
                return ApiError(StatusCode::FORBIDDEN, "missing or wrong CSRF token: reload the page".into())
                    .into_response();
            }
        }
        Authed { caller: session.caller, csrf: Some(session.csrf) }
    } else {
        return ApiError(
            StatusCode::UNAUTHORIZED,
            "sign in with a token (`a2rag token create`, or the daemon's own: server.bearer_token or the rpc-token \
             file in its data directory)"
                .into(),
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

/// Opens a session for a valid token; the page keeps the CSRF token it gets back. Over TLS
/// the cookie is `Secure`: the browser never sends it in clear.
pub(super) async fn login(State(web): Shared, super::extract::Json(login): super::extract::Json<Login>) -> Response {
    let caller = match web.engine.authenticate(&login.token) {
        Ok(caller) => caller,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let (id, csrf) = web.sessions.open(caller);
    let secure = if web.tls { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/{secure}");
    ([(header::SET_COOKIE, cookie)], axum::Json(serde_json::json!({"csrf": csrf}))).into_response()
}

pub(super) async fn logout(State(web): Shared, headers: HeaderMap) -> Response {
    if let Some(id) = session_id(&headers) {
        web.sessions.close(id);
    }
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], axum::Json(serde_json::json!({"signed_out": true}))).into_response()
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
        let (first, csrf) = sessions.open(Caller::owner());
        assert_eq!(sessions.get(&first).map(|s| s.csrf), Some(csrf));
        for _ in 0..MAX_SESSIONS {
            sessions.open(Caller::owner());
        }
        assert!(sessions.get(&first).is_none(), "the oldest session ended");
        let (id, _) = sessions.open(Caller::owner());
        sessions.close(&id);
        assert!(sessions.get(&id).is_none());
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
