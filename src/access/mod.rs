//! Who may do what. Every front door turns the credential a client presents into a
//! [`Caller`] ([`Gatekeeper::authenticate`]); every `Engine` operation then asks
//! [`Gatekeeper::admit`] whether that caller's scope and knowledge bases cover it, under its
//! token's request limits. So the doors differ only in where the token travels (the first
//! JSON-RPC message, an `Authorization` header or a web session, the MCP server's
//! environment), never in what it allows.
//!
//! Credentials:
//! * named tokens (`a2rag token create`), each with a [`Scope`], optionally a set of KBs, an
//!   expiry and limits; their records (argon2 hashes, never the tokens) live with the KBs
//!   (`kb::store::credentials`), so a revocation reaches every daemon of a PostgreSQL
//!   database within `access.refresh_ms`;
//! * the daemon's own token (`server.bearer_token`, or one generated into `DATA_DIR/rpc-token`,
//!   0600): an admin token named `admin`, kept so that existing clients go on working;
//! * no token where the operating system already vouches for the caller (the CLI, stdio, a
//!   unix socket that is the owner's alone): the data directory's owner, an admin.

mod limits;
pub mod tls;
pub mod token;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub use limits::{Exceeded, Limits, Slot};
pub use token::{Kbs, Scope, TokenRecord};

use crate::config::{AccessSettings, Settings};
use crate::error::{Error, Result};
use crate::kb::audit::{Author, OWNER, now_ms};
use crate::kb::catalog::KbName;
use crate::kb::store::credentials::{Credentials, credentials};
use limits::Limiter;

/// The name the daemon's own token acts under.
pub const LEGACY_NAME: &str = "admin";

/// Who is asking, as established by a front door.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    name: String,
    scope: Scope,
    kbs: Kbs,
    credential: Credential,
}

#[derive(Debug, Clone, PartialEq)]
enum Credential {
    Owner,
    Legacy,
    /// A named token, by the id of the record it was checked against.
    Named {
        id: String,
    },
}

impl Caller {
    /// The data directory's owner: the CLI, stdio, an owner-only unix socket.
    pub fn owner() -> Caller {
        Caller { name: OWNER.to_string(), scope: Scope::Admin, kbs: Kbs::All, credential: Credential::Owner }
    }

    /// The token's name ([`OWNER`] without one).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Whether the caller's scope covers `scope` (what the doors show; `admit` decides).
    pub fn may(&self, scope: Scope) -> bool {
        self.scope >= scope
    }

    /// Whether the caller reaches knowledge base `kb`.
    pub fn reaches(&self, kb: &KbName) -> bool {
        self.kbs.contains(kb)
    }

    /// Whom a write is recorded under: this caller's token, labelled `who` when the client
    /// gave a name (a reviewer's; an empty one is the decision's to refuse), else by the
    /// token's name.
    pub fn author(&self, who: Option<&str>) -> Author {
        match (&self.credential, who.map(str::trim)) {
            (_, Some(who)) => Author { token: self.name.clone(), who: who.to_string() },
            (Credential::Owner, None) => Author::owner(),
            (_, None) => Author { token: self.name.clone(), who: self.name.clone() },
        }
    }
}

/// The token records as last read, with when.
struct Loaded {
    at: Instant,
    by_name: HashMap<String, TokenRecord>,
}

/// Checks credentials and admits requests (see the module doc).
pub struct Gatekeeper {
    credentials: Box<dyn Credentials>,
    settings: AccessSettings,
    /// The daemon's own token, once a network door has enabled it.
    legacy: Mutex<Option<BearerToken>>,
    loaded: Mutex<Option<Arc<Loaded>>>,
    /// Tokens already checked against their argon2 hash, by their SHA-256: the slow hash is
    /// paid once per token and process, not per request. Holds the PHC string it matched, so
    /// a record made again under the same name does not inherit it.
    verified: Mutex<HashMap<[u8; 32], (String, String)>>,
    limiter: Limiter,
}

impl Gatekeeper {
    pub fn open(settings: &Settings) -> Result<Gatekeeper> {
        Ok(Gatekeeper {
            credentials: credentials(settings)?,
            settings: settings.access.clone(),
            legacy: Mutex::new(None),
            loaded: Mutex::new(None),
            verified: Mutex::new(HashMap::new()),
            limiter: Limiter::default(),
        })
    }

    /// Accepts the daemon's own token from now on (when `server.legacy_token` allows) and
    /// returns it, for the doors that print where it is. Read (or generated) once: every
    /// door of a daemon gets the same token.
    pub fn enable_legacy(&self, settings: &Settings) -> Result<Option<BearerToken>> {
        if !settings.server.legacy_token {
            return Ok(None);
        }
        let mut legacy = self.legacy.lock().unwrap_or_else(|e| e.into_inner());
        if legacy.is_none() {
            *legacy = Some(bearer_token(settings)?);
        }
        Ok(legacy.clone())
    }

    /// The caller a token stands for: the daemon's own token or a named one that is neither
    /// revoked nor expired.
    pub fn authenticate(&self, token: &str) -> Result<Caller> {
        let token = token.trim();
        let legacy = self.legacy.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.token.clone());
        if legacy.is_some_and(|l| constant_time_eq(l.as_bytes(), token.as_bytes())) {
            return Ok(Caller {
                name: LEGACY_NAME.to_string(),
                scope: Scope::Admin,
                kbs: Kbs::All,
                credential: Credential::Legacy,
            });
        }
        let unknown =
            || Error::Unauthorized("unknown or revoked token (`a2rag token list` shows the live ones)".into());
        let id = token::token_id(token).ok_or_else(unknown)?;
        let loaded = self.records()?;
        let record = loaded.by_name.values().find(|r| r.id == id).ok_or_else(unknown)?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let cached = self.verified.lock().unwrap_or_else(|e| e.into_inner()).get(&digest).cloned();
        let known = cached.is_some_and(|(name, phc)| name == record.name && phc == record.hash);
        if !known {
            if !token::verify(token, &record.hash) {
                return Err(unknown());
            }
            self.verified
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(digest, (record.name.clone(), record.hash.clone()));
        }
        live(record)?;
        Ok(Caller {
            name: record.name.clone(),
            scope: record.scope,
            kbs: record.kbs.clone(),
            credential: Credential::Named { id: record.id.clone() },
        })
    }

    /// Lets `caller` do what needs `scope` (on `kb`, when the operation is on one), checking
    /// its token again (a revoked or expired one stops here, whenever it was presented) and
    /// taking a place under its limits, held until the returned slot drops.
    pub fn admit(&self, caller: &Caller, scope: Scope, kb: Option<&KbName>) -> Result<Slot> {
        let (current_scope, kbs, limits) = match &caller.credential {
            Credential::Owner => return Ok(Slot::unlimited()),
            Credential::Legacy => {
                if self.legacy.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
                    return Err(Error::Unauthorized("the daemon's own token is not accepted here".into()));
                }
                (Scope::Admin, Kbs::All, self.scope_limits(Scope::Admin))
            }
            Credential::Named { id } => {
                let loaded = self.records()?;
                let record = loaded
                    .by_name
                    .get(&caller.name)
                    .filter(|r| &r.id == id)
                    .ok_or_else(|| Error::Unauthorized(format!("token `{}` has been revoked", caller.name)))?;
                live(record)?;
                let defaults = self.scope_limits(record.scope);
                let limits =
                    Limits { rps: record.rps.or(defaults.rps), concurrent: record.concurrent.or(defaults.concurrent) };
                (record.scope, record.kbs.clone(), limits)
            }
        };
        if current_scope < scope {
            return Err(Error::Forbidden(format!(
                "this needs the `{scope}` scope; token `{}` has `{current_scope}`",
                caller.name
            )));
        }
        // The same words whether or not the KB exists: a token learns nothing of KBs it
        // does not reach.
        if let Some(kb) = kb.filter(|kb| !kbs.contains(kb)) {
            return Err(Error::Forbidden(format!("token `{}` does not reach knowledge base `{kb}`", caller.name)));
        }
        self.limiter.admit(&caller.name, limits).map_err(|exceeded| {
            let what = match exceeded {
                Exceeded::Rate => format!("{} requests per second", fmt_limit(limits.rps)),
                Exceeded::Concurrency => format!("{} requests at once", fmt_limit(limits.concurrent.map(f64::from))),
            };
            Error::Overloaded(format!("token `{}` is over its limit of {what}; retry shortly", caller.name))
        })
    }

    /// Makes a named token; returns its record and the token, which is shown this once.
    pub fn create(&self, spec: TokenSpec) -> Result<(TokenRecord, String)> {
        token::check_name(&spec.name)?;
        if spec.rps.is_some_and(|r| !r.is_finite() || r <= 0.0) {
            return Err(Error::Invalid("--rps must be a number above 0".into()));
        }
        let (id, token) = token::new_token();
        let record = TokenRecord {
            name: spec.name,
            id,
            scope: spec.scope,
            kbs: spec.kbs,
            expires_ms: spec.expires_ms,
            created_ms: now_ms(),
            rps: spec.rps,
            concurrent: spec.concurrent.filter(|c| *c > 0),
            hash: token::hash(&token)?,
        };
        let text = serde_json::to_string(&record)
            .map_err(|e| Error::Internal(format!("cannot encode the token record: {e}")))?;
        if !self.credentials.insert_new(&record.name, &text)? {
            return Err(Error::Conflict(format!(
                "a token named `{}` exists; revoke it first or choose another name",
                record.name
            )));
        }
        self.forget();
        Ok((record, token))
    }

    /// The live and expired named tokens, by name.
    pub fn list(&self) -> Result<Vec<TokenRecord>> {
        self.forget();
        let mut records: Vec<TokenRecord> = self.records()?.by_name.values().cloned().collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    /// Removes token `name`: every daemon refuses it within `access.refresh_ms`.
    pub fn revoke(&self, name: &str) -> Result<()> {
        if !self.credentials.remove(name)? {
            return Err(Error::NotFound(format!("token `{name}` (`a2rag token list` shows them)")));
        }
        self.forget();
        Ok(())
    }

    fn forget(&self) {
        *self.loaded.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The records, read again when the copy is older than `access.refresh_ms`. A store
    /// that cannot be read refuses every named token rather than trust a stale copy.
    fn records(&self) -> Result<Arc<Loaded>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = Duration::from_millis(self.settings.refresh_ms);
        if let Some(current) = loaded.as_ref().filter(|l| l.at.elapsed() < fresh) {
            return Ok(current.clone());
        }
        let mut by_name = HashMap::new();
        for (name, text) in self.credentials.all()? {
            match serde_json::from_str::<TokenRecord>(&text) {
                Ok(record) => {
                    by_name.insert(name, record);
                }
                Err(e) => tracing::warn!(token = %name, error = %e, "unreadable token record; it is refused"),
            }
        }
        let current = Arc::new(Loaded { at: Instant::now(), by_name });
        *loaded = Some(current.clone());
        Ok(current)
    }

    fn scope_limits(&self, scope: Scope) -> Limits {
        let s = &self.settings;
        let (rps, concurrent) = match scope {
            Scope::Read => (s.rps_read, s.concurrent_read),
            Scope::Write => (s.rps_write, s.concurrent_write),
            Scope::Curate => (s.rps_curate, s.concurrent_curate),
            Scope::Admin => (s.rps_admin, s.concurrent_admin),
        };
        Limits { rps: (rps > 0.0).then_some(rps), concurrent: (concurrent > 0).then_some(concurrent) }
    }
}

fn fmt_limit(limit: Option<f64>) -> String {
    limit.map_or_else(|| "?".into(), |l| format!("{l}"))
}

/// A record's token may be used now.
fn live(record: &TokenRecord) -> Result<()> {
    if record.expired(now_ms()) {
        return Err(Error::Unauthorized(format!(
            "token `{}` has expired; ask an admin for a new one (`a2rag token create`)",
            record.name
        )));
    }
    Ok(())
}

/// What `a2rag token create` asks for.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    pub name: String,
    pub scope: Scope,
    pub kbs: Kbs,
    pub expires_ms: Option<u64>,
    pub rps: Option<f64>,
    pub concurrent: Option<u32>,
}

impl TokenSpec {
    /// A token as a person asks for one: the KBs it may use (none listed: all) and when it
    /// stops working (`never`, or a duration from now such as `30d`).
    pub fn new(
        name: String,
        scope: Scope,
        kbs: Vec<KbName>,
        expires: &str,
        rps: Option<f64>,
        concurrent: Option<u32>,
    ) -> Result<TokenSpec> {
        let kbs = if kbs.is_empty() { Kbs::All } else { Kbs::Only(kbs) };
        let expires_ms = token::expiry(expires, now_ms())?;
        Ok(TokenSpec { name, scope, kbs, expires_ms, rps, concurrent })
    }
}

/// Where a generated token lives, inside the data directory.
pub const TOKEN_FILE: &str = "rpc-token";

#[derive(Clone)]
pub struct BearerToken {
    pub token: String,
    /// The file holding it, when it was generated rather than configured.
    pub file: Option<PathBuf>,
}

/// The configured token, or the generated one of `settings.data_dir`.
pub fn bearer_token(settings: &Settings) -> Result<BearerToken> {
    if !settings.server.bearer_token.is_empty() {
        return Ok(BearerToken { token: settings.server.bearer_token.clone(), file: None });
    }
    let file = settings.data_dir.join(TOKEN_FILE);
    Ok(BearerToken { token: read_or_create_token(&file)?, file: Some(file) })
}

/// The token in `file`, or a new random one written there with mode 0600 (created with that
/// mode, so it is never readable by others, even briefly).
fn read_or_create_token(file: &Path) -> Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(existing) = std::fs::read_to_string(file) {
        let token = existing.trim();
        if !token.is_empty() {
            return Ok(token.to_string());
        }
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| Error::io(file, e))?;
    let token = random_hex();
    out.write_all(token.as_bytes()).map_err(|e| Error::io(file, e))?;
    Ok(token)
}

/// 32 random bytes as hex: tokens, session ids, CSRF tokens.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equality whose time does not depend on where the first difference is.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every door of a daemon accepts one token: a door enabled after the token file changed
    /// still gets the first door's token.
    #[test]
    fn the_daemons_own_token_is_read_once_for_every_door() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::defaults();
        settings.data_dir = dir.path().to_path_buf();
        settings.server.legacy_token = true;
        let gate = Gatekeeper::open(&settings).unwrap();
        let first = gate.enable_legacy(&settings).unwrap().unwrap();
        assert_eq!(first.file.as_deref(), Some(dir.path().join(TOKEN_FILE).as_path()));
        std::fs::write(dir.path().join(TOKEN_FILE), "a-token-written-later").unwrap();
        let second = gate.enable_legacy(&settings).unwrap().unwrap();
        assert_eq!(second.token, first.token);
        assert!(gate.authenticate(&first.token).is_ok());
        assert!(gate.authenticate("a-token-written-later").is_err());
    }
}
