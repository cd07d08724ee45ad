"""Packing and unpacking the Python files a job ships (engine/runtime/python_dependencies.py)."""
from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import cloudpickle
import pytest

from millstream.engine.runtime.python_dependencies import PythonDependencyError, activate, materialize, pack, read_item, unpack


def test_code_without_files_stays_the_bare_pickle() -> None:
    graph = cloudpickle.dumps({"a": 1})
    assert pack(graph, []) == graph
    u = unpack(graph)
    assert (u.graph, u.items, u.requirements, u.archives) == (graph, [], None, [])
    m = materialize(graph, "/nonexistent")
    assert (m.graph, m.python_path, m.working_dir) == (graph, [], None)


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
    m = materialize(code, tmp_path / "root")
    graph, entries = m.graph, m.python_path
    assert graph == b"graph" and len(entries) == 3 and m.working_dir is None
    assert not list((tmp_path / "root").rglob("__pycache__"))
    again = materialize(code, tmp_path / "root")  # a second task of the job: same place, nothing rewritten
    assert again == m
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


def test_a_later_job_sees_only_what_it_shipped_itself(tmp_path: Path) -> None:
    """A slot process runs jobs one after another: job B imports its own ``same_pd`` (not A's cached
    one), and job C, which shipped nothing, can import neither."""
    entries = {}
    for job, value in (("a", 1), ("b", 2)):
        src = tmp_path / job
        src.mkdir()
        (src / "same_pd.py").write_text(f"V = {value}\n")
        (src / "only_a_pd.py").write_text("W = 1\n")
        entries[job] = materialize(pack(b"g", [read_item(str(src / "same_pd.py")), read_item(str(src / "only_a_pd.py"))] if job == "a" else [read_item(str(src / "same_pd.py"))]), tmp_path / "root" / job).python_path
    before = list(sys.path)
    try:
        activate(entries["a"])
        import only_a_pd  # type: ignore[import-not-found]  # noqa: F401
        import same_pd  # type: ignore[import-not-found]

        assert same_pd.V == 1
        activate(entries["b"])
        import same_pd  # type: ignore[import-not-found]  # noqa: F811

        assert same_pd.V == 2
        with pytest.raises(ImportError):
            import only_a_pd  # type: ignore[import-not-found]  # noqa: F401,F811
        activate([])
        with pytest.raises(ImportError):
            import same_pd  # type: ignore[import-not-found]  # noqa: F401,F811
        assert not any(str(tmp_path) in p for p in sys.path)
    finally:
        sys.path[:] = before
        for m in ("same_pd", "only_a_pd"):
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


def _wheel(tmp_path: Path) -> Path:
    """A tiny wheel written here (a wheel is a zip with a dist-info), so the requirements tests need
    neither a package index nor a build backend."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    info = "msreqdemo-0.1.dist-info"
    files = {
        "msreqdemo/__init__.py": "ANSWER = 42\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: msreqdemo\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: millstream-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheels / "msreqdemo-0.1-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheels


def test_requirements_are_installed_once_from_the_shipped_cache_and_importable(tmp_path: Path) -> None:
    from millstream.engine.runtime.python_dependencies import Requirements

    wheels = _wheel(tmp_path)
    reqs = Requirements("msreqdemo==0.1\n", read_item(str(wheels))[1])
    code = pack(b"graph", [], reqs)
    m = materialize(code, tmp_path / "root")
    graph, entries = m.graph, m.python_path
    assert graph == b"graph" and len(entries) == 1
    installed = Path(entries[0]) / ".installed"
    stamp = installed.stat().st_mtime_ns
    assert materialize(pack(b"other graph", [], reqs), tmp_path / "root").python_path == entries  # cached by content
    assert installed.stat().st_mtime_ns == stamp
    before = list(sys.path)
    try:
        activate(entries)
        import msreqdemo  # type: ignore[import-not-found]

        assert msreqdemo.ANSWER == 42
    finally:
        sys.path[:] = before
        sys.modules.pop("msreqdemo", None)


def test_a_requirement_that_cannot_be_installed_is_a_clear_error(tmp_path: Path) -> None:
    from millstream.engine.runtime.python_dependencies import Requirements

    wheels = _wheel(tmp_path)
    code = pack(b"graph", [], Requirements("msreqdemo==9.9\n", read_item(str(wheels))[1]))
    with pytest.raises(PythonDependencyError, match="installing the job's Python requirements failed"):
        materialize(code, tmp_path / "root")


def test_archives_are_extracted_into_the_jobs_working_directory_and_may_not_escape_it(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data/words.txt", "hello\n")
    m = materialize(pack(b"graph", [], None, [("model", buf.getvalue())]), tmp_path / "root")
    assert m.working_dir is not None
    assert (Path(m.working_dir) / "model" / "data" / "words.txt").read_text() == "hello\n"
    with pytest.raises(PythonDependencyError, match="outside its job directory"):
        materialize(pack(b"graph", [], None, [("../up", buf.getvalue())]), tmp_path / "root2")
