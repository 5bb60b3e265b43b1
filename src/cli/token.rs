//! `a2rag token …`: through an engine that opens no KB, so it works beside a running daemon.

use std::process::ExitCode;

use anyhow::Result;

use a2rag::access::TokenSpec;
use a2rag::kb::catalog::KbName;

use super::Door;
use super::args::TokenCommand;

pub fn token(door: &Door, action: TokenCommand, kbs: Vec<KbName>) -> Result<ExitCode> {
    if !kbs.is_empty() && !matches!(action, TokenCommand::Create { .. }) {
        anyhow::bail!("--kb is for `token create` (the KBs a new token may use)");
    }
    let engine = door.open_without_kbs()?;
    match action {
        TokenCommand::Create { name, scope, expires, rps, concurrent } => {
            let spec = TokenSpec::new(name, scope, kbs, &expires, rps, concurrent)?;
            let (record, token) = engine.create_token(&door.owner, spec)?;
            eprintln!("a2rag: token `{}` ({} scope) made; it is shown this once:", record.name, record.scope);
            say!("{token}");
        }
        TokenCommand::List => {
            for record in engine.tokens(&door.owner)? {
                say!("{}", serde_json::to_string(&record.shown())?);
            }
        }
        TokenCommand::Revoke { name } => {
            engine.revoke_token(&door.owner, &name)?;
            say!("revoked {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
