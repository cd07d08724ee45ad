"""Real remote stores for tests, each a server in a process of its own: FTP (pyftpdlib) and
S3-compatible (moto's server mode). The cluster reaches them through fsspec, configured as a
deployment would be (FSSPEC_S3_ENDPOINT_URL and AWS_* variables for S3); the test looks at what
landed there with an fsspec client of its own (``Store.fs``), never through the cluster."""
from __future__ import annotations

import ftplib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster import free_port

FTP_SERVER = """
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import ThreadedFTPServer

root, port = sys.argv[1], int(sys.argv[2])
authorizer = DummyAuthorizer()
authorizer.add_anonymous(root, perm="elradfmwMT")
FTPHandler.authorizer = authorizer
FTPHandler.passive_ports = range(30000, 60000)
server = ThreadedFTPServer(("127.0.0.1", port), FTPHandler)
server.max_cons = 256
server.serve_forever()
"""


@dataclass
class Store:
    """A running store: the URL the cluster is given, the environment that reaches it, an fsspec
    client for the test, and a location on the same kind of store outside the cluster's directories."""

    url: str
    env: dict[str, str]
    fs: Any
    elsewhere: str

    def path(self, relative: str) -> str:
        """fsspec's path (for ``fs``) of ``relative`` under the store's URL."""
        return self.fs._strip_protocol(f"{self.url}/{relative}")

    def glob(self, pattern: str) -> list[str]:
        return list(self.fs.glob(self.path(pattern)))

    def read_text(self, path: str) -> str:
        return bytes(self.fs.cat_file(path)).decode("utf-8")


@pytest.fixture
def ftp(tmp_path: Path):
    pytest.importorskip("pyftpdlib")
    from fsspec.implementations.ftp import FTPFileSystem

    root = tmp_path / "ftp-root"
    root.mkdir()
    port = free_port()
    log = open(tmp_path / "ftp.log", "wb")
    p = subprocess.Popen([sys.executable, "-c", FTP_SERVER, str(root), str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            ftplib.FTP().connect("127.0.0.1", port, timeout=2)
            break
        except OSError:
            assert time.monotonic() < deadline and p.poll() is None, "the FTP server did not start"
            time.sleep(0.2)
    try:
        fs = FTPFileSystem("127.0.0.1", port=port, skip_instance_cache=True, use_listings_cache=False)
        yield Store(f"ftp://127.0.0.1:{port}", {}, fs, "ftp://127.0.0.1:1/elsewhere")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


@pytest.fixture
def s3(tmp_path: Path):
    pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "moto.log", "wb")
    p = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    env = {
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "millstream-test",
        "AWS_SECRET_ACCESS_KEY": "millstream-test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"],
                           skip_instance_cache=True, use_listings_cache=False)
    deadline = time.monotonic() + 60
    while True:
        try:
            fs.mkdir("millstream-state")
            break
        except Exception:  # the server is still starting: connection refused
            assert time.monotonic() < deadline and p.poll() is None, "the S3 server did not start"
            time.sleep(0.3)
    try:
        yield Store("s3://millstream-state", env, fs, "s3://elsewhere/x")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


# S3 in `make test`; FTP (the first remote store tested) in the long variants `make bench` runs.
@pytest.fixture(params=["s3", pytest.param("ftp", marks=pytest.mark.full)])
def store(request) -> Store:
    return request.getfixturevalue(request.param)
