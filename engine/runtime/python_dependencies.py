"""Python files shipped with a job (PyFlink's ``add_python_file`` and ``-pyfs``) and its requirements
(``set_python_requirements``, ``-pyreq``) and archives (``add_python_archive``, ``-pyarch``): packed with its user code at submission, unpacked per job
on every TaskManager and put on the import path before the user code is loaded.

Each item the program added is one of:
- a ``.py`` file or a directory (a package, or any folder): copied as ``<job dir>/<n>/<name>``, and
  ``<job dir>/<n>`` goes on ``sys.path``, so ``import name`` works as it did for the program;
- a ``.zip``: extracted into ``<job dir>/<n>/``, which goes on ``sys.path``;
- a ``.whl`` or ``.egg``: kept as a file that goes on ``sys.path`` itself (importable zips).

Archives (zip files, as in PyFlink) are extracted into the job's working directory, under the
target directory the program named or the archive's file name; a slot process changes into it
before the job's tasks run, so the job's functions open what the archives hold by relative path.

Requirements are installed with ``pip install --target`` into a directory per requirements content,
cached on the TaskManager, which also goes on ``sys.path``.

The packed form is ``MAGIC`` + msgpack ``{"graph": <cloudpickled StreamGraph>, "files": [[item
name, [[relative path, bytes], ...]], ...], "requirements": {"text": ..., "cache": [...]}}``; user code without files stays the bare pickle, so
jobs stored before this existed load as they did. The whole blob is what the JobManager signs, so
shipped files are covered by the same signature as the code.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import msgpack

MAGIC = b"MSPYDEP1"
#: files in one added directory (the whole upload is bounded by MILLSTREAM_MAX_UPLOAD_BYTES too)
MAX_ITEM_FILES = 10_000


class PythonDependencyError(ValueError):
    """An added Python file that cannot be shipped (missing, unreadable, or an unsafe archive)."""


def read_item(path: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The files of one added item, as ``(name, [(relative path, bytes), ...])``."""
    p = Path(path).expanduser()
    if not p.exists():
        raise PythonDependencyError(f"add_python_file: {path!r} does not exist")
    if p.is_file():
        return p.name, [("", p.read_bytes())]
    files: list[tuple[str, bytes]] = []
    for f in sorted(p.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            files.append((f.relative_to(p).as_posix(), f.read_bytes()))
            if len(files) > MAX_ITEM_FILES:
                raise PythonDependencyError(f"add_python_file: {path!r} holds more than {MAX_ITEM_FILES} files")
    return p.name, files


Item = tuple[str, list[tuple[str, bytes]]]


@dataclass(frozen=True)
class Requirements:
    """``set_python_requirements``: a requirements file's text, and the files of its cache directory
    (wheels and sdists pip installs from without an index), if one was given."""

    text: str
    cache: list[tuple[str, bytes]] = field(default_factory=list)


def user_code_of(stream_graph: object) -> bytes:
    """What a client submits: the cloudpickled StreamGraph, with the files its program added."""
    import cloudpickle

    paths = list(getattr(stream_graph, "python_files", None) or [])
    reqs = getattr(stream_graph, "python_requirements", None)
    requirements = None
    if reqs is not None:
        req_file, cache_dir = reqs
        try:
            text = Path(req_file).read_text()
        except OSError as e:
            raise PythonDependencyError(f"set_python_requirements: cannot read {req_file!r}: {e}") from None
        requirements = Requirements(text, read_item(cache_dir)[1] if cache_dir else [])
    archives = [(target, Path(path).read_bytes()) for path, target in getattr(stream_graph, "python_archives", None) or []]
    return pack(cloudpickle.dumps(stream_graph), [read_item(p) for p in paths], requirements, archives)


def pack(
    graph: bytes, items: list[Item], requirements: Requirements | None = None, archives: list[tuple[str, bytes]] | None = None
) -> bytes:
    """``archives``: ``(target directory, zip bytes)`` for add_python_archive."""
    if not items and requirements is None and not archives:
        return graph
    body: dict = {"graph": graph, "files": [[name, [[rel, data] for rel, data in files]] for name, files in items]}
    if requirements is not None:
        body["requirements"] = {"text": requirements.text, "cache": [[rel, data] for rel, data in requirements.cache]}
    if archives:
        body["archives"] = [[target, data] for target, data in archives]
    return MAGIC + msgpack.packb(body, use_bin_type=True)


@dataclass(frozen=True)
class Unpacked:
    graph: bytes
    items: list[Item]
    requirements: Requirements | None
    archives: list[tuple[str, bytes]]


def unpack(code: bytes) -> Unpacked:
    """The cloudpickled graph, the shipped items, requirements and archives of a job's user code."""
    if not code.startswith(MAGIC):
        return Unpacked(code, [], None, [])
    body = msgpack.unpackb(code[len(MAGIC):], raw=False)
    items = [(name, [(rel, data) for rel, data in files]) for name, files in body["files"]]
    req = body.get("requirements")
    requirements = Requirements(req["text"], [(rel, data) for rel, data in req["cache"]]) if req else None
    return Unpacked(body["graph"], items, requirements, [(t, d) for t, d in body.get("archives", [])])


def _safe_join(base: Path, rel: str) -> Path:
    """``base / rel``, refusing anything that would land outside ``base`` (``..``, absolute paths)."""
    target = (base / rel).resolve()
    if target != base.resolve() and base.resolve() not in target.parents:
        raise PythonDependencyError(f"shipped file {rel!r} would be written outside its job directory")
    return target


@dataclass(frozen=True)
class Materialized:
    graph: bytes  # the cloudpickled StreamGraph to load
    python_path: list[str]  # entries that make the shipped items and requirements importable
    working_dir: str | None  # holds the extracted archives: the job's functions run in it


def materialize(code: bytes, root: str | os.PathLike[str]) -> Materialized:
    """Write a job's shipped items under ``root`` (once per content: the directory is named by the
    blob's hash, so a job's tasks and attempts share it and a changed job gets a new one)."""
    u = unpack(code)
    graph, items, requirements = u.graph, u.items, u.requirements
    if not items and requirements is None and not u.archives:
        return Materialized(graph, [], None)
    digest = hashlib.sha256(code).hexdigest()[:24]
    job_dir = Path(root) / digest
    entries: list[str] = []
    if requirements is not None:
        entries.append(install_requirements(requirements, Path(root) / "requirements"))
    working_dir = None
    if u.archives:
        working_dir = job_dir / "cwd"
        if not (job_dir / ".complete").exists():
            for target, data in u.archives:
                _extract(data, _safe_join(working_dir, target))
    done = job_dir / ".complete"
    for n, (name, files) in enumerate(items):
        slot = job_dir / str(n)
        if name.endswith((".whl", ".egg")):
            entries.append(str(slot / name))
        else:
            entries.append(str(slot))
        if done.exists():
            continue
        slot.mkdir(parents=True, exist_ok=True)
        if name.endswith(".zip") and len(files) == 1 and files[0][0] == "":
            _extract(files[0][1], slot)
            continue
        base = _safe_join(slot, name)
        for rel, data in files:
            target = _safe_join(slot, f"{name}/{rel}") if rel else base
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + f".tmp{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, target)  # tasks of one job deploying at once write the same bytes
    done.parent.mkdir(parents=True, exist_ok=True)
    done.touch()
    return Materialized(graph, entries, str(working_dir) if working_dir else None)


def _extract(data: bytes, into: Path) -> None:
    """Unzip, refusing members that would land outside ``into``; keeps the executable bit."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise PythonDependencyError("a shipped archive is not a zip file") from None
    with z:
        for member in z.infolist():
            target = _safe_join(into, member.filename)
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(member))
            mode = (member.external_attr >> 16) & 0o777
            if mode & 0o111:
                target.chmod(mode)


#: how long installing one job's requirements may take
PIP_TIMEOUT_S = 600


def install_requirements(requirements: Requirements, root: Path) -> str:
    """``pip install --target`` the requirements once per content (cached across jobs and attempts,
    and shared by the slot processes of a TaskManager under a file lock); returns the directory to
    put on ``sys.path``. With a cache directory pip installs from it alone (``--no-index``), as
    PyFlink does, so TaskManagers need no package index; without one, pip uses its configured index."""
    h = hashlib.sha256(requirements.text.encode())
    for rel, data in sorted(requirements.cache):
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    target = root / h.hexdigest()[:24]
    done = target / ".installed"
    if done.exists():
        return str(target)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time; the others then find it done
        if done.exists():
            return str(target)
        work = Path(tempfile.mkdtemp(prefix="reqs-", dir=root))
        try:
            (work / "requirements.txt").write_text(requirements.text)
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   "--no-warn-script-location", "--target", str(work / "site"), "-r", str(work / "requirements.txt")]
            if requirements.cache:
                cache = work / "cache"
                for rel, data in requirements.cache:
                    f = _safe_join(cache, rel)
                    f.parent.mkdir(parents=True, exist_ok=True)
                    f.write_bytes(data)
                cmd += ["--no-index", "--find-links", str(cache)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
            if p.returncode != 0:
                raise PythonDependencyError(
                    f"installing the job's Python requirements failed: {(p.stderr or p.stdout).strip()[-2000:]}"
                )
            if target.exists():
                shutil.rmtree(target)
            os.replace(work / "site", target)
            done.touch()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return str(target)


def activate(entries: list[str]) -> None:
    """Make a job's shipped items the ones on the import path (first, as PyFlink prepends PYTHONPATH).

    A slot process outlives its jobs and runs one job at a time, so what an earlier job shipped
    leaves the import path and the module cache here: a job imports only what it shipped itself
    (a module of the same name is its own, and a job that shipped nothing cannot import another
    job's files). Only modules loaded from shipped entries are dropped, never the interpreter's."""
    stale = [e for e in _activated if e not in entries]
    for entry in stale:
        while entry in sys.path:
            sys.path.remove(entry)
        _activated.discard(entry)
    if stale:
        # A module's file lies under its entry for directories and zips alike ("x.whl/pkg/m.py").
        roots = tuple(os.path.abspath(e) + os.sep for e in stale)
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None)
            if origin and os.path.abspath(origin).startswith(roots):
                del sys.modules[name]
    for entry in reversed(entries):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    _activated.update(entries)


_activated: set[str] = set()  # the entries of the job activated last in this process


def zip_entry(entry: str, target: str) -> str:
    """A ``sys.path`` entry as one importable zip at ``target`` (what Spark's ``addPyFile`` ships to
    its executors); a wheel or egg is importable as it is."""
    if entry.endswith((".whl", ".egg")):
        return entry
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(Path(entry).rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                z.write(f, f.relative_to(entry).as_posix())
    return target
