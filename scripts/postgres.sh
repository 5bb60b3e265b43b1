#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests: Debian's `postgresql` binaries (installed with
# apt-get where missing), a cluster made by initdb in a temporary directory, listening on a
# unix socket in that directory only (no TCP port), stopped and deleted by `stop`.
#
#   scripts/postgres.sh install   # the server binaries (apt-get install -y postgresql)
#   scripts/postgres.sh start     # prints a libpq connection string without dbname, e.g.
#                                 # "host=/tmp/a2rag-pg.X port=5432 user=postgres"
#   scripts/postgres.sh stop      # the server $A2RAG_TEST_POSTGRES names (or: stop DIR)
#
# Typical use:
#   export A2RAG_TEST_POSTGRES="$(scripts/postgres.sh start)"
#   cargo test --test kb
#   scripts/postgres.sh stop
# Tests make a fresh database per test in that server.
set -euo pipefail

PORT=5432

log() { echo "postgres: $*" >&2; }

bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [[ -n "$dir" && -x "$dir/initdb" ]] || return 1
    echo "$dir"
}

# The server refuses to run as root: as root, run it as the `postgres` user the package made.
as_server_user() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cmd_install() {
    if bindir >/dev/null; then
        log "already installed in $(bindir)"
        return 0
    fi
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        log "no PostgreSQL binaries, and no root apt-get to install them"
        return 1
    fi
    log "installing postgresql with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; } \
        || { log "apt-get install postgresql failed"; return 1; }
    bindir >/dev/null
}

cmd_start() {
    local bin dir
    bin=$(bindir) || { log "not installed (run: scripts/postgres.sh install)"; return 1; }
    # Each server is its own directory: runs side by side never touch each other's.
    dir=$(mktemp -d "${TMPDIR:-/tmp}/a2rag-pg.XXXXXX")
    chmod 755 "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
    as_server_user "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { log "initdb failed: $(tail -5 "$dir/initdb.log")"; rm -rf "$dir"; return 1; }
    # Durability settings off: the tests kill daemons, never this server, and it is deleted
    # afterwards.
    as_server_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
        -o "-k $dir -c listen_addresses= -p $PORT -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null \
        || { log "the server did not start: $(tail -5 "$dir/server.log")"; rm -rf "$dir"; return 1; }
    log "server up in $dir"
    echo "host=$dir port=$PORT user=postgres"
}

cmd_stop() { # [DIR]: default, the socket directory of $A2RAG_TEST_POSTGRES
    local dir="${1:-}" bin
    if [[ -z "$dir" && "${A2RAG_TEST_POSTGRES:-}" =~ host=([^[:space:]]+) ]]; then
        dir="${BASH_REMATCH[1]}"
    fi
    [[ -n "$dir" && -d "$dir/data" ]] || { log "no test server to stop"; return 0; }
    if bin=$(bindir); then
        as_server_user "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    log "stopped $dir"
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop "${2:-}" ;;
    *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
