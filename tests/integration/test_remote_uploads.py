"""A snapshot's shared files uploaded to a real S3-compatible server (moto's server mode, through
s3fs) several at a time (``state_uploader.Uploads``): ``write_shared_file`` returns each file's size
and index once it is spooled, and after ``wait`` every file is in place, whole, its parts reading back
as written, with no temporary object left behind."""
from __future__ import annotations

import random

from millstream.engine.checkpoint.storage import read_shared_file, seal_state_files, write_shared_file
from millstream.engine.runtime.state.state_chain import FOOTER, encode_index
from millstream.engine.runtime.state.state_uploader import Uploads
from tests.integration.stores import Store, s3  # noqa: F401 (fixture)

JOB = "ab" * 16


def test_shared_files_uploaded_together_land_whole(s3: Store, monkeypatch) -> None:  # noqa: F811
    import fsspec.config

    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": s3.env["FSSPEC_S3_ENDPOINT_URL"]})
    from millstream.engine.checkpoint import storage

    monkeypatch.setattr(storage, "_sealing", {})  # this process's sealing is back as it was after the test
    seal_state_files("c" * 32)
    shared = f"{s3.url}/{JOB}/shared"
    rng = random.Random(3)
    files = {
        f"op-0-{n}-0123abcd.delta": [(kg, rng.randbytes(rng.randrange(1, 200_000))) for kg in sorted(rng.sample(range(128), 20))]
        for n in range(6)
    }
    uploads = Uploads(4)
    written = {name: write_shared_file(shared, name, parts, JOB, (FOOTER, encode_index), uploads.submit) for name, parts in files.items()}
    uploads.wait()

    for name, parts in files.items():
        size, index = written[name]
        assert s3.fs.size(s3.path(f"{JOB}/shared/{name}")) == size
        assert index[-1][0] == FOOTER and [kg for kg, _, _ in index[:-1]] == [kg for kg, _ in parts]
        assert read_shared_file(shared, name, index[:-1], JOB) == parts
    left = sorted(p.rsplit("/", 1)[1] for p in s3.fs.ls(s3.path(f"{JOB}/shared"), detail=False))  # dot names too
    assert left == sorted(files), "a temporary object was left behind"
