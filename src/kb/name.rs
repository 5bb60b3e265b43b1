//! The name of a knowledge base, checked once where it enters: letters, digits, `-` and
//! `_`, so that it is safe as a directory name and a database key.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Directory under the data directory that holds the named KBs.
pub(super) const NAMED_DIR: &str = "kbs";
const MAX_NAME_BYTES: usize = 64;

/// A knowledge base's name: letters, digits, `-` and `_`, at most 64 bytes, so that it is
/// also a safe directory name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct KbName(String);

impl KbName {
    pub const DEFAULT: &'static str = "default";

    pub fn new(name: &str) -> Result<KbName> {
        KbName::parse(name).map_err(Error::Invalid)
    }

    /// The name, or what a name may be: the message alone, for the request decoders that
    /// say "invalid params" themselves.
    fn parse(name: &str) -> std::result::Result<KbName, String> {
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME_BYTES
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if valid {
            Ok(KbName(name.to_string()))
        } else {
            Err(format!("knowledge base name `{name}` is not 1 to {MAX_NAME_BYTES} letters, digits, `-` or `_`"))
        }
    }

    pub fn is_default(&self) -> bool {
        self.0 == KbName::DEFAULT
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Where this KB lives under `data_dir`.
    pub fn dir(&self, data_dir: &Path) -> PathBuf {
        if self.is_default() { data_dir.to_path_buf() } else { data_dir.join(NAMED_DIR).join(&self.0) }
    }

    /// `name`, or the default KB when absent.
    pub fn or_default(name: Option<&str>) -> Result<KbName> {
        name.map_or_else(|| Ok(KbName::default()), KbName::new)
    }
}

impl Default for KbName {
    fn default() -> Self {
        KbName(KbName::DEFAULT.to_string())
    }
}

impl fmt::Display for KbName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for KbName {
    type Err = Error;
    fn from_str(s: &str) -> Result<KbName> {
        KbName::new(s)
    }
}

impl TryFrom<String> for KbName {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<KbName, String> {
        KbName::parse(&s)
    }
}

impl From<KbName> for String {
    fn from(name: KbName) -> String {
        name.0
    }
}
