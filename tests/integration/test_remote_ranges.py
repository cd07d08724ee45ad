"""Ranged reads from a real S3-compatible server (moto's server mode, through s3fs as a deployment
reaches S3): the spans ``RemoteFileSystem.read_ranges`` sends together come back as each range's bytes,
and a key-grouped state file restores its key groups from there."""
from __future__ import annotations

import random

from millstream.engine.checkpoint.filesystem import RemoteFileSystem
from tests.integration.stores import Store, s3  # noqa: F401 (fixture)


def test_ranges_read_together_from_s3_are_the_files_bytes(s3: Store, monkeypatch) -> None:  # noqa: F811
    import fsspec.config

    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)  # credentials: read when the client is made
    # the endpoint: fsspec reads its FSSPEC_* variables at import, as a deployment's processes start with them
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": s3.env["FSSPEC_S3_ENDPOINT_URL"]})
    fs = RemoteFileSystem(s3.url)
    rng = random.Random(7)
    data = rng.randbytes(4_000_000)
    path = f"{s3.url}/shared/op-1.delta"
    fs.write_atomic(path, data)
    ranges = [(rng.randrange(0, 4_000_000), rng.randrange(0, 40_000)) for _ in range(200)]
    ranges += [(kg * 30_000, 30_000) for kg in range(10, 40)]  # a restore's consecutive key groups
    assert fs.read_ranges(path, ranges) == [data[o : o + n] for o, n in ranges]
