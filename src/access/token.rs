//! Named tokens: what a token may do ([`Scope`], its knowledge bases, an expiry, limits) and
//! how it is kept. The store holds a record per name with the token's argon2 hash, never the
//! token; the token itself is shown once, when it is made.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::kb::catalog::KbName;

/// What a token may do; each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Query, retrieve, stats, documents, the graph and the audit log of its KBs.
    Read,
    /// And ingest and delete.
    Write,
    /// And the triple proposals: list and decide.
    Curate,
    /// And tokens, `check --repair`, shutdown.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Write, Scope::Curate, Scope::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Curate => "curate",
            Scope::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scope {
    type Err = Error;
    fn from_str(s: &str) -> Result<Scope> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.name() == s)
            .ok_or_else(|| Error::Invalid(format!("scope `{s}` is not one of read, write, curate, admin")))
    }
}

/// Which knowledge bases a token reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kbs {
    #[default]
    All,
    Only(Vec<KbName>),
}

impl Kbs {
    pub fn contains(&self, kb: &KbName) -> bool {
        match self {
            Kbs::All => true,
            Kbs::Only(names) => names.contains(kb),
        }
    }
}

/// A named token's stored record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub name: String,
    /// The public part of the token, which finds its record without trying every hash.
    pub id: String,
    pub scope: Scope,
    pub kbs: Kbs,
    /// Unix milliseconds after which the token is refused; `None`: never.
    pub expires_ms: Option<u64>,
    pub created_ms: u64,
    /// Requests per second and requests at once this token may make; `None`: its scope's
    /// defaults (`access.rps_*`, `access.concurrent_*`).
    pub rps: Option<f64>,
    pub concurrent: Option<u32>,
    /// The argon2 hash of the whole token, in PHC form. Never shown: `a2rag token list` and
    /// the `tokens.list` method leave it out.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub hash: String,
}

impl TokenRecord {
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms.is_some_and(|at| now_ms >= at)
    }

    /// The record as shown to people: without the hash.
    pub fn shown(&self) -> TokenRecord {
        TokenRecord { hash: String::new(), ..self.clone() }
    }
}

/// Tokens look like `a2r_<id>_<secret>`: the id is public (it names the record to check),
/// the secret is 256 random bits.
const PREFIX: &str = "a2r_";

/// A new token: its id and the whole token text.
pub fn new_token() -> (String, String) {
    let id = super::random_hex()[..16].to_string();
    let token = format!("{PREFIX}{id}_{}", super::random_hex());
    (id, token)
}

/// The id part of a token written as [`new_token`] makes them.
pub fn token_id(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    (!id.is_empty() && !secret.is_empty()).then_some(id)
}

/// The argon2 hash of `token` with a fresh salt.
pub fn hash(token: &str) -> Result<String> {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let mut bytes = [0u8; 16];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    let salt = SaltString::encode_b64(&bytes).map_err(|e| Error::Internal(format!("cannot salt a token: {e}")))?;
    argon2::Argon2::default()
        .hash_password(token.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::Internal(format!("cannot hash a token: {e}")))
}

/// Whether `token` is the one `phc` is the hash of.
pub fn verify(token: &str, phc: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    PasswordHash::new(phc)
        .is_ok_and(|parsed| argon2::Argon2::default().verify_password(token.as_bytes(), &parsed).is_ok())
}

/// When a token made now with `--expires text` stops working: `never`, or a duration from
/// now such as `30d`, `12h`, `90m`, `45s`.
pub fn expiry(text: &str, now_ms: u64) -> Result<Option<u64>> {
    let text = text.trim();
    if text == "never" {
        return Ok(None);
    }
    let bad = || Error::Invalid(format!("--expires `{text}`: give `never` or a duration such as 30d, 12h, 90m, 45s"));
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let unit_ms = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        "s" => 1_000,
        _ => return Err(bad()),
    };
    Ok(Some(now_ms.saturating_add(n.saturating_mul(unit_ms))))
}

/// Token names: what the audit log and `/metrics` show, so short and plain.
pub fn check_name(name: &str) -> Result<()> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@');
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) {
        return Err(Error::Invalid(format!("token name `{name}`: use 1 to 64 letters, digits, `-`, `_`, `.` or `@`")));
    }
    if name == crate::kb::audit::OWNER || name == super::LEGACY_NAME {
        return Err(Error::Invalid(format!("token name `{name}` is reserved; choose another")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_against_its_hash_only() {
        let (id, token) = new_token();
        assert_eq!(token_id(&token), Some(id.as_str()));
        let phc = hash(&token).unwrap();
        assert!(!phc.contains(&token[PREFIX.len() + id.len() + 1..]), "the hash does not hold the secret");
        assert!(verify(&token, &phc));
        let (_, other) = new_token();
        assert!(!verify(&other, &phc));
        assert!(!verify(&token, "not a hash"));
        assert_eq!(token_id("plain-secret"), None);
    }

    #[test]
    fn scopes_include_the_ones_below() {
        assert!(Scope::Admin > Scope::Curate && Scope::Curate > Scope::Write && Scope::Write > Scope::Read);
        assert_eq!("curate".parse::<Scope>().unwrap(), Scope::Curate);
        assert!("root".parse::<Scope>().is_err());
    }

    #[test]
    fn expiries_are_durations_from_now() {
        assert_eq!(expiry("never", 5).unwrap(), None);
        assert_eq!(expiry("2h", 1_000).unwrap(), Some(1_000 + 7_200_000));
        assert_eq!(expiry("30d", 0).unwrap(), Some(30 * 86_400_000));
        for wrong in ["", "d", "12", "1w", "-1h", "tomorrow"] {
            assert!(expiry(wrong, 0).is_err(), "{wrong}");
        }
    }

    #[test]
    fn names_are_plain_and_not_reserved() {
        assert!(check_name("ci-bot@team.example").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("two words").is_err());
        assert!(check_name("owner").is_err());
    }
}
