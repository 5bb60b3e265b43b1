//! Where the access tokens' records live: beside the KBs, so that every daemon serving them
//! sees the same tokens. With sled, a file in the data directory (`tokens.json`, mode 0600),
//! outside sled's locked directory so that `a2rag token` works while a daemon runs; with
//! PostgreSQL, the `a2rag_tokens` table of the database. Records are opaque text here (the
//! `access` layer owns their meaning); a record never holds a token, only its hash.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::config::{Settings, StoreBackend, StoreSettings};
use crate::error::{Error, Result};

/// The file holding the tokens of a sled data directory.
pub const TOKENS_FILE: &str = "tokens.json";

/// Token records by name.
pub trait Credentials: Send + Sync {
    /// Every record, by name.
    fn all(&self) -> Result<BTreeMap<String, String>>;
    /// Adds a record; `false`, with nothing written, when `name` is taken.
    fn insert_new(&self, name: &str, record: &str) -> Result<bool>;
    /// Removes a record; `false` when there was none.
    fn remove(&self, name: &str) -> Result<bool>;
}

/// The token records of the configured store.
pub fn credentials(settings: &Settings) -> Result<Box<dyn Credentials>> {
    Ok(match settings.store.backend {
        StoreBackend::Sled => Box::new(TokenFile { path: settings.data_dir.join(TOKENS_FILE) }),
        StoreBackend::Postgres => Box::new(PgTokens(settings.store.clone())),
    })
}

struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    fn read(&self) -> Result<BTreeMap<String, String>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                key: self.path.display().to_string(),
                message: format!("{e}; restore it from a backup or remove it and create the tokens again"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }

    /// Reads, changes and replaces the file under an exclusive lock, so that two `a2rag
    /// token` commands at once both land. The new file is written aside and renamed into
    /// place: a reader sees the old file or the new one, never a part.
    fn update<T>(&self, change: impl FnOnce(&mut BTreeMap<String, String>) -> T) -> Result<T> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock_path = self.path.with_extension("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        lock_exclusive(&lock, &lock_path)?;
        let mut records = self.read()?;
        let outcome = change(&mut records);
        let staging = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        let text = serde_json::to_vec_pretty(&records)
            .map_err(|e| Error::Internal(format!("cannot encode the token records: {e}")))?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&staging)
            .map_err(|e| Error::io(&staging, e))?;
        out.write_all(&text).and_then(|()| out.sync_all()).map_err(|e| Error::io(&staging, e))?;
        std::fs::rename(&staging, &self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(outcome)
    }
}

/// Blocks until this process holds `file`'s exclusive advisory lock (released on close).
fn lock_exclusive(file: &std::fs::File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function borrows for the call; no memory is shared.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(path, std::io::Error::last_os_error()));
    }
    Ok(())
}

impl Credentials for TokenFile {
    fn all(&self) -> Result<BTreeMap<String, String>> {
        self.read()
    }

    fn insert_new(&self, name: &str, record: &str) -> Result<bool> {
        self.update(|records| {
            if records.contains_key(name) {
                return false;
            }
            records.insert(name.to_string(), record.to_string());
            true
        })
    }

    fn remove(&self, name: &str) -> Result<bool> {
        self.update(|records| records.remove(name).is_some())
    }
}

struct PgTokens(StoreSettings);

impl Credentials for PgTokens {
    fn all(&self) -> Result<BTreeMap<String, String>> {
        super::postgres::tokens(&self.0)
    }

    fn insert_new(&self, name: &str, record: &str) -> Result<bool> {
        super::postgres::insert_token(&self.0, name, record)
    }

    fn remove(&self, name: &str) -> Result<bool> {
        super::postgres::remove_token(&self.0, name)
    }
}
