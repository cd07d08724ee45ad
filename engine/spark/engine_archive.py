"""The engine and the pure-Python libraries it needs, as one zip for Spark executors on other hosts.

A standalone Spark cluster's workers have PySpark and Python, not Millstream. The functions a BATCH
job runs there are the engine's (translated operators, the print stream, the job's records) and the
program's, so the driver ships both with ``addPyFile``: the program's files as it always did, and
this archive for a master that is not ``local``. Compiled extension modules cannot be imported from
a zip, so only pure-Python code goes in (msgpack falls back to its pure-Python implementation);
anything compiled a job needs on the executors must be installed there.
"""
from __future__ import annotations

import importlib
import os
import zipfile
from pathlib import Path

#: top-level packages the executors import: the engine, the ``pyflink`` name user code may import,
#: and the engine's pure-Python dependencies
PACKAGES = ("millstream.engine", "cloudpickle", "msgpack", "redis")
_COMPILED = (".so", ".pyd", ".dylib")


def is_local_master(master: str) -> bool:
    """``local``, ``local[4]``, ``local[2,3]``...: executors are threads of this driver's JVM whose
    Python workers share the driver's environment, so nothing needs shipping."""
    return master == "local" or master.startswith("local[")


def _add_tree(z: zipfile.ZipFile, root: Path, arcname: str) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(_COMPILED):
            z.write(path, f"{arcname}/{path.relative_to(root).as_posix()}")


def build(target: str) -> str:
    """Write the archive to ``target`` and return its path."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        # zipimport finds a namespace package (the ``millstream`` of ``millstream.engine``) only by
        # its directory entry, which writing the files alone does not make.
        parents = sorted({"/".join(n.split(".")[:i]) for n in PACKAGES for i in range(1, n.count(".") + 1)})
        for parent in parents:
            z.writestr(parent + "/", "")
        for name in PACKAGES:
            module = importlib.import_module(name)
            # A dotted package goes in at its path (millstream/engine); its parent is a namespace
            # package, which zipimport serves without an __init__.py.
            _add_tree(z, Path(os.path.dirname(module.__file__ or "")), name.replace(".", "/"))
        # ``pyflink`` is served by the engine's shim package, which installs the alias on import.
        shim = importlib.import_module("millstream.engine.compat.pyflink")
        _add_tree(z, Path(os.path.dirname(shim.__file__ or "")), "pyflink")
    return target
