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
from typing import TYPE_CHECKING, Any, Callable

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

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, to hand options resolved by the JobManager to the plan subprocess."""
        return {"files": self.files, "archives": [list(a) for a in self.archives],
                "requirements": list(self.requirements) if self.requirements else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PythonDependencyOptions":
        reqs = d.get("requirements")
        return cls(
            list(d.get("files") or []),
            [(a[0], a[1]) for a in d.get("archives") or []],
            (reqs[0], reqs[1]) if reqs else None,
        )


# The names `millstream run` takes (short and long, as Flink's CLI); the order is parse()'s.
OPTION_NAMES = (("-pyfs", "--pyFiles"), ("-pyarch", "--pyArchives"), ("-pyreq", "--pyRequirements"))


def split_program_args(args: list[str]) -> tuple[tuple[str | None, str | None, str | None], list[str]]:
    """Take the dependency options out of a program's arguments, as Flink's PythonDriver does for a
    Python job submitted through REST: ``(values for parse(), the other arguments in their order)``.
    Each option is ``NAME VALUE`` or ``NAME=VALUE``; given twice, the last wins (as on the command
    line). Any argument that is not one of these names stays the program's."""
    values: list[str | None] = [None, None, None]
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        slot = next((n for n, names in enumerate(OPTION_NAMES) if name in names), None)
        if slot is None:
            rest.append(arg)
            i += 1
            continue
        if eq:
            values[slot] = inline
            i += 1
        elif i + 1 < len(args):
            values[slot] = args[i + 1]
            i += 2
        else:
            raise BadDependencyOption(f"{name} needs a value")
    return (values[0], values[1], values[2]), rest


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


Resolver = Callable[[str, str], str]  # (path as given, option) -> absolute path; may refuse it


def _from_cwd(path: str, option: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _existing(path: str, option: str, what: str, resolve: Resolver = _from_cwd) -> str:
    full = resolve(path, option)
    if not os.path.exists(full):
        raise BadDependencyOption(f"{option}: the {what} {path!r} does not exist")
    return full


def parse(
    py_files: str | None, py_archives: str | None, py_requirements: str | None, resolve: Resolver = _from_cwd
) -> PythonDependencyOptions:
    """The three options' values as given on the command line (None when absent). ``resolve`` makes a
    given path absolute: from the working directory for ``millstream run``; the JobManager passes one
    that confines it to an uploaded program's directory."""
    files = [_existing(p, "-pyfs", "file or directory", resolve) for p in _split(py_files or "")]
    archives: list[tuple[str, str | None]] = []
    for item in _split(py_archives or ""):
        # Flink's form: "archive.zip#target_dir"; without "#", the archive's file name is the directory.
        path, sep, target = item.partition("#")
        full = _existing(path, "-pyarch", "archive", resolve)
        if not os.path.isfile(full) or not zipfile.is_zipfile(full):
            raise BadDependencyOption(f"-pyarch: {path!r} is not a zip file (only zip archives are supported, as in PyFlink)")
        if sep and (not target or os.path.isabs(target) or ".." in target.replace("\\", "/").split("/")):
            raise BadDependencyOption(f"-pyarch: the target directory of {item!r} must be a relative directory name")
        archives.append((full, target if sep else None))
    requirements = None
    if py_requirements:
        req, sep, cache = py_requirements.strip().partition("#")
        req_full = _existing(req, "-pyreq", "requirements file", resolve)
        if not os.path.isfile(req_full):
            raise BadDependencyOption(f"-pyreq: {req!r} is not a file")
        if sep and not cache:
            raise BadDependencyOption(f"-pyreq: nothing follows '#' in {py_requirements!r}; give the cache directory or drop '#'")
        cache_full = _existing(cache, "-pyreq", "requirements cache directory", resolve) if sep else None
        if cache_full is not None and not os.path.isdir(cache_full):
            raise BadDependencyOption(f"-pyreq: the requirements cache {cache!r} is not a directory")
        requirements = (req_full, cache_full)
    return PythonDependencyOptions(files, archives, requirements)
