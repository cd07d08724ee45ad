"""harden_process in a process that is not root, as in the container image (USER millstream).

Making the process non-dumpable hands its /proc files to root, so a non-root process can no
longer read its own /proc/self/environ. Run as root (every other test here), that never shows;
in the image it did: each JobManager and TaskManager logged "could not locate the initial
environment block: Permission denied" and left its secrets in the block /proc/<pid>/environ shows.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import millstream.engine.security.process_hardening as process_hardening

NOBODY = 65534
# The module needs only the standard library: the child loads it by path, so that an interpreter
# the unprivileged user can run is enough (this venv's may live under root's home).
CHILD = (
    "import importlib.util, sys, time\n"
    "spec = importlib.util.spec_from_file_location('process_hardening', sys.argv[1])\n"
    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
    "m.harden_process()\n"
    "print('ready', m.is_dumpable(), flush=True)\n"
    "time.sleep(30)\n"
)


def _runs(candidate: str) -> bool:
    try:
        return subprocess.run([candidate, "-c", ""], user=NOBODY, group=NOBODY, cwd="/",
                              capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to start a process as another user")
def test_a_non_root_process_blanks_its_secrets_and_is_undumpable(tmp_path: Path) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    token = f"token-{uuid.uuid4().hex}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "MILLSTREAM_CLUSTER_SECRET": secret, "MILLSTREAM_AUTH_TOKEN": token, "KEEP_ME": "visible"}
    python = next((p for p in (sys.executable, shutil.which("python3"), "/usr/bin/python3") if p and _runs(p)), None)
    if python is None:
        pytest.skip("no Python interpreter that user nobody may run")
    module = Path(process_hardening.__file__).resolve()
    assert os.access(module, os.R_OK)
    child = subprocess.Popen([python, "-c", CHILD, str(module)], env=env, cwd=tmp_path, user=NOBODY, group=NOBODY,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        # As root (CAP_SYS_PTRACE), the reader the dumpable flag does not stop: what is left there.
        environ = Path(f"/proc/{child.pid}/environ").read_bytes()
    finally:
        child.kill()
        _, stderr = child.communicate(timeout=10)
    assert line.split() == ["ready", "False"], stderr
    assert secret.encode() not in environ and token.encode() not in environ, "secrets left in the environment block"
    assert b"KEEP_ME=visible" in environ  # only the secrets are blanked
    assert "initial environment block" not in stderr, stderr
