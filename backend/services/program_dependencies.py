"""The Python dependency options (``-pyfs``, ``-pyarch``, ``-pyreq``) of a program uploaded through
REST or the dashboard, taken from its program arguments as Flink's PythonDriver takes them.

They are parsed by the same code as ``millstream run``'s (engine/client/python_options.py), but a path
names a file of the upload: it is resolved from the uploaded program's directory (where a .zip was
unpacked) and must stay inside it. ``..``, an absolute path elsewhere or a symbolic link out of it is
refused before the program runs, so a request cannot ship the JobManager's own files with a job.
"""
from __future__ import annotations

from pathlib import Path

from millstream.backend.services.uploads import UploadRejected, confined_path
from millstream.engine.client.python_options import (
    BadDependencyOption,
    PythonDependencyOptions,
    parse,
    split_program_args,
)


def upload_dependencies(root: Path, args: list[str]) -> tuple[PythonDependencyOptions, list[str]]:
    """``(the options, the program's own arguments in their order)``; UploadRejected (400) saying
    which value is wrong when one names nothing in ``root`` or leads out of it."""

    def inside(path: str, option: str) -> str:
        found = confined_path(root, path)
        if found is None:
            raise UploadRejected(f"{option}: {path!r} is outside the uploaded program's directory")
        return str(found)

    try:
        values, rest = split_program_args(args)
        return parse(*values, resolve=inside), rest
    except BadDependencyOption as e:
        raise UploadRejected(str(e)) from None
