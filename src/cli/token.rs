//! `a2rag token …`: the token store alone, not the KBs, so it works beside a running daemon.

use std::process::ExitCode;

use anyhow::Result;

use a2rag::access::{Gatekeeper, TokenSpec};
use a2rag::kb::catalog::KbName;

use super::Door;
use super::args::TokenCommand;

pub fn token(door: &Door, action: TokenCommand, kbs: Vec<KbName>) -> Result<ExitCode> {
    let access = Gatekeeper::open(&door.settings)?;
    if !kbs.is_empty() && !matches!(action, TokenCommand::Create { .. }) {
        anyhow::bail!("--kb is for `token create` (the KBs a new token may use)");
    }
    match action {
        TokenCommand::Create { name, scope, expires, rps, concurrent } => {
            let spec = TokenSpec::new(name, scope, kbs, &expires, rps, concurrent)?;
            let (record, token) = access.create(spec)?;
            eprintln!("a2rag: token `{}` ({} scope) made; it is shown this once:", record.name, record.scope);
            say!("{token}");
        }
        TokenCommand::List => {
            for record in access.list()? {
                say!("{}", serde_json::to_string(&record.shown())?);
            }
        }
        TokenCommand::Revoke { name } => {
            access.revoke(&name)?;
            say!("revoked {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
