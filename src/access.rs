//! Who may use a daemon's network doors: the bearer token that TCP JSON-RPC clients and the
//! web page's users present. One token per data directory, configured
//! (`server.bearer_token`) or generated on first use into `DATA_DIR/rpc-token`, mode 0600.

use std::path::{Path, PathBuf};

use crate::config::Settings;
use crate::error::{Error, Result};

/// Where a generated token lives, inside the data directory.
pub const TOKEN_FILE: &str = "rpc-token";

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
