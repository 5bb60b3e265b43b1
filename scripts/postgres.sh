#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests: Debian's `postgresql` binaries (installed with
# apt-get where missing), a cluster made by initdb in a temporary directory, listening on a
# unix socket in that directory and, where openssl is found, on a loopback TCP port with TLS
# (a server certificate for localhost signed by a throwaway CA: DIR/tls/ca.crt, and the
# libpq string to reach it in DIR/tls/url), stopped and deleted by `stop`.
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

# A free port (the unix socket's name carries it too), so that a system server on 5432 or a
# second test server never collides with this one.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null \
        || echo 5432
}

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
    # openssl makes the certificates of the TLS listener (see make_tls).
    if ! command -v openssl >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >/dev/null 2>&1 \
            || log "apt-get install openssl failed: the TLS tests will skip"
    fi
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

# A CA and a server certificate for localhost / 127.0.0.1 in DIR/tls, owned by the server's user.
make_tls() { # DIR
    local tls="$1/tls"
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3 -subj "/CN=a2rag test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$tls/ca.key" -out "$tls/ca.crt" >/dev/null 2>&1 || return 1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$tls/server.key" -out "$tls/server.csr" \
        >/dev/null 2>&1 || return 1
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -days 3 \
        -extfile "$tls/server.ext" -out "$tls/server.crt" >/dev/null 2>&1 || return 1
    chmod 600 "$tls/server.key"
    [[ $(id -u) -eq 0 ]] && chown -R postgres: "$tls"
    return 0
}

cmd_start() {
    local bin dir port tls_opts=""
    bin=$(bindir) || { log "not installed (run: scripts/postgres.sh install)"; return 1; }
    port=$(free_port)
    # Each server is its own directory: runs side by side never touch each other's.
    dir=$(mktemp -d "${TMPDIR:-/tmp}/a2rag-pg.XXXXXX")
    chmod 755 "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
    as_server_user "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { log "initdb failed: $(tail -5 "$dir/initdb.log")"; rm -rf "$dir"; return 1; }
    # Durability settings off: the tests kill daemons, never this server, and it is deleted
    # afterwards.
    local listen=""
    if command -v openssl >/dev/null && make_tls "$dir"; then
        listen="127.0.0.1"
        tls_opts="-c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key"
    else
        log "no openssl: TLS is not served, and the TLS tests will skip"
    fi
    as_server_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
        -o "-k $dir -c listen_addresses=$listen -p $port $tls_opts -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null \
        || { log "the server did not start: $(tail -5 "$dir/server.log")"; rm -rf "$dir"; return 1; }
    [[ -n "$listen" ]] && echo "host=localhost port=$port user=postgres" >"$dir/tls/url"
    log "server up in $dir${listen:+ (TLS on 127.0.0.1:$port)}"
    echo "host=$dir port=$port user=postgres"
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
