"""Python files shipped with a job (PyFlink's ``add_python_file`` and ``-pyfs``): packed with its user
code at submission, unpacked per job on every TaskManager and put on the import path before the
user code is loaded.

Each item the program added is one of:
- a ``.py`` file or a directory (a package, or any folder): copied as ``<job dir>/<n>/<name>``, and
  ``<job dir>/<n>`` goes on ``sys.path``, so ``import name`` works as it did for the program;
- a ``.zip``: extracted into ``<job dir>/<n>/``, which goes on ``sys.path``;
- a ``.whl`` or ``.egg``: kept as a file that goes on ``sys.path`` itself (importable zips).

The packed form is ``MAGIC`` + msgpack ``{"graph": <cloudpickled StreamGraph>, "files": [[item
name, [[relative path, bytes], ...]], ...]}``; user code without files stays the bare pickle, so
jobs stored before this existed load as they did. The whole blob is what the JobManager signs, so
shipped files are covered by the same signature as the code.
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import zipfile
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


def user_code_of(stream_graph: object) -> bytes:
    """What a client submits: the cloudpickled StreamGraph, with the files its program added."""
    import cloudpickle

    paths = list(getattr(stream_graph, "python_files", None) or [])
    return pack(cloudpickle.dumps(stream_graph), [read_item(p) for p in paths])


def pack(graph: bytes, items: list[tuple[str, list[tuple[str, bytes]]]]) -> bytes:
    if not items:
        return graph
    body = {"graph": graph, "files": [[name, [[rel, data] for rel, data in files]] for name, files in items]}
    return MAGIC + msgpack.packb(body, use_bin_type=True)


def unpack(code: bytes) -> tuple[bytes, list[tuple[str, list[tuple[str, bytes]]]]]:
    """The cloudpickled graph and the shipped items of a job's user code."""
    if not code.startswith(MAGIC):
        return code, []
    body = msgpack.unpackb(code[len(MAGIC):], raw=False)
    return body["graph"], [(name, [(rel, data) for rel, data in files]) for name, files in body["files"]]


def _safe_join(base: Path, rel: str) -> Path:
    """``base / rel``, refusing anything that would land outside ``base`` (``..``, absolute paths)."""
    target = (base / rel).resolve()
    if target != base.resolve() and base.resolve() not in target.parents:
        raise PythonDependencyError(f"shipped file {rel!r} would be written outside its job directory")
    return target


def materialize(code: bytes, root: str | os.PathLike[str]) -> tuple[bytes, list[str]]:
    """Write a job's shipped items under ``root`` (once per content: the directory is named by the
    blob's hash, so a job's tasks and attempts share it and a changed job gets a new one) and return
    the graph to unpickle and the ``sys.path`` entries that make the items importable."""
    graph, items = unpack(code)
    if not items:
        return graph, []
    digest = hashlib.sha256(code).hexdigest()[:24]
    job_dir = Path(root) / digest
    entries: list[str] = []
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
            with zipfile.ZipFile(io.BytesIO(files[0][1])) as z:
                for member in z.infolist():
                    target = _safe_join(slot, member.filename)
                    if member.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(member))
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
    return graph, entries


def activate(entries: list[str]) -> None:
    """Put a job's shipped items on the import path (first, as PyFlink prepends PYTHONPATH). A slot
    process outlives its jobs: a module of the same name that an earlier job shipped is dropped from
    the module cache, so this job imports its own."""
    for entry in reversed(entries):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
        others = tuple(os.path.abspath(e) + os.sep for e in _activated if e != entry)
        for name in _top_level_names(entry):
            for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                # Only what another job shipped: the interpreter's own modules are never unloaded.
                origin = os.path.abspath(getattr(sys.modules[loaded], "__file__", None) or "")
                if others and origin.startswith(others):
                    del sys.modules[loaded]
        _activated.add(entry)


_activated: set[str] = set()  # every entry activated in this process


def _top_level_names(entry: str) -> list[str]:
    p = Path(entry)
    if p.is_file():  # a wheel or egg: its top-level packages are whatever it holds
        with zipfile.ZipFile(p) as z:
            return sorted({n.split("/")[0].removesuffix(".py") for n in z.namelist() if not n.split("/")[0].endswith((".dist-info", ".egg-info", "EGG-INFO"))})
    return sorted(c.name.removesuffix(".py") for c in p.iterdir() if c.suffix == ".py" or (c.is_dir() and not c.name.startswith(".")))


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
