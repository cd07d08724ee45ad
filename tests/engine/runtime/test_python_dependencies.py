"""Packing and unpacking the Python files a job ships (engine/runtime/python_dependencies.py)."""
from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import cloudpickle
import pytest

from engine.runtime.python_dependencies import PythonDependencyError, activate, materialize, pack, read_item, unpack


def test_code_without_files_stays_the_bare_pickle() -> None:
    graph = cloudpickle.dumps({"a": 1})
    assert pack(graph, []) == graph
    assert unpack(graph) == (graph, [])
    assert materialize(graph, "/nonexistent") == (graph, [])


def test_a_module_a_package_and_a_zip_become_importable(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg_pd").mkdir(parents=True)
    (src / "mod_pd.py").write_text("X = 1\n")
    (src / "pkg_pd" / "__init__.py").write_text("Y = 2\n")
    (src / "pkg_pd" / "__pycache__").mkdir()
    (src / "pkg_pd" / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("zip_pd.py", "Z = 3\n")
    (src / "lib.zip").write_bytes(buf.getvalue())
    code = pack(b"graph", [read_item(str(src / n)) for n in ("mod_pd.py", "pkg_pd", "lib.zip")])
    graph, entries = materialize(code, tmp_path / "root")
    assert graph == b"graph" and len(entries) == 3
    assert not list((tmp_path / "root").rglob("__pycache__"))
    again = materialize(code, tmp_path / "root")  # a second task of the job: same place, nothing rewritten
    assert again == (graph, entries)
    before = list(sys.path)
    try:
        activate(entries)
        import mod_pd  # type: ignore[import-not-found]
        import pkg_pd  # type: ignore[import-not-found]
        import zip_pd  # type: ignore[import-not-found]

        assert (mod_pd.X, pkg_pd.Y, zip_pd.Z) == (1, 2, 3)
    finally:
        sys.path[:] = before
        for m in ("mod_pd", "pkg_pd", "zip_pd"):
            sys.modules.pop(m, None)


def test_a_zip_that_would_write_outside_its_directory_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("../../escaped.py", "print('no')\n")
    code = pack(b"graph", [("evil.zip", [("", buf.getvalue())])])
    with pytest.raises(PythonDependencyError, match="outside its job directory"):
        materialize(code, tmp_path / "root")
    assert not list(tmp_path.rglob("escaped.py"))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PythonDependencyError, match="does not exist"):
        read_item(str(tmp_path / "nope.py"))
