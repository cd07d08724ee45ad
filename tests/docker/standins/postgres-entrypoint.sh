#!/bin/sh
# First start: create the cluster with POSTGRES_USER as superuser (password
# POSTGRES_PASSWORD) and the POSTGRES_DB database, reachable over the network
# with a password; later starts reuse the volume as it is.
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    if [ "$POSTGRES_DB" != "postgres" ]; then
        createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
