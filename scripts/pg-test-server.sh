#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests and benchmarks: a cluster in .pg/ under the repository,
# listening on 127.0.0.1:${AWAKEN_STDIO_PG_PORT:-54329} with trust auth. Never use it for real data.
#
#   eval "$(scripts/pg-test-server.sh start)"   # start (idempotent); exports AWAKEN_STDIO_TEST_PG
#   scripts/pg-test-server.sh stop              # stop it (the data stays in .pg/ until you delete it)
#
# Installs Debian's `postgresql` package when no server binaries are found (as root). PostgreSQL refuses to run as
# root, so as root the cluster belongs to, and runs as, the `postgres` OS user. Only the export goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${AWAKEN_STDIO_PG_PORT:-54329}"
ROOT="$PWD/.pg"
DATA="$ROOT/data"
URL="postgresql://postgres@127.0.0.1:$PORT/postgres"

log() { echo "pg-test-server: $*" >&2; }

find_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
    done
    command -v pg_ctl >/dev/null 2>&1 && { dirname "$(readlink -f "$(command -v pg_ctl)")"; return 0; }
    return 1
}

install_server() {
    if [ "$(id -u)" != 0 ]; then
        log "no PostgreSQL server found; install Debian's postgresql package (apt-get install postgresql)"
        exit 1
    fi
    log "installing Debian's postgresql package"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# Run a server binary as the cluster's owner: ourselves, or `postgres` when we are root.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start() {
    local bin
    bin="$(find_bindir)" || { install_server; bin="$(find_bindir)"; }
    mkdir -p "$ROOT"
    [ "$(id -u)" = 0 ] && chown postgres: "$ROOT"
    if [ ! -s "$DATA/PG_VERSION" ]; then
        log "initdb $DATA"
        as_owner "$bin/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --no-locale >/dev/null
    fi
    if as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        log "already running on 127.0.0.1:$PORT"
    else
        log "starting on 127.0.0.1:$PORT (log: $ROOT/server.log)"
        as_owner "$bin/pg_ctl" -D "$DATA" -l "$ROOT/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $PORT -k $ROOT -c max_connections=300" start >/dev/null
    fi
    echo "export AWAKEN_STDIO_TEST_PG=$URL"
}

stop() {
    local bin
    bin="$(find_bindir)" || exit 0
    if [ -s "$DATA/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        log "stopped"
    fi
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    url) echo "$URL" ;;
    *) log "usage: $0 [start|stop|url]"; exit 2 ;;
esac
