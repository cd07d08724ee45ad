"""The Python dependency options of ``millstream run``, as Flink's ``flink run`` has them:
``-pyfs/--pyFiles``, ``-pyarch/--pyArchives`` and ``-pyreq/--pyRequirements``.

They are parsed (and checked against the filesystem) before the program runs, so a missing file is
one line from the CLI, not a traceback from inside the program. The launcher's execution context then
applies them to every environment the program creates, through the same calls a program would make
(``add_python_file``, ``add_python_archive``, ``set_python_requirements``): what the job ships is
exactly what it would ship had the program called them itself. A program's own calls come after, as
they run later, so they add to what the command line gave (and its ``set_python_requirements`` wins).
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment


class BadDependencyOption(ValueError):
    """A ``-pyfs``/``-pyarch``/``-pyreq`` value that names nothing usable; the message says which."""


@dataclass(frozen=True)
class PythonDependencyOptions:
    files: list[str] = field(default_factory=list)  # -pyfs: absolute paths
    archives: list[tuple[str, str | None]] = field(default_factory=list)  # -pyarch: (zip path, target dir or None)
    requirements: tuple[str, str | None] | None = None  # -pyreq: (requirements file, cache dir or None)

    def __bool__(self) -> bool:
        return bool(self.files or self.archives or self.requirements)

    def client_path(self) -> list[str]:
        """Entries that make the ``-pyfs`` files importable by the program itself, as Flink puts them
        on the PYTHONPATH of the client too: a program usually imports at its top what its functions
        use. A zip, wheel or egg is importable as it is; a module or a package is imported from the
        directory holding it (on the client only: the TaskManagers get each item alone)."""
        entries: list[str] = []
        for path in self.files:
            entry = path if path.endswith((".zip", ".whl", ".egg")) else os.path.dirname(path)
            if entry not in entries:
                entries.append(entry)
        return entries

    def apply(self, env: "StreamExecutionEnvironment") -> None:
        """Give a new environment what the command line named, as the program's own calls would."""
        for path in self.files:
            env.add_python_file(path)
        for path, target in self.archives:
            env.add_python_archive(path, target)
        if self.requirements is not None:
            env.set_python_requirements(*self.requirements)


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _existing(path: str, option: str, what: str) -> str:
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(full):
        raise BadDependencyOption(f"{option}: the {what} {path!r} does not exist")
    return full


def parse(py_files: str | None, py_archives: str | None, py_requirements: str | None) -> PythonDependencyOptions:
    """The three options' values as given on the command line (None when absent)."""
    files = [_existing(p, "-pyfs", "file or directory") for p in _split(py_files or "")]
    archives: list[tuple[str, str | None]] = []
    for item in _split(py_archives or ""):
        # Flink's form: "archive.zip#target_dir"; without "#", the archive's file name is the directory.
        path, sep, target = item.partition("#")
        full = _existing(path, "-pyarch", "archive")
        if not os.path.isfile(full) or not zipfile.is_zipfile(full):
            raise BadDependencyOption(f"-pyarch: {path!r} is not a zip file (only zip archives are supported, as in PyFlink)")
        if sep and (not target or os.path.isabs(target) or ".." in target.replace("\\", "/").split("/")):
            raise BadDependencyOption(f"-pyarch: the target directory of {item!r} must be a relative directory name")
        archives.append((full, target if sep else None))
    requirements = None
    if py_requirements:
        req, sep, cache = py_requirements.strip().partition("#")
        req_full = _existing(req, "-pyreq", "requirements file")
        if not os.path.isfile(req_full):
            raise BadDependencyOption(f"-pyreq: {req!r} is not a file")
        if sep and not cache:
            raise BadDependencyOption(f"-pyreq: nothing follows '#' in {py_requirements!r}; give the cache directory or drop '#'")
        cache_full = _existing(cache, "-pyreq", "requirements cache directory") if sep else None
        if cache_full is not None and not os.path.isdir(cache_full):
            raise BadDependencyOption(f"-pyreq: the requirements cache {cache!r} is not a directory")
        requirements = (req_full, cache_full)
    return PythonDependencyOptions(files, archives, requirements)
