//! The long-running commands: the JSON-RPC daemon with its web page, the watched folder and
//! the MCP server, each handing one engine to the door that serves it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use a2rag::access::tls::ServerTls;
use a2rag::engine::Synced;
use a2rag::rpc::{Daemon, Listen, ServeOptions};
use a2rag::web::WebServer;

use super::Door;

/// Grace period for work still running at exit: dropping the runtime would wait for a write
/// that outlived the shutdown; the store keeps each document's batch atomic, so exiting is
/// safe.
const EXIT_GRACE: Duration = Duration::from_secs(1);

pub fn serve(
    door: Door,
    stdio: bool,
    listen: Vec<Listen>,
    http: Option<String>,
    watch: Option<PathBuf>,
) -> Result<ExitCode> {
    let Door { settings, kb, owner, runtime, .. } = &door;
    let http = http.or_else(|| Some(settings.server.http.clone()).filter(|a| !a.is_empty()));
    if !stdio && listen.is_empty() && http.is_none() {
        anyhow::bail!("nothing to serve: give --stdio, --listen and/or --http (or set server.http)");
    }
    let engine = Arc::new(door.open()?);
    let tls = ServerTls::configured(&engine.settings.server)?;
    let options = ServeOptions { stdio, listen, tls: tls.clone(), ..Default::default() };
    let served = runtime.block_on(async {
        if let Some(tls) = &tls {
            tls.clone().reload_on_sighup();
        }
        let daemon = Daemon::bind(engine.clone(), options).await?;
        for address in daemon.addresses() {
            eprintln!("a2rag: listening on {address}");
        }
        if let Some(file) = daemon.token_file() {
            eprintln!(
                "a2rag: network clients send a named token (a2rag token create) or the one in {} (auth)",
                file.display()
            );
        }
        if let Some(dir) = watch {
            eprintln!("a2rag: watching {}", dir.display());
            let watching = a2rag::watch::run(
                engine.clone(),
                owner.clone(),
                kb.clone(),
                dir,
                Box::new(log_sync),
                daemon.stopping(),
            );
            tokio::spawn(async move {
                if let Err(e) = watching.await {
                    tracing::error!(error = %e, "the watched folder is no longer followed");
                }
            });
        }
        let web = match &http {
            Some(addr) => Some(WebServer::bind(engine, addr, tls).await?),
            None => None,
        };
        let web = web.map(|web| {
            let address = web.address().map_or_else(|_| "?".into(), |a| a.to_string());
            let scheme = if web.is_tls() { "https" } else { "http" };
            match web.token_file() {
                Some(file) => eprintln!(
                    "a2rag: web page at {scheme}://{address}/ (sign in with a named token or the one in {})",
                    file.display()
                ),
                None => eprintln!("a2rag: web page at {scheme}://{address}/ (sign in with a token)"),
            }
            tokio::spawn(web.run(daemon.stopping()))
        });
        daemon.run().await?;
        if let Some(web) = web {
            // Open browser connections must not hold the exit for long.
            match tokio::time::timeout(Duration::from_secs(5), web).await {
                Ok(Ok(result)) => result?,
                Ok(Err(e)) => tracing::warn!(error = %e, "the web server task failed"),
                Err(_) => tracing::warn!("web connections still open after shutdown; exiting anyway"),
            }
        }
        Ok::<_, a2rag::error::Error>(())
    });
    door.runtime.shutdown_timeout(EXIT_GRACE);
    served?;
    Ok(ExitCode::SUCCESS)
}

pub fn watch(door: Door, dir: PathBuf) -> Result<ExitCode> {
    let engine = Arc::new(door.open()?);
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let watched = door.runtime.block_on(a2rag::watch::run(
        engine.clone(),
        door.owner.clone(),
        door.kb.clone(),
        dir,
        Box::new(print_sync),
        stop,
    ));
    door.runtime.shutdown_timeout(EXIT_GRACE);
    engine.flush_idle()?;
    watched?;
    Ok(ExitCode::SUCCESS)
}

pub fn mcp(door: Door) -> Result<ExitCode> {
    let engine = Arc::new(door.open()?);
    let caller = a2rag::mcp::caller_from_env(&engine)?;
    let served = door.runtime.block_on(a2rag::mcp::serve_stdio(engine, caller, door.kb.clone()));
    door.runtime.shutdown_timeout(EXIT_GRACE);
    served?;
    Ok(ExitCode::SUCCESS)
}

/// One line per sync of `a2rag watch`.
fn print_sync(synced: &Synced) {
    let r = &synced.report;
    if r.added + r.replaced + synced.deleted.len() + r.errors.len() == 0 {
        return;
    }
    eprintln!(
        "a2rag: {} added, {} replaced, {} deleted, {} errors; KB has {} documents",
        r.added,
        r.replaced,
        synced.deleted.len(),
        r.errors.len(),
        synced.stats.documents
    );
    for e in &r.errors {
        eprintln!("error: {e}");
    }
}

/// The daemon's log of each sync of `serve --watch`.
fn log_sync(synced: &Synced) {
    let r = &synced.report;
    tracing::info!(added = r.added, replaced = r.replaced, deleted = synced.deleted.len(), errors = ?r.errors, "synced the watched folder");
}
