#!/bin/sh
# As the official redis image's entrypoint does: a server started without a config file
# gets --protected-mode no, since the other containers reach it over the compose network
# (protected mode would refuse every client but loopback). Options given after it win.
set -eu
if [ "${1:-}" = "redis-server" ]; then
    shift
    exec redis-server --protected-mode no "$@"
fi
exec "$@"
