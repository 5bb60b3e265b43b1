//! The PostgreSQL back end: every KB of a database in one table of entries, a change log per
//! KB, and ids from one sequence, so that several daemons can serve the same KBs.
//!
//! * Entries: `(kb, space, key, value)`, keys and values as `bytea` exactly as the sled back end
//!   stores them (vectors are little-endian f32, so they round-trip bit for bit). `bytea`
//!   compares bytewise, so a key-range scan returns sled's order.
//! * Writers of one KB serialise on a transaction-scoped advisory lock. A commit writes its
//!   entries, appends the KB keys it touched to `a2rag_changes` under the KB's next sequence
//!   number, and sends `NOTIFY a2rag_changes` with the KB's name, all in one transaction.
//! * Schema migrations are applied in order on first connection, under an advisory lock; a
//!   database migrated by a newer build is refused.
//!
//! The KB layer is synchronous and runs on many threads (inside the daemon's runtime too), so
//! every statement runs on this module's own small tokio runtime; the calling thread waits on
//! a channel and never drives a future itself.

use std::collections::HashMap;
use std::future::Future;
use std::ops::{Deref, Range};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio::sync::{Mutex as AsyncMutex, OwnedMappedMutexGuard, OwnedMutexGuard};
use tokio_postgres::{AsyncMessage, Client};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{Backend, ChangeLog, Commit, Entries, Entry, Put, Session, Space, Write};
use crate::config::{StoreBackend, StoreSettings};
use crate::error::{Error, Result};
use crate::kb::name::KbName;

/// The schema, one migration per version, applied in order and never edited once released.
const MIGRATIONS: &[&str] = &[
    // 1: entries, change log, ids.
    "CREATE TABLE a2rag_kbs (
         name text PRIMARY KEY,
         created_at timestamptz NOT NULL DEFAULT now()
     );
     CREATE TABLE a2rag_entries (
         kb text NOT NULL REFERENCES a2rag_kbs (name) ON DELETE CASCADE,
         space smallint NOT NULL,
         key bytea NOT NULL,
         value bytea NOT NULL,
         PRIMARY KEY (kb, space, key)
     );
     CREATE TABLE a2rag_changes (
         kb text NOT NULL REFERENCES a2rag_kbs (name) ON DELETE CASCADE,
         seq bigint NOT NULL,
         keys bytea[] NOT NULL,
         committed_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (kb, seq)
     );
     CREATE SEQUENCE a2rag_ids INCREMENT BY 1024 MINVALUE 1;",
    // 2: one fact vector per distinct fact, no longer one per edge. No table changes; the
    // version keeps an older build, which expects a vector under every edge, off the database.
    "COMMENT ON TABLE a2rag_entries IS 'a2rag KB records; schema 2: one fact vector per distinct fact'",
    // 3: named access tokens (argon2 hashes, never the tokens) shared by every daemon of the
    // database, and the token each change was made through.
    "CREATE TABLE a2rag_tokens (
         name text PRIMARY KEY,
         record text NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now()
     );
     ALTER TABLE a2rag_changes ADD COLUMN author text NOT NULL DEFAULT '';",
    // 4: mostly-zero vectors stored sparse (`kb::packed`). No table changes; the version
    // keeps an older build, which would misread them, off the database.
    "COMMENT ON TABLE a2rag_entries IS 'a2rag KB records; schema 4: sparse vectors where most components are zero'",
    // 5: a node's chunks stored one key per mention (`kb::store::Family::Mention`), not in
    // its record; an older build would read nodes without provenance.
    "COMMENT ON TABLE a2rag_entries IS 'a2rag KB records; schema 5: one key per mention, not the chunk list in the node'",
];

/// The notification channel commits announce themselves on (payload: the KB's name).
const CHANNEL: &str = "a2rag_changes";
/// First half of every advisory lock key a2rag takes ("a2ra"), the second being the KB's
/// name hashed, or [`MIGRATION_LOCK`].
const LOCK_CLASS: i32 = 0x6132_7261;
const MIGRATION_LOCK: i32 = 0;
/// Taken by every writer of a KB, until its transaction ends.
const LOCK_KB: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";
/// Ids each `nextval` reserves: the sequence's increment.
const ID_BLOCK: u64 = 1024;
/// Entries per page of a scan.
const PAGE: i64 = 4096;
/// Every this many changes, a commit prunes the log.
const PRUNE_EVERY: i64 = 1024;
/// A listener wakes its follower at least this often, which also tells it whether the
/// follower is still there.
const LISTEN_HEARTBEAT: Duration = Duration::from_secs(30);
/// How long to wait for a pooled connection or a new one before reporting the server down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RUNTIME_THREAD: &str = "a2rag-postgres";

/// The runtime every statement runs on: one per process, for every pool.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(RUNTIME_THREAD)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Postgres(format!("could not start the PostgreSQL I/O runtime: {e}")))
}

/// Runs `task` on the PostgreSQL runtime and waits for it on this thread.
fn block_on<T: Send + 'static>(task: impl Future<Output = Result<T>> + Send + 'static) -> Result<T> {
    if std::thread::current().name() == Some(RUNTIME_THREAD) {
        return Err(Error::Internal("a PostgreSQL call waited on the PostgreSQL runtime itself".into()));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = tx.send(task.await);
    });
    rx.recv().map_err(|_| Error::Internal("a PostgreSQL task stopped before answering".into()))?
}

fn pg(error: tokio_postgres::Error) -> Error {
    match error.as_db_error() {
        Some(db) => {
            let hint = db.hint().map(|h| format!(" (hint: {h})")).unwrap_or_default();
            Error::Postgres(format!("{}{hint}", db.message()))
        }
        None => {
            let cause = std::error::Error::source(&error).map(|s| format!(": {s}")).unwrap_or_default();
            Error::Postgres(format!("{error}{cause}"))
        }
    }
}

fn no_connection(error: deadpool_postgres::PoolError) -> Error {
    let error = match error {
        deadpool_postgres::PoolError::Backend(e) => pg(e).to_string(),
        other => other.to_string(),
    };
    if error.contains("certificate") || error.contains("TLS") {
        return Error::Postgres(format!(
            "no connection to the database ({error}); the server's TLS certificate was not accepted: set store.tls_ca \
             to the CA that signed it and connect by a host name the certificate names"
        ));
    }
    Error::Postgres(format!("no connection to the database ({error}); check store.url and that the server is running"))
}

fn parse_url(settings: &StoreSettings) -> Result<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = settings.url.parse().map_err(|e| {
        Error::Config(format!(
            "store.url is not a PostgreSQL connection string ({e}); write postgres://user@host:5432/db or host=... dbname=..."
        ))
    })?;
    // A CA given means TLS is wanted: a server that does not offer it must not get the
    // password in clear.
    if !settings.tls_ca.as_os_str().is_empty() {
        config.ssl_mode(tokio_postgres::config::SslMode::Require);
    }
    Ok(config)
}

/// The TLS connector every connection uses when TLS is negotiated: rustls, verifying the
/// server's chain against `store.tls_ca` (or the public web roots) and its name against the
/// host connected to, as libpq's `sslmode=verify-full`.
fn tls(settings: &StoreSettings) -> Result<MakeRustlsConnect> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let ca = &settings.tls_ca;
    if ca.as_os_str().is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    } else {
        let bad = |e: &dyn std::fmt::Display| {
            Error::Config(format!("store.tls_ca `{}`: {e} (give a PEM file of CA certificates)", ca.display()))
        };
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(&e))? {
            roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
        }
        if roots.is_empty() {
            return Err(bad(&"no certificate in it"));
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// One pool per connection string and size, made (and the schema migrated) on first use.
fn pool(settings: &StoreSettings) -> Result<Pool> {
    static POOLS: OnceLock<Mutex<HashMap<(String, usize), Pool>>> = OnceLock::new();
    let key = (settings.url.clone(), settings.pool_size);
    let pools = POOLS.get_or_init(Default::default);
    if let Some(pool) = pools.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(pool.clone());
    }
    let config = parse_url(settings)?;
    let database = config.get_dbname().unwrap_or("(default)").to_string();
    let manager =
        Manager::from_config(config, tls(settings)?, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    let pool = Pool::builder(manager)
        .max_size(settings.pool_size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .create_timeout(Some(CONNECT_TIMEOUT))
        .wait_timeout(Some(CONNECT_TIMEOUT * 6))
        .build()
        .map_err(|e| Error::Postgres(format!("could not make the connection pool: {e}")))?;
    let migrating = pool.clone();
    block_on(async move { migrate(&migrating, &database).await })?;
    pools.lock().unwrap_or_else(|e| e.into_inner()).insert(key, pool.clone());
    Ok(pool)
}

/// Brings the schema up to this build's, refusing a database a newer build migrated.
async fn migrate(pool: &Pool, database: &str) -> Result<()> {
    let mut client = pool.get().await.map_err(no_connection)?;
    let tx = client.transaction().await.map_err(pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&LOCK_CLASS, &MIGRATION_LOCK]).await.map_err(pg)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS a2rag_schema (version integer NOT NULL)").await.map_err(pg)?;
    let found: Option<i32> = tx.query_one("SELECT max(version) FROM a2rag_schema", &[]).await.map_err(pg)?.get(0);
    let found = found.unwrap_or(0).max(0) as usize;
    if found > MIGRATIONS.len() {
        return Err(Error::SchemaTooNew {
            place: format!("PostgreSQL database `{database}`"),
            found: found as u32,
            supported: MIGRATIONS.len() as u32,
        });
    }
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(found) {
        tx.batch_execute(sql).await.map_err(pg)?;
        tx.execute("INSERT INTO a2rag_schema (version) VALUES ($1)", &[&(version as i32 + 1)]).await.map_err(pg)?;
        tracing::info!(database, version = version + 1, "migrated the PostgreSQL schema");
    }
    tx.commit().await.map_err(pg)
}

/// The names of the KBs in the configured database.
pub fn kb_names(settings: &StoreSettings) -> Result<Vec<KbName>> {
    let pool = pool(settings)?;
    let names: Vec<String> = block_on(async move {
        let client = pool.get().await.map_err(no_connection)?;
        let rows = client.query("SELECT name FROM a2rag_kbs ORDER BY name", &[]).await.map_err(pg)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    })?;
    names.iter().map(|n| KbName::new(n)).collect()
}

/// Every token record of the database, by name.
pub(super) fn tokens(settings: &StoreSettings) -> Result<std::collections::BTreeMap<String, String>> {
    let pool = pool(settings)?;
    block_on(async move {
        let client = pool.get().await.map_err(no_connection)?;
        let rows = client.query("SELECT name, record FROM a2rag_tokens", &[]).await.map_err(pg)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    })
}

pub(super) fn insert_token(settings: &StoreSettings, name: &str, record: &str) -> Result<bool> {
    let pool = pool(settings)?;
    let (name, record) = (name.to_string(), record.to_string());
    block_on(async move {
        let client = pool.get().await.map_err(no_connection)?;
        let inserted = client
            .execute(
                "INSERT INTO a2rag_tokens (name, record) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                &[&name, &record],
            )
            .await
            .map_err(pg)?;
        Ok(inserted == 1)
    })
}

pub(super) fn remove_token(settings: &StoreSettings, name: &str) -> Result<bool> {
    let pool = pool(settings)?;
    let name = name.to_string();
    block_on(async move {
        let client = pool.get().await.map_err(no_connection)?;
        Ok(client.execute("DELETE FROM a2rag_tokens WHERE name = $1", &[&name]).await.map_err(pg)? == 1)
    })
}

/// The connection a session holds (a write or snapshot transaction), used by every statement
/// of this KB's back end while it is held.
type Pinned = Arc<AsyncMutex<Option<Object>>>;

enum Conn {
    Pinned(OwnedMappedMutexGuard<Option<Object>, Object>),
    Pooled(Box<Object>),
}

impl Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        match self {
            Conn::Pinned(object) => object,
            Conn::Pooled(object) => object,
        }
    }
}

/// The session's connection if one is pinned, else one from the pool.
async fn conn(pool: &Pool, pinned: &Pinned) -> Result<Conn> {
    match OwnedMutexGuard::try_map(pinned.clone().lock_owned().await, Option::as_mut) {
        Ok(object) => Ok(Conn::Pinned(object)),
        Err(_) => Ok(Conn::Pooled(Box::new(pool.get().await.map_err(no_connection)?))),
    }
}

/// Rolls back whatever the pinned connection holds open and returns it to the pool (or
/// drops it, if it is broken).
async fn release(pinned: &Pinned) {
    if let Some(object) = pinned.lock().await.take()
        && let Err(e) = object.batch_execute("ROLLBACK").await
    {
        tracing::warn!(error = %pg(e), "dropping a PostgreSQL connection that could not roll back");
        drop(Object::take(object));
    }
}

pub(super) struct PgBackend {
    pool: Pool,
    settings: StoreSettings,
    kb: String,
    pinned: Pinned,
    /// The ids this process reserved and has not handed out yet.
    ids: Mutex<Range<u64>>,
}

impl PgBackend {
    pub(super) fn open(settings: &StoreSettings, kb: &KbName) -> Result<PgBackend> {
        let pool = pool(settings)?;
        let name = kb.to_string();
        let creating = pool.clone();
        block_on(async move {
            let client = creating.get().await.map_err(no_connection)?;
            client
                .execute("INSERT INTO a2rag_kbs (name) VALUES ($1) ON CONFLICT DO NOTHING", &[&name])
                .await
                .map_err(pg)?;
            Ok(())
        })?;
        Ok(PgBackend {
            pool,
            settings: settings.clone(),
            kb: kb.to_string(),
            pinned: Arc::default(),
            ids: Mutex::new(0..0),
        })
    }

    /// Runs `op` with this KB's connection (the session's, or a pooled one) and its name.
    fn run<T, F>(&self, op: impl FnOnce(Conn, String) -> F + Send + 'static) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let (pool, pinned, kb) = (self.pool.clone(), self.pinned.clone(), self.kb.clone());
        block_on(async move { op(conn(&pool, &pinned).await?, kb).await })
    }

    /// Opens a transaction on a pooled connection and pins it until the session drops.
    fn pin(&self, begin: &'static str, take_write_lock: bool) -> Result<Session> {
        let (pool, pinned, kb) = (self.pool.clone(), self.pinned.clone(), self.kb.clone());
        block_on(async move {
            let mut slot = pinned.lock().await;
            if slot.is_some() {
                return Ok(false);
            }
            let object = pool.get().await.map_err(no_connection)?;
            object.batch_execute(begin).await.map_err(pg)?;
            if take_write_lock && let Err(e) = object.execute(LOCK_KB, &[&LOCK_CLASS, &kb]).await {
                let _ = object.batch_execute("ROLLBACK").await;
                return Err(pg(e));
            }
            *slot = Some(object);
            Ok(true)
        })
        .map(|pinned_here| {
            if !pinned_here {
                // Already inside a session (a snapshot read during a write): that one ends it.
                return Session::none();
            }
            let pinned = self.pinned.clone();
            Session(Some(Box::new(move || {
                if let Err(e) = block_on(async move {
                    release(&pinned).await;
                    Ok(())
                }) {
                    tracing::warn!(error = %e, "could not end a PostgreSQL session");
                }
            })))
        })
    }
}

/// The smallest key greater than every key starting with `prefix`; `None` when there is none.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The key range of one page: from `from` (inclusive) below `end`.
async fn page(conn: Conn, kb: String, space: i16, from: Vec<u8>, end: Option<Vec<u8>>) -> Result<Vec<Entry>> {
    let rows = conn
        .query(
            "SELECT key, value FROM a2rag_entries
             WHERE kb = $1 AND space = $2 AND key >= $3 AND ($4::bytea IS NULL OR key < $4)
             ORDER BY key LIMIT $5",
            &[&kb, &space, &from, &end, &PAGE],
        )
        .await
        .map_err(pg)?;
    Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// A scan read a page at a time, by key ranges, so a large KB is never held twice.
struct Scan<'a> {
    backend: &'a PgBackend,
    space: i16,
    next: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    page: std::vec::IntoIter<Entry>,
}

impl Iterator for Scan<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if let Some(entry) = self.page.next() {
            return Some(Ok(entry));
        }
        let from = self.next.take()?;
        let (space, end) = (self.space, self.end.clone());
        match self.backend.run(move |conn, kb| page(conn, kb, space, from, end)) {
            Ok(entries) => {
                if entries.len() as i64 == PAGE
                    && let Some((last, _)) = entries.last()
                {
                    // The next key after `last` in byte order is `last` followed by a zero.
                    let mut after = last.clone();
                    after.push(0);
                    self.next = Some(after);
                }
                self.page = entries.into_iter();
                self.page.next().map(Ok)
            }
            Err(e) => Some(Err(e)),
        }
    }
}

impl Backend for PgBackend {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (space, key) = (space.code(), key.to_vec());
        self.run(move |conn, kb| async move {
            let row = conn
                .query_opt(
                    "SELECT value FROM a2rag_entries WHERE kb = $1 AND space = $2 AND key = $3",
                    &[&kb, &space, &key],
                )
                .await
                .map_err(pg)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn get_many(&self, space: Space, keys: &[Vec<u8>]) -> Result<HashMap<Vec<u8>, Vec<u8>>> {
        let (space, keys) = (space.code(), keys.to_vec());
        self.run(move |conn, kb| async move {
            let rows = conn
                .query(
                    "SELECT key, value FROM a2rag_entries WHERE kb = $1 AND space = $2 AND key = ANY($3)",
                    &[&kb, &space, &keys],
                )
                .await
                .map_err(pg)?;
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn scan<'a>(&'a self, space: Space, prefix: &[u8]) -> Entries<'a> {
        Box::new(Scan {
            backend: self,
            space: space.code(),
            next: Some(prefix.to_vec()),
            end: prefix_end(prefix),
            page: Vec::new().into_iter(),
        })
    }

    fn insert(&self, space: Space, key: &[u8], value: &[u8]) -> Result<()> {
        let (space, key, value) = (space.code(), key.to_vec(), value.to_vec());
        self.run(move |conn, kb| async move {
            conn.execute(
                "INSERT INTO a2rag_entries (kb, space, key, value) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (kb, space, key) DO UPDATE SET value = EXCLUDED.value",
                &[&kb, &space, &key, &value],
            )
            .await
            .map_err(pg)?;
            Ok(())
        })
    }

    /// One statement, so one transaction: the second row is written only if the first was.
    fn insert_new_with(
        &self,
        (space, key, value): Put<'_>,
        (along_space, along_key, along_value): Put<'_>,
    ) -> Result<bool> {
        let (space, key, value) = (space.code(), key.to_vec(), value.to_vec());
        let (along_space, along_key, along_value) = (along_space.code(), along_key.to_vec(), along_value.to_vec());
        self.run(move |conn, kb| async move {
            let inserted = conn
                .execute(
                    "WITH claimed AS (
                         INSERT INTO a2rag_entries (kb, space, key, value) VALUES ($1, $2, $3, $4)
                         ON CONFLICT DO NOTHING RETURNING kb
                     )
                     INSERT INTO a2rag_entries (kb, space, key, value) SELECT kb, $5, $6, $7 FROM claimed
                     ON CONFLICT (kb, space, key) DO UPDATE SET value = EXCLUDED.value",
                    &[&kb, &space, &key, &value, &along_space, &along_key, &along_value],
                )
                .await
                .map_err(pg)?;
            Ok(inserted == 1)
        })
    }

    /// Ids come from one sequence for the whole database, a block of [`ID_BLOCK`] per round
    /// trip; the ids of a block a crashed daemon never used are simply skipped.
    fn next_id(&self) -> Result<u64> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.is_empty() {
            let start: i64 = self.run(|conn, _| async move {
                Ok(conn.query_one("SELECT nextval('a2rag_ids')", &[]).await.map_err(pg)?.get(0))
            })?;
            let start = start as u64;
            *ids = start..start + ID_BLOCK;
        }
        let id = ids.start;
        ids.start += 1;
        Ok(id)
    }

    fn reserve_ids_through(&self, floor: u64) -> Result<()> {
        let floor =
            i64::try_from(floor).map_err(|_| Error::Invalid(format!("id {floor} is beyond PostgreSQL's bigint")))?;
        self.run(move |conn, _| async move {
            conn.execute("SELECT setval('a2rag_ids', greatest($1, (SELECT last_value FROM a2rag_ids)))", &[&floor])
                .await
                .map_err(pg)?;
            Ok(())
        })?;
        *self.ids.lock().unwrap_or_else(|e| e.into_inner()) = 0..0;
        Ok(())
    }

    /// One transaction: the entries (the ahead part too: the server holds a large
    /// transaction, not this process), the change record with the KB keys touched, the
    /// notification (delivered on commit). Inside a write session it ends the session.
    fn commit(&self, Commit { mut ahead, writes, author }: Commit) -> Result<Option<u64>> {
        ahead.extend(writes);
        let writes = ahead;
        let (pool, pinned, kb) = (self.pool.clone(), self.pinned.clone(), self.kb.clone());
        block_on(async move {
            let held = pinned.lock().await.take();
            let object = match held {
                Some(object) => object,
                None => {
                    let object = pool.get().await.map_err(no_connection)?;
                    object.batch_execute("BEGIN").await.map_err(pg)?;
                    object
                }
            };
            // Advisory locks are re-entrant: inside a write session this one is held already.
            let written = match object.execute(LOCK_KB, &[&LOCK_CLASS, &kb]).await {
                Ok(_) => write_entries(&object, &kb, writes, &author).await,
                Err(e) => Err(pg(e)),
            };
            match written {
                Ok(seq) => {
                    object.batch_execute("COMMIT").await.map_err(pg)?;
                    Ok(seq)
                }
                Err(e) => {
                    if object.batch_execute("ROLLBACK").await.is_err() {
                        drop(Object::take(object));
                    }
                    Err(e)
                }
            }
        })
    }

    /// Writes commit as they are made.
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn begin_write(&self) -> Result<Session> {
        self.pin("BEGIN", true)
    }

    fn begin_snapshot(&self) -> Result<Session> {
        self.pin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", false)
    }

    fn changes_since(&self, seq: u64) -> Result<ChangeLog> {
        let seq = seq as i64;
        self.run(move |conn, kb| async move {
            let row = conn
                .query_one("SELECT min(seq), max(seq) FROM a2rag_changes WHERE kb = $1", &[&kb])
                .await
                .map_err(pg)?;
            let (first, latest): (Option<i64>, Option<i64>) = (row.get(0), row.get(1));
            let (Some(first), Some(latest)) = (first, latest) else {
                return Ok(ChangeLog::Current);
            };
            if latest <= seq {
                return Ok(ChangeLog::Current);
            }
            if first > seq + 1 {
                return Ok(ChangeLog::Pruned { latest: latest as u64 });
            }
            let rows = conn
                .query("SELECT keys FROM a2rag_changes WHERE kb = $1 AND seq > $2 ORDER BY seq", &[&kb, &seq])
                .await
                .map_err(pg)?;
            let mut keys: Vec<Vec<u8>> = rows.into_iter().flat_map(|r| r.get::<_, Vec<Vec<u8>>>(0)).collect();
            keys.sort_unstable();
            keys.dedup();
            Ok(ChangeLog::Since { latest: latest as u64, keys })
        })
    }

    fn latest_change(&self) -> Result<u64> {
        self.run(|conn, kb| async move {
            let latest: i64 = conn
                .query_one("SELECT coalesce(max(seq), 0) FROM a2rag_changes WHERE kb = $1", &[&kb])
                .await
                .map_err(pg)?
                .get(0);
            Ok(latest as u64)
        })
    }

    fn waiting_since(&self, seq: u64) -> Result<Duration> {
        let seq = seq as i64;
        self.run(move |conn, kb| async move {
            let row = conn
                .query_opt(
                    "SELECT extract(epoch FROM clock_timestamp() - committed_at)::float8 FROM a2rag_changes
                     WHERE kb = $1 AND seq > $2 ORDER BY seq LIMIT 1",
                    &[&kb, &seq],
                )
                .await
                .map_err(pg)?;
            let seconds: f64 = row.map_or(0.0, |r| r.get(0));
            Ok(Duration::from_secs_f64(seconds.max(0.0)))
        })
    }

    fn watch(&self) -> Option<Receiver<()>> {
        let config = parse_url(&self.settings).ok()?;
        let tls = tls(&self.settings).ok()?;
        let (tx, rx) = std::sync::mpsc::channel();
        runtime().ok()?.spawn(listen(config, tls, self.kb.clone(), tx));
        Some(rx)
    }

    fn kind(&self) -> StoreBackend {
        StoreBackend::Postgres
    }
}

/// Writes `writes` and, when they touch KB records, records the keys under the KB's next
/// change number and announces it. The caller holds the KB's write lock.
async fn write_entries(client: &Client, kb: &str, writes: Vec<Write>, author: &str) -> Result<Option<u64>> {
    let (mut put_spaces, mut put_keys, mut put_values) = (Vec::new(), Vec::new(), Vec::new());
    let (mut removed_spaces, mut removed_keys) = (Vec::new(), Vec::new());
    let mut touched: Vec<Vec<u8>> = Vec::new();
    for write in writes {
        if write.space == Space::Kb {
            touched.push(write.key.clone());
        }
        match write.value {
            Some(value) => {
                put_spaces.push(write.space.code());
                put_keys.push(write.key);
                put_values.push(value);
            }
            None => {
                removed_spaces.push(write.space.code());
                removed_keys.push(write.key);
            }
        }
    }
    if !put_keys.is_empty() {
        client
            .execute(
                "INSERT INTO a2rag_entries (kb, space, key, value)
                 SELECT $1, s, k, v FROM unnest($2::int2[], $3::bytea[], $4::bytea[]) AS t (s, k, v)
                 ON CONFLICT (kb, space, key) DO UPDATE SET value = EXCLUDED.value",
                &[&kb, &put_spaces, &put_keys, &put_values],
            )
            .await
            .map_err(pg)?;
    }
    if !removed_keys.is_empty() {
        client
            .execute(
                "DELETE FROM a2rag_entries e USING unnest($2::int2[], $3::bytea[]) AS t (s, k)
                 WHERE e.kb = $1 AND e.space = t.s AND e.key = t.k",
                &[&kb, &removed_spaces, &removed_keys],
            )
            .await
            .map_err(pg)?;
    }
    if touched.is_empty() {
        return Ok(None);
    }
    let seq: i64 = client
        .query_one(
            "INSERT INTO a2rag_changes (kb, seq, keys, author)
             SELECT $1, coalesce(max(seq), 0) + 1, $2, $3 FROM a2rag_changes WHERE kb = $1
             RETURNING seq",
            &[&kb, &touched, &author],
        )
        .await
        .map_err(pg)?
        .get(0);
    client.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &kb]).await.map_err(pg)?;
    if seq % PRUNE_EVERY == 0 {
        client
            .execute(
                "DELETE FROM a2rag_changes WHERE kb = $1 AND seq <= $2",
                &[&kb, &(seq - super::CHANGES_KEPT as i64)],
            )
            .await
            .map_err(pg)?;
    }
    Ok(Some(seq as u64))
}

/// Wakes `wake` on every notification for `kb`, after every (re)connection (changes made
/// while not listening are then caught up from the log) and at least every
/// [`LISTEN_HEARTBEAT`]; ends when the receiver is gone.
async fn listen(config: tokio_postgres::Config, tls: MakeRustlsConnect, kb: String, wake: std::sync::mpsc::Sender<()>) {
    loop {
        match listen_once(&config, &tls, &kb, &wake).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, kb, "lost the PostgreSQL change notifications; reconnecting");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        if wake.send(()).is_err() {
            return;
        }
    }
}

/// `Ok` when the receiver is gone, an error when the connection failed.
async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    kb: &str,
    wake: &std::sync::mpsc::Sender<()>,
) -> Result<()> {
    let (client, mut connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(tls.clone()))
        .await
        .map_err(|_| Error::Postgres("connecting timed out".into()))?
        .map_err(pg)?;
    let (notes_tx, mut notes) = tokio::sync::mpsc::unbounded_channel::<String>();
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) => {
                    if notes_tx.send(note.payload().to_string()).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    let listening = client.batch_execute(&format!("LISTEN {CHANNEL}")).await.map_err(pg);
    let outcome = match listening {
        Err(e) => Err(e),
        Ok(()) => loop {
            if wake.send(()).is_err() {
                break Ok(());
            }
            let heard = tokio::time::timeout(LISTEN_HEARTBEAT, async {
                loop {
                    match notes.recv().await {
                        Some(payload) if payload == kb => return true,
                        Some(_) => {}
                        None => return false,
                    }
                }
            })
            .await;
            // A timeout is the heartbeat: wake the follower anyway.
            if let Ok(false) = heard {
                break Err(Error::Postgres("the notification connection closed".into()));
            }
        },
    };
    driver.abort();
    outcome
}
